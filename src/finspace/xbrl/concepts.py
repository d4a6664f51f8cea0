"""The filer's value for a Matrix field: the first of the field's concepts that the filing reports for its own
period, with no dimensions.

The document's period ends on ``dei:DocumentPeriodEndDate`` (its text, "September 28, 2024"; else the end of that
fact's context). A duration must end there and last the form's period: about a year for a 10-K (or a 20-F,
40-F), about a quarter for a 10-Q; an instant (a balance-sheet item) must be that date. A ``dei:`` cover fact
(shares outstanding at a later date, the auditor's name) is taken from its own undimensioned context. The
same figure tagged on several pages (the statement and a note) is one value: the first page is kept.
"""

from __future__ import annotations

from typing import Any

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from finspace.xbrl.facts import Context, Fact, Facts

# days a duration lasts for the form's own period (52/53-week years and 13/14-week quarters included)
YEAR_DAYS = range(350, 380)
QUARTER_DAYS = range(80, 100)
_MONTHS = {
    m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)
}
_NAMED = re.compile(r"([a-z]{3})[a-z]*\.?\s+(\d{1,2}),?\s+(\d{4})")
_DAY_FIRST = re.compile(r"(\d{1,2})\s+([a-z]{3})[a-z]*\.?,?\s+(\d{4})")
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_US = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")


@dataclass(frozen=True)
class FilerValue:
    concept: str
    page: int
    value: Decimal | None = None  # a number
    text: str | None = None  # a date (YYYY-MM-DD) or a text
    unit: str | None = None  # iso4217:USD, xbrli:shares, iso4217:USD/xbrli:shares
    decimals: str | None = None
    start: str | None = None
    end: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "concept": self.concept,
            "value": None if self.value is None else format(self.value, "f"),
            "text": self.text,
            "unit": self.unit,
            "decimals": self.decimals,
            "page": self.page,
            "period": {"start": self.start, "end": self.end},
        }


def as_date(text: str | None) -> str | None:
    """A date as YYYY-MM-DD from a cover page's text ("September 28, 2024", "2024-09-28", "28 September 2024")."""
    if not text:
        return None
    folded = " ".join(text.lower().split())
    for pattern, order in ((_ISO, "ymd"), (_NAMED, "mdy"), (_DAY_FIRST, "dmy"), (_US, "MDY")):
        m = pattern.search(folded)
        if not m:
            continue
        try:
            if order == "ymd":
                y, mo, d = int(m[1]), int(m[2]), int(m[3])
            elif order == "mdy":
                y, mo, d = int(m[3]), _MONTHS.get(m[1], 0), int(m[2])
            elif order == "dmy":
                y, mo, d = int(m[3]), _MONTHS.get(m[2], 0), int(m[1])
            else:
                y, mo, d = int(m[3]), int(m[1]), int(m[2])
            return date(y, mo, d).isoformat()
        except ValueError:
            continue
    return None


def period_end(facts: Facts) -> str | None:
    """The document's own period end: dei:DocumentPeriodEndDate's text, else its context's end date."""
    for f in facts.named("dei:DocumentPeriodEndDate"):
        got = as_date(f.text)
        if got:
            return got
        ctx = facts.contexts.get(f.context)
        if ctx is not None and ctx.end:
            return ctx.end
    return None


def period_days(facts: Facts) -> range:
    """How long the form's own period lasts: a quarter for a 10-Q, else a year."""
    form = (facts.dei("DocumentType") or "").upper()
    return QUARTER_DAYS if form.startswith("10-Q") else YEAR_DAYS


def _own_period(ctx: Context, end: str, days: range) -> bool:
    if ctx.dims or ctx.end != end:
        return False
    return ctx.instant or (ctx.days is not None and ctx.days in days)


def filer_value(facts: Facts, concepts: Sequence[str]) -> FilerValue | None:
    """The filer's value of the first of ``concepts`` reported for the document's own period (None when none is)."""
    if not facts.facts or not concepts:
        return None
    end, days = period_end(facts), period_days(facts)
    for concept in concepts:
        found = [f for f in facts.named(concept) if _fits(facts, f, concept, end, days)]
        if found:
            return _value(facts, _pick(facts, found, concept))
    return None


def _fits(facts: Facts, f: Fact, concept: str, end: str | None, days: range) -> bool:
    ctx = facts.contexts.get(f.context)
    if ctx is None:
        return False
    if concept.lower().startswith("dei:"):
        return not ctx.dims
    return end is not None and _own_period(ctx, end, days)


def _pick(facts: Facts, found: list[Fact], concept: str) -> Fact:
    """The first page's fact; for a cover (dei:) fact, the latest date's."""
    if concept.lower().startswith("dei:"):
        latest = max(facts.contexts[f.context].end or "" for f in found)
        found = [f for f in found if (facts.contexts[f.context].end or "") == latest]
    return min(found, key=lambda f: f.page)


def _value(facts: Facts, f: Fact) -> FilerValue:
    ctx = facts.contexts[f.context]
    text = f.text
    if f.concept.lower() == "dei:documentperiodenddate":
        text = period_end(facts) or text
    return FilerValue(f.concept, f.page, f.value, text, f.unit, f.decimals, ctx.start, ctx.end)
