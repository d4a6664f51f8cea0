"""Tools the model calls: the calculator (``calculator``), the built-ins' specs and runner (``registry``), and
OpenAI tool calling: a request's tools checked (``spec``), a reply's calls parsed by vLLM's parsers (``calls``).

May import: errors, structured (tests/test_imports.py).
"""
