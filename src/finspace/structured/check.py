"""A caller's JSON schema, checked before it reaches vLLM's structured outputs (xgrammar).

``/v1``'s ``response_format`` takes a schema from anyone on the internet, and a grammar is compiled from it
in the engine. So it is held to what xgrammar really enforces, and to sizes that compile quickly:
- only the keywords in ``SUPPORTED``; any other (``not``, ``if``, ``patternProperties``, ``uniqueItems``...) is a
  400 naming it, never silently ignored;
- at most ``MAX_DEPTH`` levels, ``MAX_NODES`` sub-schemas, ``MAX_ENUM`` values in an enum, ``MAX_PROPERTIES``
  properties in an object, a ``pattern`` of at most ``MAX_PATTERN_CHARS`` with no counted repetition over
  ``MAX_REPEAT`` and at most ``MAX_EXPANDED`` pieces once they are multiplied out (``((a{60}){60}){60}`` is
  216,000), lengths and item counts at most ``MAX_COUNT``, and ``MAX_SCHEMA_BYTES`` in all;
- ``$ref`` only to the schema's own ``#/$defs/...`` or ``#/definitions/...``.
Every refusal is ``BadInput`` naming the place in the schema (``properties.revenue.pattern``) and the fix.
"""

from __future__ import annotations

import json
import math
import re
from re import _constants as re_constants  # noqa: PLC2701 - the standard library's own regex parser
from re import _parser as re_parser  # noqa: PLC2701
from typing import Any

from finspace.errors import BadInput
from finspace.structured import cost, rules

SUPPORTED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
    }
)
TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
FORMATS = frozenset({"date", "time", "date-time", "email", "uuid", "uri", "ipv4", "ipv6", "hostname", "duration"})
MAX_DEPTH = 10
MAX_NODES = 400
MAX_ENUM = 256
MAX_ENUM_CHARS = 200
MAX_PROPERTIES = 64
MAX_PATTERN_CHARS = 256
MAX_REPEAT = 64
MAX_EXPANDED = 2048  # a pattern's pieces once its counted repetitions are written out
MAX_COUNT = 100_000
MAX_SCHEMA_BYTES = 32 * 1024
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_REPEAT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")


def check_schema(schema: Any, where: str = "response_format.json_schema.schema") -> dict:
    """``schema`` if it is one finspace passes to vLLM; BadInput naming the first problem otherwise."""
    if not isinstance(schema, dict):
        raise BadInput(f"{where} must be a JSON object (a JSON schema)")
    try:
        size = len(json.dumps(schema, allow_nan=False))
    except (ValueError, RecursionError):
        raise BadInput(
            f"{where} holds a non-finite number or nests too deeply; a schema has at most "
            f"{MAX_DEPTH} levels and finite numbers"
        ) from None
    if size > MAX_SCHEMA_BYTES:
        raise BadInput(f"{where} is {size:,} bytes as JSON; the limit is {MAX_SCHEMA_BYTES:,}: simplify it")
    rules.check_nesting(schema, where)
    nodes = [0]
    _check(schema, where, 0, nodes, schema)
    _check_cost(schema, where)
    if _vllm_refuses(schema):  # vLLM's own list of what xgrammar cannot enforce, as a last check
        raise BadInput(f"{where} combines keywords that structured outputs cannot enforce here; simplify it")
    return schema


def _vllm_refuses(schema: dict) -> bool:
    try:
        from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features
    except ImportError:  # pragma: no cover - vLLM is always installed beside finspace
        return False
    return has_xgrammar_unsupported_json_features(schema)


def _check_cost(schema: dict, where: str) -> None:
    """The whole schema's grammar cost (finspace.structured.cost) within MAX_GRAMMAR_COST."""
    figure = cost.schema_cost(schema)
    if figure <= cost.MAX_GRAMMAR_COST:
        return
    heaviest = cost.heaviest(schema, where)
    raise BadInput(
        f"{where}: this schema would cost the engine about {figure:,} units to compile into a grammar "
        f"(the limit is {cost.MAX_GRAMMAR_COST:,}, about 10 s; most of it at {heaviest}); every "
        f"bounded string position, pattern repetition and alternative counts: use fewer or shorter "
        f"maxLength, patterns and anyOf branches"
    )


def _check(node: Any, where: str, depth: int, nodes: list[int], root: dict) -> None:
    if isinstance(node, bool):  # true / false are schemas too
        return
    if not isinstance(node, dict):
        raise BadInput(f"{where} must be a schema object")
    nodes[0] += 1
    if depth > MAX_DEPTH:
        raise BadInput(f"{where}: the schema nests more than {MAX_DEPTH} levels; flatten it")
    if nodes[0] > MAX_NODES:
        raise BadInput(f"the schema has more than {MAX_NODES} sub-schemas; simplify it")
    unknown = sorted(str(k) for k in node if k not in SUPPORTED)
    if unknown:
        names = ", ".join(repr(k[:40]) for k in unknown[:5])
        raise BadInput(
            f"{where}: {names} {'is' if len(unknown) == 1 else 'are'} not supported by structured "
            f"outputs here; remove {'it' if len(unknown) == 1 else 'them'} (supported: "
            f"{', '.join(sorted(SUPPORTED - {'$schema', '$id', '$comment'}))})"
        )
    _check_values(node, where)
    rules.check_ranges(node, where)
    if isinstance(node.get("$ref"), str):
        rules.check_ref(root, node["$ref"], where)
    for key in _SUBSCHEMA_MAPS:
        if key in node:
            sub = node[key]
            if not isinstance(sub, dict) or (key == "properties" and len(sub) > MAX_PROPERTIES):
                raise BadInput(f"{where}.{key} must be an object of at most {MAX_PROPERTIES} schemas")
            for name, child in sub.items():
                rules.check_false(child, key, f"{where}.{key}.{str(name)[:40]}")
                _check(child, f"{where}.{key}.{str(name)[:40]}", depth + 1, nodes, root)
    for key in _SUBSCHEMA_LISTS:
        if key in node:
            if not isinstance(node[key], list) or not node[key]:
                raise BadInput(f"{where}.{key} must be a non-empty list of schemas")
            for i, child in enumerate(node[key]):
                rules.check_false(child, key, f"{where}.{key}.{i}")
                _check(child, f"{where}.{key}.{i}", depth + 1, nodes, root)
    for key in ("items", "additionalProperties"):
        if key in node:
            _check(node[key], f"{where}.{key}", depth + 1, nodes, root)


def _check_values(node: dict, where: str) -> None:
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if not all(isinstance(k, str) and k in TYPES for k in kinds) or (isinstance(kind, list) and not kind):
        raise BadInput(f"{where}.type must be one of {', '.join(sorted(TYPES))} (or a list of them)")
    if "enum" in node:
        values = node["enum"]
        if not isinstance(values, list) or not values or len(values) > MAX_ENUM:
            raise BadInput(f"{where}.enum must be a list of 1 to {MAX_ENUM} values")
        if any(len(json.dumps(v)) > MAX_ENUM_CHARS for v in values):
            raise BadInput(f"{where}.enum: each value is at most {MAX_ENUM_CHARS} characters as JSON")
    if "required" in node and not (
        isinstance(node["required"], list) and all(isinstance(r, str) for r in node["required"])
    ):
        raise BadInput(f"{where}.required must be a list of property names")
    for key in _COUNTS:
        if key in node and not (
            isinstance(node[key], int) and not isinstance(node[key], bool) and 0 <= node[key] <= MAX_COUNT
        ):
            raise BadInput(f"{where}.{key} must be a whole number from 0 to {MAX_COUNT:,}")
    for key in _NUMBERS:
        value = node.get(key)
        if key in node and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or abs(value) > 1e15
        ):
            raise BadInput(f"{where}.{key} must be a finite number of at most 1e15 in size")
    if "pattern" in node:
        _check_pattern(node["pattern"], f"{where}.pattern")
    if ("pattern" in node or "format" in node) and ("minLength" in node or "maxLength" in node):
        raise BadInput(
            f"{where}: a pattern or format cannot be combined with minLength/maxLength here (xgrammar "
            f"does not enforce the pair); put the length in the pattern, e.g. ^[A-Z]{{1,40}}$"
        )
    if "format" in node and node["format"] not in FORMATS:
        raise BadInput(f"{where}.format must be one of {', '.join(sorted(FORMATS))}")
    if "$ref" in node and not (
        isinstance(node["$ref"], str)
        and node["$ref"].startswith(("#/$defs/", "#/definitions/"))
        and len(node["$ref"]) <= 200
    ):
        raise BadInput(f"{where}.$ref must point inside the schema (#/$defs/NAME or #/definitions/NAME)")


def _check_pattern(pattern: Any, where: str) -> None:
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        raise BadInput(f"{where} must be a regular expression of at most {MAX_PATTERN_CHARS} characters")
    for m in _REPEAT.finditer(pattern):
        counts = [int(x) for x in m.groups() if x]
        if any(c > MAX_REPEAT for c in counts):
            raise BadInput(f"{where}: the repetition {m.group(0)} is over {MAX_REPEAT}; use a shorter one or maxLength")
    try:
        tree = re_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        raise BadInput(f"{where} is not a valid regular expression") from None
    rules.check_regex_features(pattern, tree, where)
    if _expanded(tree) > MAX_EXPANDED:
        raise BadInput(
            f"{where}: its counted repetitions multiply out to more than {MAX_EXPANDED:,} pieces (a "
            f"grammar is built from every one); nest fewer {{n}} repetitions or use maxLength"
        )


def _expanded(items: Any, depth: int = 0) -> int:
    """How many pieces the grammar of a parsed pattern holds once its counted repetitions ({n,m}) are written out:
    a repetition multiplies its body by its largest finite count; * and + do not (they stay loops)."""
    if depth > 50:
        return MAX_EXPANDED + 1
    total = 0
    for op, arg in items:
        if op in (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT):
            low, high, body = arg
            count = high if high != re_constants.MAXREPEAT else max(low, 1)
            total += max(1, count) * _expanded(body, depth + 1)
        elif op == re_constants.SUBPATTERN:
            total += _expanded(arg[-1], depth + 1)
        elif op == re_constants.BRANCH:
            total += sum(_expanded(b, depth + 1) for b in arg[1])
        elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            total += _expanded(arg[1], depth + 1)
        else:
            total += 1
        if total > MAX_EXPANDED:
            return total
    return total


def response_format_schema(value: Any) -> dict | None:
    """OpenAI's ``response_format`` as the schema to constrain to: None for text, ``{"type": "object"}`` for
    json_object, the checked schema for json_schema."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        raise BadInput(
            'response_format must be {"type": "text"}, {"type": "json_object"} or '
            '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}'
        )
    kind = value["type"]
    allowed = {"type", "json_schema"} if kind == "json_schema" else {"type"}
    if set(value) - allowed:
        raise BadInput(f"response_format of type {kind} takes only {', '.join(sorted(allowed))}")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or "schema" not in spec or set(spec) - {"name", "schema", "strict", "description"}:
        raise BadInput(
            'response_format.json_schema must be {"name": ..., "schema": {...}} (strict and description are optional)'
        )
    if "name" in spec and not (isinstance(spec["name"], str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", spec["name"])):
        raise BadInput("response_format.json_schema.name must be 1-64 letters, digits, '_' or '-'")
    return check_schema(spec["schema"])
