"""Companies on SEC's EDGAR: find one by ticker or name, list its filings, read a filing, chart its XBRL figures.

``config`` (the settings), ``limiter`` (10 requests a second for the whole Space), ``cache`` (bodies on disk with
their validators), ``client`` (SEC's two hosts only, bounded, retried), ``companies``, ``filings``, ``facts`` and
``desk`` (what ``Service.edgar`` is). See docs/edgar.md.

May import: errors, engine, xbrl, documents, matrix (tests/test_imports.py).
"""
