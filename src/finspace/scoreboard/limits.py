"""What a scoreboard run may take and what the store keeps. Frozen and passed in (``Settings.evals``, read once
from the environment by finspace.settings); nothing here reads the environment."""

from __future__ import annotations

from dataclasses import dataclass

# a set's published file given on the Scoreboard tab (TAT-QA's and FinQA's .json, FinanceBench's .jsonl): the
# upload route takes these beside the documents, bounded as they are
FILE_TYPES = (".json", ".jsonl")


@dataclass(frozen=True)
class EvalLimits:
    max_items: int = 500  # items in one run (FINSPACE_EVAL_MAX_ITEMS): all go to the engine at once
    reply_tokens: int = 256  # an answer's bound (FINSPACE_EVAL_REPLY_TOKENS); greedy
    context_chars: int = 12_000  # an item's table and text in the prompt, at most (FINSPACE_EVAL_CONTEXT_CHARS)
    max_results: int = 200  # stored results kept, the oldest removed first (FINSPACE_EVAL_MAX_RESULTS)
    answer_chars: int = 2000  # each stored answer, at most (the rest cut, marked)
