"""Each cell checked against the source: is the quote on the page it cites, and does the value agree with it?

Text is compared after normalising Unicode (NFKC), case, quotes, dashes and whitespace, so a PDF's line
breaks and curly quotes do not fail a true quote. Numbers are compared exactly (``numbers``). A cell is
``verified`` only when every check for its type passed:
- number: the value is one of the quote's numbers, as printed or with its scale (1.2 billion = 1200000000);
- percent: a percentage in the quote equals the value (12.5 for 12.5%; 0.125 is accepted as the same);
- money: amount x scale equals a number of the quote with its scale word (1.2 billion), or the quote prints
  no scale word and the scale is units (a table "in millions" says so outside the quote: not verified);
- date: the quote writes that date (2024-03-31, March 31, 2024, 31 March 2024, Mar. 31, 2024);
- text and list: the text, or each item, appears in the quote;
- yes/no: the quote is on the page (a yes or no cannot be read off a quote mechanically).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date

from finspace.matrix.cells import SCALES, Cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.numbers import as_decimal, numbers_in


@dataclass(frozen=True)
class Mark:
    key: str
    label: str
    symbol: str  # the text marker shown beside the colour: never colour alone


VERIFIED = Mark("verified", "verified", "✓")
NOT_ON_PAGE = Mark("not_on_page", "quote not on that page", "✗")
VALUE_NOT_IN_QUOTE = Mark("value_not_in_quote", "value not in the quote", "≠")
NOT_FOUND = Mark("not_found", "not found", "—")
CUT = Mark("cut", "cut at max_tokens", "✂")
INVALID = Mark("invalid", "reply did not parse", "!")
MARKS = (VERIFIED, NOT_ON_PAGE, VALUE_NOT_IN_QUOTE, NOT_FOUND, CUT, INVALID)
MIN_QUOTE_WORDS = 3  # "14.2" or "USD" proves nothing: a quote is evidence in its own words
_FOLD = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "−": "-", "\u00a0": " "})
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], 1)}
_MONTH = r"(?P<month>" + "|".join(sorted({*_MONTHS, *(m[:3] for m in _MONTHS), "sept"}, key=len, reverse=True)) + r")\.?"
_DATES = [
    re.compile(r"(?P<year>\d{4})-(?P<mnum>\d{2})-(?P<day>\d{2})"),
    re.compile(_MONTH + r"\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4})"),
    re.compile(r"(?P<day>\d{1,2})\s+" + _MONTH + r",?\s+(?P<year>\d{4})"),
]


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).translate(_FOLD).casefold().split())


def quote_on_page(quote: str, page_text: str) -> bool:
    q = normalize(quote)
    return len(q.split()) >= MIN_QUOTE_WORDS and q.rstrip(".") in normalize(page_text)


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


def value_in_quote(value: object, type_: str, quote: str) -> bool:
    """Does ``value`` (already typed by ``cells.read_cell``) agree with ``quote``?"""
    if type_ == "yesno":
        return True
    if type_ == "text":
        return normalize(str(value)) in normalize(quote)
    if type_ == "list":
        return all(normalize(item) in normalize(quote) for item in value)  # type: ignore[union-attr]
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
    return any(amount == n.scaled for n in numbers if not n.percent)


def verify(cell: Cell, field: MatrixField, pages: dict[int, str]) -> Mark:
    """The cell's mark: its page's text is ``pages[cell.page]`` (pages numbered from 1)."""
    if cell.status == "cut":
        return CUT
    if cell.status != "ok":
        return INVALID
    if not cell.found:
        return NOT_FOUND
    page_text = pages.get(cell.page or 0)
    if page_text is None or not quote_on_page(cell.quote, page_text):
        return NOT_ON_PAGE
    if not value_in_quote(cell.value, field.type, cell.quote):
        return VALUE_NOT_IN_QUOTE
    return VERIFIED
