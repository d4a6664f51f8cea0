"""Passages for filings (pure, fast): a table stays with its title and scale line, finance words count, the
statements come first for a figure question, and a document's BM25 index is built once."""

from __future__ import annotations

import pytest

from finspace.documents import finance_words as fw
from finspace.documents import passages
from finspace.documents import placing as doc_prompt
from finspace.documents.convert import Document, Page
from finspace.matrix import cell_prompt as matrix_prompt
from finspace.matrix.fields import MatrixField

FILLER = "The company reviewed its markets, its people and its plans for the year ahead in some detail. " * 3
STATEMENT = (
    "Apple Inc.\nCONSOLIDATED STATEMENTS OF OPERATIONS\n"
    "(In millions, except number of shares, which are reflected in thousands, and per-share amounts)\n\n"
    "| | Years ended | | |\n| --- | --- | --- | --- |\n| | September 28, 2024 | September 30, 2023 | |\n"
    "| Total net sales | 391,035 | 383,285 | 394,328 |\n| Total cost of sales | 210,352 | 214,137 | 223,546 |\n"
    "| Gross margin | 180,683 | 169,148 | 170,782 |\n| Net income | $93,736 | $96,995 | $99,803 |\n"
)


def words(text: str) -> int:
    return len(text.split())


def test_a_table_is_one_passage_with_its_title_and_scale_line():
    doc = Document("a.html", "html", (Page("page 1", f"{FILLER}\n{FILLER}\n{STATEMENT}\n{FILLER}"),))
    parts = passages.split(doc, words=40)
    [table] = [p for p in parts if "| Total net sales |" in p.text]
    assert table.text.startswith("Apple Inc.\nCONSOLIDATED STATEMENTS OF OPERATIONS\n(In millions")
    assert "| Net income | $93,736 |" in table.text and "September 28, 2024" in table.text
    assert all("|" not in p.text for p in parts if p is not table)  # prose passages are as before


def test_a_long_table_is_cut_between_rows_each_part_keeping_its_header_and_scale():
    rows = "\n".join(f"| Line item {i} | {i},{i:03d} | {i},{i + 1:03d} |" for i in range(1, 400))
    text = (
        f"Apple Inc.\nCONSOLIDATED BALANCE SHEETS\n(In millions)\n\n| | 2024 | 2023 |\n| --- | --- | --- |\n"
        f"| | September 28, 2024 | September 30, 2023 |\n{rows}"
    )
    parts = passages.split(Document("b.html", "html", (Page("page 1", text),)))
    assert len(parts) > 2
    for p in parts:
        assert p.text.startswith(
            "Apple Inc.\nCONSOLIDATED BALANCE SHEETS\n(In millions)\n| | 2024 | 2023 |\n"
            "| --- | --- | --- |\n| | September 28, 2024 |"
        )
        assert len(p.text) <= passages.TABLE_CHARS + 200
    body = [ln for p in parts for ln in p.text.split("\n") if ln.startswith("| Line item")]
    assert body == rows.split("\n")  # every row once, in order


@pytest.mark.parametrize(
    "question, added",
    [
        ("What was Apple's revenue in 2024?", "net sales"),
        ("How much did Costco spend on capex?", "purchases of property and equipment"),
        ("What were the net earnings?", "net income"),
        ("What was the free cash flow?", "net cash provided by operating activities"),
        ("What is the quick ratio?", "accounts receivable"),
        ("What was the inventory turnover?", "cost of sales"),
    ],
)
def test_finance_words_add_synonyms_titles_and_a_metrics_inputs(question, added):
    assert added in fw.expand(question)


def test_the_statements_a_question_needs():
    assert fw.statements_for("What was Apple's revenue?") == (fw.INCOME,)
    assert fw.statements_for("What was the free cash flow?") == (fw.CASH,)  # not the balance sheet's "cash"
    assert fw.statements_for("What was the inventory turnover?") == (fw.INCOME, fw.BALANCE)
    assert fw.statements_for("What was the total amount?") == (fw.INCOME, fw.BALANCE, fw.CASH)
    assert fw.statements_for("Who audits the company?") == ()


@pytest.mark.parametrize(
    "head, kind",
    [
        ("Apple Inc.\nCONSOLIDATED STATEMENTS OF OPERATIONS\n(In millions)", fw.INCOME),
        ("AMAZON.COM, INC.\nCONSOLIDATED STATEMENTS OF\nCASH FLOWS(in millions)", fw.CASH),  # a PDF's broken title
        ("PART II\nItem 8\nINCOME STATEMENTS\n(In millions, except per share amounts)", fw.INCOME),  # Microsoft
        ("JPMorgan Chase & Co.\nConsolidated balance sheets (unaudited)", fw.BALANCE),
        ("Tesla, Inc.\nCondensed Consolidated Statements of Operations\n(unaudited)", fw.INCOME),
        ("CONSOLIDATED BALANCE SHEETS AND CASH FLOWS ANALYSIS\nConsolidated balance sheets analysis", None),
        ("Tesla, Inc.\nNotes to Consolidated Financial Statements", None),
        ("| Consolidated Balance Sheets | 31 |", None),  # a contents line
        ("A content liability is recorded on the Consolidated Balance Sheets.", None),
    ],
)
def test_a_statement_is_known_by_its_title_line(head, kind):
    assert fw.statement_of(head) == kind


def _long_report() -> Document:
    pages = [
        Page(f"page {n}", "\n".join([f"Page {n}. Our stores and customers.", FILLER, FILLER])) for n in range(1, 30)
    ]
    pages[20] = Page(
        "page 21", STATEMENT + "\n" + "\n".join(f"| Line {i} | {i},{i:03d} | 1,000 | 2,000 |" for i in range(1, 25))
    )
    pages[5] = Page("page 6", "Page 6. Revenue grew as customers bought more in our stores. " + FILLER)
    return Document("r.pdf", "pdf", tuple(pages))


def test_a_figure_question_gets_its_statement_within_a_share_of_the_budget():
    doc = _long_report()
    index = passages.Index.of(doc)
    assert set(index.statements.values()) == {fw.INCOME}
    chosen = index.select("What was the revenue?", 600, words)
    assert any(p.label == "page 21" for p in chosen) and sum(words(p.text) + 8 for p in chosen) <= 600
    plain = index.select("What was the revenue?", 600, words, passages.Use(False, False, False))
    assert not any(p.label == "page 21" for p in plain)  # BM25 alone prefers the prose that says "revenue"
    [statement] = [p for p in index.passages if p.label == "page 21"]
    cost = words(statement.text) + 8
    fits_first = int(cost / passages.FIRST_STATEMENT_SHARE) + 1  # past 40% of it, within 60%: the first may
    assert cost > fits_first * passages.STATEMENT_SHARE
    rule_only = passages.Use(synonyms=False, metrics=False)  # so only the statements rule can bring it in
    assert any(p.label == "page 21" for p in index.select("What was the revenue?", fits_first, words, rule_only))
    small = index.select("What was the revenue?", int(cost / passages.FIRST_STATEMENT_SHARE) - 5, words, rule_only)
    assert not any(p.label == "page 21" for p in small)  # past 60% of a small budget: not even the first


def test_the_bm25_index_is_built_once_per_document(monkeypatch):
    import bm25s

    builds = []
    real = bm25s.BM25.index
    monkeypatch.setattr(bm25s.BM25, "index", lambda self, *a, **k: (builds.append(1), real(self, *a, **k))[1])
    doc = _long_report()
    fields = [
        MatrixField(n, "money", f"the {n.lower()} of the year")
        for n in ("Revenue", "Net income", "Total assets", "Capex", "Cash")
    ]
    for f in fields:  # the Matrix: one prompt per field, the document too long for the budget
        assert not matrix_prompt.cell_prompt(doc, f, 400, words).whole
    assert len(builds) == 1
    for q in ("What was the revenue?", "And the net income?", "And the cash?"):  # a chat's follow-ups
        assert not doc_prompt.prepare(doc, q, 400, words).whole
    assert len(builds) == 1
    other = Document("s.pdf", "pdf", doc.pages[:20])
    matrix_prompt.cell_prompt(other, fields[0], 400, words)
    assert len(builds) == 2  # another document, its own index


def test_a_filing_with_xbrl_facts_gets_its_index_once(monkeypatch):
    # the index is cached by the document object, not its value: a Document with XBRL facts (dicts inside) is
    # unhashable, and the Matrix tab failed with "unhashable type: 'dict'" on every real EDGAR filing
    import bm25s

    from finspace.xbrl.facts import Context, Facts

    builds = []
    real = bm25s.BM25.index
    monkeypatch.setattr(bm25s.BM25, "index", lambda self, *a, **k: (builds.append(1), real(self, *a, **k))[1])
    facts = Facts(contexts={"c1": Context("c1", None, None, None, {"us-gaap:SegmentAxis": "x"})})
    doc = Document("f.html", "html", _long_report().pages, facts=facts)
    with pytest.raises(TypeError):
        hash(doc)  # what the old cache asked
    field = MatrixField("Revenue", "money", "the revenue of the year")
    matrix_prompt.cell_prompt(doc, field, 400, words)
    matrix_prompt.cell_prompt(doc, field, 400, words)
    assert len(builds) == 1
