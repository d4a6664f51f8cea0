"""Finance QA sets with answer keys, and their scoring.

sets.py loads FinQA, TAT-QA and FinanceBench's open set from their published files (placed under evalsets/,
cached in the data folder, fetched once from GitHub by fetched.py, or named by path); prompt.py turns an
item into chat messages; score.py scores a reply as each set's own evaluation does (tatqa_metric.py:
TAT-QA's EM and F1). Nothing here touches the engine: a run (another module) sends the messages and passes
the replies back.
"""
