"""A document too long for the context, answered from its most relevant passages.

``split`` cuts each page into passages of about ``PASSAGE_WORDS`` words (at paragraph ends where it can), each
keeping its page label. A table stays whole in one passage with the short lines written above it (its title,
its caption, its scale line "(In millions, except per-share amounts)"); a table longer than ``TABLE_CHARS`` is
cut between rows, and each part repeats those lines and the table's header rows (the years).

``Index`` is built once per document (``index_of`` keeps it while the document object lives: a Matrix's fields
reuse it; the chat page sends its document back with each question, as a new object, so a question builds one): the passages, their BM25 index (bm25s: lexical, no embedding model, nothing to
download) and which passages are the financial statements' own pages, found by their titles. ``select`` ranks
the passages against the question, with finance synonyms, statement titles and a metric's inputs counted as
its words (finspace.documents.finance_words); for a figure question the statements it needs come first, within
``STATEMENT_SHARE`` of the budget (the first of them within ``FIRST_STATEMENT_SHARE``, so a small model's context
still gets one); the best of the rest fill the budget; all in document order.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from finspace.documents import finance_words as fw
from finspace.documents.convert import Document

PASSAGE_WORDS = 160
TABLE_CHARS = 6_000  # a table up to this size is one passage; a longer one is cut between rows
HEAD_LINES = 3  # short lines above a table that belong to it (title, caption, scale line)
HEAD_CHARS = 200  # a line longer than this above a table is prose, not its title
EXTRA_WEIGHT = 0.5  # the words a question's finance terms add count half as much as its own
STATEMENT_SHARE = 0.4  # of the budget, at most, for the statements a figure question needs
FIRST_STATEMENT_SHARE = 0.6  # but the first, most relevant statement passage may take this much
STATEMENT_HEAD_CHARS = 400  # a statement's title is in the first characters of its page (or its passage)
STATEMENT_MIN_FIGURES = 20  # and the page prints figures: a contents page that names the statements is not one
_FIGURE = re.compile(r"\d{1,3}(?:,\d{3})+")


# a "word" longer than this is cut into pieces of it: a passage is bounded in characters as in words (3 KB runs
# without a space made one 1.2 MB passage, whose token count took the app 250 MiB)
MAX_WORD_CHARS = 64


@dataclass(frozen=True)
class Passage:
    index: int  # position in the document
    label: str  # the page it is on ("page 7"), "" when the document has no pages
    text: str


@dataclass(frozen=True)
class Use:
    """Which of the finance rules ``select`` applies (all, unless a measurement turns one off)."""

    synonyms: bool = True  # finance synonyms and statement titles count as the question's words
    metrics: bool = True  # a metric's inputs count as its words
    statements: bool = True  # the statements' own pages come first for a figure question


def split(doc: Document, words: int = PASSAGE_WORDS) -> list[Passage]:
    """The document's passages in order: paragraphs packed up to ``words`` words; a longer paragraph is cut; a
    table with its title and scale lines is one passage (cut between rows past ``TABLE_CHARS``)."""
    out: list[Passage] = []

    current: list[str] = []  # the paragraphs of the passage being packed (on the page being read)

    def emit(label: str, text: str) -> None:
        out.append(Passage(len(out), label, text))

    def flush(label: str) -> None:
        if current:
            emit(label, "\n".join(current))
            current.clear()

    for page in doc.pages:
        for kind, block in _blocks(page.text):
            if kind == "table":
                flush(page.label)
                for part in block:
                    emit(page.label, part)
                continue
            pw = [w[i : i + MAX_WORD_CHARS] for w in block[0].split() for i in range(0, len(w), MAX_WORD_CHARS)]
            while len(pw) > words:  # a paragraph longer than a passage: cut it
                flush(page.label)
                emit(page.label, " ".join(pw[:words]))
                pw = pw[words:]
            if current and sum(len(c.split()) for c in current) + len(pw) > words:
                flush(page.label)
            if pw:
                current.append(" ".join(pw))
        flush(page.label)
    return out


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The page as ("para", [line]) and ("table", [passage texts]) in order."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("|"):
            out.append(("para", [lines[i]]))
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        head: list[str] = []
        while out and out[-1][0] == "para" and len(head) < HEAD_LINES and len(out[-1][1][0]) <= HEAD_CHARS:
            head.insert(0, out.pop()[1][0])
        out.append(("table", _table_parts(head, lines[i:j])))
        i = j
    return out


def _table_parts(head: list[str], rows: list[str]) -> list[str]:
    whole = "\n".join([*head, *rows])
    if len(whole) <= TABLE_CHARS:
        return [whole]
    n = 2 if len(rows) > 1 and set(rows[1].replace("|", "").strip()) <= set("-: ") else 1  # header, separator
    while n < min(len(rows), 6) and _empty_label(rows[n]):  # the label-less rows under it: the years, the dates
        n += 1
    lead = [*head, *rows[:n]]
    lead_size = sum(len(r) + 1 for r in lead)
    parts, current, size = [], list(lead), lead_size
    for row in rows[n:]:
        if len(current) > len(lead) and size + len(row) > TABLE_CHARS:
            parts.append("\n".join(current))
            current, size = list(lead), lead_size
        current.append(row)
        size += len(row) + 1
    parts.append("\n".join(current))
    return parts


def _empty_label(row: str) -> bool:
    cells = row.strip().strip("|").split("|")
    return not cells or not cells[0].strip()


class Index:
    """One document's passages, ready to rank: built once, used for every question or field."""

    def __init__(self, passages: Sequence[Passage], statements: dict[int, str] | None = None) -> None:
        import bm25s

        self.passages = list(passages)
        self.statements = statements or {}  # passage index -> "income", "balance" or "cash"
        self._retriever = None
        if self.passages:
            corpus = bm25s.tokenize([p.text for p in self.passages], stopwords="en", show_progress=False)
            if corpus.vocab:  # a text of no word to index (single digits, "1" rows): no index, document order
                self._retriever = bm25s.BM25()
                self._retriever.index(corpus, show_progress=False)

    @classmethod
    def of(cls, doc: Document, words: int = PASSAGE_WORDS) -> Index:
        parts = split(doc, words)
        return cls(parts, _statements(doc, parts))

    def rank(self, question: str, use: Use = Use()) -> list[int]:
        """Indexes of the passages, most relevant to ``question`` first: BM25 of the question's own words, plus
        ``EXTRA_WEIGHT`` x BM25 of the words ``use`` adds (synonyms, statement titles, a metric's inputs), each
        scaled to its best passage; ties keep document order."""
        n = len(self.passages)
        if self._retriever is None:  # no passage, or no word in any: document order
            return list(range(n))
        own = self._scores(question)
        extra = fw.expand(question, synonyms=use.synonyms, metrics=use.metrics)[len(question) :]
        more = self._scores(extra) if extra.strip() else None
        if own is None and more is None:  # nothing to match: document order
            return list(range(n))
        total = [0.0] * n
        for scores, weight in ((own, 1.0), (more, EXTRA_WEIGHT)):
            if scores is not None and (top := max(scores)) > 0:
                total = [t + weight * float(s) / top for t, s in zip(total, scores, strict=True)]
        return sorted(range(n), key=lambda i: (-total[i], i))

    def _scores(self, text: str) -> list[float] | None:
        import bm25s

        words = [
            w
            for w in bm25s.tokenize([text], stopwords="en", show_progress=False, return_ids=False)[0]
            if w in self._retriever.vocab_dict
        ]  # type: ignore[union-attr]
        return list(self._retriever.get_scores(words)) if words else None  # type: ignore[union-attr]

    def select(
        self, question: str, budget_tokens: int, count: Callable[[str], int], use: Use = Use(), label_tokens: int = 8
    ) -> list[Passage]:
        """The most relevant passages whose tokens (``count``, plus ``label_tokens`` each: the caller's label line
        and separator, measured on its longest) fit ``budget_tokens``, in document order; for a figure question
        the statements it needs first, within ``STATEMENT_SHARE``."""
        ranked = self.rank(question, use)
        chosen: dict[int, Passage] = {}
        used = 0
        if use.statements:
            kinds = fw.statements_for(question)
            where = {i: r for r, i in enumerate(ranked)}
            first = sorted(
                (i for i, k in self.statements.items() if k in kinds),
                key=lambda i: (kinds.index(self.statements[i]), where.get(i, 0)),
            )
            share = int(budget_tokens * STATEMENT_SHARE)
            for n, i in enumerate(first):
                cost = count(self.passages[i].text) + label_tokens
                # the first statement passage may take more of a small budget (a 2,048-token model's)
                if used + cost <= (max(share, int(budget_tokens * FIRST_STATEMENT_SHARE)) if n == 0 else share):
                    chosen[i] = self.passages[i]
                    used += cost
        for i in ranked:
            if budget_tokens - used <= label_tokens:  # not even a label line fits
                break
            if i in chosen:
                continue
            cost = count(self.passages[i].text) + label_tokens
            if used + cost > budget_tokens:
                continue
            chosen[i] = self.passages[i]
            used += cost
        return sorted(chosen.values(), key=lambda p: p.index)


def _statements(doc: Document, passages: Sequence[Passage]) -> dict[int, str]:
    """Passages that are a financial statement: every passage of a page whose first lines carry a statement's
    title (and that prints figures), or, in a document without pages, a table passage under such a title."""
    kinds: dict[str, str] = {}
    if len(doc.pages) > 1:
        for page in doc.pages:
            kind = fw.statement_of(page.text[:STATEMENT_HEAD_CHARS])
            if kind and len(_FIGURE.findall(page.text)) >= STATEMENT_MIN_FIGURES:
                kinds[page.label] = kind
    out: dict[int, str] = {}
    for p in passages:
        if p.label in kinds:
            out[p.index] = kinds[p.label]
        elif "\n|" in p.text and len(_FIGURE.findall(p.text)) >= STATEMENT_MIN_FIGURES:
            head = p.text[: p.text.find("\n|")]
            kind = fw.statement_of(head[-STATEMENT_HEAD_CHARS:])
            if kind:
                out[p.index] = kind
    return out


class _Indexes:
    """The index of each live document: built on first use, dropped with the document. Keyed by the object's
    identity, not its value: a Document's hash would read every page (and its XBRL facts hold dicts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, tuple[weakref.ref, Index]] = {}

    def _drop(self, key: int, ref: weakref.ref) -> None:
        with self._lock:
            if self._by_id.get(key, (None,))[0] is ref:
                del self._by_id[key]

    def get(self, doc: Document) -> Index:
        key = id(doc)
        with self._lock:
            ref, found = self._by_id.get(key, (None, None))
        if ref is None or ref() is not doc:
            found = Index.of(doc)
            with self._lock:
                ref, found = self._by_id.setdefault(key, (weakref.ref(doc, lambda r, k=key: self._drop(k, r)), found))
        return found


_INDEXES = _Indexes()


def index_of(doc: Document) -> Index:
    """The document's index, built once while the document object lives (every field of a Matrix's row)."""
    return _INDEXES.get(doc)


def rank(passages: Sequence[Passage], question: str) -> list[int]:
    """Indexes of ``passages``, most relevant to ``question`` first: plain BM25 over exactly these passages."""
    return Index(passages).rank(question, Use(synonyms=False, metrics=False, statements=False))


def select(
    passages: Sequence[Passage], question: str, budget_tokens: int, count: Callable[[str], int], use: Use = Use()
) -> list[Passage]:
    """The most relevant of ``passages`` that fit ``budget_tokens``, in document order (an index built for them
    alone: a caller with the document uses ``index_of(doc).select``, built once)."""
    return Index(passages).select(question, budget_tokens, count, use)
