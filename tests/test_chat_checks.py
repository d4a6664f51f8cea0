"""An answer's figures checked on the page (issue 39): finspace.grounding.chat.checked over the real Apple 10-K,
the marks next to the figures and the Sources panel (finspace.ui.checks through the chat's display), the
browser store keeping them, and the Markdown / JSON exports carrying them."""

from __future__ import annotations

import pytest

from finspace.documents.desk import Attached
from finspace.documents.convert import convert
from finspace.documents.limits import DocumentLimits
from finspace.grounding.chat import checked
from finspace.ui import chat as convo
from finspace.ui import saved
from support.filings import filing

APPLE = "aapl-10-k-2024-11-01"
ANSWER = (
    "Total net sales were $391,035 million in fiscal 2024 (page 31). Net income was $100,295 million "
    "(page 31). Cost of sales was $210,352 million."
)


@pytest.fixture(scope="module")
def result():
    doc = convert(filing(f"{APPLE}.html"), f"{APPLE}.html", DocumentLimits())
    return checked(ANSWER, [Attached(doc, 0, APPLE)])


def test_true_figures_verify_a_wrong_one_differs_and_an_uncited_one_is_marked(result):
    marks = {c["figure"]: c["mark"] for c in result["checks"]}
    assert marks["$391,035 million"] == "verified" and marks["$210,352 million"] == "uncited", marks
    assert marks["$100,295 million"] in ("differs", "not_on_page"), marks
    [source] = result["sources"]
    assert source["document"] == APPLE and source["page"] == 31 and "Total net sales" in source["text"]


def reply(result) -> dict:
    return {"kind": "turn", "role": "assistant", "content": ANSWER, "usage": None, "model": "m", **result}


def test_the_page_marks_each_figure_and_shows_the_sources_under_the_answer(result):
    shown = convo.display([{"kind": "turn", "role": "user", "content": "Sales?"}, reply(result)])
    answer, sources = shown[1]["content"], shown[2]
    assert "$391,035 million ✓ in fiscal 2024" in answer and "$210,352 million ? *(uncited)*" in answer
    assert sources["metadata"]["title"].startswith("📑 Sources: 1 ✓ verified")
    assert f"**{APPLE} · page 31 (printed 29)**" in sources["content"]
    assert "| Total net sales ⟵ **✓ $391,035 million** | 391,035 |" in sources["content"]  # the row that prints it


def test_the_store_keeps_the_checks_and_the_exports_carry_them(result):
    kept = saved.check_turn(reply(result), 0)
    assert kept["checks"] == result["checks"] and kept["sources"] == result["sources"]
    doc = saved.export_json("t", [{"kind": "turn", "role": "user", "content": "Sales?"}, reply(result)])
    assert doc["messages"][1]["checks"] == result["checks"]
    md = saved.export_markdown(doc)
    assert f"- ✓ $391,035 million ({APPLE} p. 31): verified" in md and "- ? $210,352 million (uncited): uncited" in md
