"""Inline-XBRL facts as plain data: contexts (period and dimensions), units, facts (numeric or text), each fact
with the page it is on. Serialised to JSON and back, because documents are converted in a child process."""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation


@dataclass(frozen=True)
class Context:
    id: str
    start: str | None = None  # YYYY-MM-DD, for a duration
    end: str | None = None  # YYYY-MM-DD: a duration's end, or the instant
    instant: bool = False
    dims: tuple[tuple[str, str], ...] = ()  # (dimension, member) of xbrldi:explicitMember / typedMember

    @property
    def days(self) -> int | None:
        """A duration's length in days (start to end); None for an instant or an unreadable date."""
        if self.instant or not self.start or not self.end:
            return None
        try:
            return (date.fromisoformat(self.end) - date.fromisoformat(self.start)).days
        except ValueError:
            return None


@dataclass(frozen=True)
class Fact:
    concept: str  # prefixed, as written: us-gaap:Revenues, dei:DocumentPeriodEndDate
    context: str  # its context's id
    page: int  # 1-based: the page (CSS page breaks, xbrl.pagebreaks) the tag is on
    value: Decimal | None = None  # a number's value: the displayed number x 10^scale, negated by sign="-"
    text: str | None = None  # a text fact (ix:nonNumeric, continuations joined), at most MAX_TEXT_CHARS
    unit: str | None = None  # the unit's measure: iso4217:USD, xbrli:shares, iso4217:USD/xbrli:shares
    decimals: str | None = None  # as written: "-6", "INF"
    scale: int = 0

    @property
    def numeric(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Facts:
    facts: tuple[Fact, ...] = ()
    contexts: dict[str, Context] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what was skipped and why (a missing context or unit, a bound reached)

    def __len__(self) -> int:
        return len(self.facts)

    def named(self, concept: str) -> list[Fact]:
        folded = concept.casefold()
        return [f for f in self.facts if f.concept.casefold() == folded]

    def dei(self, name: str) -> str | None:
        """The first text of ``dei:<name>`` (DocumentPeriodEndDate, EntityRegistrantName, AuditorName ...)."""
        for f in self.named(f"dei:{name}"):
            if f.text is not None:
                return f.text
            if f.value is not None:
                return str(f.value)
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "contexts": [[c.id, c.start, c.end, c.instant, [list(d) for d in c.dims]] for c in self.contexts.values()],
            "facts": [
                [
                    f.concept,
                    f.context,
                    f.page,
                    None if f.value is None else str(f.value),
                    f.text,
                    f.unit,
                    f.decimals,
                    f.scale,
                ]
                for f in self.facts
            ],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Facts:
        if not d:
            return cls()
        contexts = {
            str(c[0]): Context(str(c[0]), c[1], c[2], bool(c[3]), tuple((str(a), str(b)) for a, b in c[4]))
            for c in d.get("contexts", ())
        }
        facts = tuple(
            Fact(str(f[0]), str(f[1]), int(f[2]), _decimal(f[3]), f[4], f[5], f[6], int(f[7]))
            for f in d.get("facts", ())
        )
        return cls(facts, contexts, tuple(str(n) for n in d.get("notes", ())))


def _decimal(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None
