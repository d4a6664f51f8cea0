"""Grounding a chat answer in its filings: a library of documents by short id, each filing's outline, the filing
tools (search, read a page, the filer's XBRL facts), and every cited figure of an answer checked against its page
(issue 39). Pure functions over frozen dataclasses; the chat's loop and the doors call them through service.py.

May import: errors, tools, engine, xbrl, documents, matrix (tests/test_imports.py).
"""
