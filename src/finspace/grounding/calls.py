"""The filing tools run for the chat's tool loop: a call's name and JSON arguments -> a ToolStep whose result is
bounded in tokens. Bad input (an unknown document, a page out of range, arguments that are not JSON) is the
result's text ("error: ..."), so the model reads it and the conversation goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from finspace.errors import BadInput
from finspace.grounding import library as lib_
from finspace.grounding import lookup
from finspace.grounding.filer_facts import filer_facts
from finspace.grounding.outline import outline
from finspace.tools import filing, registry

MAX_ARGUMENT_CHARS = 2_000  # what a step keeps of the arguments the model wrote


def runner(lib: lib_.Library, result_tokens: int, count: Callable[[str], int] = lib_.approx_tokens):
    """``run(name, arguments) -> ToolStep`` over ``lib``: the filing tools (each result within ``result_tokens``
    by ``count``) and the calculator."""

    def run(name: str, arguments: Any) -> registry.ToolStep:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        if name == registry.CALCULATE:
            return registry.run(name, text)
        shown = text[:MAX_ARGUMENT_CHARS]
        if name not in filing.NAMES:
            return registry.ToolStep(
                str(name)[:64],
                shown,
                f"error: there is no tool {str(name)[:64]!r}; the "
                f"tools: {', '.join((*filing.NAMES, registry.CALCULATE))}",
                False,
            )
        try:
            args = json.loads(text) if text.strip() else {}
        except ValueError:
            args = None
        if not isinstance(args, dict):
            return registry.ToolStep(
                name, shown, "error: the arguments must be a JSON object, as the tool's parameters say", False
            )
        try:
            return registry.ToolStep(name, shown, _result(lib, name, args, result_tokens, count))
        except BadInput as exc:
            return registry.ToolStep(name, shown, f"error: {exc}", False)

    return run


def _text(args: dict, key: str) -> str | None:
    value = args.get(key)
    return None if value is None else str(value)


def _result(lib: lib_.Library, name: str, args: dict, bound: int, count: Callable[[str], int]) -> str:
    doc = _text(args, "document")
    if name == filing.OUTLINE:
        key, d = lib_.document(lib, doc)
        return outline(d, key).render(bound, count)
    if name == filing.SEARCH:
        query = _text(args, "query") or ""
        if not query.strip():
            raise BadInput("search needs a query: the words to look for")
        return lookup.search(lib, query, doc).render(bound, count)
    if name == filing.READ_PAGE:
        return lookup.read_page(lib, doc, args.get("page")).render(bound, count)
    query = _text(args, "query") or ""
    return filer_facts(lib, doc, query, _text(args, "period")).render(bound, count)
