"""The matrix's exports say what the page says: the CSV is the grid, the XLSX the grid and the provenance."""

from __future__ import annotations

import csv
import io
import json

from finspace.matrix import export
from finspace.matrix.cells import Cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.table import CellResult, MatrixResult, Row, details, grid, show_value
from finspace.matrix.verify import CUT, NOT_FOUND, NOT_ON_PAGE, VERIFIED

FIELDS = (MatrixField("Revenue", "money", "Total revenue"), MatrixField("Auditor", "text", "Who signed"))
REVENUE = {"amount": 12.4, "currency": "USD", "scale": "billions"}


def result() -> MatrixResult:
    r = MatrixResult(
        FIELDS,
        (Row("alpha.pdf", 3), Row("beta.pdf", 2), Row("broken.pdf", error="not a PDF")),
        provenance={
            "model_key": "smollm2-135m",
            "repo": "local",
            "load_id": "17.000-smollm2-135m",
            "created_at": "2026-12-01T12:00:00Z",
        },
    )
    r.cells[(0, 0)] = CellResult(Cell("ok", True, REVENUE, 2, "Revenue was $12.4 billion"), VERIFIED, True)
    r.cells[(0, 1)] = CellResult(
        Cell("ok", True, "=HYPERLINK(\"http://x\")", 3, "=HYPERLINK(\"http://x\")"), NOT_ON_PAGE, True
    )  # a quote that would run as a formula
    r.cells[(1, 0)] = CellResult(Cell("ok"), NOT_FOUND, False)
    r.cells[(1, 1)] = CellResult(Cell("cut"), CUT, True)
    r.state = "done"
    return r


def test_the_grid_shows_marker_value_and_page():
    headers, rows = grid(result())
    assert headers == ["Document", "Revenue", "Auditor"]
    assert rows[0][1] == "✓ USD 12.4 billion (p. 2)"
    assert rows[1][1:] == ["— not found", "✂ cut at max_tokens"]
    assert rows[2] == ["broken.pdf (not read: not a PDF)", "not read", "not read"]


MONEY_HEADERS = ["Revenue (USD billions)", "Revenue page", "Revenue check", "Revenue quote"]


def test_the_csv_is_the_page_with_money_as_numbers_and_runs_no_formula():
    """Issue 40: a money column is a number with its unit and scale in the header, then its page, mark and quote;
    the other columns are the page's grid."""
    m = result()
    headers, rows = grid(m)
    back = list(csv.reader(io.StringIO(export.to_csv(m))))
    assert back[0] == ["Document", *MONEY_HEADERS, "Auditor"]
    assert back[1][:5] == ["alpha.pdf", "12.4", "2", "✓ verified", "Revenue was $12.4 billion"]
    assert back[2][:5] == ["beta.pdf", "", "", "— not found", ""]
    assert back[3][:5] == [rows[2][0], "", "", "not read", ""]
    assert [r[5] for r in back[1:]] == [r[2] for r in rows]  # the text field as the page shows it
    assert back[1][5] == rows[0][2] and not back[1][5].startswith("=")  # "✗ =HYPER..." starts with its marker


def trimmed(row) -> list:
    row = list(row)
    while row and row[-1] is None:
        row.pop()
    return row


def test_the_xlsx_has_the_grid_and_a_provenance_sheet(tmp_path):
    from openpyxl import load_workbook

    m = result()
    wb = load_workbook(export.to_xlsx(m, tmp_path / "m.xlsx"))
    assert wb.sheetnames == ["Matrix", "Provenance"]
    headers, rows = grid(m)
    sheet = [list(r) for r in wb["Matrix"].iter_rows(values_only=True)]
    assert sheet[0] == ["Document", *MONEY_HEADERS, "Auditor"]
    assert sheet[1][1] == 12.4 and wb["Matrix"]["B2"].data_type == "n" and sheet[1][2] == 2  # a number to add
    assert [r[5] for r in sheet[1:]] == [r[2] for r in rows]
    prov = [trimmed(r) for r in wb["Provenance"].iter_rows(values_only=True)]
    flat = {r[0]: r[1] for r in prov if len(r) >= 2}
    assert flat["model_key"] == "smollm2-135m" and flat["load_id"] == "17.000-smollm2-135m"
    assert flat["created_at"] == "2026-12-01T12:00:00Z"
    assert ["Revenue", "money", "Total revenue"] in prov  # the field definitions
    lines = [r for r in prov if r and r[0] in ("alpha.pdf", "beta.pdf")]
    assert lines[0] == ["alpha.pdf", "Revenue", "money", "USD 12.4 billion", 2, "Revenue was $12.4 billion", "verified"]
    assert lines[1][-2].startswith("'=")  # the formula-shaped quote is text
    assert len(lines) == len(details(m))


def test_json_keeps_typed_values(tmp_path):
    paths = export.write_all(result(), tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data["rows"][0]["cells"][0] == {
        "found": True,
        "value": REVENUE,
        "page": 2,
        "quote": "Revenue was $12.4 billion",
        "check": "verified",
        "match": None,
        "whole_document": True,
    }  # a hand-made mark: no "how"
    assert data["rows"][2]["error"] == "not a PDF" and data["rows"][2]["cells"] == [None, None]
    assert {p.suffix for p in paths.values()} == {".csv", ".xlsx", ".json"}


def test_values_are_shown_as_analysts_write_them():
    assert show_value(12.5, "percent") == "12.5%"
    assert show_value(1234567.5, "number") == "1,234,567.5"
    assert show_value(["a", "b"], "list") == "a; b"
    assert show_value(False, "yesno") == "no"
    assert show_value({"amount": 420, "currency": "EUR", "scale": "millions"}, "money") == "EUR 420 million"


def formula_result() -> MatrixResult:
    """Headers and cells that begin as formulas do (OWASP's list), and a negative number."""
    fields = (
        MatrixField("=HYPERLINK(\"http://evil.example/\",\"open\")", "number", "x"),
        MatrixField("+SUM(1,1)", "text", "x"),
        MatrixField("-2+3", "number", "x"),
        MatrixField("@SUM(1,1)", "text", "x"),
        MatrixField("\tTab", "text", "x"),
        MatrixField("\rCR", "text", "x"),
    )
    r = MatrixResult(fields, (Row("=cmd|' /C calc'!A0.pdf", 3), Row("-2+3.pdf", 1)))
    r.cells[(0, 0)] = CellResult(Cell("ok", True, -1234.5, 2, "-1,234.5"), VERIFIED, True)
    r.cells[(0, 1)] = CellResult(Cell("ok", True, "@SUM(1,1)", 2, "+SUM(1,1)"), NOT_ON_PAGE, True)
    r.state = "done"
    return r


def test_every_exported_header_and_cell_that_begins_as_a_formula_is_neutralised(tmp_path):
    from openpyxl import load_workbook

    m = formula_result()
    starts = ("=", "+", "-", "@", "\t", "\r")
    rows = list(csv.reader(io.StringIO(export.to_csv(m), newline="")))
    cells = [v for row in rows for v in row]
    assert not [v for v in cells if v.startswith(starts)], rows
    assert rows[0][1] == "'=HYPERLINK(\"http://evil.example/\",\"open\")" and rows[0][3] == "'-2+3"
    assert rows[0][5] == "'\tTab" and rows[1][0] == "'=cmd|' /C calc'!A0.pdf" and rows[2][0] == "'-2+3.pdf"
    wb = load_workbook(export.to_xlsx(m, tmp_path / "m.xlsx"))
    for ws in wb.worksheets:
        for line in ws.iter_rows():
            for cell in line:
                assert cell.data_type != "f", (ws.title, cell.coordinate, cell.value)
                assert not (isinstance(cell.value, str) and cell.value.startswith(starts)), (ws.title, cell.value)
    assert wb["Matrix"]["B1"].value.startswith("'=") and wb["Matrix"]["A2"].value.startswith("'=")
    # the quote "+SUM(1,1)" is text with its apostrophe; the negative value a number, a numeric cell
    lines = [
        r
        for r in wb["Provenance"].iter_rows()
        if r[0].value == "=cmd|' /C calc'!A0.pdf" or (isinstance(r[0].value, str) and r[0].value.startswith("'=cmd"))
    ]
    value, quote = lines[0][3], lines[0][5]
    assert value.value == -1234.5 and value.data_type == "n", (value.value, value.data_type)
    assert quote.value == "-1,234.5" or quote.value == -1234.5  # a plain number, not a formula


def test_plain_numbers_stay_numbers_and_formula_lookalikes_do_not():
    assert export._safe("-12.5") == "-12.5" and export._safe("-1,234") == "-1,234"
    assert export._safe("-2+3") == "'-2+3" and export._safe("-1e3") == "'-1e3" and export._safe("-") == "'-"
    assert export._xlsx_cell("-1,234") == -1234 and export._xlsx_cell("-12.5") == -12.5
    assert export._xlsx_cell("=1") == "'=1" and export._xlsx_cell(7) == 7
