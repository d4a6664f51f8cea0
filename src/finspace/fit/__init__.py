"""Will it fit, for people and the page: the check behind /fit and the tab, its runner and service, the
verdict per catalogue entry, plans rendered as text and JSON, the Hub's config.json, and the host doctor.

May import: errors, units, host, planner, models, ledger, engine (tests/test_imports.py).
"""
