"""The Matrix's verification on real filings: true quotes copied from real table rows verify, with the table's
scale line above them; plausible fabrications (a real row with one figure changed, a negative's parentheses
dropped, another row's figures under a label) never do.

Each quote is written both as a model may copy it (EDGAR HTML tables with their old spacer cells; pypdf's plain
text that runs rows together and cuts words) and as the converter writes it now (one Markdown row,
``| Total net sales | 391,035 | 383,285 | 394,328 |``; a PDF row from pypdf's layout mode with its columns apart).
The figures were read from the filings (page numbers are the PDF's pages;
an HTML quote is looked for on every page, since how an HTML filing is paged belongs to the converter).
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from finspace.documents.convert import Document, Page, convert
from finspace.documents.limits import DocumentLimits
from finspace.matrix import align
from finspace.matrix import verify as v
from finspace.matrix.cells import Cell
from finspace.matrix.fields import MatrixField
from support.filings import filing

MONEY = MatrixField("Figure", "money", "a figure of a statement")


@lru_cache(maxsize=8)
def _doc(name: str) -> Document:
    return convert(filing(name), name, DocumentLimits())


def doc(name: str) -> Document:
    return _doc(str(filing(name).name))


def pages(d: Document) -> dict[int, str]:
    return {i: p.text for i, p in enumerate(d.pages, 1)}


def page_of(d: Document, quote: str) -> int:
    """The first page where the (true) quote is, so the test does not depend on how the converter pages HTML."""
    found = [i for i, t in pages(d).items() if v.quote_on_page(quote, t)]
    assert found, f"{quote!r} is not in {d.name}"
    return found[0]


def mark(d: Document, page: int, quote: str, amount: float, scale: str = "millions") -> v.Mark:
    cell = Cell("ok", True, {"amount": amount, "currency": "USD", "scale": scale}, page, quote)
    return v.verify(cell, MONEY, pages(d))


# (filing, page or None for HTML, the quote as a row, its value in millions, how it matches today)
TRUE_ROWS = [
    # Apple FY2024 10-K, consolidated statements of operations (printed page 28): "(In millions, except number
    # of shares, which are reflected in thousands, and per-share amounts)" above the table
    ("aapl-10-k-2024-11-01.html", None, "| Total net sales | 391,035 | | | 383,285 | | | 394,328 | | | | |", 391035),
    ("aapl-10-k-2024-11-01.html", None, "| Total net sales | $391,035 | $383,285 | $394,328 |", 391035),
    ("aapl-10-k-2024-11-01.html", None, "| Net income | $93,736 | $96,995 | $99,803 |", 93736),
    ("aapl-10-k-2024-11-01.html", None, "| Other income/(expense), net | 269 | (565) | (334) |", -565),
    ("aapl-10-k-2024-11-01.html", None, "Research and development 31,370 29,915 26,251", 31370),
    # NVIDIA FY2025 10-K: the scale is a row of the table, "($ in millions, except per share data)"
    ("nvda-10-k-2025-02-26.html", None, "| Revenue | $130,497 | $60,922 | Up 114% |", 130497),
    # Apple FY2015 10-K PDF, page 41: pypdf cuts "administr\native"; the scale line also breaks a line
    ("APPLE_2015_10K.pdf", 41, "Net sales $ 233,715 $ 182,795 $ 170,910", 233715),
    ("APPLE_2015_10K.pdf", 41, "| Net sales | $233,715 | $182,795 | $170,910 |", 233715),
    ("APPLE_2015_10K.pdf", 41, "Selling, general and administrative 14,329 11,993 10,830", 14329),
    # Amazon FY2015 10-K PDF: cash flows (page 38) print "(241 )"; the balance sheet (page 41) glues a figure
    # to its label ("and other6,423") and cuts "compr\nehensive loss(723 )"
    ("AMAZON_2015_10K.pdf", 38, "Net income (loss) 596 (241) 274", -241),
    ("AMAZON_2015_10K.pdf", 41, "Accounts receivable, net and other 6,423 5,612", 6423),
    ("AMAZON_2015_10K.pdf", 41, "Accumulated other comprehensive loss (723) (511)", -723),
    (
        "AMAZON_2015_10K.pdf",
        38,
        "Purchases of property and equipment, including internal-use software and website "
        "development, net (4,589) (4,893) (3,444)",
        -4589,
    ),
]


@pytest.mark.parametrize("name, page, quote, amount", TRUE_ROWS)
def test_a_true_table_row_verifies_with_its_tables_scale(name, page, quote, amount):
    d = doc(name)
    page = page or page_of(d, quote)
    got = mark(d, page, quote, amount)
    assert got == v.VERIFIED, (quote, got.label)
    assert got.symbol.startswith("✓ ") and got.how  # "✓ exact", "✓ normalised", "✓ close (0.93)"
    assert mark(d, page, quote, amount / 1000, "billions") == v.VERIFIED  # the same figure at another scale
    assert mark(d, page, quote, amount, "units") == v.VALUE_NOT_IN_QUOTE  # the table says millions


def test_the_mark_says_how_the_quote_matched():
    apple = doc("aapl-10-k-2024-11-01.html")
    # the statement of operations as the converter writes it (no "$" cells in that table)
    row = "| Total net sales | 391,035 | 383,285 | 394,328 |"
    statement = next(i for i, t in pages(apple).items() if row in t and "| Cost of sales: |" in t)
    assert mark(apple, statement, row, 391035).symbol == "✓ exact"
    for shape in (
        "| Total net sales | $391,035 | $383,285 | $394,328 |",  # signs the page lacks
        "| Total net sales | 391,035 | | | 383,285 | | | 394,328 | | | | |",  # spacer cells
        "Total net sales 391,035 383,285 394,328",
    ):  # no cells at all
        assert mark(apple, statement, shape, 391035).symbol == "✓ normalised", shape
    pdf = doc("APPLE_2015_10K.pdf")
    assert mark(pdf, 41, "Selling, general and administrative 14,329 11,993 10,830", 14329).symbol == "✓ normalised"
    # a model that copies pypdf's plain text, with its word cut in two, differs only in spacing: normalised
    # (issue 40; it was close); a word added to the label is close, not exact
    cut = mark(pdf, 41, "Selling, general and administr\native 14,329 11,993 10,830", 14329)
    assert cut.symbol == "✓ normalised"
    close = mark(pdf, 41, "Selling, general and administrative costs 14,329 11,993 10,830", 14329)
    assert re.fullmatch(r"✓ close \(0\.\d\d\)", close.symbol) and float(close.how[7:11]) >= align.CLOSE_THRESHOLD
    assert close.label.startswith("verified (close quote: 0.")


# (filing, page or None, a true row (for its page), a fabrication, the value the fabrication claims)
FABRICATED = [
    (
        "aapl-10-k-2024-11-01.html",
        None,
        "| Total net sales | $391,035 | $383,285 | $394,328 |",
        "| Total net sales | $391,035 | $383,285 | $394,329 |",
        391035,
    ),  # one figure changed by one
    (
        "aapl-10-k-2024-11-01.html",
        None,
        "| Net income | $93,736 | $96,995 | $99,803 |",
        "| Net income | $93,763 | $96,995 | $99,803 |",
        93763,
    ),  # two digits swapped
    (
        "aapl-10-k-2024-11-01.html",
        None,
        "| Other income/(expense), net | 269 | (565) | (334) |",
        "| Other income/(expense), net | 269 | 565 | 334 |",
        565,
    ),  # a negative made positive
    (
        "aapl-10-k-2024-11-01.html",
        None,
        "| Net income | $93,736 | $96,995 | $99,803 |",
        "| Net income | $123,216 | $114,301 | $119,437 |",
        123216,
    ),  # operating income's figures
    (
        "APPLE_2015_10K.pdf",
        41,
        "Net sales $ 233,715 $ 182,795 $ 170,910",
        "Net sales $ 233,715 $ 182,795 $ 170,911",
        233715,
    ),
    (
        "APPLE_2015_10K.pdf",
        41,
        "Net sales $ 233,715 $ 182,795 $ 170,910",
        "Research and development 14,329 11,993 10,830",
        14329,
    ),  # SG&A's figures under R&D
    (
        "APPLE_2015_10K.pdf",
        41,
        "Net sales $ 233,715 $ 182,795 $ 170,910",
        "Selling, general and marketing 14,329 11,993 10,830",
        14329,
    ),  # a label changed, figures kept
    (
        "APPLE_2015_10K.pdf",
        41,
        "Net sales $ 233,715 $ 182,795 $ 170,910",
        "Net sales $ 233,715 million",
        233715,
    ),  # a scale word the row lacks
    (
        "AMAZON_2015_10K.pdf",
        38,
        "Net income (loss) 596 (241) 274",
        "Net income (loss) 596 241 274",
        241,
    ),  # the parentheses dropped
]


@pytest.mark.parametrize("name, page, true, fake, amount", FABRICATED)
def test_a_fabricated_row_never_verifies(name, page, true, fake, amount):
    d = doc(name)
    page = page or page_of(d, true)
    assert mark(d, page, fake, amount) == v.NOT_ON_PAGE
    assert not any(v.quote_on_page(fake, t) for t in pages(d).values())  # nor on any other page


def test_a_true_row_on_another_page_is_not_on_that_page():
    assert mark(doc("APPLE_2015_10K.pdf"), 40, "Net sales $ 233,715 $ 182,795 $ 170,910", 233715) == v.NOT_ON_PAGE


def test_a_per_share_line_is_in_units_under_except_per_share():
    apple = doc("aapl-10-k-2024-11-01.html")
    diluted = "| Diluted | $6.08 | $6.13 | $6.11 |"
    page = page_of(apple, diluted)
    assert mark(apple, page, diluted, 6.08, "units") == v.VERIFIED
    total = "| Total net sales | $391,035 | $383,285 | $394,328 |"
    assert mark(apple, page_of(apple, total), total, 391035, "units") == v.VALUE_NOT_IN_QUOTE


def _layout_page(name: str, index: int) -> str:
    """A page as pypdf's layout mode prints it, runs of spaces as column separators (the converter's new shape)."""
    import pypdf

    text = pypdf.PdfReader(str(filing(name))).pages[index - 1].extract_text(extraction_mode="layout")
    return "\n".join("| " + re.sub(r"\s{3,}", " | ", line.strip()) + " |" for line in text.splitlines() if line.strip())


def test_rows_verify_on_a_pdf_page_in_layout_shape():
    page = _layout_page("APPLE_2015_10K.pdf", 41)
    assert "| Net sales | $ | 233,715 | $ | 182,795 | $ | 170,910 |" in page
    d = Document("apple.pdf", "pdf", (Page("page 1", "cover"), Page("page 2", page)))
    for quote, amount in [
        ("| Net sales | $233,715 | $182,795 | $170,910 |", 233715),
        ("Selling, general and administrative 14,329 11,993 10,830", 14329),
        ("Net income $ 53,394 $ 39,510 $ 37,037", 53394),
    ]:
        assert mark(d, 2, quote, amount) == v.VERIFIED, quote
    assert mark(d, 2, "| Net income | $53,394 | $39,510 | $37,036 |", 53394) == v.NOT_ON_PAGE
    assert align.scale_above(page, page.index("Net income")) == align.Scale("millions", True)


def test_the_scale_is_the_nearest_line_above_the_quote():
    apple = doc("aapl-10-k-2024-11-01.html")
    # Note 3's table: "(net income in millions and shares in thousands)", below the statements' "(In millions,
    # except number of shares, which are reflected in thousands, and per-share amounts)"
    row = "| Weighted-average basic shares outstanding | 15,343,783 | 15,744,231 | 16,215,963 |"
    text = pages(apple)[page_of(apple, row)]
    at = v.locate(row, text).start
    assert align.scale_above(text, at) == align.Scale("millions", False)
    assert align.scale_above("Revenue | 12,400", 10) is None
    assert align.scale_above("(in thousands)\n| Revenue | 12,400 |", 20) == align.Scale("thousands", False)
    nvidia = "| | ($ in millions, except per share data) | |\n| Revenue | 1 |"
    assert align.scale_above(nvidia, nvidia.index("Revenue")) == align.Scale("millions", True)
