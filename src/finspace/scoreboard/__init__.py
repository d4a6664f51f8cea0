"""Finance QA sets with answer keys, and their scoring.

sets.py loads FinQA, TAT-QA and FinanceBench's open set from their published files (placed under evalsets/,
cached in the data folder, fetched once from GitHub by fetched.py, or named by path); asking.py turns an
item into chat messages; score.py scores a reply as each set's own evaluation does (tatqa_metric.py:
TAT-QA's EM and F1). run.py sends the items to the engine; desk.py is the Service's Scoreboard. FinanceBench
over the whole filings: pdfs.py fetches each question's PDF once (cached, never shipped), filings.py asks it
through the Service as the chat asks about an attached document (passages, or the filing tools).

May import: errors, ledger_line, ledger, engine, documents, grounding (tests/test_imports.py).
"""
