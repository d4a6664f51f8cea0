"""A matrix exported as CSV, XLSX (openpyxl) and JSON, each saying what the page says.

The CSV is the page's grid. The XLSX has the grid as its first sheet ("Matrix") and the provenance as its
second ("Provenance"): the model (key, repo, revision, quantization, the load ledger's id), the time, the
field definitions, and one line per cell with its page, quote and check. Values leave as text, exactly as the
page shows them: a spreadsheet formula in a quote (``=cmd|...``) is written as text, never as a formula, and every
cell and header beginning with =, +, -, @, a tab or a carriage return gets a leading apostrophe (``_safe``); a
plain number (a negative one too) stays a number, a numeric cell in the XLSX.

A field that names XBRL concepts carries the filer's value beside the model's: the grid's "<field> (XBRL)"
column, and in the CSV and the Matrix sheet one more column, "<field> (XBRL concept)", naming the concept the
value was tagged with; the Provenance sheet's cell lines and the JSON carry value, concept, page and agreement.

**Money stays money** (issue 40): in the CSV and the Matrix sheet a money field's column is a number a
spreadsheet can add, its unit and scale in the header ("Revenue (USD millions)"), then the cell's page, its mark
(with the filer's agreement) and its quote in columns of their own; the filer's value likewise ("Revenue (XBRL,
USD millions)", "Revenue (XBRL) page"). A column has one scale, the one most of its values are in (the larger on
a tie): Netflix's 39,000,966 thousand is 39,000.966 in a millions column, exactly (``Decimal``). A column whose
rows are in different currencies says "(millions)" and gets a "<field> currency" column. The JSON keeps each
value as the model or the filer gave it, with its own scale.
"""

from __future__ import annotations

from typing import Any

import csv
import io
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

from finspace.matrix import filer
from finspace.matrix.cells import SCALES
from finspace.matrix.fields import FORMULA_START
from finspace.matrix.numbers import as_decimal
from finspace.matrix.table import MatrixResult, against_filer, detail_headers, details, grid, to_json

_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # a plain number as the page shows it: -1,234.5


def _safe(value: object) -> object:
    """Every exported cell and header: text a spreadsheet would run as a formula (it begins with =, +, -, @, a tab
    or a carriage return) gets a leading apostrophe, as OWASP's CSV-injection guidance says. A plain negative
    number (-1,234.5) is no formula and stays as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _xlsx_cell(value: object) -> object:
    """An XLSX cell: a plain number as a number (a negative one too: a numeric cell, not text), else ``_safe``."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        number = float(value.replace(",", ""))
        return int(number) if number.is_integer() and "." not in value else number
    return _safe(value)


def export_grid(result: MatrixResult) -> tuple[list[str], list[list[object]]]:
    """The page's grid with each money column as numbers (and its page, mark and quote columns), and for each
    field naming XBRL concepts the concept of each row's filer value."""
    headers, rows = grid(result)
    out_headers: list[str] = [headers[0]]
    out_rows: list[list[object]] = [[row[0]] for row in rows]
    columns = [
        col for c, f in enumerate(result.fields) for col in ([(c, False), (c, True)] if f.concepts else [(c, False)])
    ]  # as the grid's
    for k, (c, x) in enumerate(columns, 1):
        f = result.fields[c]
        if f.type != "money":
            out_headers.append(headers[k])
            for row, got in zip(out_rows, rows, strict=True):
                row.append(got[k])
            continue
        values = [_money_of(result, r, c, x) for r in range(len(result.rows))]
        scale, currency = _column_scale(values)
        name = f"{f.name} (XBRL)" if x else f.name
        unit = f"{currency} {scale}" if currency else scale
        out_headers += [f"{f.name} (XBRL, {unit})" if x else f"{f.name} ({unit})", f"{name} page"]
        out_headers += [] if currency else [f"{name} currency"]
        out_headers += [] if x else [f"{name} check", f"{name} quote"]
        for r, row in enumerate(out_rows):
            v = values[r]
            row += [_in_scale(v, scale) if v else "", _page_of(result, r, c, x)]
            row += [] if currency else [v["currency"] if v else ""]
            row += [] if x else [_check(result, r, c, rows[r][k]), _quote(result, r, c)]
    xbrl_fields = [c for c, f in enumerate(result.fields) if f.concepts]
    out_headers += [f"{result.fields[c].name} (XBRL concept)" for c in xbrl_fields]
    for r, row in enumerate(out_rows):
        row += [fv.concept if (fv := result.filer.get((r, c))) else "" for c in xbrl_fields]
    return out_headers, out_rows


def _money_of(result: MatrixResult, r: int, c: int, xbrl_column: bool) -> dict[str, Any] | None:
    """The row's money value in this column (the model's, or the filer's), or None."""
    if result.rows[r].error is not None:
        return None
    if xbrl_column:
        fv = result.filer.get((r, c))
        return filer.typed(fv, "money") if fv is not None and fv.value is not None else None
    got = result.cells.get((r, c))
    return got.cell.value if got is not None and got.cell.found and isinstance(got.cell.value, dict) else None


def _column_scale(values: list[dict[str, Any] | None]) -> tuple[str, str | None]:
    """(the column's scale: the one most of its values are in, the larger on a tie; its currency, or None when
    its rows are in different ones)."""
    present = [v for v in values if v]
    if not present:
        return "millions", "USD"
    counts = Counter(v["scale"] for v in present)
    scale = max(counts, key=lambda s: (counts[s], SCALES[s]))
    currencies = {v["currency"] for v in present}
    return scale, (currencies.pop() if len(currencies) == 1 else None)


def _in_scale(value: dict[str, Any], scale: str) -> int | float:
    """The amount in the column's scale, exactly as a decimal, then as the number a spreadsheet holds."""
    d = as_decimal(value["amount"]) * SCALES[value["scale"]] / Decimal(SCALES[scale])
    return int(d) if d == d.to_integral_value() else float(d)


def _page_of(result: MatrixResult, r: int, c: int, xbrl_column: bool) -> int | str:
    if xbrl_column:
        fv = result.filer.get((r, c))
        return fv.page if fv is not None and fv.page else ""
    got = result.cells.get((r, c))
    return got.cell.page if got is not None and got.cell.found and got.cell.page else ""


def _check(result: MatrixResult, r: int, c: int, shown: str) -> str:
    """The cell's mark as the page words it, without the value: "✓ exact · agrees with the filer's XBRL"."""
    got = result.cells.get((r, c))
    if got is None or not got.cell.found:
        return shown  # "not read", "…", "no model loaded", "— not found", "✂ cut at max_tokens"
    check = against_filer(result, r, c)
    text = (
        got.mark.symbol
        if got.mark.symbol != "✓" and got.mark.key == "verified"
        else f"{got.mark.symbol} {got.mark.label}"
    )
    return f"{text} · {check[1]}" if check else text


def _quote(result: MatrixResult, r: int, c: int) -> str:
    got = result.cells.get((r, c))
    return got.cell.quote if got is not None and got.cell.found else ""


def to_csv(result: MatrixResult) -> str:
    headers, rows = export_grid(result)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([_safe(v) for v in headers])
    writer.writerows([[_safe(v) for v in row] for row in rows])
    return out.getvalue()


def provenance_lines(result: MatrixResult) -> list[list[object]]:
    p = result.provenance
    lines: list[list[object]] = [["Filing Matrix", ""]]
    for key in (
        "model_key",
        "repo",
        "revision",
        "quantization",
        "dtype",
        "max_model_len",
        "load_id",
        "created_at",
        "state",
    ):
        lines.append([key, str(p.get(key, result.state if key == "state" else ""))])
    concepts = ["XBRL concepts"] if any(f.concepts for f in result.fields) else []
    lines += [[], ["Field", "Type", "Instruction", *concepts]]
    lines += [[f.name, f.type, f.instruction, *([" ".join(f.concepts)] if f.concepts else [])] for f in result.fields]
    lines += [[], [*detail_headers(result)]]
    lines += details(result)
    return lines


def to_xlsx(result: MatrixResult, path: Path) -> Path:
    path.write_bytes(xlsx_bytes(result))
    return path


def xlsx_bytes(result: MatrixResult) -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    sheet = wb.active
    sheet.title = "Matrix"
    headers, rows = export_grid(result)
    sheet.append([_safe(v) for v in headers])
    for row in rows:
        sheet.append([_xlsx_cell(v) for v in row])
    prov = wb.create_sheet("Provenance")
    for line in provenance_lines(result):
        prov.append([_xlsx_cell(v) for v in line])
    for ws in (sheet, prov):  # every cell is data: nothing in a quote runs as a formula
        for cells in ws.iter_rows():
            for cell in cells:
                if cell.data_type == "f":
                    cell.data_type = "s"
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def files(result: MatrixResult, stem: str = "matrix") -> dict[str, bytes]:
    """The three exports by file name: CSV, XLSX, JSON."""
    return {
        f"{stem}.csv": to_csv(result).encode("utf-8"),
        f"{stem}.xlsx": xlsx_bytes(result),
        f"{stem}.json": json.dumps(to_json(result), ensure_ascii=False, indent=1).encode("utf-8"),
    }


def write_all(result: MatrixResult, folder: Path, stem: str = "matrix") -> dict[str, Path]:
    """CSV, XLSX and JSON of ``result`` in ``folder``, by suffix."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, data in files(result, stem).items():
        (folder / name).write_bytes(data)
        out[Path(name).suffix[1:]] = folder / name
    return out
