"""The filing tool ``filer_facts``: the filer's tagged XBRL values for a concept or words, over a conversation's
library.

It matches a concept ("us-gaap:Revenues", "Revenues") or words ("revenue", "net income"): a concept's local name
split at its capitals must hold every word (by prefix: "revenue" matches "Revenues"), or one of the finance
words' synonyms of them ("revenue" -> "net sales" -> SalesRevenueNet). The document's own period and facts without
dimensions come first. Its result renders, bounded in tokens, as the text a model is given (as
``finspace.grounding.lookup``'s do).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from finspace.documents import finance_words as fw
from finspace.documents.passages import index_of
from finspace.grounding.library import Library, approx_tokens
from finspace.grounding.library import document as _document
from finspace.grounding.lookup import MAX_QUERY_CHARS, STOP_WORDS, WORD, fit_tokens, int_arg, page_of
from finspace.xbrl.concepts import as_date, period_days, period_end
from finspace.xbrl.facts import Fact, Facts

MAX_FACTS = 12
SCALE_NAMES = {-2: "percent", 0: "units", 3: "thousands", 6: "millions", 9: "billions"}
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


@dataclass(frozen=True)
class FactValue:
    concept: str
    period: str  # "2023-10-01 to 2024-09-28" for a duration, "2024-09-28" for an instant
    unit: str  # iso4217:USD, xbrli:shares ...
    scale: str  # as the filing displays it: units, thousands, millions, billions
    value: str  # exact, in units: "391035000000"
    shown: str  # as displayed, in its scale: "391,035"
    page: int
    dims: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict:
        return {
            "concept": self.concept,
            "period": self.period,
            "unit": self.unit,
            "scale": self.scale,
            "value": self.value,
            "shown": self.shown,
            "page": self.page,
            "dims": [list(d) for d in self.dims],
        }

    def line(self) -> str:
        dims = f" [{', '.join(m.split(':')[-1] for _, m in self.dims)}]" if self.dims else ""
        unit = self.unit.split(":")[-1].replace("xbrli:", "")
        scale = "" if self.scale == "units" else f" {self.scale}"
        return f"{self.concept}{dims} {self.period}: {self.shown}{scale} {unit} (page {self.page})"


@dataclass(frozen=True)
class FactsResult:
    document: str
    query: str
    period: str | None
    facts: tuple[FactValue, ...]
    has_xbrl: bool
    note: str = ""

    def render(self, max_tokens: int = 600, count: Callable[[str], int] = approx_tokens) -> str:
        if not self.has_xbrl:
            return self.note
        head = f"filer_facts {self.document} {self.query[:80]!r}" + (f" {self.period}" if self.period else "")
        lines = [head + (f": {self.note}" if self.note else f": {len(self.facts)} values")]
        lines += [f.line() for f in self.facts]
        return fit_tokens("\n".join(lines), max_tokens, count)

    def to_json(self) -> dict:
        return {
            "document": self.document,
            "query": self.query,
            "period": self.period,
            "has_xbrl": self.has_xbrl,
            "note": self.note,
            "facts": [f.to_json() for f in self.facts],
        }


def _tokens(concept: str) -> list[str]:
    return [t.casefold() for t in _CAMEL.findall(concept.split(":")[-1])]


def _phrases(query: str) -> list[tuple[bool, list[str]]]:
    """(the query's own words?, words) for the query and each finance synonym of the terms it names."""
    if re.fullmatch(r"\s*(?:[\w-]+:)?[A-Z][A-Za-z0-9]+\s*", query):  # a concept's name: its words
        return [(True, _tokens(query.strip()))]
    own = [w for w in WORD.findall(query.casefold()) if w not in STOP_WORDS]
    out = [(True, own)] if own else []
    for term in fw.terms_in(query):
        for name in term.names:
            words = [w for w in WORD.findall(name) if w not in STOP_WORDS]
            if len(words) > 1 and (False, words) not in out and words != own:
                out.append((False, words))
    return out


def _score(concept: str, query: str, phrases: list[tuple[bool, list[str]]]) -> tuple[int, float] | None:
    """How well ``concept`` matches: (3 named exactly, 1 by the query's words, 0 by a synonym; the share of the
    concept's words matched, plus 1 when the concept's name starts with the first word), or None."""
    q = query.strip().casefold()
    if q == concept.casefold() or (":" not in q and q == concept.split(":")[-1].casefold()):
        return (3, 1.0)
    tokens = _tokens(concept)
    for own, words in phrases:
        if all(any(t.startswith(w) or (len(t) >= 4 and w.startswith(t)) for t in tokens) for w in words):
            lead = tokens[0].startswith(words[0]) or words[0].startswith(tokens[0])
            return (1 if own else 0, lead + len(words) / max(1, len(tokens)))
    return None


def _period_text(facts: Facts, fact: Fact) -> tuple[str, str]:
    ctx = facts.contexts[fact.context]
    if ctx.instant or not ctx.start:
        return ctx.end or "", ctx.end or ""
    return f"{ctx.start} to {ctx.end}", ctx.end or ""


def _wanted(period: str | None) -> tuple[str | None, int | None]:
    """(an exact end date, or a year) from "2024-09-28", "September 28, 2024", "FY2024", "2024"."""
    if not period:
        return None, None
    day = as_date(period)
    if day:
        return day, None
    m = re.search(r"(?:19|20)\d{2}", period)
    return None, int(m[0]) if m else None


def _shown(fact: Fact) -> str:
    shown = fact.value / (Decimal(10) ** fact.scale)  # type: ignore[operator]
    if shown == shown.to_integral_value():
        return f"{int(shown):,}"
    return f"{shown:,.{max(0, -shown.as_tuple().exponent)}f}"  # type: ignore[operator]


def filer_facts(
    lib: Library, document: str | None, query: str, period: str | None = None, limit: int = MAX_FACTS
) -> FactsResult:
    """The filer's tagged values in ``document`` matching ``query`` (a concept or words), for ``period`` (an
    end date or a fiscal year) or all periods, the document's own first; a filing without XBRL says so."""
    key, doc = _document(lib, document)
    query = str(query)[:MAX_QUERY_CHARS]
    period = None if period is None else str(period)[:100]
    facts = doc.facts
    if not facts.facts:
        why = "a PDF carries none" if doc.kind == "pdf" else "this file has no inline XBRL tags"
        return FactsResult(
            key,
            query,
            period,
            (),
            False,
            f"{key} has no XBRL facts ({why}): use search and read_page to find the figure on its page",
        )
    phrases = _phrases(query)
    end, days = period_end(facts), period_days(facts)
    want_day, want_year = _wanted(period)
    index = index_of(doc)
    statement_pages = {page_of(doc, index.passages[i].label) for i in index.statements}
    found: dict[tuple[str, str], tuple[tuple, Fact]] = {}
    for f in facts.facts:
        ctx = facts.contexts.get(f.context)
        if f.value is None or ctx is None or (score := _score(f.concept, query, phrases)) is None:
            continue
        if want_day and ctx.end != want_day:
            continue
        if want_year and not (ctx.end or "").startswith(str(want_year)):
            continue
        own = ctx.end == end and (ctx.instant or ctx.days in days)
        rank = (
            bool(ctx.dims),
            not own,
            not (ctx.instant or ctx.days in days),
            -score[0],
            f.page not in statement_pages,
            -score[1],
            "".join(chr(0x10FFFF - ord(c)) for c in ctx.end or ""),
            f.page,
        )
        k = (f.concept, f.context)
        if k not in found or rank < found[k][0]:
            found[k] = (rank, f)
    best = sorted(found.values(), key=lambda rf: rf[0])[: max(1, min(int_arg(limit, MAX_FACTS), 50))]
    out = []
    for _, f in best:
        period_text, _end = _period_text(facts, f)
        out.append(
            FactValue(
                f.concept,
                period_text,
                f.unit or "",
                SCALE_NAMES.get(f.scale, f"10^{f.scale}"),
                format(f.value, "f"),
                _shown(f),
                f.page,
                facts.contexts[f.context].dims,
            )
        )
    note = (
        ""
        if out
        else (
            f"no tagged value matches {query[:80]!r}"
            + (f" for {period}" if period else "")
            + "; try the concept's name (us-gaap:Revenues) or other words, or search the pages"
        )
    )
    return FactsResult(key, query, period, tuple(out), True, note)
