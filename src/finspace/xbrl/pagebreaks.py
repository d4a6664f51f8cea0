"""Where an HTML filing's pages end: the one rule that the XBRL reader and the HTML converter
(``documents/html.py``) share, here below both so that each imports it downward.

EDGAR filings mark their printed pages with CSS page breaks on an element, most often
``<hr style="page-break-after:always"/>`` (Apple, NVIDIA, Wells Fargo ... all 7 inline-XBRL filings in
``shared/filings``), sometimes ``page-break-before`` or the newer ``break-before: page``. Page N (1-based)
holds everything after the (N-1)th break in document order; a document without breaks is one page.
"""

from __future__ import annotations

import re

_BREAK = re.compile(
    r"(?:^|[;\s\"'{])(?:page-break-|break-)(before|after)\s*:\s*(always|page|left|right|recto|verso)", re.IGNORECASE
)


def breaks(style: str | None) -> tuple[bool, bool]:
    """``(before, after)``: whether an element with this ``style`` attribute starts or ends a page."""
    if not style or "break-" not in style.lower():
        return False, False
    sides = {m.group(1).lower() for m in _BREAK.finditer(style)}
    return "before" in sides, "after" in sides
