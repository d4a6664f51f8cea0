"""The Filing Matrix's checks: numbers as filings print them, quotes on pages, values in quotes (pure, fast)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from finspace.matrix import verify as v
from finspace.matrix.cells import Cell, cell_schema, read_cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.numbers import numbers_in

D = Decimal


@pytest.mark.parametrize(
    "text, expected",
    [
        # (value as printed, scale, percent)
        ("Revenue was 1,234.5", [(D("1234.5"), 1, False)]),
        ("a loss of (1,234)", [(D("-1234"), 1, False)]),  # accounting negative
        ("($2,500) million", [(D("-2500"), 10**6, False)]),  # currency inside the parentheses
        ("-7.5 and −3", [(D("-7.5"), 1, False), (D("-3"), 1, False)]),  # ASCII and Unicode minus
        ("$1.2 billion", [(D("1.2"), 10**9, False)]),  # 1.2 x 10^9
        ("€3.4bn", [(D("3.4"), 10**9, False)]),
        ("12 thousand units", [(D("12"), 10**3, False)]),
        ("up 8% year over year", [(D("8"), 1, True)]),
        ("a margin of 12.5 percent", [(D("12.5"), 1, True)]),
        ("12.5% million", [(D("12.5"), 1, True)]),  # a percentage takes no scale
        ("fiscal 2023-2024", [(D("2023"), 1, False), (D("2024"), 1, False)]),  # a range, not -2024
        ("Q3 FY2024 10-K", [(D("10"), 1, False)]),  # Q3 and FY2024 are labels
        ("12 months", [(D("12"), 1, False)]),  # "m" of months is no scale
        ("no figures here", []),
        ("(1,886 )", [(D("-1886"), 1, False)]),  # a PDF's negative, a space inside
        ("( 25 ) and ( 565 )", [(D("-25"), 1, False), (D("-565"), 1, False)]),
        ("($ 1,234 )", [(D("-1234"), 1, False)]),
        ("Property and equipment, net4,212", [(D("4212"), 1, False)]),  # glued to its label by a PDF's text layer
        ("Q3,2024", [(D("2024"), 1, False)]),  # Q3 is still a label
        ("1,2345", [(D("1"), 1, False), (D("2345"), 1, False)]),  # not a thousands group
    ],
)
def test_numbers_as_filings_print_them(text, expected):
    assert [(n.value, n.scale, n.percent) for n in numbers_in(text)] == expected


@pytest.mark.parametrize(
    "quote, page, on_page",
    [
        ("Revenue was $12.4 billion", "Intro.\nRevenue  was\n$12.4 billion in Q3.", True),  # whitespace folded
        ("REVENUE WAS $12.4 BILLION", "revenue was $12.4 billion", True),  # case folded
        ("the “core” segment", 'the "core" segment grew', True),  # curly quotes folded
        ("Revenue was $13.4 billion", "Revenue was $12.4 billion", False),
        ("", "anything", False),  # an empty quote proves nothing
        ("14.2", "margin 14.2%", False),  # nor a number alone
        ("Young LLP", "Ernst & Young LLP", False),  # fewer than three words
        ("Revenue was $12.4 billion.", "Revenue was $12.4 billion in 2024.", True),  # its full stop dropped
        # normalised: a clean table row against EDGAR's spacer cells; a negative's parentheses are part of its figure
        ("| Total net sales | $391,035 | $383,285 |", "| Total net sales | $ | 391,035 | | | $ | 383,285 | |", True),
        ("Other income 269 (565) (334)", "| Other income | 269 | ( 565 ) | ( 334 ) |", True),
        ("Other income 269 565 334", "| Other income | 269 | ( 565 ) | ( 334 ) |", False),
        # close: a PDF's word cut in two; but a changed word, a changed figure or a dropped scale word is not close
        (
            "Selling, general and administrative 14,329 11,993",
            "Selling, general and administr\native 14,329 11,993",
            True,
        ),
        ("Selling, general and marketing 14,329 11,993", "Selling, general and administr\native 14,329 11,993", False),
        (
            "Selling, general and administrative 14,329 11,994",
            "Selling, general and administr\native 14,329 11,993",
            False,
        ),
        ("Revenue for the year was $12.4 billion in total", "Revenue for the year was $12.4 in total", False),
    ],
)
def test_quote_on_page(quote, page, on_page):
    assert v.quote_on_page(quote, page) is on_page


@pytest.mark.parametrize(
    "type_, value, quote, agrees",
    [
        ("number", 1234.5, "revenue of 1,234.5", True),
        ("number", -1234, "a loss of (1,234)", True),
        ("number", 1234, "a loss of (1,234)", False),  # the sign matters
        ("number", 1200000000, "$1.2 billion", True),  # with its scale
        ("number", 1.2, "$1.2 billion", True),  # as printed
        ("number", 12.41, "12.4", False),
        ("percent", 8, "up 8% year over year", True),
        ("percent", 0.08, "up 8% year over year", True),  # the fraction of the same
        ("percent", 8, "up 8 points", False),  # not a percentage
        ("money", {"amount": 12.4, "currency": "USD", "scale": "billions"}, "Revenue was $12.4 billion", True),
        ("money", {"amount": 12400, "currency": "USD", "scale": "millions"}, "Revenue was $12.4 billion", True),
        ("money", {"amount": 12.4, "currency": "USD", "scale": "millions"}, "Revenue was $12.4 billion", False),
        ("money", {"amount": 12400, "currency": "USD", "scale": "units"}, "Revenue | 12,400", True),
        ("money", {"amount": 12400, "currency": "USD", "scale": "millions"}, "Revenue | 12,400", False),  # scale unseen
        ("money", {"amount": 14.2, "currency": "USD", "scale": "units"}, "a margin of 14.2%", False),
        ("date", "2024-03-31", "as of March 31, 2024", True),
        ("date", "2024-03-31", "as of 31 March 2024", True),
        ("date", "2024-03-31", "as of Mar. 31, 2024", True),
        ("date", "2024-03-31", "period ended 2024-03-31", True),
        ("date", "2024-03-30", "as of March 31, 2024", False),
        ("text", "Ernst & Young LLP", "/s/ Ernst & Young LLP, Boston", True),
        ("text", "Deloitte", "/s/ Ernst & Young LLP", False),
        ("list", ["Competition", "Interest rates"], "Risks: Competition; Interest rates.", True),
        ("list", ["Competition", "War"], "Risks: Competition; Interest rates.", False),
        ("yesno", True, "the statements present fairly", True),  # only the quote's place is checked
    ],
)
def test_value_in_quote(type_, value, quote, agrees):
    assert v.value_in_quote(value, type_, quote) is agrees


REVENUE = MatrixField("Revenue", "money", "Total revenue")
PAGES = {1: "Cover page.", 2: "Revenue was $12.4 billion in fiscal 2024."}


def _cell(**data) -> str:
    base = {
        "found": True,
        "page": 2,
        "quote": "Revenue was $12.4 billion",
        "value": {"amount": 12.4, "currency": "USD", "scale": "billions"},
    }
    return json.dumps({**base, **data})


@pytest.mark.parametrize(
    "reply, finish, mark",
    [
        (_cell(), "stop", v.VERIFIED),
        (_cell(page=1), "stop", v.NOT_ON_PAGE),  # true quote, wrong page
        (_cell(quote="Revenue was $99 billion"), "stop", v.NOT_ON_PAGE),  # a fabricated quote
        (_cell(value={"amount": 13.1, "currency": "USD", "scale": "billions"}), "stop", v.VALUE_NOT_IN_QUOTE),
        (json.dumps({"found": False, "page": None, "quote": "", "value": None}), "stop", v.NOT_FOUND),
        ('{"found": true, "page": 2, "quote": "Revenue was $12', "length", v.CUT),  # max_tokens: never a value
        ('{"found": true, "page": 2, "quote": "Revenue was $12', "stop", v.INVALID),
        (_cell(page=3), "stop", v.INVALID),  # a page the document does not have
        (_cell(value=12.4), "stop", v.INVALID),  # a number where money was asked
        (_cell(extra=1), "stop", v.INVALID),  # a key outside the schema
        (_cell(value=None), "stop", v.INVALID),  # found, but no value
    ],
)
def test_a_cell_is_verified_only_when_its_checks_pass(reply, finish, mark):
    assert v.verify(read_cell(reply, REVENUE, len(PAGES), finish), REVENUE, PAGES) == mark


@pytest.mark.parametrize(
    "quote, page, symbol",
    [
        ("Revenue was $12.4 billion", "Revenue was $12.4 billion in 2024.", "✓ exact"),
        ("revenue was 12.4 BILLION", "Revenue was $12.4 billion in 2024.", "✓ normalised"),
        # a word the page cuts in two differs only in its spacing: normalised (issue 40; it was close (0.99))
        (
            "Selling, general and administrative 14,329 11,993",
            "Selling, general and administr\native 14,329 11,993",
            "✓ normalised",
        ),
        (
            "Selling, general and administrative costs 14,329 11,993",
            "Selling, general and administr\native 14,329 11,993",
            "✓ close (0.93)",
        ),
    ],
)
def test_a_verified_mark_says_how_its_quote_matched(quote, page, symbol):
    mark = v.verified(v.locate(quote, page))
    assert mark == v.VERIFIED and mark.symbol == symbol and mark.key == "verified"
    assert mark.label.startswith("verified (")


def test_every_mark_has_a_text_marker_besides_its_colour():
    assert len({m.symbol for m in v.MARKS}) == len(v.MARKS)
    assert all(m.symbol.strip() and m.label for m in v.MARKS)


@pytest.mark.parametrize("type_", ["number", "percent", "money", "date", "text", "list", "yesno"])
def test_each_type_schema_compiles_for_guided_decoding(type_):
    """xgrammar (vLLM's structured-outputs backend here) compiles every cell schema."""
    xgrammar = pytest.importorskip("xgrammar")
    schema = cell_schema(MatrixField("F", type_, "x"), pages=7)
    assert schema["anyOf"][0]["properties"]["page"]["maximum"] == 8  # 7 pages: rounded up to a power of two
    xgrammar.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False)


def test_every_cell_schema_passes_vllms_own_xgrammar_check():
    from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features

    for type_ in ("number", "percent", "money", "date", "text", "list", "yesno"):
        assert not has_xgrammar_unsupported_json_features(cell_schema(MatrixField("F", type_, "x"), pages=3))


def test_a_cell_read_back_keeps_its_typed_value():
    cell = read_cell(_cell(), REVENUE, 2, "stop")
    assert cell == Cell(
        "ok",
        found=True,
        value={"amount": 12.4, "currency": "USD", "scale": "billions"},
        page=2,
        quote="Revenue was $12.4 billion",
        raw=_cell(),
    )


@pytest.mark.parametrize("pages, bound", [(0, 1), (1, 1), (2, 2), (3, 4), (59, 64), (64, 64), (65, 128), (1000, 1024)])
def test_documents_of_similar_size_share_one_cell_schema(pages, bound):
    # one schema (one compiled grammar) for every document of 33-64 pages, not one per page count
    from finspace.matrix.cells import page_bound

    assert page_bound(pages) == bound
    assert cell_schema(MatrixField("F", "money", "x"), 59) == cell_schema(MatrixField("F", "money", "x"), 64)


def test_a_page_past_the_document_is_invalid_though_the_schema_allows_it():
    from finspace.matrix.cells import read_cell

    field = MatrixField("F", "number", "x")
    reply = json.dumps({"found": True, "quote": "Net sales 1", "page": 8, "value": 1})
    assert read_cell(reply, field, 7, "stop").status == "invalid"  # the schema allowed 8 (7 rounded up)
    assert read_cell(reply, field, 8, "stop").status == "ok"
