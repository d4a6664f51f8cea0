"""What a JSON schema will cost xgrammar to compile, as one figure, bounded for the whole schema.

Each piece of a schema can be small and the whole still stall the engine: 379 strings each with the pattern
``(((a{8}){8}){8}){4}`` (2,048 characters once written out, well inside the per-pattern bound) took xgrammar 31 s
to compile, because its cost is the sum over every position of the grammar of the tokens that can follow there.
So the figure is that sum, in units of about 0.1 ms of compile on the development machine with SmolLM2's
49,152-token vocabulary (measured: tests/reliability/test_surface_schemas.py, bench/schemas.py):

- a literal character is ``LITERAL``; a character class by how many of the vocabulary's tokens can start in it:
  digits, capitals, spaces ``NARROW``; lower-case letters or ``\\w`` ``WORD``; anything wider (``.``, ``[^"]``,
  letters with a space, a negated class) ``WIDE``;
- a counted repetition multiplies its body by its count (``(((a{8}){8}){8}){4}`` is 2,048 literals), and a wide
  body grows faster than its count (each position keeps its own remaining length): ``k * body * (1 + k / 800)``;
  a repeated body that can match several lengths (``([a-z]{1,16}){8}``, ``(\\w+ ?)+``) is ambiguous, and is
  multiplied again by how many lengths it can match (at most 64): the product of nested repetition counts;
- a string with ``maxLength`` (or only ``minLength``) is that many wide positions; a ``format`` its measured cost;
- objects add their property names and values, ``anyOf``/``oneOf``/``allOf`` every alternative (the nesting is
  counted as the alternatives inside alternatives), an array its item schemas once, a ``$ref`` its definition
  (once per reference: a definition used ten times costs ten times), an ``enum`` or ``const`` its characters.

``MAX_GRAMMAR_COST`` holds the worst schema the Matrix builds itself (a text cell: a 200-character quote and a
120-character value, about 93,000) and refuses the rest, before vLLM sees the schema: a compile that has
started cannot be stopped in vLLM, so a costly one must never start.
"""

from __future__ import annotations

import json
from re import _constants as re_constants  # noqa: PLC2701 - the standard library's own regex parser
from re import _parser as re_parser  # noqa: PLC2701
from typing import Any

MAX_GRAMMAR_COST = 100_000  # about 10 s of xgrammar compile here (SmolLM2's vocabulary); see the docstring
LITERAL, NARROW, WORD, WIDE = 1, 4, 70, 240
NODE = 10  # a sub-schema's own rule
NUMBER_RANGE = 200  # a bounded number or integer: a range expression
ANY_VALUE = 500  # a schema with no type: any JSON value
FORMAT_COST = {"email": 1_500, "uri": 900, "hostname": 500}  # measured; the other formats ~100 (date, uuid...)
FORMAT_DEFAULT = 200
_SUPERLINEAR = 800
_MAX_SPREAD = 64
HEAVIEST_WORK = 8 * MAX_GRAMMAR_COST  # the walk that names the costliest place in a refusal


def schema_cost(schema: Any, limit: int = MAX_GRAMMAR_COST) -> int:
    """The figure for a whole (already checked) schema; stops counting a little past ``limit``."""
    return _Counter(schema, limit).cost(schema, ())


def heaviest(schema: Any, where: str) -> str:
    """Where most of a schema's figure is: the path down its costliest sub-schemas (for the refusal's message).
    Bounded like ``schema_cost``: all of it together counts at most ``HEAVIEST_WORK`` units of walking."""
    counter = _Counter(schema, HEAVIEST_WORK)
    node, path = schema, where
    for _ in range(32):
        kids = (
            [
                (child, f"{path}.{key}.{str(name)[:40]}")
                for key in ("properties",)
                for name, child in (node.get(key) or {}).items()
            ]
            if isinstance(node, dict)
            else []
        )
        if isinstance(node, dict):
            kids += [
                (child, f"{path}.{key}.{i}")
                for key in ("anyOf", "oneOf", "allOf", "prefixItems")
                for i, child in enumerate(node.get(key) or ())
            ]
            kids += [
                (node[key], f"{path}.{key}")
                for key in ("items", "additionalProperties")
                if isinstance(node.get(key), dict)
            ]
        if not kids or counter.spent > HEAVIEST_WORK:
            break
        node, path = max(kids, key=lambda kid: counter.cost(kid[0], ()))
    return path


def pattern_cost(pattern: str) -> int:
    """A regular expression's figure (0 when Python cannot parse it: the checks refuse it elsewhere)."""
    try:
        return _regex(re_parser.parse(pattern), 0)
    except (Exception, RecursionError):  # noqa: BLE001 - an unparsable pattern is refused by the checks
        return 0


def string_length_cost(positions: int) -> int:
    """``positions`` characters of free JSON string text (maxLength, or minLength alone)."""
    return _repeat(positions, WIDE)


def _repeat(count: int, body: int) -> int:
    if body >= WORD:  # wide positions: each keeps its own remaining length, so the cost grows faster
        return int(count * body * (1 + count / _SUPERLINEAR))
    return count * body


class _Counter:
    """The figure, with its work bounded: a definition's figure is kept once walked (``memo``, unless the walk met
    a reference cycle, whose figure depends on the path), every sum stops as soon as it passes ``limit``, and
    ``spent`` counts the walk itself: each sub-schema visited adds at least ``NODE`` to the figure, so once the
    walk has spent ``limit`` the figure is past it. Twenty definitions each naming the next twice (``$ref`` and
    ``items``) were 2**20 walks (14 s with the event loop held); now each is walked once."""

    def __init__(self, root: Any, limit: int):
        self.root, self.limit, self.spent, self.cycles = root, limit, 0, 0
        self.memo: dict[str, int] = {}

    def cost(self, node: Any, refs: tuple[str, ...]) -> int:
        self.spent += NODE if isinstance(node, dict) else LITERAL
        if self.spent > self.limit:
            return self.limit + 1
        if not isinstance(node, dict):
            return LITERAL
        out = NODE
        for key in ("enum", "const"):
            if key in node:
                values = node[key] if key == "enum" else [node[key]]
                out += sum(len(json.dumps(v, default=str)) for v in values) * LITERAL
        ref = node.get("$ref")
        if isinstance(ref, str):
            out += self._ref(ref, refs)
            if out > self.limit:
                return out
        kinds = node.get("type")
        kinds = set(kinds) if isinstance(kinds, list) else {kinds} if isinstance(kinds, str) else set()
        shaped = any(
            k in node
            for k in (
                "enum",
                "const",
                "$ref",
                "anyOf",
                "oneOf",
                "allOf",
                "properties",
                "items",
                "prefixItems",
                "pattern",
                "format",
            )
        )
        if not kinds and not shaped:
            out += ANY_VALUE
        if "string" in kinds or "pattern" in node or "format" in node:
            out += _string(node)
        if kinds & {"integer", "number"}:
            out += (
                NUMBER_RANGE
                if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
                else NODE
            )
        for name, child in (node.get("properties") or {}).items():
            out += len(str(name)) * LITERAL + self.cost(child, refs)
            if out > self.limit:
                return out
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            out += WIDE + self.cost(extra, refs)
            if out > self.limit:
                return out
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for child in node.get(key) or ():
                out += self.cost(child, refs)
                if out > self.limit:
                    return out
        if isinstance(node.get("items"), dict):
            out += self.cost(node["items"], refs)
        return out

    def _ref(self, ref: str, refs: tuple[str, ...]) -> int:
        if ref in refs:  # a cycle: counted once on this path
            self.cycles += 1
            return 0
        if ref in self.memo:
            return self.memo[ref]
        cycles = self.cycles
        figure = self.cost(_resolve(self.root, ref), (*refs, ref))
        if self.cycles == cycles:
            self.memo[ref] = figure
        return figure


def _string(node: dict) -> int:
    if isinstance(node.get("pattern"), str):
        return pattern_cost(node["pattern"])
    if "format" in node:
        return FORMAT_COST.get(node["format"], FORMAT_DEFAULT)
    top = node.get("maxLength", node.get("minLength"))
    return string_length_cost(top) + WIDE if isinstance(top, int) and not isinstance(top, bool) else WIDE


def _resolve(root: Any, ref: str) -> Any:
    """The definition a ``#/...`` reference names (None when it names none: the checks refuse that)."""
    node = root
    for part in ref.lstrip("#").strip("/").split("/") if ref not in ("#", "") else ():
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _regex(items: Any, depth: int) -> int:
    if depth > 60:
        return MAX_GRAMMAR_COST + 1
    total = 0
    for op, arg in items:
        if op in (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT):
            low, high, body = arg
            count = max(1, high if high != re_constants.MAXREPEAT else max(low + 1, 2))
            total += _repeat(count, _regex(body, depth + 1) * _spread(body, count))
        elif op == re_constants.SUBPATTERN:
            total += _regex(arg[-1], depth + 1)
        elif op == re_constants.BRANCH:
            total += sum(_regex(b, depth + 1) for b in arg[1])
        elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            total += _regex(arg[1], depth + 1)
        elif op == re_constants.LITERAL:
            total += LITERAL
        elif op == re_constants.IN:
            total += _class(arg)
        elif op == re_constants.AT:
            continue
        else:  # ANY, NOT_LITERAL, CATEGORY outside a class...
            total += WIDE
        if total > MAX_GRAMMAR_COST:
            return total
    return total


def _spread(body: Any, count: int) -> int:
    """How many lengths a repeated body can match (1 for a fixed length): a repetition of a body of varying
    length is ambiguous, and xgrammar's cost grows with the ways to split the text. ``([a-z]{1,16}){8}`` took 15 s
    and ``((([a-zA-Z0-9 ]){1,16}){1,2}){8}`` 750 s to compile here (found by the fuzzing), against 0.3 s for
    ``[a-z]{128}``."""
    if count <= 1:
        return 1
    try:
        low, high = body.getwidth()
    except (AttributeError, OverflowError):  # pragma: no cover - a parsed pattern always has a width
        return _MAX_SPREAD
    return 1 if low == high else min(high, _MAX_SPREAD) - min(low, _MAX_SPREAD) + 1


_CATEGORY_CHARS = {re_constants.CATEGORY_DIGIT: b"0123456789", re_constants.CATEGORY_SPACE: b" \t\n\r\f\v"}


def _class(items: list) -> int:
    """A character class by the tokens that can start in it (see the module's docstring)."""
    chars: set[int] = set()
    weight = LITERAL
    for op, arg in items:
        if op == re_constants.NEGATE:
            return WIDE
        if op == re_constants.LITERAL:
            chars.add(arg)
        elif op == re_constants.RANGE:
            chars.update(range(arg[0], min(arg[1], arg[0] + 512) + 1))
            if arg[1] - arg[0] > 512:
                return WIDE
        elif op == re_constants.CATEGORY:
            if arg in _CATEGORY_CHARS:
                weight = max(weight, NARROW)
                chars.update(_CATEGORY_CHARS[arg])
            elif arg == re_constants.CATEGORY_WORD:
                weight = max(weight, WORD)
                chars.update(range(ord("a"), ord("z") + 1))
            else:
                return WIDE
        else:
            return WIDE
    lower = sum(ord("a") <= c <= ord("z") for c in chars)
    if lower and ord(" ") in chars:
        return WIDE
    if lower >= 6 or len(chars) > 64:
        return max(weight, WORD)
    if len(chars) > 1:
        return max(weight, NARROW)
    return weight
