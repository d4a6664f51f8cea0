"""The filer's XBRL value beside the model's, without an engine: presets name concepts, a model value agrees
with the filer's when it is that figure rounded as the model wrote it, the grid gets an XBRL column and the
exports carry both values and the concept. The values come from a real 10-K's facts (Apple FY2024)."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest

from finspace.matrix import export
from finspace.matrix.cells import Cell, context_problem, reply_tokens
from finspace.matrix.fields import load_field_presets, parse_fields
from finspace.matrix.filer import AGREES, DIFFERS, agreement, filer_values, typed
from finspace.matrix.table import CellResult, MatrixResult, Row, details, grid, mark_keys, to_json, xbrl_marks
from finspace.matrix.verify import CUT, NOT_FOUND, VALUE_NOT_IN_QUOTE, VERIFIED
from finspace.xbrl.concepts import FilerValue
from finspace.xbrl.reader import read_file
from support.filings import filing

REV = FilerValue("us-gaap:Revenues", 31, Decimal("391035000000"), unit="iso4217:USD", decimals="-6")
EPS = FilerValue("us-gaap:EarningsPerShareDiluted", 31, Decimal("6.08"), unit="iso4217:USD/xbrli:shares", decimals="2")
END = FilerValue("dei:DocumentPeriodEndDate", 1, text="2024-09-28")


def money(amount, scale="millions", currency="USD"):
    return {"amount": amount, "currency": currency, "scale": scale}


@pytest.mark.parametrize(
    "model, expected",
    [
        (money(391035), AGREES),
        (money(391.035, "billions"), AGREES),
        (money(391, "billions"), AGREES),
        (money(391.04, "billions"), AGREES),
        (money(391035000000, "units"), AGREES),
        (money(391035400000, "units"), AGREES),  # more precise than the filer's decimals (-6): rounds to it
        (money(390, "billions"), DIFFERS),
        (money(391.1, "billions"), DIFFERS),
        (money(-391035), DIFFERS),
        (money(391035, currency="EUR"), DIFFERS),
        (money(391035, "thousands"), DIFFERS),
        (None, None),
    ],
)
def test_a_money_value_agrees_when_it_is_the_filers_rounded(model, expected):
    assert agreement(model, REV, "money") == expected


def test_numbers_dates_and_text():
    assert typed(REV, "money") == money(391035)
    assert agreement(6.08, EPS, "number") == AGREES and agreement(6.1, EPS, "number") == AGREES
    assert agreement(6.18, EPS, "number") == DIFFERS
    assert agreement("2024-09-28", END, "date") == AGREES and agreement("2024-09-30", END, "date") == DIFFERS
    auditor = FilerValue("dei:AuditorName", 51, text="Ernst & Young LLP")
    assert agreement("ernst & young  LLP", auditor, "text") == AGREES
    assert agreement("Deloitte", auditor, "text") == DIFFERS


def test_every_income_statement_and_balance_sheet_field_names_concepts():
    presets = load_field_presets()
    for key in ("income-statement", "balance-sheet"):
        for f in presets.get(key).fields:
            assert f.concepts and all(":" in c for c in f.concepts), f
    assert "us-gaap:Revenues" in presets.get("income-statement").fields[0].concepts
    assert parse_fields([{"name": "R", "type": "money", "instruction": "x", "concepts": ["us-gaap:Revenues"]}])[
        0
    ].concepts == ("us-gaap:Revenues",)
    with pytest.raises(Exception, match=r"field 1 \(concepts"):
        parse_fields([{"name": "R", "type": "money", "instruction": "x", "concepts": ["not a concept"]}])


def test_a_cells_reply_is_sized_to_the_models_context():
    assert reply_tokens(1024, 768) == 256 and reply_tokens(1280, 768) == 512 and reply_tokens(2048, 768) == 768
    assert reply_tokens(40960, 768) == 768 and reply_tokens(40960, 2000) == 2000 and reply_tokens(1024, 100) == 100
    assert context_problem(1024) is None
    assert "load a model with a longer context" in context_problem(1023)


@pytest.fixture(scope="module")
def apple_result() -> MatrixResult:
    fields = load_field_presets().get("income-statement").fields
    facts = read_file(filing("aapl-10-k-2024-11-01.html"))
    result = MatrixResult(
        fields, (Row("aapl.html", 59, facts=len(facts)), Row("old.pdf", 3), Row("bad.pdf", error="not a PDF"))
    )
    result.filer = filer_values(fields, [facts, None, None])
    return result


def test_the_grid_shows_the_filers_value_beside_the_models(apple_result):
    r = apple_result
    headers, rows = grid(r)
    assert headers[:3] == ["Document", "Revenue", "Revenue (XBRL)"] and headers[-1] == "Period end (XBRL)"
    assert rows[0][1:3] == ["…", "USD 391,035 million (p. 31)"]  # the filer's value before any model answer
    assert rows[1][2] == "— no XBRL in this file" and rows[2][2] == "not read"
    r.cells[(0, 0)] = CellResult(
        Cell("ok", True, money(391.0, "billions"), 31, "Total net sales 391,035"), VERIFIED, False
    )
    r.cells[(0, 2)] = CellResult(
        Cell("ok", True, money(12, "billions"), 2, "Net income 12 billion dollars"), VALUE_NOT_IN_QUOTE, False
    )
    r.cells[(0, 1)] = CellResult(Cell("ok"), NOT_FOUND, False)
    headers, rows = grid(r)
    assert rows[0][1] == "✓ USD 391.0 billion (p. 31) · agrees with the filer's XBRL"
    assert rows[0][5] == "≠ USD 12 billion (p. 2) · differs from the filer's XBRL: USD 93,736 million"
    assert rows[0][3] == "— not found · the filer's XBRL has USD 123,216 million"  # the model missed it
    assert mark_keys(r)[0][:4] == ["verified", "xbrl", "not_found", "xbrl"]
    assert xbrl_marks(r)[0][:6] == ["agrees", "", "missed", "", "differs", ""]
    r.cells[(0, 3)] = CellResult(Cell("cut"), CUT, False)  # no answer: nothing to mark
    assert grid(r)[1][0][7] == "✂ cut at max_tokens" and xbrl_marks(r)[0][6] == ""
    line = next(d for d in details(r) if d[1] == "Revenue")
    assert line[-4:] == [
        "USD 391,035 million",
        "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
        31,
        "agrees with the filer's XBRL",
    ]


def test_the_exports_carry_both_values_and_the_concept(apple_result, tmp_path):
    from openpyxl import load_workbook

    r = apple_result
    back = list(csv.reader(io.StringIO(export.to_csv(r))))
    h = back[0]
    assert h[-len(r.fields) :] == [f"{f.name} (XBRL concept)" for f in r.fields]
    assert back[1][h.index("Revenue (XBRL concept)")] == "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"
    # money as numbers, unit and scale in the header (issue 40), the page and the mark in columns of their own
    assert (
        back[1][h.index("Revenue (XBRL, USD millions)")] == "391035" and back[1][h.index("Revenue (XBRL) page")] == "31"
    )
    assert back[1][h.index("Revenue (USD billions)")] == "391" and back[1][h.index("Revenue page")] == "31"
    assert back[1][h.index("Revenue check")] == "✓ verified · agrees with the filer's XBRL"
    assert back[2][h.index("Revenue (XBRL concept)")] == ""
    wb = load_workbook(export.to_xlsx(r, tmp_path / "m.xlsx"))
    assert [list(x) for x in wb["Matrix"].iter_rows(values_only=True, max_row=1)][0] == h
    prov = [list(x) for x in wb["Provenance"].iter_rows(values_only=True)]
    assert any(
        x[:4] == ["aapl.html", "Revenue", "money", "USD 391.0 billion"]
        and "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax" in x
        for x in prov
    )
    data = json.loads(export.files(r)["matrix.json"])
    cell = data["rows"][0]["cells"][0]
    assert cell["value"] == money(391.0, "billions") and cell["xbrl"]["value"] == money(391035)
    assert cell["xbrl"]["concept"] == "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"
    assert cell["xbrl"]["agreement"] == "agrees" and cell["xbrl"]["number"] == "391035000000"
    assert data["fields"][0]["concepts"][0] == "us-gaap:Revenues"


def test_with_no_model_the_filers_values_alone():
    fields = load_field_presets().get("balance-sheet").fields
    facts = read_file(filing("nvda-10-k-2025-02-26.html"))
    r = MatrixResult(fields, (Row("nvda.html", 87, facts=len(facts)),), model=False, state="done")
    r.filer = filer_values(fields, [facts])
    headers, rows = grid(r)
    assert rows[0][1:3] == ["no model loaded", "USD 111,601 million (p. 54)"]
    assert rows[0][headers.index("Shares outstanding (XBRL)")] == "24,400,000,000 (p. 1)"
    assert r.total == 0 and to_json(r)["rows"][0]["cells"][0]["check"] == "no_model"


# ------------------------------------------------------------------ the desk (real conversion, no engine)
def _desk(tmp_path, engine):

    from finspace.documents.gate import ConversionGate
    from finspace.documents.limits import DocumentLimits
    from finspace.matrix.desk import MatrixDesk

    return MatrixDesk(engine, ConversionGate(1, 1, 60.0), DocumentLimits(), str((tmp_path / "uploads").resolve()))


def _upload(tmp_path, name: str) -> tuple[str, str]:
    import shutil

    folder = tmp_path / "uploads" / "one"
    folder.mkdir(parents=True, exist_ok=True)
    return str(shutil.copy(filing(name), folder / name)), name


async def test_with_no_model_loaded_a_matrix_of_xbrl_fields_fills_from_the_filing(tmp_path):
    from types import SimpleNamespace

    desk = _desk(tmp_path, SimpleNamespace(entry=None, ready=False))
    files = [_upload(tmp_path, "nflx-10-k-2025-01-27.html")]
    results = [r async for r in desk.fill(files, "income-statement")]
    final = results[-1]
    assert (final.state, final.model, final.total, final.rows[0].facts > 1000) == ("done", False, 0, True)
    assert grid(final)[1][0][1:3] == ["no model loaded", "USD 39,000,966 thousand (p. 39)"]
    assert not (tmp_path / "uploads" / "one" / "nflx-10-k-2025-01-27.html").exists()  # the upload is deleted
    from finspace.errors import NotReady

    with pytest.raises(NotReady, match="no model is loaded"):  # fields without concepts still need a model
        [r async for r in desk.fill([_upload(tmp_path, "nflx-10-k-2025-01-27.html")], "guidance")]


async def test_a_model_too_small_for_a_cell_is_refused_once_in_the_matrixs_words(tmp_path):
    from types import SimpleNamespace

    from finspace.errors import BadInput

    desk = _desk(tmp_path, SimpleNamespace(entry=object(), ready=True, max_model_len=512))
    with pytest.raises(
        BadInput,
        match=r"the loaded model reads 512 tokens at a time; a Matrix cell needs at least "
        r"1,024 .*: load a model with a longer context",
    ):
        [r async for r in desk.fill([_upload(tmp_path, "nflx-10-k-2025-01-27.html")], "income-statement")]


def test_every_cells_hover_is_a_sentence(apple_result):
    """#41: a cell's hover showed the raw key "xbrl_none" (and "pending", "error")."""
    import html
    import re

    from finspace.ui.matrix_tab import grid_html

    cells = [
        (c, html.unescape(t))
        for c, t in re.findall(
            r"<td data-check='([a-z_]+)' data-xbrl='[a-z]*' title='([^']*)'", grid_html(apple_result)
        )
    ]
    checks = {c for c, _ in cells}
    assert {"xbrl_none", "pending", "error"} <= checks, checks
    for check, title in cells:
        assert title and title != check and " " in title, (check, title)
    assert ("xbrl_none", "the filer's XBRL has no value for this field") in cells
