"""A matrix's result: rows are documents, columns are fields, each cell a typed value with its page, quote and
mark; and the two views every boundary shows (the grid, one line per cell) so the page, the API and the
exports say the same thing.

A field that names XBRL concepts gets a second column, "<field> (XBRL)": the filer's own value for the
document's period with its page (``matrix.filer``), there from the start; the model's cell then says whether
it "agrees with the filer's XBRL" or "differs from the filer's XBRL: <the filer's value>".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from finspace.matrix import filer as xbrl
from finspace.matrix.cells import Cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.verify import Mark
from finspace.xbrl.concepts import FilerValue

PENDING = "…"
NO_MODEL = "no model loaded"
XBRL_LABELS = {
    xbrl.AGREES: "agrees with the filer's XBRL",
    xbrl.DIFFERS: "differs from the filer's XBRL",
    xbrl.MISSED: "the filer's XBRL has",
}
SCALE_WORDS = {"units": "", "thousands": " thousand", "millions": " million", "billions": " billion"}


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    mark: Mark
    whole: bool  # the whole document was in the prompt (else the field's passages)


@dataclass(frozen=True)
class Row:
    name: str
    pages: int = 0
    error: str | None = None  # the document did not convert: the row says why, the rest completes
    facts: int = 0  # the document's inline-XBRL facts (0: none, a PDF or an untagged HTML file)


MatrixState = Literal["running", "done", "cancelled"]


@dataclass
class MatrixResult:
    fields: tuple[MatrixField, ...]
    rows: tuple[Row, ...]
    provenance: dict[str, Any] = field(default_factory=dict)  # model key, repo, revision, quantization, load id, time
    cells: dict[tuple[int, int], CellResult] = field(default_factory=dict)
    state: MatrixState = "running"
    filer: dict[tuple[int, int], FilerValue] = field(default_factory=dict)  # the filer's XBRL values, at once
    model: bool = True  # False: no model loaded, the filer's values only
    pages: dict[tuple[int, int], dict[str, Any]] = field(
        default_factory=dict
    )  # (row, page): a cited page (matrix.pages)

    @property
    def total(self) -> int:
        return sum(len(self.fields) for r in self.rows if r.error is None) if self.model else 0

    @property
    def done(self) -> int:
        return len(self.cells)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells.values():
            out[c.mark.key] = out.get(c.mark.key, 0) + 1
        return out


def show_value(value: Any, type_: str) -> str:
    """A cell's value as the page shows it (and the CSV writes it)."""
    if value is None:
        return ""
    if type_ == "money":
        return f"{value['currency']} {value['amount']:,}{SCALE_WORDS[value['scale']]}"
    if type_ == "percent":
        return f"{value:g}%"
    if type_ == "list":
        return "; ".join(value)
    if type_ == "yesno":
        return "yes" if value else "no"
    if type_ == "number":
        return f"{value:,}"
    return str(value)


def against_filer(result: MatrixResult, r: int, c: int) -> tuple[str, str] | None:
    """(agrees | differs | missed, the words) for a model's answer beside a filer's value; None without either
    (a cell cut or unparsed is no answer)."""
    fv, got = result.filer.get((r, c)), result.cells.get((r, c))
    if fv is None or got is None or got.cell.status != "ok":
        return None
    type_ = result.fields[c].type
    filer = show_value(xbrl.typed(fv, type_), type_)
    if not got.cell.found:
        return xbrl.MISSED, f"{XBRL_LABELS[xbrl.MISSED]} {filer}"
    key = xbrl.agreement(got.cell.value, fv, type_)
    if key is None:
        return None
    return key, XBRL_LABELS[key] + ("" if key == xbrl.AGREES else f": {filer}")


def cell_text(result: MatrixResult, r: int, c: int) -> str:
    row = result.rows[r]
    if row.error is not None:
        return "not read"
    got = result.cells.get((r, c))
    if got is None:
        return NO_MODEL if not result.model else PENDING if result.state == "running" else "cancelled"
    shown = show_value(got.cell.value, result.fields[c].type) if got.cell.found else ""
    page = f" (p. {got.cell.page})" if got.cell.found and got.cell.page else ""
    text = f"{got.mark.symbol} {shown}{page}".rstrip() if shown else f"{got.mark.symbol} {got.mark.label}"
    check = against_filer(result, r, c)
    return f"{text} · {check[1]}" if check else text


def filer_text(result: MatrixResult, r: int, c: int) -> str:
    """The filer's value with its page, or why there is none."""
    row, fv = result.rows[r], result.filer.get((r, c))
    if row.error is not None:
        return "not read"
    if fv is None:
        return "— not in the filer's XBRL" if row.facts else "— no XBRL in this file"
    type_ = result.fields[c].type
    return f"{show_value(xbrl.typed(fv, type_), type_)} (p. {fv.page})"


def _columns(result: MatrixResult) -> list[tuple[int, bool]]:
    """The grid's columns after Document: (field index, is the field's XBRL column)."""
    return [
        col for c, f in enumerate(result.fields) for col in ([(c, False), (c, True)] if f.concepts else [(c, False)])
    ]


def column_of(result: MatrixResult, col: int) -> tuple[int, bool] | None:
    """The grid's column ``col`` (0: the first after Document) as (field index, is its XBRL column); None: none."""
    cols = _columns(result)
    return cols[col] if 0 <= col < len(cols) else None


def grid(result: MatrixResult) -> tuple[list[str], list[list[str]]]:
    """The page's table: Document, then one column per field (and its XBRL column when it names concepts); each
    cell its marker, value and page."""
    cols = _columns(result)
    headers = ["Document", *(f"{result.fields[c].name} (XBRL)" if x else result.fields[c].name for c, x in cols)]
    rows = []
    for r, row in enumerate(result.rows):
        name = row.name if row.error is None else f"{row.name} (not read: {row.error})"
        rows.append([name, *(filer_text(result, r, c) if x else cell_text(result, r, c) for c, x in cols)])
    return headers, rows


def mark_keys(result: MatrixResult) -> list[list[str]]:
    """Each cell's mark key (for its colour), in the grid's shape without the Document column; an XBRL column's
    cell is "xbrl" (a filer's value) or "xbrl_none"."""

    def key(r: int, c: int, x: bool, row: Row) -> str:
        if x:
            return "error" if row.error else "xbrl" if (r, c) in result.filer else "xbrl_none"
        return result.cells[(r, c)].mark.key if (r, c) in result.cells else ("error" if row.error else "pending")

    cols = _columns(result)
    return [[key(r, c, x, row) for c, x in cols] for r, row in enumerate(result.rows)]


def xbrl_marks(result: MatrixResult) -> list[list[str]]:
    """Each model cell's agreement with the filer's XBRL (agrees, differs, missed, ""), in the grid's shape."""
    return [
        [("" if x else (against_filer(result, r, c) or ("", ""))[0]) for c, x in _columns(result)]
        for r in range(len(result.rows))
    ]


DETAIL_HEADERS = ["Document", "Field", "Type", "Value", "Page", "Quote", "Check"]
XBRL_HEADERS = ["XBRL value", "XBRL concept", "XBRL page", "Against XBRL"]


def detail_headers(result: MatrixResult) -> list[str]:
    return DETAIL_HEADERS + (XBRL_HEADERS if any(f.concepts for f in result.fields) else [])


def details(result: MatrixResult) -> list[list[Any]]:
    """One line per finished cell (or cell with a filer's value), in grid order: the provenance of every value."""
    out: list[list[Any]] = []
    line: list[Any]
    with_xbrl = any(f.concepts for f in result.fields)
    for r, c in sorted(set(result.cells) | set(result.filer)):
        got, f = result.cells.get((r, c)), result.fields[c]
        if got is None:
            line = [result.rows[r].name, f.name, f.type, "", "", "", NO_MODEL if not result.model else "pending"]
        else:
            value = show_value(got.cell.value, f.type) if got.cell.found else ""
            line = [result.rows[r].name, f.name, f.type, value, got.cell.page or "", got.cell.quote, got.mark.label]
        if with_xbrl:
            fv, check = result.filer.get((r, c)), against_filer(result, r, c)
            line += [show_value(xbrl.typed(fv, f.type), f.type), fv.concept, fv.page] if fv else ["", "", ""]
            line.append(check[1] if check else "")
        out.append(line)
    return out


def to_json(result: MatrixResult) -> dict[str, Any]:
    """The whole matrix as JSON: fields, rows, every cell typed, and the provenance."""
    return {
        "state": result.state,
        "provenance": result.provenance,
        "model": result.model,
        "fields": [f.to_json() for f in result.fields],
        "rows": [
            {
                "document": row.name,
                "pages": row.pages,
                "error": row.error,
                "xbrl_facts": row.facts,
                "cells": [_cell_json(result, r, c) for c in range(len(result.fields))],
            }
            for r, row in enumerate(result.rows)
        ],
    }


def _cell_json(result: MatrixResult, r: int, c: int) -> dict[str, Any] | None:
    got, fv = result.cells.get((r, c)), result.filer.get((r, c))
    if got is None and fv is None:
        return None
    out: dict[str, Any] = (
        {
            "found": None,
            "value": None,
            "page": None,
            "quote": "",
            "whole_document": None,
            "check": "no_model" if not result.model else "pending",
        }
        if got is None
        else {
            "found": got.cell.found,
            "value": got.cell.value,
            "page": got.cell.page,
            "quote": got.cell.quote,
            "check": got.mark.key,
            "match": got.mark.how or None,
            "whole_document": got.whole,
        }
    )
    if fv is not None:  # the filer's value, typed as the field's, with its concept, page and period
        type_ = result.fields[c].type
        check = against_filer(result, r, c)
        out["xbrl"] = {
            **fv.to_json(),
            "value": xbrl.typed(fv, type_),
            "number": fv.to_json()["value"],
            "shown": show_value(xbrl.typed(fv, type_), type_),
            "agreement": check[0] if check else None,
        }
    return out


def dumps(result: MatrixResult) -> str:
    return json.dumps(to_json(result), ensure_ascii=False, indent=1)
