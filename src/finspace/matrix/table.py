"""A matrix's result: rows are documents, columns are fields, each cell a typed value with its page, quote and
mark; and the two views every boundary shows (the grid, one line per cell) so the page, the API and the
exports say the same thing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from finspace.matrix.cells import Cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.verify import Mark

PENDING = "…"
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


@dataclass
class MatrixResult:
    fields: tuple[MatrixField, ...]
    rows: tuple[Row, ...]
    provenance: dict = field(default_factory=dict)  # model key, repo, revision, quantization, load id, time
    cells: dict[tuple[int, int], CellResult] = field(default_factory=dict)
    state: str = "running"  # running, done, cancelled

    @property
    def total(self) -> int:
        return sum(len(self.fields) for r in self.rows if r.error is None)

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


def cell_text(result: MatrixResult, r: int, c: int) -> str:
    row = result.rows[r]
    if row.error is not None:
        return "not read"
    got = result.cells.get((r, c))
    if got is None:
        return PENDING if result.state == "running" else "cancelled"
    shown = show_value(got.cell.value, result.fields[c].type) if got.cell.found else ""
    page = f" (p. {got.cell.page})" if got.cell.found and got.cell.page else ""
    return f"{got.mark.symbol} {shown}{page}".rstrip() if shown else f"{got.mark.symbol} {got.mark.label}"


def grid(result: MatrixResult) -> tuple[list[str], list[list[str]]]:
    """The page's table: Document, then one column per field; each cell its marker, value and page."""
    headers = ["Document", *(f.name for f in result.fields)]
    rows = []
    for r, row in enumerate(result.rows):
        name = row.name if row.error is None else f"{row.name} (not read: {row.error})"
        rows.append([name, *(cell_text(result, r, c) for c in range(len(result.fields)))])
    return headers, rows


def mark_keys(result: MatrixResult) -> list[list[str]]:
    """Each cell's mark key (for its colour), in the grid's shape without the Document column."""
    return [[(result.cells[(r, c)].mark.key if (r, c) in result.cells else ("error" if row.error else "pending"))
             for c in range(len(result.fields))] for r, row in enumerate(result.rows)]


DETAIL_HEADERS = ["Document", "Field", "Type", "Value", "Page", "Quote", "Check"]


def details(result: MatrixResult) -> list[list[Any]]:
    """One line per finished cell, in grid order: the provenance of every value."""
    out = []
    for (r, c) in sorted(result.cells):
        got, f = result.cells[(r, c)], result.fields[c]
        value = show_value(got.cell.value, f.type) if got.cell.found else ""
        out.append([result.rows[r].name, f.name, f.type, value, got.cell.page or "", got.cell.quote, got.mark.label])
    return out


def to_json(result: MatrixResult) -> dict:
    """The whole matrix as JSON: fields, rows, every cell typed, and the provenance."""
    return {
        "state": result.state,
        "provenance": result.provenance,
        "fields": [{"name": f.name, "type": f.type, "instruction": f.instruction} for f in result.fields],
        "rows": [{"document": row.name, "pages": row.pages, "error": row.error,
                  "cells": [_cell_json(result, r, c) for c in range(len(result.fields))]}
                 for r, row in enumerate(result.rows)],
    }


def _cell_json(result: MatrixResult, r: int, c: int) -> dict | None:
    got = result.cells.get((r, c))
    if got is None:
        return None
    return {"found": got.cell.found, "value": got.cell.value, "page": got.cell.page, "quote": got.cell.quote,
            "check": got.mark.key, "whole_document": got.whole}


def dumps(result: MatrixResult) -> str:
    return json.dumps(to_json(result), ensure_ascii=False, indent=1)
