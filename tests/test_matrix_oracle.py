"""Issue 40: the figures analysts ask for verify. Oracle cells built from the shared filings (the true value, its
page and a quote as a model copies it, read off the converted pages) each verify; the same cell with its value 7%
off is flagged. An outflow asked as a positive figure on a row that prints it negative verifies with the mark
"printed as an outflow (1,577)"; any other sign difference stays "value not in the quote". A quote whose label and
figures the page prints apart, or written with the filing's own spacing, aligns to its row.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from support.filings import filing

from finspace.documents.convert import Document, convert
from finspace.documents.limits import DocumentLimits
from finspace.matrix import align
from finspace.matrix import verify as v
from finspace.matrix.cells import Cell
from finspace.matrix.fields import MatrixField


@lru_cache(maxsize=12)
def _doc(name: str) -> Document:
    return convert(filing(name), name, DocumentLimits())


def pages(d: Document) -> dict[int, str]:
    return {i: p.text for i, p in enumerate(d.pages, 1)}


def check(name: str, page: int, field: str, quote: str, amount: float, scale: str = "millions") -> v.Mark:
    cell = Cell("ok", True, {"amount": amount, "currency": "USD", "scale": scale}, page, quote)
    return v.verify(cell, MatrixField(field, "money", f"the {field.lower()}"), pages(_doc(name)))


# (filing, page, field, quote as a model copies it, the value asked, its scale, how it verifies)
ORACLE = [
    ("APPLE_2015_10K.pdf", 41, "Revenue", "Net sales $ 233,715 $ 182,795 $ 170,910", 233715, "millions", ""),
    ("APPLE_2015_10K.pdf", 41, "Net income", "Net income $53,394 $39,510 $37,037", 53394, "millions", ""),
    (
        "APPLE_2015_10K.pdf",
        45,
        "Capital expenditure",
        "Payments for acquisition of property, plant and equipment (11,247) (9,571) (8,165)",
        11247,
        "millions",
        "(11,247)",
    ),
    (
        "APPLE_2015_10K.pdf",
        45,
        "Share repurchases",
        "Repurchase of common stock (35,253) (45,000) (22,860)",
        35253,
        "millions",
        "(35,253)",
    ),
    (
        "APPLE_2015_10K.pdf",
        45,
        "Dividends paid",
        "Dividends and dividend equivalents paid (11,561)",
        11.561,
        "billions",
        "(11,561)",
    ),
    ("AMAZON_2015_10K.pdf", 39, "Revenue", "Total net sales 107,006 88,988 74,452", 107006, "millions", ""),
    (
        "AMAZON_2015_10K.pdf",
        31,
        "Capital expenditure",
        "Purchases of property and equipment, including internal-use software and website development, net (4,589)",
        4589,
        "millions",
        "(4,589)",
    ),
    ("MICROSOFT_2015_10K.pdf", 55, "Total assets", "Total assets $ 176,223 $ 172,384", 176223, "millions", ""),
    (
        "MICROSOFT_2015_10K.pdf",
        56,
        "Capital expenditure",
        "Additions to property and equipment (5,944) (5,485)",
        5944,
        "millions",
        "(5,944)",
    ),
    (
        "MICROSOFT_2015_10K.pdf",
        56,
        "Dividends paid",
        "Common stock cash dividends paid (9,882)",
        9882,
        "millions",
        "(9,882)",
    ),
    ("COSTCO_2015_10K.pdf", 40, "Revenue", "Total revenue 116,199 112,640 105,156", 116199, "millions", ""),
    (
        "COSTCO_2015_10K.pdf",
        43,
        "Share repurchases",
        "Repurchases of common stock (481) (334) (36)",
        481,
        "millions",
        "(481)",
    ),
    ("JPMORGAN_2022Q1_10Q.pdf", 80, "Net income", "Net income $ 8,282 $ 14,300", 8282, "millions", ""),
    ("JPMORGAN_2022Q1_10Q.pdf", 84, "Dividends paid", "Dividends paid (3,430) (3,193)", 3430, "millions", "(3,430)"),
    (
        "INTEL_2022Q4_EARNINGS.pdf",
        10,
        "Capital expenditure",
        "Additions to property, plant and equipment (24,844) (18,733)",
        24844,
        "millions",
        "(24,844)",
    ),
    (
        "nflx-10-k-2025-01-27.html",
        39,
        "Revenue",
        "| Revenues | $39,000,966 | $33,723,297 | $31,615,550 |",
        39000966,
        "thousands",
        "",
    ),
    (
        "nflx-10-k-2025-01-27.html",
        41,
        "Capital expenditure",
        "| Purchases of property and equipment | (439,538) | (348,552) | (407,729) |",
        439538,
        "thousands",
        "(439,538)",
    ),
    (
        "aapl-10-k-2024-11-01.html",
        35,
        "Capital expenditure",
        "Payments for acquisition of property, plant and equipment (9,447) (10,959) (10,708)",
        9447,
        "millions",
        "(9,447)",
    ),
]


@pytest.mark.parametrize(
    "name, page, field, quote, amount, scale, printed",
    ORACLE,
    ids=[f"{r[0].split('_')[0].split('-')[0]}-p{r[1]}-{r[2]}" for r in ORACLE],
)
def test_an_oracle_cell_verifies_and_seven_percent_off_is_flagged(name, page, field, quote, amount, scale, printed):
    got = check(name, page, field, quote, amount, scale)
    assert got == v.VERIFIED, (quote, got.label)
    if printed:
        assert got.symbol == f"✓ printed as an outflow {printed}" and got.how.endswith(
            f"printed as an outflow {printed}"
        )
        assert got.label == f"verified (printed as an outflow {printed})"
    else:
        assert "outflow" not in got.symbol
    off = check(name, page, field, quote, round(amount * 1.07, 3), scale)
    assert off == v.VALUE_NOT_IN_QUOTE, (quote, off.label)


def test_another_sign_difference_stays_a_different_figure():
    # Amazon's 2014 net loss, printed (241), asked as 241: no outflow word on the row, so not the same figure
    assert (
        check("AMAZON_2015_10K.pdf", 39, "Net income", "Net income (loss) $ 596 $ (241) $ 274", 241)
        == v.VALUE_NOT_IN_QUOTE
    )
    # an outflow asked as a negative is the printed figure, plainly verified
    got = check(
        "APPLE_2015_10K.pdf",
        45,
        "Capital expenditure",
        "Payments for acquisition of property, plant and equipment (11,247)",
        -11247,
    )
    assert got == v.VERIFIED and "outflow" not in got.symbol
    # a proceeds row printed positive, asked negative: differs
    assert (
        check("APPLE_2015_10K.pdf", 45, "Proceeds", "Proceeds from issuance of common stock 543 730 530", -543)
        == v.VALUE_NOT_IN_QUOTE
    )
    # "Interest expense (459)" is money out of the income statement, not a cash outflow row: differs
    assert (
        check("AMAZON_2015_10K.pdf", 39, "Interest", "Interest expense (459) (210) (141)", 459) == v.VALUE_NOT_IN_QUOTE
    )


def test_a_quote_whose_label_and_figures_the_page_prints_apart_aligns_to_its_row():
    text = pages(_doc("APPLE_2015_10K.pdf"))[41]
    assert "Net sales\t$233,715\t$182,795\t$170,910" in text
    apart = text.replace("Net sales\t$233,715", "Net sales\n(continued)\n$233,715")  # the label a line above
    match = align.align("Net sales $233,715 $182,795 $170,910", apart)
    assert match is not None and match.how == "row" and apart[match.start :].startswith("Net sales")
    # another row's figures under a label never align: the label's own figures come first
    assert align.align("Net sales 140,089 112,258 106,606", apart) is None
    assert align.align("Cost of sales 233,715 182,795 170,910", apart) is None
    cell = Cell(
        "ok",
        True,
        {"amount": 233715, "currency": "USD", "scale": "millions"},
        1,
        "Net sales $233,715 $182,795 $170,910",
    )
    got = v.verify(cell, MatrixField("Revenue", "money", "net sales"), {1: apart})
    assert got == v.VERIFIED and got.how == "row"


def test_a_quote_with_the_filings_own_spacing_aligns_to_its_row():
    text = pages(_doc("APPLE_2015_10K.pdf"))[41]
    for quote in (
        "Selling, general and administr ative 14,329 11,993 10,830",  # a word cut, as pypdf did
        "Selling,general andadministrative 14,329 11,993 10,830",  # words run together
        "Totaloperating expenses 22,396 18,034 15,305",
    ):
        match = align.align(quote, text)
        assert match is not None and match.how == "normalised", quote
    assert align.align("Totaloperating expenses 22,396 18,034 15,306", text) is None  # a figure changed
    assert align.align("Total operating expenses 22,39 618,034 15,305", text) is None  # figures run together
