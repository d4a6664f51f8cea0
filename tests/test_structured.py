"""finspace.structured: a caller's JSON schema held to what structured outputs enforce, in bounded size."""

from __future__ import annotations

import json

import pytest

from finspace.errors import BadInput
from finspace.structured import MAX_DEPTH, MAX_ENUM, MAX_NODES, MAX_PROPERTIES, check_schema, response_format_schema

W = "response_format.json_schema.schema"
REVENUE = {"type": "object", "required": ["revenue"], "additionalProperties": False,
           "properties": {"revenue": {"type": "number", "minimum": 0}, "period": {"type": "string", "pattern": "^Q[1-4]$"},
                          "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 5}},
           "$defs": {"item": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}}}


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("schema, match", [
    ({"type": "object", "not": {}}, rf"{W}: 'not' is not supported"),                  # silently ignored elsewhere
    ({"type": "object", "patternProperties": {}, "if": {}}, r"'if', 'patternProperties' are not supported"),
    ({"properties": {"a": {"type": "array", "uniqueItems": True}}}, rf"{W}.properties.a: 'uniqueItems'"),
    ({"type": "decimal"}, r"\.type must be one of array, boolean"),
    ({"type": []}, r"\.type must be one of"),
    (nested(MAX_DEPTH + 1), rf"nests more than {MAX_DEPTH} levels"),                   # deep nesting
    ({"enum": list(range(MAX_ENUM + 1))}, rf"enum must be a list of 1 to {MAX_ENUM}"),  # a huge enum
    ({"enum": ["x" * 300]}, r"each value is at most 200"),
    ({"type": "object", "properties": {f"p{i}": {} for i in range(MAX_PROPERTIES + 1)}}, r"at most 64 schemas"),
    ({"anyOf": [{"anyOf": [{"type": "string"}] * 30}] * 30}, rf"more than {MAX_NODES} sub-schemas"),
    ({"type": "string", "pattern": "(a{1000}){1000}"}, r"repetition \{1000\} is over 64"),   # pathological
    ({"type": "string", "pattern": "a{2,5000}"}, r"repetition \{2,5000\} is over 64"),
    ({"type": "string", "pattern": "((a{60}){60}){60}"}, r"multiply out to more than 2,048 pieces"),
    ({"type": "string", "pattern": "(x|y{50}){50}"}, r"multiply out"),
    ({"type": "string", "pattern": "x" * 257}, r"at most 256 characters"),
    ({"type": "string", "pattern": "(unclosed"}, r"not a valid regular expression"),
    ({"type": "string", "maxLength": 10**9}, r"maxLength must be a whole number from 0 to 100,000"),
    ({"type": "string", "pattern": "^a+$", "maxLength": 5}, r"cannot be combined with minLength/maxLength"),
    ({"type": "string", "format": "date", "minLength": 5}, r"cannot be combined with minLength/maxLength"),
    ({"type": "number", "maximum": 1e300}, r"maximum must be a finite number"),
    ({"type": "number", "minimum": float("nan")}, r"non-finite number"),
    ({"$ref": "https://evil.example/schema.json"}, r"\$ref must point inside the schema"),
    ({"type": "string", "format": "credit-card"}, r"format must be one of"),
    ({"anyOf": []}, r"anyOf must be a non-empty list"),
    ({"required": "a"}, r"required must be a list"),
    ({"type": "string", "description": "d" * 40_000}, r"the limit is 32,768"),
    ([], rf"{W} must be a JSON object"),
])
def test_hostile_or_unsupported_schemas_are_refused_naming_the_place(schema, match):
    with pytest.raises(BadInput, match=match):
        check_schema(schema)


@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^\d{4}-\d{2}-\d{2}$", r"(ab)*c+", r"^(?:[a-z]{1,64}\.){1,8}[a-z]{2,6}$"])
def test_ordinary_patterns_pass(pattern):
    assert check_schema({"type": "string", "pattern": pattern})


def test_a_schema_within_the_bounds_passes_unchanged_and_compiles():
    assert check_schema(REVENUE) is REVENUE
    assert check_schema(nested(MAX_DEPTH - 1))
    xgrammar = pytest.importorskip("xgrammar")
    xgrammar.Grammar.from_json_schema(json.dumps(REVENUE))


@pytest.mark.parametrize("value, match", [
    ("json", r"must be \{\"type\": \"text\"\}"),
    ({"type": "json_schema"}, r"json_schema must be \{\"name\""),
    ({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}, r"name must be 1-64 letters"),
    ({"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}}, r"json_schema must be"),
    ({"type": "json_object", "schema": {}}, r"takes only type"),
])
def test_bad_response_formats_name_the_fix(value, match):
    with pytest.raises(BadInput, match=match):
        response_format_schema(value)
