"""Each cell checked against the source: is the quote on the page it cites, and does the value agree with it?

The quote is aligned to its page (``align``): exact, then normalised (whitespace, case, table separators,
currency signs, dashes and quotes dropped), then close (a fuzzy token alignment at 0.85 or more, whose every
figure matches exactly). The verified mark says which: "✓ exact", "✓ normalised", "✓ close (0.93)". Numbers are
compared exactly (``numbers``). A cell is ``verified`` only when every check for its type passed:
- number: the value is one of the quote's numbers, as printed or with its scale (1.2 billion = 1200000000);
- percent: a percentage in the quote equals the value (12.5 for 12.5%; 0.125 is accepted as the same);
- money: amount x scale equals a number of the quote with its scale word (1.2 billion); a figure with no scale
  word takes its table's scale line: the one in the quote, else the nearest above the quote on its page ("(In
  millions, except per-share amounts)": 391,035 is 391,035 million, and a per-share line's figure, one that
  says per share, basic or diluted, is in units); with
  no scale line at all, the figure is in units;
- date: the quote writes that date (2024-03-31, March 31, 2024, 31 March 2024, Mar. 31, 2024);
- text and list: the text, or each item, appears in the quote;
- yes/no: the quote is on the page (a yes or no cannot be read off a quote mechanically).

An outflow asked as a positive figure (capital expenditure 1,577) on a row that prints it negative, as a cash
flow statement does (``Purchases of property and equipment (1,577)``), verifies with the mark "printed as an
outflow (1,577)" when the row or the field says money goes out (purchases, payments, acquisitions of, additions
to, capital expenditures, repurchases, dividends, repayments, distributions); any other sign difference stays
"value not in the quote".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal

from finspace.matrix import align
from finspace.matrix.cells import SCALES, Cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.numbers import as_decimal, numbers_in


@dataclass(frozen=True)
class Mark:
    """A cell's check. Marks are equal by ``key``; a verified cell's label and symbol also say how its quote
    matched its page ("✓ close (0.93)")."""

    key: str
    label: str = field(compare=False)
    symbol: str = field(compare=False)  # the text marker shown beside the colour: never colour alone
    how: str = field(default="", compare=False)  # "exact", "normalised", "close (0.93)": verified cells only


VERIFIED = Mark("verified", "verified", "✓")
NOT_ON_PAGE = Mark("not_on_page", "quote not on that page", "✗")
VALUE_NOT_IN_QUOTE = Mark("value_not_in_quote", "value not in the quote", "≠")
NOT_FOUND = Mark("not_found", "not found", "—")
CUT = Mark("cut", "cut at max_tokens", "✂")
INVALID = Mark("invalid", "reply did not parse", "!")
_PER_SHARE = re.compile(r"per[\s-]+(?:common\s+)?share|\b(?:basic|diluted|eps)\b", re.IGNORECASE)
_OUTFLOW = re.compile(
    r"\b(?:purchases?|payments?|paid|acquisitions?\s+of|additions?\s+to|capital\s+expenditures?|"
    r"capex|repurchases?|buy\s?backs?|repayments?|dividends?|distributions?)\b",
    re.IGNORECASE,
)
_PRINTED_NEGATIVE = re.compile(
    r"\(\s*[$€£¥]?\s*(?P<paren>\d[\d,]*(?:\.\d+)?)\s*\)"
    r"|(?<![\w,.])[-−–]\s*[$€£¥]?\s*(?P<minus>\d[\d,]*(?:\.\d+)?)"
)
MARKS = (VERIFIED, NOT_ON_PAGE, VALUE_NOT_IN_QUOTE, NOT_FOUND, CUT, INVALID)
MIN_QUOTE_WORDS = 3  # "14.2" or "USD" proves nothing: a quote is evidence in its own words
_FOLD = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "−": "-", "\u00a0": " "})
_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        1,
    )
}
_MONTH = (
    r"(?P<month>" + "|".join(sorted({*_MONTHS, *(m[:3] for m in _MONTHS), "sept"}, key=len, reverse=True)) + r")\.?"
)
_DATES = [
    re.compile(r"(?P<year>\d{4})-(?P<mnum>\d{2})-(?P<day>\d{2})"),
    re.compile(_MONTH + r"\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4})"),
    re.compile(r"(?P<day>\d{1,2})\s+" + _MONTH + r",?\s+(?P<year>\d{4})"),
]


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).translate(_FOLD).casefold().split())


def locate(quote: str, page_text: str) -> align.Match | None:
    """Where the quote is on the page and how it matched; None for a quote of fewer than three words."""
    if len(normalize(quote).split()) < MIN_QUOTE_WORDS:
        return None
    return align.align(quote, page_text)


def quote_on_page(quote: str, page_text: str) -> bool:
    return locate(quote, page_text) is not None


def verified(match: align.Match) -> Mark:
    how = f"close ({match.score:.2f})" if match.how == "close" else match.how
    label = {
        "exact": "verified (exact quote)",
        "normalised": "verified (quote matched normalised)",
        "row": "verified (its row: the label and its figures apart on the page)",
    }.get(match.how, f"verified (close quote: {match.score:.2f})")
    return replace(VERIFIED, label=label, symbol=f"{VERIFIED.symbol} {how}", how=how)


def dates_in(text: str) -> set[date]:
    found = set()
    folded = normalize(text)
    for pattern in _DATES:
        for m in pattern.finditer(folded):
            month = int(m["mnum"]) if "mnum" in pattern.groupindex else _month(m["month"])
            try:
                found.add(date(int(m["year"]), month, int(m["day"])))
            except ValueError:
                continue
    return found


def _month(name: str) -> int:
    name = name.rstrip(".")
    return _MONTHS.get(name) or next(i for m, i in _MONTHS.items() if m.startswith(name[:3]))


def value_in_quote(value: object, type_: str, quote: str, table: align.Scale | None = None) -> bool:
    """Does ``value`` (already typed by ``cells.read_cell``) agree with ``quote``? ``table``: the scale line of
    the quote's table on its page, for a money figure the quote prints without a scale word."""
    if type_ == "yesno":
        return True
    if type_ == "text":
        return normalize(str(value)) in normalize(quote)
    if type_ == "list":
        return isinstance(value, list) and all(normalize(str(item)) in normalize(quote) for item in value)
    if type_ == "date":
        try:
            return date.fromisoformat(str(value)) in dates_in(quote)
        except ValueError:
            return False
    numbers = numbers_in(quote)
    if type_ == "number":
        v = as_decimal(value)  # type: ignore[arg-type]
        return any(v in (n.value, n.scaled) for n in numbers if not n.percent)
    if type_ == "percent":
        v = as_decimal(value)  # type: ignore[arg-type]
        return any(v == n.value or v * 100 == n.value for n in numbers if n.percent)
    amount = as_decimal(value["amount"]) * SCALES[value["scale"]]  # type: ignore[index]
    table = align.scale_in(quote) or table
    per_share = table is not None and table.except_per_share and bool(_PER_SHARE.search(quote))
    for n in numbers:
        if n.percent:
            continue
        if n.scale != 1 or table is None:
            if amount == n.scaled:
                return True
        elif amount == n.value * SCALES[table.scale] or (per_share and amount == n.value):
            return True
    return False


def outflow(value: object, type_: str, quote: str, table: align.Scale | None = None, name: str = "") -> str | None:
    """How the quote prints an outflow asked as a positive figure: a money or number ``value`` above zero that
    agrees with the quote once negated, on a row (or a field ``name``) that says it is money going out (purchases
    of property and equipment, repurchases, dividends paid, ...). The figure as printed, ``(1,577)``, else None:
    any other sign difference is a different figure."""
    if type_ not in ("money", "number"):
        return None
    amount = as_decimal(value["amount"] if type_ == "money" else value)  # type: ignore[index,arg-type]
    label = _label(quote)
    if amount <= 0 or not _OUTFLOW.search(label if len(label.split()) >= 2 else name):  # the row says, else the field
        return None
    negated = {**value, "amount": -value["amount"]} if type_ == "money" else -value  # type: ignore[index,operator,dict-item]
    if not value_in_quote(negated, type_, quote, table):
        return None
    printed = [
        (m[0].strip(), Decimal((m["paren"] or m["minus"]).replace(",", ""))) for m in _PRINTED_NEGATIVE.finditer(quote)
    ]
    for text, figure in printed:  # the one the value is, at the quote's scale or its own
        if any(amount == figure * k for k in (1, *SCALES.values())):
            return text
    return printed[0][0] if printed else None


def _label(quote: str) -> str:
    """A row's label: the quote's words before its first figure."""
    m = re.search(r"[(\-−–$€£¥]*\s*\d", quote)
    return quote[: m.start()] if m else quote


def outflow_mark(match: align.Match, printed: str) -> Mark:
    how = f"{'close (%.2f)' % match.score if match.how == 'close' else match.how}; printed as an outflow {printed}"
    return replace(
        VERIFIED,
        label=f"verified (printed as an outflow {printed})",
        symbol=f"{VERIFIED.symbol} printed as an outflow {printed}",
        how=how,
    )


def verify(cell: Cell, field: MatrixField, pages: dict[int, str]) -> Mark:
    """The cell's mark: its page's text is ``pages[cell.page]`` (pages numbered from 1)."""
    if cell.status == "cut":
        return CUT
    if cell.status != "ok":
        return INVALID
    if not cell.found:
        return NOT_FOUND
    page_text = pages.get(cell.page or 0)
    match = None if page_text is None else locate(cell.quote, page_text)
    if match is None:
        return NOT_ON_PAGE
    table = align.scale_above(page_text, match.start) if field.type == "money" else None  # type: ignore[arg-type]
    if not value_in_quote(cell.value, field.type, cell.quote, table):
        printed = outflow(cell.value, field.type, cell.quote, table, f"{field.name} {field.instruction}")
        return VALUE_NOT_IN_QUOTE if printed is None else outflow_mark(match, printed)
    return verified(match)
