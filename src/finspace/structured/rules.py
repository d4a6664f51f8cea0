"""A schema that is well formed but that vLLM (xgrammar) refuses or silently misreads, refused first here.

Each of these reached vLLM and came back as HTTP 500 ``VLLMValidationError`` with a traceback in the log: values
(``const``, ``default``...) nested past vLLM's 64 levels; patterns with a backreference, a lookbehind, ``\\b``, a
named backreference, an atomic group, a conditional or an inline flag group (xgrammar's regex converter has none
of them); a ``$ref`` to a definition that is not there; empty ranges (``minimum > maximum``, ``minItems >
maxItems``, ``minLength > maxLength``). Others that xgrammar would misread without a word are refused too: a
lookahead (ignored), ``\\A`` / ``\\Z`` (taken as the letters A and Z), ``\\101`` (a backreference to xgrammar),
``a{,3}``. Each refusal is a ``BadInput`` naming the place and the keyword.
"""

from __future__ import annotations

import math
import re
from re import _constants as re_constants  # noqa: PLC2701 - the standard library's own regex parser
from typing import Any

from finspace.errors import BadInput

MAX_JSON_NESTING = 40  # objects and lists inside one another anywhere in the schema (vLLM refuses past 64)
_DIGIT_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\[0-9]")
_OPEN_COUNT = re.compile(r"(?<!\\)(?:\\\\)*\{\s*,")
_FALSE_OK = ("additionalProperties", "items")


def check_nesting(value: Any, where: str, limit: int = MAX_JSON_NESTING) -> None:
    """BadInput naming the deepest place when ``value`` nests more than ``limit`` objects and lists."""
    stack = [(value, where, 1)]
    while stack:
        node, path, level = stack.pop()
        if level > limit:
            raise BadInput(
                f"{path}: the schema nests more than {limit} levels of objects and lists here "
                f"(const, default and examples included); flatten it"
            )
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{str(k)[:40]}", level + 1) for k, v in node.items() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, f"{path}.{i}", level + 1) for i, v in enumerate(node) if isinstance(v, dict | list))


def check_false(node: Any, key: str, where: str) -> None:
    """``false`` (no value allowed) only where it means "no more": additionalProperties, items."""
    if node is False and key not in _FALSE_OK:
        raise BadInput(
            f"{where} is false (no value can match it); structured outputs need a schema a value can "
            f"match: remove it, or use false only as additionalProperties or items"
        )


def check_ranges(node: dict, where: str) -> None:
    """Bounds that leave nothing to write: lengths, item counts, numbers (integers with whole-number bounds)."""
    for low, high in (("minLength", "maxLength"), ("minItems", "maxItems")):
        if isinstance(node.get(low), int) and isinstance(node.get(high), int) and node[low] > node[high]:
            raise BadInput(
                f"{where}: {low} {node[low]} is greater than {high} {node[high]}; no value fits: "
                f"lower {low} or raise {high}"
            )
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and isinstance(node.get("maxItems"), int) and node["maxItems"] < len(prefix):
        raise BadInput(
            f"{where}: maxItems {node['maxItems']} is less than the {len(prefix)} prefixItems; raise "
            f"maxItems or remove prefixItems"
        )
    if (
        isinstance(prefix, list)
        and node.get("items") is False
        and isinstance(node.get("minItems"), int)
        and node["minItems"] > len(prefix)
    ):
        raise BadInput(
            f"{where}: minItems {node['minItems']} is more than the {len(prefix)} prefixItems and items "
            f"is false; lower minItems or allow items"
        )
    kinds = node.get("type")
    integer = kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds and "number" not in kinds)
    bounds = {k: node[k] for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum") if k in node}
    if integer:
        for key, value in bounds.items():
            if isinstance(value, float) and not value.is_integer():
                raise BadInput(f"{where}.{key} is {value:g}, but the type is integer: use a whole number")
    lows = [(bounds[k], k == "exclusiveMinimum") for k in ("minimum", "exclusiveMinimum") if k in bounds]
    highs = [(bounds[k], k == "exclusiveMaximum") for k in ("maximum", "exclusiveMaximum") if k in bounds]
    low = max(lows, default=None)  # the tighter bound; at a tie, the exclusive one
    high = min(highs, key=lambda b: (b[0], not b[1]), default=None)
    if low is None or high is None:
        return
    (lo, lo_open), (hi, hi_open) = low, high
    if integer:
        lo, hi = (math.floor(lo) + 1 if lo_open else math.ceil(lo)), (math.ceil(hi) - 1 if hi_open else math.floor(hi))
        empty = lo > hi
    else:
        empty = lo > hi or (lo == hi and (lo_open or hi_open))
    if empty:
        names = ("exclusiveMinimum" if lo_open else "minimum", "exclusiveMaximum" if hi_open else "maximum")
        raise BadInput(
            f"{where}: {names[0]} {bounds[names[0]]:g} and {names[1]} {bounds[names[1]]:g} leave no "
            f"number between them (minimum > maximum); swap or widen them"
        )


def check_ref(root: Any, ref: str, where: str) -> None:
    """``ref`` must name a definition that is in the schema (#/$defs/NAME, #/definitions/NAME, deeper paths too)."""
    if "~" in ref or "%" in ref:
        raise BadInput(
            f"{where}.$ref {ref[:80]!r}: escaped names (~0, ~1, %) are not supported here; rename the "
            f"definition to letters, digits, '_' or '-'"
        )
    node = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            raise BadInput(
                f"{where}.$ref {ref[:80]!r} names a definition that is not in the schema; add it under "
                f"$defs or fix the name"
            )
        node = node[part]
    if not isinstance(node, dict | bool):
        raise BadInput(f"{where}.$ref {ref[:80]!r} does not name a schema")


def check_regex_features(pattern: str, tree: Any, where: str) -> None:
    """Refuse what xgrammar's regex converter cannot do (or would silently do otherwise), naming the feature."""
    if _DIGIT_ESCAPE.search(pattern):
        raise BadInput(
            f"{where}: a backreference or octal escape (\\1, \\01) is not supported by structured "
            f"outputs; write the text out, or use \\x41 for a character"
        )
    if _OPEN_COUNT.search(pattern):
        raise BadInput(f"{where}: a repetition with no lower count ({{,n}}) is not supported; write {{0,n}}")
    _walk(tree, where, 0)
    _nested_repeats(tree, where, 1, False, 0)


MAX_NESTED_VARYING = 16  # repetitions inside one another, one of them of varying count: the counts' product


def _nested_repeats(items: Any, where: str, product: int, varying: bool, depth: int) -> None:
    """Refuse repetitions nested inside one another when one of them has a varying count and their counts multiply
    past MAX_NESTED_VARYING: the grammar holds every way to split the text (found by the fuzzing: ``((([a-zA-Z0-9
    ]){1,16}){1,2}){8}`` took xgrammar 750 s to compile, ``([a-z]{1,16}){8}`` 15 s). ``*`` and ``+`` count 2."""
    if depth > 60:
        return
    for op, arg in items:
        if op in (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT):
            low, high, body = arg
            count = high if high != re_constants.MAXREPEAT else 2
            inner_product, inner_varying = product * max(1, count), varying or low != high
            if product > 1 and inner_varying and inner_product > MAX_NESTED_VARYING:
                raise BadInput(
                    f"{where}: repetitions nested inside one another, one with a varying count ({{m,n}}, *, "
                    f"+), multiply to {inner_product} (the limit is {MAX_NESTED_VARYING}): the grammar "
                    f"would hold every way to split the text; use one repetition, e.g. [a-z]{{1,64}}"
                )
            _nested_repeats(body, where, inner_product, inner_varying, depth + 1)
        elif op == re_constants.SUBPATTERN:
            _nested_repeats(arg[-1], where, product, varying, depth + 1)
        elif op == re_constants.BRANCH:
            for branch in arg[1]:
                _nested_repeats(branch, where, product, varying, depth + 1)


_FEATURES = {
    re_constants.GROUPREF: "a backreference (\\1 or (?P=name))",
    re_constants.GROUPREF_EXISTS: "a conditional group (?(1)...)",
    re_constants.ATOMIC_GROUP: "an atomic group (?>...)",
}
_ANCHORS = {
    re_constants.AT_BOUNDARY: "a word boundary \\b",
    re_constants.AT_NON_BOUNDARY: "a non-boundary \\B",
    re_constants.AT_BEGINNING_STRING: "\\A (use ^)",
    re_constants.AT_END_STRING: "\\Z (use $)",
}


def _walk(items: Any, where: str, depth: int) -> None:
    if depth > 60:
        raise BadInput(f"{where} nests too deeply; simplify it")
    for op, arg in items:
        what = _FEATURES.get(op)
        if op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            what = "a lookbehind (?<=...)" if arg[0] < 0 else "a lookahead (?=...) (xgrammar would ignore it)"
        elif op == re_constants.AT:
            what = _ANCHORS.get(arg)
        elif op == re_constants.SUBPATTERN and (arg[1] or arg[2]):
            what = "an inline flag group (?i:...)"
        if what:
            raise BadInput(f"{where}: {what} is not supported by structured outputs; rewrite the pattern without it")
        if op in (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT):
            _walk(arg[2], where, depth + 1)
        elif op == re_constants.SUBPATTERN:
            _walk(arg[-1], where, depth + 1)
        elif op == re_constants.BRANCH:
            for branch in arg[1]:
                _walk(branch, where, depth + 1)
