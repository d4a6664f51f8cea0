"""The filing tools' lookups of text, over a conversation's library: ``search`` for passages, ``read_page`` for one
page whole (the filer's tagged XBRL values: ``finspace.grounding.filer_facts``). Each returns a frozen result whose
``render`` is the text a model is given, bounded in tokens, and whose ``to_json`` goes to the page and the exports.

``search`` reuses each document's passage index (finspace.documents.passages: BM25 with the finance words): for a
question naming a statement's line or a metric, the best passage of the statement it needs (income, balance,
cash) comes first, then the best
passages by rank, one hit per page, taken in turn from each document when no document is named. A query is read
to its first ``MAX_QUERY_CHARS`` characters, so a 100,000-character query costs what a short one does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from finspace.documents import finance_words as fw
from finspace.documents.passages import index_of
from finspace.grounding.library import Library, approx_tokens, page_text
from finspace.grounding.library import document as _document

MAX_QUERY_CHARS = 1_000
MAX_K = 20
EXCERPT_CHARS = 400
LEAD_CHARS = 60  # a window starts this far before the query word it is anchored on
MAX_WINDOWS = 200  # windows tried on one page
WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    "a an and the of in on for to by from what was were is are how much many total fiscal year "
    "quarter value amount".split()
)


def fit_tokens(text: str, max_tokens: int, count: Callable[[str], int], tail: str = "") -> str:
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
    return out if count(out) <= max_tokens or not tail else fit_tokens(text, max_tokens, count)


def int_arg(value: object, default: int) -> int:
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
                    out = fit_tokens(out + block, max_tokens, count)
                out += f"\n... {len(self.hits) - i} results left out (bound of {max_tokens} tokens)"
                break
            out += block
        return out if count(out) <= max_tokens else fit_tokens(out, max_tokens, count)

    def to_json(self) -> dict:
        return {"query": self.query, "note": self.note, "hits": [h.to_json() for h in self.hits]}


def page_of(doc, label: str) -> int:
    for n, p in enumerate(doc.pages, 1):
        if p.label == label:
            return n
    return 0


def _query_words(query: str) -> set[str]:
    return {w for w in WORD.findall(query.casefold()) if w not in STOP_WORDS and len(w) > 2}


def _hits(text: str, words: set[str]) -> int:
    """How well ``text`` holds ``words``: the distinct words it holds first, then how often."""
    if not words:
        return 0
    found = [w for w in WORD.findall(text.casefold()) if w.startswith(tuple(words))]
    distinct = {q for q in words if any(w.startswith(q) for w in found)}
    return 1_000 * len(distinct) + len(found)


def window(text: str, words: set[str], chars: int) -> str:
    """The ``chars`` of ``text`` holding the most of ``words``, starting a little before one of them (at most
    ``MAX_WINDOWS`` tried); the start when none is there."""
    if len(text) <= chars:
        return text
    folded = text.casefold()
    starts = (
        sorted({max(0, m.start() - LEAD_CHARS) for m in WORD.finditer(folded) if m[0].startswith(tuple(words))})
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
    k = max(1, min(int_arg(k, 5), MAX_K))
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
                Hit(key, page_of(doc, p.label), p.label, excerpt(p.text, query, excerpt_chars), index.statements.get(i))
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
            return fit_tokens(head + self.text, bound, count, tail)
        chars = max(0, len(self.text))
        lo, hi = 0, chars
        while lo < hi:  # the widest window around the focus that fits
            mid = (lo + hi + 1) // 2
            if count(head + window(self.text, words, mid) + tail) <= bound:
                lo = mid
            else:
                hi = mid - 1
        return head + window(self.text, words, lo) + tail if lo else fit_tokens(head + self.text, bound, count, tail)

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
        max(0, int_arg(max_tokens, 1_500)),
        str(focus or "")[:MAX_QUERY_CHARS],
        count,
    )
