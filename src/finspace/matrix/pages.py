"""The pages a matrix's cells cite, kept with the result so a click on a cell shows its page and quote (the same
view as the chat's Sources, finspace.ui.checks.page_view), after the filings themselves are gone.

The desk (finspace.matrix.desk) calls ``keep`` as the filer's values and the model's cells arrive: each cited
page's text once per (row, page), up to ``PAGE_CHARS`` (a matrix has at most ``MatrixLimits.max_cells`` cells,
so what is kept is bounded). ``cell_source`` is what one grid cell opens: the page, the quote to mark, and a
line saying what the cell holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from finspace.matrix import filer as xbrl
from finspace.matrix.table import MatrixResult, cell_text, column_of, filer_text

PAGE_CHARS = 6_000  # a cited page's text kept (as the chat's Sources panel keeps)


def keep(result: MatrixResult, documents: Sequence[Any]) -> None:
    """Note in ``result.pages`` the text of every page its cells and the filer's values cite, not yet noted.
    ``documents``: the converted filings by row (None for a row that did not convert)."""
    cited = [(r, got.cell.page) for (r, _c), got in result.cells.items() if got.cell.found and got.cell.page]
    cited += [(r, fv.page) for (r, _c), fv in result.filer.items() if fv.page]
    for r, page in cited:
        doc = documents[r] if 0 <= r < len(documents) else None
        if (r, page) in result.pages or doc is None or not 1 <= page <= len(doc.pages):
            continue
        shown = doc.pages[page - 1]
        result.pages[(r, page)] = {
            "document": result.rows[r].name,
            "page": page,
            "label": shown.label or f"page {page}",
            "text": shown.text[:PAGE_CHARS],
        }


def printed_line(text: str, number: Any) -> str:
    """The first line of ``text`` that prints ``number`` as a filing does ("391,035" for 391035, "6.08"), not
    inside a longer number; "" when none does (or ``number`` is not a number)."""
    if isinstance(number, dict):  # money: the amount in its scale, as the statement's table prints it
        number = number.get("amount")
    if not isinstance(number, int | float) or isinstance(number, bool):
        return ""
    digits = re.escape(f"{number:,}")
    found = re.search(rf"^.*(?<![\d.,]){digits}(?![\d]|[.,]\d).*$", text, re.MULTILINE)
    return found.group(0) if found else ""


def cell_source(result: MatrixResult, r: int, col: int) -> dict[str, Any] | None:
    """What the grid's cell at row ``r``, column ``col`` (0: the first after Document) opens: {"title": the
    document, field and the cell's text; "source": the page kept by ``keep`` (None: the cell cites none, or a page
    the filing does not have); "quote": the text to mark on it; "note": the mark's words}. None: no such cell."""
    if not (0 <= r < len(result.rows)) or (found := column_of(result, col)) is None:
        return None
    c, is_xbrl = found
    name, field = result.rows[r].name, result.fields[c].name
    if is_xbrl:
        fv = result.filer.get((r, c))
        text = filer_text(result, r, c)
        source = result.pages.get((r, fv.page)) if fv is not None else None
        quote = printed_line(source["text"], xbrl.typed(fv, result.fields[c].type)) if source and fv else ""
        return {
            "title": f"{name} · {field} (XBRL): {text}",
            "source": source,
            "quote": quote,
            "note": f"the filer's XBRL value: {text}",
        }
    got = result.cells.get((r, c))
    text = cell_text(result, r, c)
    page = got.cell.page if got is not None and got.cell.found else None
    return {
        "title": f"{name} · {field}: {text}",
        "source": result.pages.get((r, page)) if page else None,
        "quote": got.cell.quote if got is not None else "",
        "note": text,
    }
