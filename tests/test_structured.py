"""finspace.structured: a caller's JSON schema held to what structured outputs enforce, in bounded size."""

from __future__ import annotations

import json

import pytest

from finspace.errors import BadInput
from finspace.structured import MAX_DEPTH, MAX_ENUM, MAX_NODES, MAX_PROPERTIES, check_schema, response_format_schema

W = "response_format.json_schema.schema"
REVENUE = {
    "type": "object",
    "required": ["revenue"],
    "additionalProperties": False,
    "properties": {
        "revenue": {"type": "number", "minimum": 0},
        "period": {"type": "string", "pattern": "^Q[1-4]$"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 5},
    },
    "$defs": {"item": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}},
}


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize(
    "schema, match",
    [
        ({"type": "object", "not": {}}, rf"{W}: 'not' is not supported"),  # silently ignored elsewhere
        ({"type": "object", "patternProperties": {}, "if": {}}, r"'if', 'patternProperties' are not supported"),
        ({"properties": {"a": {"type": "array", "uniqueItems": True}}}, rf"{W}.properties.a: 'uniqueItems'"),
        ({"type": "decimal"}, r"\.type must be one of array, boolean"),
        ({"type": []}, r"\.type must be one of"),
        (nested(MAX_DEPTH + 1), rf"nests more than {MAX_DEPTH} levels"),  # deep nesting
        ({"enum": list(range(MAX_ENUM + 1))}, rf"enum must be a list of 1 to {MAX_ENUM}"),  # a huge enum
        ({"enum": ["x" * 300]}, r"each value is at most 200"),
        ({"type": "object", "properties": {f"p{i}": {} for i in range(MAX_PROPERTIES + 1)}}, r"at most 64 schemas"),
        ({"anyOf": [{"anyOf": [{"type": "string"}] * 30}] * 30}, rf"more than {MAX_NODES} sub-schemas"),
        ({"type": "string", "pattern": "(a{1000}){1000}"}, r"repetition \{1000\} is over 64"),  # pathological
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
    ],
)
def test_hostile_or_unsupported_schemas_are_refused_naming_the_place(schema, match):
    with pytest.raises(BadInput, match=match):
        check_schema(schema)


# issue 33: a hostname as ^(?:[a-z]{1,64}\.){1,8}[a-z]{2,6}$ nests varying repetitions (512 ways): refused now
# (([a-z]{1,16}){8} took xgrammar 15 s); "format": "hostname" is the cheap way, or ^(?:[a-z]+\.)+[a-z]{2,6}$
@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^\d{4}-\d{2}-\d{2}$", r"(ab)*c+", r"^(?:[a-z]+\.)+[a-z]{2,6}$"])
def test_ordinary_patterns_pass(pattern):
    assert check_schema({"type": "string", "pattern": pattern})


def test_a_schema_within_the_bounds_passes_unchanged_and_compiles():
    assert check_schema(REVENUE) is REVENUE
    assert check_schema(nested(MAX_DEPTH - 1))
    xgrammar = pytest.importorskip("xgrammar")
    xgrammar.Grammar.from_json_schema(json.dumps(REVENUE))


@pytest.mark.parametrize(
    "value, match",
    [
        ("json", r"must be \{\"type\": \"text\"\}"),
        ({"type": "json_schema"}, r"json_schema must be \{\"name\""),
        ({"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}, r"name must be 1-64 letters"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}}, r"json_schema must be"),
        ({"type": "json_object", "schema": {}}, r"takes only type"),
    ],
)
def test_bad_response_formats_name_the_fix(value, match):
    with pytest.raises(BadInput, match=match):
        response_format_schema(value)


# ------------------------------------------------------------------ issue 33: what vLLM refused with a 500
@pytest.mark.parametrize(
    "schema, match",
    [
        (
            {"properties": {"a": {"const": json.loads("[" * 70 + "]" * 70)}}},
            r"\.properties\.a\.const\.0\.0.*nests more than 40",
        ),
        (
            {"properties": {"a": {"default": json.loads('{"x":' * 60 + "1" + "}" * 60)}}},
            r"\.a\.default\.x\.x.*nests more",
        ),
        ({"type": "string", "pattern": r"^(a)\1$"}, r"\.pattern: a backreference"),
        ({"type": "string", "pattern": r"(?<=a)b"}, r"\.pattern: a lookbehind"),
        ({"type": "string", "pattern": r"(?<!a)b"}, r"\.pattern: a lookbehind"),
        ({"type": "string", "pattern": r"a(?=b)"}, r"\.pattern: a lookahead"),
        ({"type": "string", "pattern": r"\bword"}, r"\.pattern: a word boundary"),
        ({"type": "string", "pattern": r"a\Bb"}, r"\.pattern: a non-boundary"),
        ({"type": "string", "pattern": r"(?P<x>a)(?P=x)"}, r"\.pattern: a backreference"),
        ({"type": "string", "pattern": r"(?>ab)c"}, r"\.pattern: an atomic group"),
        ({"type": "string", "pattern": r"(a)?(?(1)b|c)"}, r"\.pattern: a conditional group"),
        ({"type": "string", "pattern": r"(?i:a)b"}, r"\.pattern: an inline flag group"),
        ({"type": "string", "pattern": r"\Aab\Z"}, r"\\A \(use \^\)"),
        ({"type": "string", "pattern": r"\101"}, r"octal escape"),
        ({"type": "string", "pattern": r"a{,3}"}, r"no lower count"),
        ({"type": "string", "pattern": r"^((([a-zA-Z0-9 ]){1,16}){1,2}){8}$"}, r"nested inside one another.*multiply"),
        ({"type": "string", "pattern": r"^(a{1,16}){8}$"}, r"varying count .* multiply to 128"),
        ({"type": "string", "pattern": r"^([a-z]{4}){1,16}$"}, r"multiply to 64 \(the limit is 16\)"),
        (
            {"properties": {"a": {"$ref": "#/$defs/missing"}}},
            r"\.properties\.a\.\$ref '#/\$defs/missing' names a definition that is not",
        ),
        ({"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x/y"}, r"not in the schema"),
        ({"$defs": {"a/b": {}}, "$ref": "#/$defs/a~1b"}, r"escaped names"),
        ({"type": "integer", "minimum": 10, "maximum": 1}, r"minimum 10 and maximum 1 leave no number"),
        (
            {"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2},
            r"exclusiveMinimum 1 and exclusiveMaximum 2",
        ),
        ({"type": "number", "exclusiveMinimum": 5, "maximum": 5}, r"leave no number"),
        ({"type": "integer", "minimum": 1.5}, r"\.minimum is 1.5, but the type is integer"),
        ({"type": "array", "minItems": 5, "maxItems": 2}, r"minItems 5 is greater than maxItems 2"),
        ({"type": "string", "minLength": 9, "maxLength": 3}, r"minLength 9 is greater than maxLength 3"),
        ({"type": "array", "prefixItems": [{}, {}], "maxItems": 1}, r"maxItems 1 is less than the 2 prefixItems"),
        ({"type": "array", "prefixItems": [{}], "items": False, "minItems": 3}, r"minItems 3 is more than the 1"),
        ({"anyOf": [False]}, r"\.anyOf\.0 is false"),
        ({"properties": {"a": False}, "required": ["a"]}, r"\.properties\.a is false"),
    ],
)
def test_what_vllm_refuses_is_refused_first_naming_the_place(schema, match):
    with pytest.raises(BadInput, match=match):
        check_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 5, "maximum": 5},
        {"type": "number", "minimum": 1.5, "maximum": 1.7},
        {"type": "object", "additionalProperties": False},
        {"type": "array", "items": False, "prefixItems": [{}]},
        {"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x"},
        {"type": "string", "pattern": r"^\d{4}-\d\d$"},
        {"type": "string", "pattern": r"(?:ab|cd)+\s*x"},
        {"type": "string", "pattern": r"^[0-9]{1,3}(,[0-9]{3})*$"},
        {"type": "string", "pattern": r"^(\w+\s?)+$"},
        {"type": "string", "pattern": "(((a{8}){8}){8}){4}"},
    ],
)
def test_what_vllm_takes_still_passes(schema):
    assert check_schema(schema) is schema


def test_every_schema_the_matrix_builds_is_within_the_cost_bound():
    from finspace.matrix.cells import cell_schema
    from finspace.matrix.fields import FIELD_TYPES, MatrixField
    from finspace.structured import MAX_GRAMMAR_COST, schema_cost

    for kind in FIELD_TYPES:
        s = cell_schema(MatrixField("Field", kind, "x"), 5000)
        assert schema_cost(s) <= MAX_GRAMMAR_COST and check_schema(s) is s


def test_the_cost_is_the_whole_schemas_not_each_pieces():
    from finspace.structured import MAX_GRAMMAR_COST, schema_cost
    from finspace.structured.cost import LITERAL, WIDE, WORD, pattern_cost, string_length_cost

    piece = {"type": "string", "pattern": "(((a{8}){8}){8}){4}"}
    assert check_schema({"type": "object", "properties": {"a": piece}})  # one is fine
    assert 2048 * LITERAL <= pattern_cost("(((a{8}){8}){8}){4}") < 2100 * LITERAL
    assert pattern_cost("[a-z]") == WORD and pattern_cost("[^\"]") == WIDE and pattern_cost(".") == WIDE
    assert pattern_cost("[a-zA-Z ]") == WIDE and pattern_cost("[0-9]") < WORD
    many = {
        "type": "object",
        "properties": {
            f"g{g}": {"type": "object", "properties": {f"s{i}": piece for i in range(63)}} for g in range(6)
        },
    }
    assert schema_cost(many) > MAX_GRAMMAR_COST
    with pytest.raises(
        BadInput,
        match=r"to compile into a grammar \(the limit is 100,000.*most of it at "
        rf"{W}\.properties\.g0\.properties\.s0",
    ):
        check_schema(many)
    alternatives = {
        "anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 40}}} for i in range(64)]
    }
    with pytest.raises(BadInput, match=r"to compile into a grammar"):
        check_schema(alternatives)
    for ambiguous in (r"^((([a-zA-Z0-9 ]){1,16}){1,2}){8}$", r"^([a-z]{1,16}){8}$", r"^(((.){1,16}){3}){2}"):
        with pytest.raises(BadInput, match=r"to compile into a grammar|multiply to"):  # 750 s, 15 s, ~90 s here
            check_schema({"type": "string", "pattern": ambiguous})
    assert check_schema({"type": "string", "pattern": r"^[a-z]{64}$"})  # unambiguous: [a-z]{100} took 0.3 s
    with pytest.raises(BadInput, match=r"to compile into a grammar"):  # one long bounded string
        check_schema({"type": "string", "maxLength": 5000})
    refs = {
        "$defs": {"big": {"type": "string", "maxLength": 100}},
        "type": "object",
        "properties": {f"p{i}": {"$ref": "#/$defs/big"} for i in range(3)},
    }
    assert schema_cost(refs) > 3 * string_length_cost(100)  # each reference counts its definition


def test_vllms_refusals_read_as_the_keyword_without_build_paths():
    from vllm.exceptions import VLLMValidationError

    from finspace.structured.refusals import explain

    msg = explain(
        VLLMValidationError(
            "Failed to transform json schema into a grammar: [00:23:53] "
            "/project/cpp/regex_converter.cc:83: Regex parsing error at position 5: "
            "Backreference is not supported"
        )
    )
    assert "(pattern)" in msg and "/project" not in msg and "[00:23:53]" not in msg and "change the schema" in msg
    assert "(minimum/maximum)" in explain(VLLMValidationError("... Invalid range: minimum greater than maximum"))
    assert "($ref)" in explain(VLLMValidationError("Cannot find field $defs in #/$defs/x"))
    assert "(nesting)" in explain(VLLMValidationError("The JSON schema is nested too deeply: objects ..."))
    assert explain(VLLMValidationError("something else")).startswith("the engine refused this request: something")


def test_one_new_schema_compiles_at_a_time_per_client_and_a_known_one_takes_no_slot():
    from finspace.errors import Busy
    from finspace.structured.compiles import CompileGate

    now = [0.0]
    gate = CompileGate(clock=lambda: now[0])
    a, b = {"type": "string", "maxLength": 100}, {"type": "integer"}
    with gate.hold("x", a) as slot:
        with pytest.raises(Busy, match=r"still compiling \(the limit is 1 at once per client\).*cached"):
            with gate.hold("x", b):
                pass
        with gate.hold("y", b) as other:  # another client is not held up
            other.compiled()
        with gate.hold("x", None):  # no schema: no slot
            pass
        slot.compiled()
    with gate.hold("x", b) as s2, gate.hold("x", a):  # a is compiled now: no slot
        s2.compiled()
    with gate.hold("x", {"type": "string", "maxLength": 200}):  # the client leaves before its first token
        pass
    with pytest.raises(Busy):  # the compile goes on in vLLM: the slot stays for its estimated time
        with gate.hold("x", {"type": "boolean"}):
            pass
    now[0] += 31
    with gate.hold("x", {"type": "boolean"}) as s3:
        s3.compiled()
    assert gate.compiling("x") == 0
