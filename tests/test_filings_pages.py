"""The converter's pages and the XBRL reader's pages are the same pages: every tagged figure of a real filing
stands, as the filer printed it, on the page the reader gives it (two readers of one file, one page-break rule:
xbrl/pagebreaks.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from finspace.documents.convert import convert
from finspace.documents.limits import DocumentLimits
from support.filings import filing


def shown(fact) -> str | None:
    """A whole figure as the filing prints it (its value over 10^scale, with thousands separators), or None."""
    if not isinstance(fact.value, Decimal) or fact.scale is None:
        return None
    n = abs(fact.value) / (Decimal(10) ** int(fact.scale))
    return f"{int(n):,}" if n >= 100 and n == n.to_integral() else None


@pytest.mark.parametrize(
    "name, at_least",
    [
        ("aapl-10-k-2024-11-01.html", 700),  # 755 figures checked when this was written
        ("nvda-10-k-2025-02-26.html", 800),  # 822
        ("tsla-10-q-2025-07-24.html", 700),  # 776
    ],
)
def test_every_tagged_figure_is_on_the_page_the_reader_gives_it(name, at_least):
    doc = convert(filing(name), name, DocumentLimits())
    checked = [(f.concept, s, f.page) for f in doc.facts.facts if (s := shown(f))]
    assert len(checked) >= at_least
    missing = [(c, s, p) for c, s, p in checked if not (1 <= p <= len(doc.pages) and s in doc.pages[p - 1].text)]
    assert missing == []


def test_the_check_sees_a_figure_on_the_wrong_page():
    doc = convert(filing("aapl-10-k-2024-11-01.html"), "aapl.html", DocumentLimits())
    sales = next(
        f
        for f in doc.facts.facts
        if f.concept.endswith("RevenueFromContractWithCustomerExcludingAssessedTax") and shown(f) == "391,035"
    )
    assert "391,035" in doc.pages[sales.page - 1].text and "391,035" not in doc.pages[sales.page - 3].text
