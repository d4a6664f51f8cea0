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
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from finspace.matrix.fields import FORMULA_START
from finspace.matrix.table import MatrixResult, detail_headers, details, grid, to_json

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


def export_grid(result: MatrixResult) -> tuple[list[str], list[list[str]]]:
    """The page's grid, and for each field naming XBRL concepts the concept of each row's filer value."""
    headers, rows = grid(result)
    xbrl_fields = [c for c, f in enumerate(result.fields) if f.concepts]
    headers = headers + [f"{result.fields[c].name} (XBRL concept)" for c in xbrl_fields]
    rows = [row + [fv.concept if (fv := result.filer.get((r, c))) else "" for c in xbrl_fields]
            for r, row in enumerate(rows)]
    return headers, rows


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
    for key in ("model_key", "repo", "revision", "quantization", "dtype", "max_model_len", "load_id", "created_at",
                "state"):
        lines.append([key, str(p.get(key, result.state if key == "state" else ""))])
    concepts = ["XBRL concepts"] if any(f.concepts for f in result.fields) else []
    lines += [[], ["Field", "Type", "Instruction", *concepts]]
    lines += [[f.name, f.type, f.instruction, *([" ".join(f.concepts)] if f.concepts else [])]
              for f in result.fields]
    lines += [[], detail_headers(result)]
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
    return {f"{stem}.csv": to_csv(result).encode("utf-8"), f"{stem}.xlsx": xlsx_bytes(result),
            f"{stem}.json": json.dumps(to_json(result), ensure_ascii=False, indent=1).encode("utf-8")}


def write_all(result: MatrixResult, folder: Path, stem: str = "matrix") -> dict[str, Path]:
    """CSV, XLSX and JSON of ``result`` in ``folder``, by suffix."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, data in files(result, stem).items():
        (folder / name).write_bytes(data)
        out[Path(name).suffix[1:]] = folder / name
    return out
