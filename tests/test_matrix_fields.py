"""The Filing Matrix's fields: matrix.yaml validated like the catalogue, callers' fields bounded."""

from __future__ import annotations

import pytest

from finspace.errors import BadInput, CatalogError
from finspace.matrix.fields import DEFAULT_MATRIX_PRESETS, MAX_FIELDS, load_field_presets, parse_fields


def test_the_shipped_presets_load_and_cover_the_analysts_headlines():
    presets = load_field_presets(DEFAULT_MATRIX_PRESETS)
    assert {"income-statement", "balance-sheet", "guidance", "auditor", "risk-factors"} <= set(presets.keys())
    assert presets.get("Income statement headline").fields[0].name == "Revenue"  # by label too


@pytest.mark.parametrize(
    "body, match",
    [
        (
            "presets:\n  p:\n    label: P\n    fields:\n      - {name: A, type: money}\n",
            r"preset 'p' field 'fields.0.instruction': missing required field",
        ),
        (
            "presets:\n  p:\n    label: P\n    fields:\n      - {name: A, type: currency, instruction: x}\n",
            r"preset 'p' field 'fields.0.type'",
        ),
        (
            "presets:\n  p:\n    label: P\n    colour: red\n    fields:\n      - {name: A, type: text, instruction: x}\n",
            r"preset 'p' field 'colour': unknown key",
        ),
        (
            "presets:\n  p:\n    label: P\n    fields:\n      - {name: A, type: text, instruction: x}\n"
            "      - {name: a, type: text, instruction: y}\n",
            r"preset 'p': field name 'a' is used twice",
        ),
        ("presets:\n  p:\n    label: P\n    fields: []\n", r"preset 'p' field 'fields'"),
        (
            "presets:\n  p q:\n    label: P\n    fields:\n      - {name: A, type: text, instruction: x}\n",
            r"preset key 'p q'",
        ),
        ("presets:\n  p:\n    label: P\n  p:\n    label: Q\n", r"duplicate key 'p'"),
    ],
)
def test_a_bad_presets_file_names_the_preset_and_the_field(tmp_path, body, match):
    path = tmp_path / "matrix.yaml"
    path.write_text(body)
    with pytest.raises(CatalogError, match=match):
        load_field_presets(path)


@pytest.mark.parametrize(
    "raw, match",
    [
        ("Revenue", r"must be a JSON list"),
        ([], r"must be a JSON list"),
        (
            [{"name": f"f{i}", "type": "text", "instruction": "x"} for i in range(MAX_FIELDS + 1)],
            rf"13 fields asked for; a matrix has at most {MAX_FIELDS}",
        ),
        ([{"name": "A", "type": "currency", "instruction": "x"}], r"field 1 \(type\).*the types are number, percent"),
        ([{"name": "A", "type": "text"}], r"field 1 \(instruction\): Field required"),
        ([{"name": "A" * 61, "type": "text", "instruction": "x"}], r"field 1 \(name\)"),
        ([{"name": "A", "type": "text", "instruction": "x" * 601}], r"field 1 \(instruction\)"),
        ([{"name": "A", "type": "text", "instruction": "x", "schema": {}}], r"field 1 \(schema\)"),
        ([{"name": "   ", "type": "text", "instruction": "x"}], r"not only spaces"),
        (
            [{"name": "A", "type": "text", "instruction": "x"}, {"name": " a", "type": "date", "instruction": "y"}],
            r"field name 'a' is used twice",
        ),
        (["A"], r"field 1"),
    ],
)
def test_a_callers_bad_fields_get_a_message_naming_the_fix(raw, match):
    with pytest.raises(BadInput, match=match):
        parse_fields(raw)


def test_a_callers_fields_are_read_in_order():
    fields = parse_fields(
        [
            {"name": " Revenue ", "type": "money", "instruction": "Total revenue"},
            {"name": "Auditor", "type": "text", "instruction": "Who signed"},
        ]
    )
    assert [(f.name, f.type) for f in fields] == [("Revenue", "money"), ("Auditor", "text")]


@pytest.mark.parametrize(
    "index, label, mark",
    [
        (23, "page 23 (printed 21)", "[page 23 (printed 21)]"),  # a filing's printed number beside the cited one
        (3, "page 3", "[page 3]"),
        (1, "", "[page 1]"),
        (2, "sheet Income", "[page 2: sheet Income]"),
        (4, "page 40 (printed 4)", "[page 4: page 40 (printed 4)]"),  # a label that is not this page's is kept apart
    ],
)
def test_a_cells_page_mark_keeps_the_printed_number(index, label, mark):
    from finspace.documents.convert import Page
    from finspace.matrix.cell_prompt import page_mark

    assert page_mark(index, Page(label, "")) == mark


@pytest.mark.parametrize(
    "name", ['=HYPERLINK("http://evil.example/","open")', "+SUM(1,1)", "-2+3", "@SUM(1,1)", "  =1+1"]
)
def test_a_field_name_a_spreadsheet_would_run_is_refused_naming_the_rule(name):
    with pytest.raises(
        BadInput,
        match=r"field name .* begins with .* a field name cannot begin with =, \+, -, @, a "
        r"tab or a carriage return",
    ):
        parse_fields([{"name": name, "type": "number", "instruction": "Total revenue"}])
    assert parse_fields([{"name": "Revenue (-2+3)", "type": "number", "instruction": "x"}])  # inside: fine
