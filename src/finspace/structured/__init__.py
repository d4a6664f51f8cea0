"""A caller's JSON schema for structured outputs (``/v1``'s ``response_format``), held to what xgrammar enforces
and to what it can compile quickly, before vLLM sees it.

- ``check``: the schema's keywords and the size of each piece (``check_schema``, ``response_format_schema``);
- ``rules``: what is well formed but vLLM refuses or misreads (empty ranges, missing ``$ref`` targets, regex
  features xgrammar lacks, values nested past vLLM's limit);
- ``cost``: the whole schema's grammar cost as one figure, bounded (``MAX_GRAMMAR_COST``);
- ``refusals``: any refusal vLLM still makes, as a message naming the keyword (the engine raises it as BadInput);
- ``compiles``: at most one new schema compiling at once per client (compiled grammars are cached by vLLM).

May import: errors (tests/test_imports.py).
"""

from finspace.structured.check import (
    MAX_COUNT,
    MAX_DEPTH,
    MAX_ENUM,
    MAX_EXPANDED,
    MAX_NODES,
    MAX_PATTERN_CHARS,
    MAX_PROPERTIES,
    MAX_REPEAT,
    MAX_SCHEMA_BYTES,
    check_schema,
    response_format_schema,
)
from finspace.structured.cost import MAX_GRAMMAR_COST, schema_cost

__all__ = [
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_ENUM",
    "MAX_EXPANDED",
    "MAX_GRAMMAR_COST",
    "MAX_NODES",
    "MAX_PATTERN_CHARS",
    "MAX_PROPERTIES",
    "MAX_REPEAT",
    "MAX_SCHEMA_BYTES",
    "check_schema",
    "response_format_schema",
    "schema_cost",
]
