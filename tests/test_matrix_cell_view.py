"""A Matrix cell opens its page with its quote marked (issue 39 item 3): the desk keeps each cited page's text
with the result (finspace.matrix.pages.keep), and a click on a grid cell shows it through the chat's Sources
view (finspace.ui.checks.page_view), on the real Apple FY2024 10-K. The click in a real browser:
test_matrix_filings_app.py."""

from __future__ import annotations

import re

import pytest

from finspace.documents.convert import convert
from finspace.documents.limits import DocumentLimits
from finspace.matrix import pages
from finspace.matrix.cells import Cell
from finspace.matrix.fields import load_field_presets
from finspace.matrix.filer import filer_values
from finspace.matrix.table import CellResult, MatrixResult, Row
from finspace.matrix.verify import NOT_FOUND, NOT_ON_PAGE, VERIFIED
from finspace.ui.matrix_tab import NO_CELL, cell_markdown, grid_html
from support.filings import filing

APPLE = "aapl-10-k-2024-11-01"
ROW = "| Total net sales | 391,035 | 383,285 | 394,328 |"


@pytest.fixture(scope="module")
def apple():
    return convert(filing(f"{APPLE}.html"), f"{APPLE}.html", DocumentLimits())


@pytest.fixture(scope="module")
def result(apple):
    """Apple's row: Revenue read from its income statement (verified), Operating income quoted on the wrong page,
    Net income not found; the filer's XBRL values beside them; the pages kept as the desk keeps them."""
    fields = load_field_presets().get("income-statement").fields
    out = MatrixResult(fields, (Row(APPLE, len(apple.pages), facts=len(apple.facts)),))
    out.filer = filer_values(fields, [apple.facts])
    money = {"amount": 391035, "currency": "USD", "scale": "millions"}
    out.cells[(0, 0)] = CellResult(Cell("ok", True, money, 31, ROW), VERIFIED, False)
    out.cells[(0, 1)] = CellResult(
        Cell("ok", True, {**money, "amount": 123216}, 2, "Operating income 123,216"), NOT_ON_PAGE, False
    )
    out.cells[(0, 2)] = CellResult(Cell("ok", False), NOT_FOUND, False)
    pages.keep(out, [apple])
    return out


def test_the_desk_keeps_each_cited_page_once_and_bounded(result, apple):
    assert set(result.pages) == {(0, 1), (0, 2), (0, 31)}  # the cover (period end), the cells' pages, p. 31
    kept = result.pages[(0, 31)]
    assert kept["document"] == APPLE and kept["label"] == "page 31 (printed 29)" and ROW in kept["text"]
    assert all(len(p["text"]) <= pages.PAGE_CHARS for p in result.pages.values())
    pages.keep(result, [None])  # a row that did not convert: nothing more, nothing lost
    assert len(result.pages) == 3


def test_a_verified_cell_shows_its_page_with_its_quote_marked(result):
    view = cell_markdown(result, 0, 0)  # Revenue, the model's column
    assert view.startswith(f"#### {APPLE} · Revenue: ✓ USD 391,035 million (p. 31)"), view
    assert f"**{APPLE} · page 31 (printed 29)**" in view  # the chat's Sources view: one renderer
    assert "| Total net sales ⟵ **✓ USD 391,035 million (p. 31)" in view and "CONSOLIDATED STATEMENTS" in view


def test_the_xbrl_cell_marks_the_row_that_prints_the_filers_value(result):
    view = cell_markdown(result, 0, 1)  # Revenue (XBRL)
    assert "Revenue (XBRL): USD 391,035 million (p. 31)" in view
    assert "| Total net sales ⟵ **the filer's XBRL value: USD 391,035 million (p. 31)** | 391,035 |" in view


def test_a_quote_not_on_its_page_and_a_cell_with_no_page_say_so(result):
    wrong = cell_markdown(result, 0, 2)  # Operating income, quoted on page 2
    assert "The quote is not on this page: «Operating income 123,216»" in wrong and f"{APPLE} · page 2" in wrong
    none = cell_markdown(result, 0, 4)  # Net income: not found
    assert "No page to show" in none and "Net income" in none


@pytest.mark.parametrize("row, col", [(None, 0), ("0", "1"), (True, 0), (0, 99), (5, 0), (-1, 0), (0, -1), (10**30, 0)])
def test_any_other_click_shows_the_hint(result, row, col):
    assert cell_markdown(result, row, col) == NO_CELL
    assert cell_markdown(None, 0, 0) == NO_CELL


def test_the_grid_cells_carry_their_row_and_column(result):
    html = grid_html(result)
    assert re.search(r"<td data-check='verified' [^>]*data-row='0' data-col='0'", html)
    assert re.search(r"<td data-check='xbrl' [^>]*data-row='0' data-col='1'", html)
