"""The words of financial statements, for finding a figure in a filing: synonyms, statement titles, metrics.

A question says "revenue" where Apple prints "net sales" and Netflix "revenues"; it says "capital expenditure"
where the cash flow statement prints "purchases of property and equipment". ``expand`` adds each term's
synonyms to the question, the title words of the statement that prints it, and, for a metric no statement
prints (free cash flow, quick ratio, gross margin ...), the lines it is computed from. ``statements_for``
names the statements a question needs (income, balance, cash), for the statement pages that always join the
context of a figure question (finspace.documents.passages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INCOME, BALANCE, CASH = "income", "balance", "cash"
TITLE_WORDS = {
    INCOME: "consolidated statements of operations income earnings",
    BALANCE: "consolidated balance sheets financial position",
    CASH: "consolidated statements of cash flows",
}
# A statement's own title line, as filers print it: "CONSOLIDATED STATEMENTS OF OPERATIONS", "Condensed
# Consolidated Balance Sheets (Unaudited)", Microsoft's "INCOME STATEMENTS"; a PDF may break it over two lines.
_PREFIX = r"(?:(?:condensed|consolidated)\s+){0,2}"
TITLES = {
    INCOME: re.compile(
        _PREFIX + r"(?:statements?\s+of\s+(?:consolidated\s+)?(?:operations|income|earnings)"
        r"|(?:income|earnings)\s+statements?)",
        re.IGNORECASE,
    ),
    BALANCE: re.compile(
        _PREFIX + r"(?:balance\s+sheets?|statements?\s+of\s+(?:consolidated\s+)?financial\s+"
        r"(?:position|condition))",
        re.IGNORECASE,
    ),
    CASH: re.compile(
        _PREFIX + r"(?:statements?\s+of\s+(?:consolidated\s+)?cash\s*flows?|cash\s*flows?\s+statements?)", re.IGNORECASE
    ),
}
_TRAILER = re.compile(r"(?:\s*\([^()]*\)?)+\s*$|[\s:.]+$")  # "(unaudited)", "(in millions", a colon


@dataclass(frozen=True)
class Term:
    names: tuple[str, ...]  # the ways filings and analysts say it
    statement: str  # the statement that prints it


TERMS = (
    Term(
        (
            "revenue",
            "revenues",
            "total revenues",
            "net revenues",
            "net sales",
            "total net sales",
            "sales",
            "turnover",
            "top line",
        ),
        INCOME,
    ),
    Term(
        (
            "cost of sales",
            "cost of revenue",
            "cost of revenues",
            "cost of goods sold",
            "cogs",
            "cost of merchandise sold",
        ),
        INCOME,
    ),
    Term(("gross profit", "gross margin"), INCOME),
    Term(
        ("operating income", "income from operations", "operating profit", "operating loss", "operating income (loss)"),
        INCOME,
    ),
    Term(
        (
            "net income",
            "net earnings",
            "net profit",
            "net loss",
            "net income (loss)",
            "profit",
            "earnings",
            "bottom line",
        ),
        INCOME,
    ),
    Term(("research and development", "r&d", "technology and content", "technology and development"), INCOME),
    Term(("selling, general and administrative", "sg&a", "general and administrative", "marketing"), INCOME),
    Term(("earnings per share", "eps", "diluted", "per diluted share", "net income per share"), INCOME),
    Term(("income taxes", "provision for income taxes", "tax expense", "income tax expense"), INCOME),
    Term(("interest expense", "interest and other expense"), INCOME),
    Term(("net interest income", "interest income"), INCOME),
    Term(("total assets",), BALANCE),
    Term(("total liabilities",), BALANCE),
    Term(("cash and cash equivalents", "cash"), BALANCE),
    Term(("inventories", "inventory", "merchandise inventories"), BALANCE),
    Term(("accounts receivable", "receivables", "trade receivables"), BALANCE),
    Term(("accounts payable", "payables"), BALANCE),
    Term(("total current assets", "current assets"), BALANCE),
    Term(("total current liabilities", "current liabilities"), BALANCE),
    Term(
        (
            "shareholders' equity",
            "stockholders' equity",
            "shareholders equity",
            "stockholders equity",
            "total equity",
            "book value",
        ),
        BALANCE,
    ),
    Term(("long-term debt", "term debt", "borrowings", "notes payable", "total debt"), BALANCE),
    Term(("goodwill",), BALANCE),
    Term(("property and equipment, net", "property, plant and equipment", "pp&e"), BALANCE),
    Term(("marketable securities", "short-term investments"), BALANCE),
    Term(
        (
            "capital expenditure",
            "capital expenditures",
            "capex",
            "purchases of property and equipment",
            "payments for acquisition of property, plant and equipment",
            "additions to property and equipment",
            "additions to property, plant and equipment",
        ),
        CASH,
    ),
    Term(
        (
            "operating cash flow",
            "cash from operations",
            "cash generated by operating activities",
            "net cash provided by operating activities",
            "cash flows from operating activities",
            "net cash from operating activities",
        ),
        CASH,
    ),
    Term(("depreciation and amortization", "depreciation", "amortization"), CASH),
    Term(
        (
            "share repurchases",
            "buybacks",
            "repurchases of common stock",
            "common stock repurchased",
            "repurchases of common stock",
        ),
        CASH,
    ),
    Term(("dividends", "dividends paid", "payments for dividends", "cash dividends"), CASH),
    Term(("stock-based compensation", "share-based compensation"), CASH),
)


@dataclass(frozen=True)
class Metric:
    names: tuple[str, ...]
    inputs: tuple[str, ...]  # the statement lines it is computed from: these count as the question's words
    statements: tuple[str, ...]


METRICS = (
    Metric(
        ("free cash flow", "fcf"),
        (
            "net cash provided by operating activities",
            "operating activities",
            "purchases of property and equipment",
            "capital expenditures",
        ),
        (CASH,),
    ),
    Metric(
        ("quick ratio", "acid test"),
        ("cash and cash equivalents", "marketable securities", "accounts receivable", "total current liabilities"),
        (BALANCE,),
    ),
    Metric(("current ratio", "working capital"), ("total current assets", "total current liabilities"), (BALANCE,)),
    Metric(
        ("inventory turnover", "days inventory", "days of inventory"),
        ("cost of sales", "inventories"),
        (INCOME, BALANCE),
    ),
    Metric(
        ("gross margin percentage", "gross margin", "gross profit margin"),
        ("net sales", "revenue", "cost of sales", "gross margin"),
        (INCOME,),
    ),
    Metric(("operating margin",), ("operating income", "net sales", "revenue"), (INCOME,)),
    Metric(("net margin", "profit margin", "net profit margin"), ("net income", "net sales", "revenue"), (INCOME,)),
    Metric(("return on equity", "roe"), ("net income", "total shareholders' equity"), (INCOME, BALANCE)),
    Metric(("return on assets", "roa"), ("net income", "total assets"), (INCOME, BALANCE)),
    Metric(
        ("debt to equity", "debt-to-equity", "leverage"),
        ("total liabilities", "term debt", "long-term debt", "total shareholders' equity"),
        (BALANCE,),
    ),
    Metric(("ebitda",), ("operating income", "depreciation and amortization"), (INCOME, CASH)),
    Metric(
        ("effective tax rate",), ("provision for income taxes", "income before provision for income taxes"), (INCOME,)
    ),
    Metric(
        ("days sales outstanding", "dso", "receivables turnover"),
        ("accounts receivable", "net sales", "revenue"),
        (INCOME, BALANCE),
    ),
    Metric(("asset turnover",), ("net sales", "revenue", "total assets"), (INCOME, BALANCE)),
    Metric(("interest coverage",), ("operating income", "interest expense"), (INCOME,)),
    Metric(("payout ratio", "dividend payout"), ("dividends", "net income"), (INCOME, CASH)),
)
_FIGURE_WORDS = re.compile(
    r"\b(?:how\s+much|how\s+many|what\s+(?:was|were|is|are)|total|amount|ratio|margin|"
    r"in\s+(?:millions|billions)|\$|dollars?)\b",
    re.IGNORECASE,
)


def _has(text: str, name: str) -> bool:
    return re.search(r"(?<![\w&])" + re.escape(name) + r"(?![\w&])", text) is not None


def terms_in(question: str) -> list[Term]:
    """The terms the question names, outside the names of the metrics it names ("cash" in "free cash flow" is
    not the balance sheet's cash)."""
    q = question.casefold().replace("’", "'")
    for m in metrics_in(question):
        for n in m.names:
            q = re.sub(r"(?<![\w&])" + re.escape(n) + r"(?![\w&])", " ", q)
    return [t for t in TERMS if any(_has(q, n) for n in t.names)]


def metrics_in(question: str) -> list[Metric]:
    q = question.casefold().replace("’", "'")
    return [m for m in METRICS if any(_has(q, n) for n in m.names)]


def expand(question: str, *, synonyms: bool = True, metrics: bool = True) -> str:
    """The question with its terms' synonyms and statement title words, and its metrics' inputs, added."""
    extra: list[str] = []
    if synonyms:
        for t in terms_in(question):
            extra += [*t.names, TITLE_WORDS[t.statement]]
    if metrics:
        for m in metrics_in(question):
            extra += [*m.inputs, *(TITLE_WORDS[s] for s in m.statements)]
    return " ".join([question, *dict.fromkeys(extra)])


def statements_for(question: str) -> tuple[str, ...]:
    """The statements a figure question needs, most likely first; () when it is not about a figure."""
    kinds = [s for m in metrics_in(question) for s in m.statements] + [t.statement for t in terms_in(question)]
    if kinds:
        return tuple(dict.fromkeys(kinds))
    return (INCOME, BALANCE, CASH) if _FIGURE_WORDS.search(question) else ()


def statement_of(head: str, lines: int = 8) -> str | None:
    """Which statement a page (or a table's passage) is, from a title line among the first ``lines`` lines of
    ``head`` (a line that is the title, with at most a parenthesis after it), or None."""
    rows = [ln.strip() for ln in head.split("\n") if ln.strip() and not ln.lstrip().startswith("|")][:lines]
    for i, line in enumerate(rows):
        for candidate in (line, f"{line} {rows[i + 1]}" if i + 1 < len(rows) else None):
            if candidate is None:
                continue
            bare = " ".join(_TRAILER.sub("", candidate).split())
            for kind, title in TITLES.items():
                if title.fullmatch(bare):
                    return kind
    return None
