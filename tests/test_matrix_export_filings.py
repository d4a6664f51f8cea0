"""Issue 40: a Matrix over the shared filings exported to XLSX keeps its figures as figures: read back with
openpyxl, every money cell is a number, each money column has one scale (Netflix's thousands converted to the
column's millions), and the JSON keeps the filer's own scale.

The Matrix is filled without a model, from the filers' inline-XBRL values (``matrix.filer``), as the app fills it
before any model answers; two model cells are added by hand from figures read off the PDFs (Apple's FY2015
10-K, page 41, in millions; Costco's, page 40, written in thousands by the "model") so the model's columns are
tested too.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from support.filings import filing

from finspace.documents.convert import convert
from finspace.documents.limits import DocumentLimits
from finspace.matrix import export
from finspace.matrix.cells import Cell
from finspace.matrix.fields import load_field_presets
from finspace.matrix.filer import filer_values
from finspace.matrix.table import CellResult, MatrixResult, Row
from finspace.matrix.verify import verify

HTML = [
    "aapl-10-k-2024-11-01.html",
    "nflx-10-k-2025-01-27.html",
    "nvda-10-k-2025-02-26.html",
    "wfc-10-k-2025-02-25.html",
]
PDF = {
    "APPLE_2015_10K.pdf": (41, "Net sales $ 233,715 $ 182,795 $ 170,910", 233715, "millions"),
    "COSTCO_2015_10K.pdf": (40, "Total revenue 116,199 112,640 105,156", 116199000, "thousands"),
}
_MONEY_HEADER = re.compile(r"\((?:XBRL, )?(?:[A-Z]{3} )?(units|thousands|millions|billions)\)$")


@pytest.fixture(scope="module")
def matrix() -> MatrixResult:
    fields = load_field_presets().get("income-statement").fields
    docs = [convert(filing(n), n, DocumentLimits()) for n in [*HTML, *PDF]]
    r = MatrixResult(fields, tuple(Row(d.name, len(d.pages), facts=len(d.facts.facts)) for d in docs), state="done")
    r.filer = filer_values(fields, [d.facts for d in docs])
    revenue = next(c for c, f in enumerate(fields) if f.name == "Revenue")
    for k, (name, (page, quote, amount, scale)) in enumerate(PDF.items(), len(HTML)):
        cell = Cell("ok", True, {"amount": amount, "currency": "USD", "scale": scale}, page, quote)
        mark = verify(cell, fields[revenue], {i: p.text for i, p in enumerate(docs[k].pages, 1)})
        r.cells[(k, revenue)] = CellResult(cell, mark, False)
    return r


def test_money_cells_read_back_from_the_xlsx_are_numbers_one_scale_per_column(matrix, tmp_path):
    from openpyxl import load_workbook

    wb = load_workbook(export.to_xlsx(matrix, tmp_path / "filings.xlsx"))
    sheet = [list(x) for x in wb["Matrix"].iter_rows(values_only=True)]
    headers, rows = sheet[0], sheet[1:]
    money = [i for i, h in enumerate(headers) if _MONEY_HEADER.search(h)]
    assert len(money) == 2 * 3, headers  # the preset's 3 money fields: the model's column and the filer's
    numbers = 0
    for i in money:
        for row in rows:
            assert row[i] is None or isinstance(row[i], int | float), (headers[i], row[i])
            numbers += row[i] is not None
    filed = sum(1 for (_, c), fv in matrix.filer.items() if matrix.fields[c].type == "money" and fv.value is not None)
    assert filed >= 9 and numbers == filed + 2  # every filer money value of the HTML filings, and the two model cells
    scales = {h: _MONEY_HEADER.search(h).group(1) for h in (headers[i] for i in money)}
    assert all(s in ("millions", "thousands", "billions", "units") for s in scales.values())  # one a column
    # Netflix files in thousands; its revenue sits in the millions column, converted exactly
    xbrl = headers.index("Revenue (XBRL, USD millions)")
    by_doc = {row[0]: row for row in rows}
    assert by_doc["nflx-10-k-2025-01-27.html"][xbrl] == 39000.966
    assert by_doc["aapl-10-k-2024-11-01.html"][xbrl] == 391035
    total = sum(row[xbrl] for row in rows if row[xbrl] is not None)  # a spreadsheet can add them
    assert total > 391035 + 39000
    # the model's column: Apple's 233,715 million and Costco's 116,199,000 thousand, both in millions, verified
    model = headers.index("Revenue (USD millions)")
    assert by_doc["APPLE_2015_10K.pdf"][model] == 233715 and by_doc["COSTCO_2015_10K.pdf"][model] == 116199
    assert by_doc["APPLE_2015_10K.pdf"][headers.index("Revenue page")] == 41
    assert by_doc["APPLE_2015_10K.pdf"][headers.index("Revenue check")].startswith("✓ ")
    assert by_doc["APPLE_2015_10K.pdf"][headers.index("Revenue quote")] == PDF["APPLE_2015_10K.pdf"][1]
    assert wb["Matrix"].cell(row=2, column=xbrl + 1).data_type == "n"


def test_the_json_keeps_the_filers_own_scale(matrix):
    data = json.loads(export.files(matrix)["matrix.json"])
    rows = {r["document"]: r for r in data["rows"]}
    nflx = rows["nflx-10-k-2025-01-27.html"]["cells"][0]["xbrl"]["value"]
    assert nflx["scale"] == "thousands" and Decimal(str(nflx["amount"])) == Decimal("39000966")
    costco = rows["COSTCO_2015_10K.pdf"]["cells"][0]["value"]
    assert costco == {"amount": 116199000, "currency": "USD", "scale": "thousands"}
