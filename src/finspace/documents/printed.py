"""A page's printed number, read from its footer or header, for labels such as "page 23 (printed 21)".

Filings print their page numbers in a footer ("Apple Inc. | 2024 Form 10-K | 21", "21", "- 21 -",
"Page 21", "F-7") or, less often, in a header. The last two and first two non-empty lines of a page are
looked at; a line counts when it is short (at most ``MAX_LINE`` characters), is not a table row, and ends
with the number (a roman numeral for front matter, or a letter-dash-number for an exhibit's pages). A
number above 999 is not a page number (it is a year, an amount).
"""

from __future__ import annotations

import re

MAX_LINE = 60
_NUMBER = re.compile(r"(?:^|[\s|])(?:page\s+)?-?\s*((?:[A-Z]{1,2}-)?[1-9]\d{0,2}|[ivxlc]{1,6})\s*-?$", re.IGNORECASE)
_ALONE = re.compile(r"^[\s\-–—]*(?:page\s+)?((?:[A-Z]{1,2}-)?[1-9]\d{0,2}|[ivxlc]{1,6})[\s\-–—]*$", re.IGNORECASE)


def printed(text: str) -> str | None:
    """The number printed on the page (as printed: "21", "F-7", "iii"), or None."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    for line in [*reversed(lines[-2:]), *lines[:2]]:
        if len(line) > MAX_LINE or line.startswith("|"):
            continue
        m = _ALONE.match(line) or (_NUMBER.search(line) if "|" in line or line.lower().startswith("page") else None)
        if m:
            return m.group(1)
    return None


def label(index: int, text: str) -> str:
    """ "page N", or "page N (printed P)" when the page prints a number P."""
    p = printed(text)
    return f"page {index} (printed {p})" if p else f"page {index}"
