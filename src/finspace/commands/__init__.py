"""The CLI's commands: one module each, a thin shell over the library.

May import: errors, units, host, planner, models, ledger_line, ledger, engine, settings, fit, service, web (tests/test_imports.py).
"""
