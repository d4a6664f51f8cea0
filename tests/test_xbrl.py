"""The filer's inline-XBRL facts (finspace.xbrl) on real 10-Ks, with figures read from the files by hand, and
on small malformed files written here.

Pages: page N is everything after the (N-1)th CSS page break; each test checks its page against a plain split
of the file at ``page-break-after`` (all three filings mark pages only that way), and names the printed footer.
"""

from __future__ import annotations

import re
import time
from decimal import Decimal

import pytest

from finspace.xbrl.concepts import filer_value, period_end
from finspace.xbrl.facts import Facts
from finspace.xbrl.reader import XbrlLimits, read, read_file
from support.filings import filing

APPLE, NVIDIA, WELLS = "aapl-10-k-2024-11-01.html", "nvda-10-k-2025-02-26.html", "wfc-10-k-2025-02-25.html"


@pytest.fixture(scope="module")
def facts() -> dict[str, Facts]:
    return {name: read_file(filing(name)) for name in (APPLE, NVIDIA, WELLS)}


def raw_page(name: str, page: int) -> str:
    """The file's text between the (page-1)th and the page-th break, by a plain split (independent of lxml)."""
    parts = re.split(r"page-break-after:\s*always", filing(name).read_text(encoding="utf-8"))
    return parts[page - 1]


def one(f: Facts, concept: str, start: str | None, end: str, dims: bool = False):
    got = [
        x
        for x in f.named(concept)
        if (c := f.contexts[x.context]).end == end and c.start == start and bool(c.dims) == dims
    ]
    assert got, f"{concept} {start}..{end} not found"
    return min(got, key=lambda x: x.page)


def test_apple_income_statement_and_balance_sheet(facts):
    f = facts[APPLE]
    assert len(f) > 1000 and sum(x.numeric for x in f.facts) >= 957 and len(f.contexts) == 193
    # Consolidated Statements of Operations, page 31 (printed "Apple Inc. | 2024 Form 10-K | 29" is its footer)
    sales = one(f, "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax", "2023-10-01", "2024-09-28")
    assert (sales.value, sales.unit, sales.decimals, sales.scale, sales.page) == (
        Decimal("391035000000"),
        "iso4217:USD",
        "-6",
        6,
        31,
    )
    assert "391,035" in raw_page(APPLE, 31) and "Form 10-K | 29" in raw_page(APPLE, 31)
    assert one(
        f, "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax", "2021-09-26", "2022-09-24"
    ).value == Decimal("394328000000")
    assert one(f, "us-gaap:NetIncomeLoss", "2023-10-01", "2024-09-28").value == Decimal("93736000000")
    eps = one(f, "us-gaap:EarningsPerShareDiluted", "2023-10-01", "2024-09-28")
    assert (eps.value, eps.unit, eps.scale) == (Decimal("6.08"), "iso4217:USD/xbrli:shares", 0)
    # Consolidated Balance Sheets, page 33: instants
    assets = one(f, "us-gaap:Assets", None, "2024-09-28")
    assert (assets.value, assets.page) == (Decimal("364980000000"), 33) and f.contexts[assets.context].instant
    assert "364,980" in raw_page(APPLE, 33)
    # sign="-": Apple's cash flow statement tags "(Increase)/decrease in accounts receivable" as a negative change
    neg = [x for x in f.facts if x.numeric and x.value < 0]
    assert neg, "no negative fact: sign='-' was not applied"
    shares = filer_value(f, ["dei:EntityCommonStockSharesOutstanding"])
    assert (shares.value, shares.end, shares.page) == (Decimal("15115823000"), "2024-10-18", 1)


def test_nvidia_figures_with_their_scale(facts):
    f = facts[NVIDIA]
    rev = one(f, "us-gaap:Revenues", "2024-01-29", "2025-01-26")
    assert (rev.value, rev.page) == (Decimal("130497000000"), 52) and "130,497" in raw_page(NVIDIA, 52)
    assert one(f, "us-gaap:NetIncomeLoss", "2022-01-31", "2023-01-29").value == Decimal("4368000000")
    # the cover's public float, "$2.7 trillion" tagged with scale 12
    flt = f.named("dei:EntityPublicFloat")[0]
    assert (flt.value, flt.scale, flt.decimals) == (Decimal("2700000000000"), 12, "-11")
    assert one(f, "us-gaap:Assets", None, "2025-01-26").value == Decimal("111601000000")


def test_wells_fargo_a_bank_whose_statements_are_in_an_exhibit(facts):
    """Wells Fargo's 10-K incorporates its financial statements from Exhibit 13: the primary document tags 18
    figures, none of them an income-statement line. Its sign, negative scale and fixed-zero facts read right."""
    f = facts[WELLS]
    assert sum(x.numeric for x in f.facts) == 18 and len(f.contexts) == 1892
    assert filer_value(f, ["us-gaap:Revenues", "us-gaap:NetIncomeLoss", "us-gaap:Assets"]) is None
    assert f.named("dei:EntityPublicFloat")[0].value == Decimal("201600000000")  # "201.6" billion, scale 9
    shares = f.named("dei:EntityCommonStockSharesOutstanding")[0]
    assert shares.value == Decimal("3288186582")  # "3,288,186,582", ixt:num-dot-decimal
    # sign="-" with scale -2: a fair-value input printed "0.055" (percent) is -0.00055
    inputs = [x.value for x in f.named("us-gaap:DerivativeAssetLiabilityNetMeasurementInput")]
    assert Decimal("-0.00055") in inputs and Decimal("0.01410") in inputs
    # ixt:fixed-zero "nil": zero; with dimensions (a series of preferred stock)
    zero = f.named("wfc:PreferredStockParOrStatedValue")[0]
    assert zero.value == 0 and f.contexts[zero.context].dims
    assert "us-gaap:StatementClassOfStockAxis" in dict(f.contexts[zero.context].dims)


def test_dei_facts(facts):
    apple, nvidia, wells = facts[APPLE], facts[NVIDIA], facts[WELLS]
    assert (
        apple.dei("EntityRegistrantName"),
        apple.dei("AuditorName"),
        apple.dei("DocumentType"),
        apple.dei("DocumentFiscalYearFocus"),
        apple.dei("DocumentPeriodEndDate"),
    ) == ("Apple Inc.", "Ernst & Young LLP", "10-K", "2024", "September 28, 2024")
    assert period_end(apple) == "2024-09-28" and period_end(nvidia) == "2025-01-26"
    assert (nvidia.dei("EntityRegistrantName"), nvidia.dei("AuditorName")) == (
        "NVIDIA CORP",
        "PricewaterhouseCoopers LLP",
    )
    assert wells.dei("EntityRegistrantName") == "WELLS FARGO & COMPANY/MN" and period_end(wells) == "2024-12-31"
    auditor = filer_value(apple, ["dei:AuditorName"])
    assert auditor.page == 51 and "Ernst &amp; Young LLP" in raw_page(APPLE, 51)


def test_the_filers_value_is_the_documents_own_period(facts):
    """The full fiscal year ending on dei:DocumentPeriodEndDate, no dimensions; a balance-sheet item's instant."""
    apple = facts[APPLE]
    rev = filer_value(apple, ["us-gaap:Revenues", "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"])
    assert (rev.concept, rev.value, rev.start, rev.end, rev.page) == (
        "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
        Decimal("391035000000"),
        "2023-10-01",
        "2024-09-28",
        31,
    )
    assert filer_value(apple, ["us-gaap:Liabilities"]).value == Decimal("308030000000")
    assert filer_value(apple, ["dei:DocumentPeriodEndDate"]).text == "2024-09-28"
    q = read_file(filing("aapl-10-q-2025-08-01.html"))  # a 10-Q: the quarter, not the nine months
    got = filer_value(q, ["us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax"])
    assert (got.value, got.start, got.end) == (Decimal("94036000000"), "2025-03-30", "2025-06-28")


def test_reading_a_10k_is_fast_beside_its_conversion():
    """The reader's time against a baseline measured in the same run: lxml parsing the same file."""
    from lxml import etree

    path = filing(APPLE)
    data = path.read_bytes()
    t0 = time.perf_counter()
    etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    read(data)
    took = time.perf_counter() - t0
    assert took < 30 * base + 0.5, (took, base)


# ------------------------------------------------------------------ malformed files
HEAD = (
    '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
    'xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:xbrldi="http://xbrl.org/2006/xbrldi" '
    'xmlns:ixt="http://www.xbrl.org/inlineXBRL/transformation/2020-02-12" '
    'xmlns:us-gaap="http://fasb.org/us-gaap/2024" xmlns:dei="http://xbrl.sec.gov/dei/2024" '
    'xmlns:iso4217="http://www.xbrl.org/2003/iso4217"><body><div style="display:none"><ix:header><ix:resources>'
    '<xbrli:context id="fy"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier></xbrli:entity>'
    '<xbrli:period><xbrli:startDate>2024-01-01</xbrli:startDate><xbrli:endDate>2024-12-31</xbrli:endDate>'
    '</xbrli:period></xbrli:context>'
    '<xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>'
    '</ix:resources></ix:header></div>'
)
TAIL = "</body></html>"


def doc(body: str) -> bytes:
    return (HEAD + body + TAIL).encode()


def num(value: str, name: str = "us-gaap:Revenues", ctx: str = "fy", unit: str = "usd", **attrs) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<ix:nonFraction name="{name}" contextRef="{ctx}" unitRef="{unit}"{extra}>{value}</ix:nonFraction>'


def test_values_scale_sign_formats_and_pages():
    f = read(
        doc(
            "<p>" + num("1,234.5", scale="6", decimals="-5", format="ixt:num-dot-decimal") + "</p>"
            '<hr style="page-break-after:always"/>'
            "<p>" + num("12", name="us-gaap:NetIncomeLoss", scale="3", sign="-") + "</p>"
            '<div style="break-before: page">'
            + num("1.234,5", name="us-gaap:Assets", scale="3", format="ixt:num-comma-decimal")
            + "</div>"
            + num("—", name="us-gaap:Liabilities", format="ixt:fixed-zero")
            + num("-", name="us-gaap:Goodwill", format="ixt:zerodash")
            + num(
                "", name="us-gaap:Cash", **{"xsi:nil": "true", "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance"}
            )
        )
    )
    got = {x.concept: (x.value, x.page) for x in f.facts}
    assert got == {
        "us-gaap:Revenues": (Decimal("1234500000"), 1),
        "us-gaap:NetIncomeLoss": (Decimal("-12000"), 2),
        "us-gaap:Assets": (Decimal("1234500"), 3),
        "us-gaap:Liabilities": (0, 3),
        "us-gaap:Goodwill": (0, 3),
    }
    assert f.notes == ()


def test_a_missing_context_or_unit_skips_the_fact_with_a_note():
    f = read(doc(num("1", ctx="nowhere") + num("2", unit="eur") + num("3")))
    assert [x.value for x in f.facts] == [Decimal(3)]
    assert sorted(f.notes) == [
        "1 fact skipped: its contextRef names no context in ix:header",
        "1 fact skipped: its unitRef names no unit in ix:header",
    ]


@pytest.mark.parametrize("scale", ["1000000000", "-1000000000", "16", "9e9", "x"])
def test_an_absurd_scale_is_bounded(scale):
    t0 = time.perf_counter()
    f = read(doc(num("5", scale=scale) + num("7", name="us-gaap:Assets", scale="9")))
    assert time.perf_counter() - t0 < 5
    assert [(x.concept, x.value) for x in f.facts] == [("us-gaap:Assets", Decimal("7000000000"))]
    assert len(f.notes) == 1 and "scale" in f.notes[0]


def test_continuations_are_followed_and_loops_refused():
    text = (
        '<ix:nonNumeric name="dei:EntityRegistrantName" contextRef="fy" continuedAt="c1">Acme'
        '<ix:exclude> (not this)</ix:exclude></ix:nonNumeric>'
        '<ix:continuation id="c1" continuedAt="c2"> Widgets</ix:continuation>'
        '<ix:continuation id="c2"> Inc.</ix:continuation>'
        '<ix:nonNumeric name="dei:AuditorName" contextRef="fy" continuedAt="l1">Loop</ix:nonNumeric>'
        '<ix:continuation id="l1" continuedAt="l2"> A</ix:continuation>'
        '<ix:continuation id="l2" continuedAt="l1"> B</ix:continuation>'
    )
    t0 = time.perf_counter()
    f = read(doc(text))
    assert time.perf_counter() - t0 < 5
    assert f.dei("EntityRegistrantName") == "Acme Widgets Inc."
    assert f.dei("AuditorName") == "Loop A B"
    assert f.notes == ("1 fact skipped: an ix:continuation loop (the text stops where it would repeat)",)


def test_a_million_facts_are_bounded():
    body = num("1") * 1_000_000  # ~80 MB of tags: more than the upload limit allows, read in bounded time
    t0 = time.perf_counter()
    f = read(doc(body), XbrlLimits(max_facts=1_000))
    took = time.perf_counter() - t0
    assert len(f) == 1_000 and f.notes == ("999,000 facts past the bound of 1,000 left out",)
    assert took < 120, took


def test_not_xbrl_and_not_well_formed():
    assert read(b"<html><body><p>no tags here</p></body></html>") == Facts()
    broken = doc(num("42") + "<p>unclosed <b>bold</p>")  # not XHTML: read with the HTML parser
    assert [x.value for x in read(broken).facts] == [Decimal(42)]
    assert read(b"\x00\xff nonFraction garbage").facts == ()


def test_document_json_carries_the_facts(tmp_path):
    from finspace.documents.convert import Document, convert
    from finspace.documents.limits import DocumentLimits

    path = tmp_path / "tiny.html"
    path.write_bytes(doc("<p>Revenue was " + num("5", scale="6") + " million.</p>"))
    d = convert(path, "tiny.html", DocumentLimits())
    back = Document.from_json(d.to_json())
    assert back.facts == d.facts and [x.value for x in back.facts.facts] == [Decimal(5000000)]
