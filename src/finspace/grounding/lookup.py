"""The filing tools' lookups, over a conversation's library: ``search`` for passages, ``read_page`` for one page
whole, ``filer_facts`` for the filer's tagged XBRL values. Each returns a frozen result whose ``render`` is the
text a model is given, bounded in tokens, and whose ``to_json`` goes to the page and the exports.

``search`` reuses each document's passage index (finspace.documents.passages: BM25 with the finance words): for a
question naming a statement's line or a metric, the best passage of the statement it needs (income, balance,
cash) comes first, then the best
passages by rank, one hit per page, taken in turn from each document when no document is named. A query is read
to its first ``MAX_QUERY_CHARS`` characters, so a 100,000-character query costs what a short one does.

``filer_facts`` matches a concept ("us-gaap:Revenues", "Revenues") or words ("revenue", "net income"): a
concept's local name split at its capitals must hold every word (by prefix: "revenue" matches "Revenues"), or one
of the finance words' synonyms of them ("revenue" -> "net sales" -> SalesRevenueNet). The document's own period
and facts without dimensions come first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from finspace.documents import finance_words as fw
from finspace.documents.passages import index_of
from finspace.grounding.library import Library, approx_tokens, page_text
from finspace.grounding.library import document as _document
from finspace.xbrl.concepts import as_date, period_days, period_end
from finspace.xbrl.facts import Fact, Facts

MAX_QUERY_CHARS = 1_000
MAX_K = 20
EXCERPT_CHARS = 400
LEAD_CHARS = 60  # a window starts this far before the query word it is anchored on
MAX_WINDOWS = 200  # windows tried on one page
MAX_FACTS = 12
SCALE_NAMES = {-2: "percent", 0: "units", 3: "thousands", 6: "millions", 9: "billions"}
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_STOP = frozenset(
    "a an and the of in on for to by from what was were is are how much many total fiscal year "
    "quarter value amount".split()
)


def _fit(text: str, max_tokens: int, count: Callable[[str], int], tail: str = "") -> str:
    """``text`` cut at a line (or characters) so that it and ``tail`` fit ``max_tokens``."""
    whole = text + tail
    if count(whole) <= max_tokens:
        return whole
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits, by bisection: count() is called log2(len) times
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + " …" + tail) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    if "\n" in cut[len(cut) // 2 :]:
        cut = cut[: cut.rfind("\n")]
    out = cut + " …" + tail if cut else tail.lstrip()
    return out if count(out) <= max_tokens or not tail else _fit(text, max_tokens, count)


def _int(value: object, default: int) -> int:
    """A model's number argument as an int (5, "5", 5.0), else ``default``."""
    try:
        return int(float(str(value)[:20]))
    except (TypeError, ValueError, OverflowError):
        return default


# ------------------------------------------------------------------ search
@dataclass(frozen=True)
class Hit:
    document: str
    page: int  # numbered from 1 (0 for a document without pages)
    label: str
    excerpt: str
    statement: str | None = None  # income, balance, cash: the page is that statement

    def to_json(self) -> dict:
        return {
            "document": self.document,
            "page": self.page,
            "label": self.label,
            "excerpt": self.excerpt,
            "statement": self.statement,
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: tuple[Hit, ...]
    note: str = ""  # the query was cut, nothing matched

    def render(self, max_tokens: int = 800, count: Callable[[str], int] = approx_tokens) -> str:
        head = f"search {self.query[:80]!r}: {len(self.hits)} results" + (f" ({self.note})" if self.note else "")
        out = head
        for i, h in enumerate(self.hits):
            tag = f", the {h.statement} statement" if h.statement else ""
            block = f"\n[{h.document} {h.label}{tag}]\n{h.excerpt}"
            if count(out + block) > max_tokens:
                room = max_tokens - count(out) - 2
                if room > 40:
                    out = _fit(out + block, max_tokens, count)
                out += f"\n... {len(self.hits) - i} results left out (bound of {max_tokens} tokens)"
                break
            out += block
        return out if count(out) <= max_tokens else _fit(out, max_tokens, count)

    def to_json(self) -> dict:
        return {"query": self.query, "note": self.note, "hits": [h.to_json() for h in self.hits]}


def _page_of(doc, label: str) -> int:
    for n, p in enumerate(doc.pages, 1):
        if p.label == label:
            return n
    return 0


def _query_words(query: str) -> set[str]:
    return {w for w in _WORD.findall(query.casefold()) if w not in _STOP and len(w) > 2}


def _hits(text: str, words: set[str]) -> int:
    """How well ``text`` holds ``words``: the distinct words it holds first, then how often."""
    if not words:
        return 0
    found = [w for w in _WORD.findall(text.casefold()) if w.startswith(tuple(words))]
    distinct = {q for q in words if any(w.startswith(q) for w in found)}
    return 1_000 * len(distinct) + len(found)


def window(text: str, words: set[str], chars: int) -> str:
    """The ``chars`` of ``text`` holding the most of ``words``, starting a little before one of them (at most
    ``MAX_WINDOWS`` tried); the start when none is there."""
    if len(text) <= chars:
        return text
    folded = text.casefold()
    starts = (
        sorted({max(0, m.start() - LEAD_CHARS) for m in _WORD.finditer(folded) if m[0].startswith(tuple(words))})
        if words
        else []
    )
    if len(starts) > MAX_WINDOWS:
        starts = starts[:: len(starts) // MAX_WINDOWS + 1]
    best, at = -1, 0
    for start in starts:
        n = _hits(text[start : start + chars], words)
        if n > best:
            best, at = n, start
    at = min(at, max(0, len(text) - chars))
    piece = text[at : at + chars]
    if at > 0:
        piece = "…" + piece[piece.find(" ") + 1 :] if " " in piece[:40] else "…" + piece
    if at + chars < len(text):
        piece = (piece[: piece.rfind(" ")] if " " in piece[-40:] else piece) + "…"
    return piece


def excerpt(text: str, query: str, chars: int = EXCERPT_CHARS) -> str:
    """The passage's first line (a table's title, a paragraph's start) and the lines holding the most of the
    query's words, in their order, within ``chars``; a long line is cut to its part that holds them."""
    words = _query_words(query)
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return ""
    best = sorted(range(1, len(lines)), key=lambda i: -_hits(lines[i], words))
    keep, size = [0], min(len(lines[0]), chars // 3)
    for i in best:
        if _hits(lines[i], words) == 0 or size + len(lines[i]) > chars:
            continue
        keep.append(i)
        size += len(lines[i]) + 1
    first = window(lines[0], words, max(chars - size, chars // 3) if len(keep) > 1 else chars)
    return "\n".join([first, *(lines[i] for i in sorted(keep[1:]))])


def search(
    lib: Library, query: str, document: str | None = None, k: int = 5, excerpt_chars: int = EXCERPT_CHARS
) -> SearchResult:
    """The ``k`` best pages for ``query`` over one document (``document``) or all, each with an excerpt."""
    note = ""
    query = str(query)
    if len(query) > MAX_QUERY_CHARS:
        note = f"query cut to its first {MAX_QUERY_CHARS:,} of {len(query):,} characters"
        query = query[:MAX_QUERY_CHARS]
    k = max(1, min(_int(k, 5), MAX_K))
    keys = [_document(lib, document)[0]] if document else list(lib)
    # a statement first only for a question naming a line or a metric ("how many employees" is not one)
    kinds = fw.statements_for(query) if fw.terms_in(query) or fw.metrics_in(query) else ()
    per_doc: list[list[Hit]] = []
    for key in keys:
        doc = lib[key]
        index = index_of(doc)
        ranked = index.rank(query)
        first = [i for kind in kinds[:1] for i in ranked if index.statements.get(i) == kind][:1]
        hits, pages = [], set()
        for i in [*first, *ranked]:
            p = index.passages[i]
            if p.label in pages:
                continue
            pages.add(p.label)
            hits.append(
                Hit(
                    key, _page_of(doc, p.label), p.label, excerpt(p.text, query, excerpt_chars), index.statements.get(i)
                )
            )
            if len(hits) >= k:
                break
        per_doc.append(hits)
    merged = [h for row in zip(*[r + [None] * (k - len(r)) for r in per_doc], strict=True) for h in row if h]
    if not merged:
        note = "; ".join(filter(None, [note, "nothing matched"]))
    return SearchResult(query, tuple(merged[:k]), note)


# ------------------------------------------------------------------ read_page
@dataclass(frozen=True)
class PageText:
    document: str
    page: int
    label: str
    pages: int  # the document's page count
    text: str  # the page's whole text
    max_tokens: int = 1_500  # render's bound unless it is given one
    focus: str = ""  # words to keep in view when the page is cut (the question, a row's label)
    count: Callable[[str], int] = field(default=approx_tokens, compare=False, repr=False)

    def render(self, max_tokens: int | None = None, count: Callable[[str], int] | None = None) -> str:
        """The page whole when it fits ``max_tokens``; else its head, or, with a ``focus``, the part that holds
        the most of its words, with a line saying it was cut."""
        bound = self.max_tokens if max_tokens is None else max_tokens
        count = count or self.count
        head = f"[{self.document} {self.label} of {self.pages}]\n"
        if count(head + self.text) <= bound:
            return head + self.text
        tail = (
            f"\n(page cut at the {bound}-token bound: {len(self.text):,} characters in all; read_page with "
            "the words you need as its focus, or search)"
        )
        words = _query_words(self.focus)
        if not words:
            return _fit(head + self.text, bound, count, tail)
        chars = max(0, len(self.text))
        lo, hi = 0, chars
        while lo < hi:  # the widest window around the focus that fits
            mid = (lo + hi + 1) // 2
            if count(head + window(self.text, words, mid) + tail) <= bound:
                lo = mid
            else:
                hi = mid - 1
        return head + window(self.text, words, lo) + tail if lo else _fit(head + self.text, bound, count, tail)

    def to_json(self) -> dict:
        return {
            "document": self.document,
            "page": self.page,
            "label": self.label,
            "pages": self.pages,
            "text": self.text,
        }


def read_page(
    lib: Library,
    document: str | None,
    page: object,
    max_tokens: int = 1_500,
    count: Callable[[str], int] = approx_tokens,
    focus: str = "",
) -> PageText:
    """One page of a document, whole (``render`` bounds it to ``max_tokens``, keeping ``focus``'s words in view
    when it cuts, counting with ``count``); UnknownDocument or PageOutOfRange name the fix."""
    key, n, label, text = page_text(lib, document, page)
    return PageText(
        key,
        n,
        label,
        len(lib[key].pages),
        text,
        max(0, _int(max_tokens, 1_500)),
        str(focus or "")[:MAX_QUERY_CHARS],
        count,
    )


# ------------------------------------------------------------------ filer_facts
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
        return _fit("\n".join(lines), max_tokens, count)

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
    own = [w for w in _WORD.findall(query.casefold()) if w not in _STOP]
    out = [(True, own)] if own else []
    for term in fw.terms_in(query):
        for name in term.names:
            words = [w for w in _WORD.findall(name) if w not in _STOP]
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
    statement_pages = {_page_of(doc, index.passages[i].label) for i in index.statements}
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
    best = sorted(found.values(), key=lambda rf: rf[0])[: max(1, min(_int(limit, MAX_FACTS), 50))]
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
