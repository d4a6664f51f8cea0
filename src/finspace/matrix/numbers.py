"""Numbers as filings print them, read exactly (``Decimal``, never a float's rounding).

``1,234.5`` is 1234.5; ``(1,234)`` is -1234 (accounting negatives), also as some PDFs print it, ``(1,886 )`` or
``( 25 )``; ``1.2 billion``, ``$3.4bn`` and ``12 thousand`` carry their scale; ``12.5%`` and ``12.5 percent`` are
percentages. A figure glued to its row label by a PDF's text layer (``net4,212``) is read when it has a thousands
separator; ``FY2024``, ``Q3`` and other digits glued to letters are labels. European separators
(``1.234,5``) are not read: a quote in that form is reported as "value not in the quote", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

SCALE_WORDS = {
    "thousand": 10**3,
    "thousands": 10**3,
    "k": 10**3,
    "million": 10**6,
    "millions": 10**6,
    "mn": 10**6,
    "m": 10**6,
    "mm": 10**6,
    "billion": 10**9,
    "billions": 10**9,
    "bn": 10**9,
    "b": 10**9,
    "trillion": 10**12,
    "trillions": 10**12,
    "tn": 10**12,
}
_NUMBER = re.compile(
    r"(?P<open>\()?\s*(?P<cur>[$€£¥])?\s*(?P<sign>[-−–])?\s*(?P<cur2>[$€£¥])?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*(?P<close>\)))?"
    r"(?:\s*(?P<pct>%|percent\b|per\s+cent\b))?"
    r"(?:\s*(?P<scale>" + "|".join(sorted(SCALE_WORDS, key=len, reverse=True)) + r")\b)?",
    re.IGNORECASE,
)
MAX_NUMBERS = 200  # a quote is short; past this many numbers the rest are not read


@dataclass(frozen=True)
class Number:
    value: Decimal  # as printed, with its sign: "(1,234)" -> -1234
    scale: int  # 1 when no scale word follows
    percent: bool

    @property
    def scaled(self) -> Decimal:
        return self.value * self.scale


def numbers_in(text: str) -> list[Number]:
    """Every number in ``text``, in order, with its sign, scale and percent mark."""
    found: list[Number] = []
    for m in _NUMBER.finditer(text):
        if len(found) >= MAX_NUMBERS:
            break
        if _inside_word(text, m.start("digits"), m.end("digits")):
            continue
        try:
            value = Decimal(m["digits"].replace(",", ""))
        except InvalidOperation:  # pragma: no cover - the pattern admits only digits
            continue
        glued = bool(m["sign"]) and m.start("sign") > 0 and text[m.start("sign") - 1].isalnum()  # 2023-2024: a range
        negative = (bool(m["sign"]) and not glued) or bool(m["open"] and m["close"])
        scale = SCALE_WORDS[m["scale"].lower()] if m["scale"] and not m["pct"] else 1
        found.append(Number(-value if negative else value, scale, bool(m["pct"])))
    return found


def _inside_word(text: str, start: int, end: int) -> bool:
    """Digits glued to letters (Q3, FY2024) are labels, not amounts; a figure with a thousands separator glued to
    its row label (a PDF's ``net4,212``) is an amount."""
    before = text[start - 1] if start > 0 else " "
    return before.isalpha() and "," not in text[start:end]


def as_decimal(value: float | int) -> Decimal:
    """A model's JSON number as the decimal it wrote (12.4, not 12.4000000000000003552713678800500929355621337890625)."""
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
