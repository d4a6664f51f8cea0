"""The filing tools on the real filings (issue 39): a library by short ids, each filing's outline, search,
read_page and the filer's XBRL facts. The figures were read from the filings' pages: Apple's FY2024 10-K prints
its statements of operations on page 31 (printed 29: "Total net sales | 391,035"), its balance sheet on page 33,
its shareholders' equity on 34 and its cash flows on 35; NVIDIA's FY2025 10-K its income statement on page 52
("Revenue | $130,497"), balance sheet on 54, cash flows on 56; Apple's 2015 10-K (a PDF) its statements of
operations on page 41 ("Net sales $233,715"), balance sheet on 43, cash flows on 45."""

from __future__ import annotations

import time

import pytest

from finspace.documents.convert import Document, Page, convert
from finspace.documents.limits import DocumentLimits
from finspace.errors import BadInput, PageOutOfRange, UnknownDocument
from finspace.grounding import library as gl
from finspace.documents.desk import unique_id
from finspace.grounding.library import approx_tokens
from finspace.grounding.filer_facts import filer_facts
from finspace.grounding.lookup import read_page, search
from finspace.grounding.outline import outline
from support.filings import filing

AAPL, NVDA, AAPL15 = "aapl-10-k-2024-11-01", "nvda-10-k-2025-02-26", "APPLE_2015_10K"


@pytest.fixture(scope="module")
def lib() -> dict[str, Document]:
    names = [f"{AAPL}.html", f"{NVDA}.html", f"{AAPL15}.pdf"]
    return gl.library(convert(filing(n), n, DocumentLimits()) for n in names)


# ----------------------------------------------------------------- the library
@pytest.mark.parametrize(
    "name, taken, expected",
    [
        ("aapl-10-k-2024-11-01.html", (), "aapl-10-k-2024-11-01"),
        ("APPLE_2015_10K.pdf", (), "APPLE_2015_10K"),
        ("my report (final).pdf", (), "my-report-final"),
        ("../../etc/passwd", (), "passwd"),
        ("C:\\Users\\me\\q3.xlsx", (), "q3"),
        ("a.pdf", ("a",), "a-2"),
        ("A.PDF", ("a", "A-2"), "A-3"),  # case folded: the model may write either
        ("", (), "document"),
        ("x" * 200 + ".pdf", (), "x" * gl.MAX_ID_CHARS),
    ],
)
def test_a_documents_id_is_its_file_name_without_the_extension_made_unique(name, taken, expected):
    assert unique_id(name, taken) == expected


def test_a_library_holds_at_most_twenty_documents_each_under_its_own_id():
    docs = [Document(f"q{i % 3}.txt", "txt", (Page("", f"text {i}"),)) for i in range(gl.MAX_DOCUMENTS)]
    lib = gl.library(docs)
    assert list(lib)[:4] == ["q0", "q1", "q2", "q0-2"] and len(lib) == 20
    with pytest.raises(BadInput, match="at most 20 documents; remove one"):
        gl.library([*docs, docs[0]])


@pytest.mark.parametrize(
    "ref, expected",
    [
        (AAPL, AAPL),
        (AAPL.upper(), AAPL),
        (f"{AAPL}.html", AAPL),
        ("aapl-10-k", AAPL),
        ("[nvda-10-k-2025-02-26]", NVDA),
        ("apple_2015", AAPL15),
        ("a", None),
        ("msft-10-k", None),
        ("", None),
        (None, None),
    ],
)
def test_a_document_is_resolved_as_a_model_writes_it(lib, ref, expected):
    assert gl.resolve(lib, ref) == expected


def test_an_unknown_document_lists_the_ids_and_a_page_out_of_range_gives_the_range(lib):
    with pytest.raises(UnknownDocument, match=f"no document 'msft'; the documents are: {AAPL}, {NVDA}, {AAPL15}"):
        read_page(lib, "msft", 3)
    with pytest.raises(UnknownDocument, match="no document was named"):
        read_page(lib, None, 3)
    for page in (0, 60, 10**9):
        with pytest.raises(PageOutOfRange, match=f"{AAPL} has pages 1 to 59; page {page} is not one of them"):
            read_page(lib, AAPL, page)
    with pytest.raises(BadInput, match="not a page number"):
        read_page(lib, AAPL, "the income statement")
    assert read_page(lib, AAPL, "p. 31 (printed 29)").page == 31


# ----------------------------------------------------------------- outline
@pytest.mark.parametrize(
    "doc, statements, xbrl, items",
    [
        (
            AAPL,
            {"income": 31, "balance": 33, "equity": 34, "cash": 35},
            True,
            {"Item 1A.": 7, "Item 7.": 23, "Item 8.": 30},
        ),
        (NVDA, {"income": 52, "balance": 54, "equity": 55, "cash": 56}, True, {"Item 1A.": 13, "Item 7.": 36}),
        (AAPL15, {"income": 41, "balance": 43, "equity": 44, "cash": 45}, False, {"Item 1A.": 10, "Item 7.": 25}),
    ],
)
def test_the_outline_names_the_statements_pages_the_items_and_whether_there_is_xbrl(lib, doc, statements, xbrl, items):
    o = outline(lib[doc], doc)
    assert o.statements == statements
    assert o.has_xbrl is xbrl
    starts = {
        i.split(" ", 2)[0] + " " + i.split(" ", 2)[1]: e.page
        for e in o.entries
        for i in e.items
        if i.startswith("Item")
    }
    assert {k: starts.get(k) for k in items} == items
    text = o.render(2_000)
    assert (
        f"income statement p. {statements['income']}" in text and f"cash flow statement p. {statements['cash']}" in text
    )
    assert ("XBRL: " in text) is xbrl and ("no XBRL facts" in text) is not xbrl
    assert o.to_json()["statements"] == statements


def test_each_page_label_carries_its_printed_number(lib):
    o = outline(lib[AAPL], AAPL)
    assert next(e for e in o.entries if e.page == 31).label == "page 31 (printed 29)"
    assert next(e for e in o.entries if e.page == 31).printed == "29"
    assert len(o.labels) == 59 and o.labels[30] == "page 31 (printed 29)"
    assert o.printed_runs() == "pages 1-2 print no number; pages 3-59 print 1-57"
    assert "printed numbers: pages 1-2 print no number; pages 3-59 print 1-57" in o.render(200)
    assert outline(lib[NVDA], NVDA).printed_runs() == "page 1 prints no number; pages 2-87 print 2-87"


@pytest.mark.parametrize("max_tokens", [30, 120, 400, 3_000])
def test_the_outline_is_bounded_in_tokens(lib, max_tokens):
    for key, doc in lib.items():
        text = outline(doc, key).render(max_tokens, approx_tokens)
        assert approx_tokens(text) <= max_tokens
    # the statements come first: a small bound still names them
    assert "income statement p. 31" in outline(lib[AAPL], AAPL).render(120)


# ----------------------------------------------------------------- search
def test_search_puts_the_income_statement_first_for_total_net_sales(lib):
    got = search(lib, "total net sales 2024", AAPL, k=5)
    assert [(h.page, h.statement) for h in got.hits][0] == (31, "income")
    assert "Total net sales | 391,035" in got.hits[0].excerpt
    assert got.hits[0].label == "page 31 (printed 29)"
    assert len({h.page for h in got.hits}) == len(got.hits) == 5  # one hit per page


def test_search_over_all_documents_takes_each_documents_best_in_turn(lib):
    got = search(lib, "total net sales revenue", k=6)
    assert [h.document for h in got.hits[:3]] == [AAPL, NVDA, AAPL15]
    assert (NVDA, 52) in [(h.document, h.page) for h in got.hits]
    text = got.render(400)
    assert approx_tokens(text) <= 400 and f"[{AAPL} page 31 (printed 29), the income statement]" in text


def test_a_100000_character_query_is_cut_and_costs_what_a_short_one_does(lib):
    search(lib, "net sales", AAPL)  # the index is built once per document
    t = time.perf_counter()
    search(lib, "total net sales 2024 " * 50, AAPL)
    base = time.perf_counter() - t
    t = time.perf_counter()
    got = search(lib, ("total net sales 2024 " * 5000)[:100_000], AAPL)
    long = time.perf_counter() - t
    assert got.note == "query cut to its first 1,000 of 100,000 characters"
    assert long < 3 * base + 0.05
    assert len(got.query) == 1_000 and approx_tokens(got.render(300)) <= 300


# ----------------------------------------------------------------- read_page
def test_read_page_gives_the_page_whole_within_its_bound(lib):
    page = read_page(lib, AAPL, 31)
    whole = page.render(5_000)
    assert whole.startswith(f"[{AAPL} page 31 (printed 29) of 59]\n") and page.text in whole
    cut = page.render(200)
    assert approx_tokens(cut) <= 200 and "Total net sales | 391,035" in cut and "page cut at the 200-token bound" in cut
    assert page.to_json()["label"] == "page 31 (printed 29)"


# ----------------------------------------------------------------- filer_facts
@pytest.mark.parametrize(
    "doc, query, period, concept, value, shown, page",
    [
        (
            AAPL,
            "revenue",
            "FY2024",
            "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
            "391035000000",
            "391,035",
            31,
        ),
        (
            AAPL,
            "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
            "2023",
            None,
            "383285000000",
            "383,285",
            31,
        ),
        (AAPL, "net income", None, "us-gaap:NetIncomeLoss", "93736000000", "93,736", 31),
        (AAPL, "total assets", "2024-09-28", "us-gaap:Assets", "364980000000", "364,980", 33),
        (NVDA, "revenue", "FY2025", "us-gaap:Revenues", "130497000000", "130,497", 52),
        (NVDA, "us-gaap:Revenues", None, "us-gaap:Revenues", "130497000000", "130,497", 52),
    ],
)
def test_filer_facts_gives_the_filers_tagged_value_on_its_page(lib, doc, query, period, concept, value, shown, page):
    got = filer_facts(lib, doc, query, period)
    first = got.facts[0]
    assert (first.value, first.shown, first.page, first.scale, first.unit) == (
        value,
        shown,
        page,
        "millions",
        "iso4217:USD",
    )
    if concept:
        assert first.concept == concept
    assert shown in lib[doc].pages[page - 1].text  # printed on the page the fact gives
    assert f"{shown} millions USD (page {page})" in got.render(300)


def test_a_filing_without_xbrl_says_so(lib):
    got = filer_facts(lib, AAPL15, "revenue")
    assert not got.has_xbrl and got.facts == ()
    assert (
        got.render() == f"{AAPL15} has no XBRL facts (a PDF carries none): use search and read_page to find "
        "the figure on its page"
    )


def test_a_query_no_fact_matches_says_what_to_try(lib):
    got = filer_facts(lib, AAPL, "zebra stripes", "2024")
    assert got.facts == () and "no tagged value matches 'zebra stripes' for 2024" in got.render()


@pytest.mark.parametrize("max_tokens", [20, 80, 600])
def test_every_result_is_bounded_in_tokens(lib, max_tokens):
    for text in (
        filer_facts(lib, NVDA, "revenue").render(max_tokens),
        search(lib, "cash").render(max_tokens),
        read_page(lib, NVDA, 52).render(max_tokens),
    ):
        assert approx_tokens(text) <= max_tokens


def test_a_long_page_read_with_a_focus_shows_the_part_that_holds_its_words():
    name = "ibm-10-k-2025-02-25.html"
    lib = gl.library([convert(filing(name), name, DocumentLimits())])
    key = "ibm-10-k-2025-02-25"
    page = read_page(lib, key, 1, 150, approx_tokens, focus="aggregate market value held by non-affiliates")
    shown = page.render()
    assert approx_tokens(shown) <= 150 and "$159.2 billion" in shown and "page cut at the 150-token bound" in shown
    assert "$159.2 billion" not in read_page(lib, key, 1, 150).render()  # without the focus: the page's head


# ----------------------------------------------------------------- bench/answers.py
@pytest.fixture(scope="module")
def answers_bench():
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[1] / "bench")
    sys.path.insert(0, folder)
    try:
        import answers
    finally:
        sys.path.remove(folder)
    return answers


def test_the_answers_bench_questions_pages_print_their_figures_and_the_tools_see_them(answers_bench):
    """The data file's pages print each answer (the HTML filings here; bench/README.md has the whole run), and the
    tool policy sees the evidence within the same budget as one-shot passages."""
    questions = [q for q in answers_bench.load_questions() if q["file"].endswith(".html")]
    assert len(answers_bench.load_questions()) >= 30 and len(questions) >= 20
    for name in {q["file"] for q in questions}:
        filing(name)
    docs = answers_bench.documents(questions)
    for q in questions:
        doc = docs[q["file"]][1]
        assert all(answers_bench.holds(doc.pages[p - 1].text, q["figure"]) for p in q["pages"]), q
    got = answers_bench.measure(1536, questions, approx_tokens, docs)
    assert all(tools.tokens <= 1536 and one.tokens <= 1536 for _, one, tools in got["rows"])
    assert got["tools"]["evidence"] >= got["oneshot"]["evidence"] - 0.05 and got["tools"]["evidence"] >= 0.8


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: search(lib, "net sales", AAPL, k="many"),
        lambda lib: search(lib, "net sales", AAPL, k=-3),
        lambda lib: search(lib, 12345),
        lambda lib: search(lib, ""),
        lambda lib: filer_facts(lib, AAPL, None, period=2024),
        lambda lib: filer_facts(lib, AAPL, "revenue", period="x" * 100_000),
        lambda lib: read_page(lib, AAPL, "31", max_tokens="lots", focus=None),
    ],
)
def test_a_models_odd_arguments_get_a_result_not_a_crash(lib, call):
    assert approx_tokens(call(lib).render(300)) <= 300


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda lib: search(lib, "net sales", 42), UnknownDocument),
        (lambda lib: filer_facts(lib, {"id": 1}, "revenue"), UnknownDocument),
        (lambda lib: read_page(lib, AAPL, True), BadInput),
        (lambda lib: read_page(lib, AAPL, -1), PageOutOfRange),
        (lambda lib: read_page({}, None, 1), UnknownDocument),
    ],
)
def test_a_models_wrong_document_or_page_is_a_clear_error(lib, call, error):
    with pytest.raises(error) as got:
        call(lib)
    assert (
        "the documents are" in str(got.value)
        or "pages 1 to" in str(got.value)
        or "a page is a number" in str(got.value)
    )
