"""A document too long for the context, answered from its most relevant passages.

``split`` cuts each page into passages of about ``PASSAGE_WORDS`` words (at
paragraph ends where it can), each keeping its page label. ``select`` ranks them
against the question with BM25 (bm25s: lexical, no embedding model, nothing to
download), takes the best that fit a token budget, and puts them back in
document order, so the model reads them as the document runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from finspace.documents.convert import Document

PASSAGE_WORDS = 160


@dataclass(frozen=True)
class Passage:
    index: int  # position in the document
    label: str  # the page it is on ("page 7"), "" when the document has no pages
    text: str


def split(doc: Document, words: int = PASSAGE_WORDS) -> list[Passage]:
    """The document's passages in order: paragraphs packed up to ``words`` words; a longer paragraph is cut."""
    out: list[Passage] = []
    for page in doc.pages:
        current: list[str] = []
        for para in (p for p in page.text.split("\n") if p.strip()):
            pw = para.split()
            while len(pw) > words:  # a paragraph longer than a passage: cut it
                if current:
                    out.append(Passage(len(out), page.label, "\n".join(current)))
                    current = []
                out.append(Passage(len(out), page.label, " ".join(pw[:words])))
                pw = pw[words:]
            if current and sum(len(c.split()) for c in current) + len(pw) > words:
                out.append(Passage(len(out), page.label, "\n".join(current)))
                current = []
            if pw:
                current.append(" ".join(pw))
        if current:
            out.append(Passage(len(out), page.label, "\n".join(current)))
    return out


def rank(passages: Sequence[Passage], question: str) -> list[int]:
    """Indexes of ``passages``, most relevant to ``question`` first (BM25; ties keep document order)."""
    import bm25s

    if not passages:
        return []
    corpus = bm25s.tokenize([p.text for p in passages], stopwords="en", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    query = bm25s.tokenize([question], stopwords="en", show_progress=False)
    if not any(len(q) for q in query.ids):  # nothing to match: document order
        return list(range(len(passages)))
    ids, scores = retriever.retrieve(query, k=len(passages), show_progress=False)
    order = sorted(range(len(passages)), key=lambda j: (-float(scores[0][j]), int(ids[0][j])))
    return [int(ids[0][j]) for j in order]


def select(passages: Sequence[Passage], question: str, budget_tokens: int,
           count: Callable[[str], int]) -> list[Passage]:
    """The most relevant passages whose tokens (``count``, plus a label line each) fit ``budget_tokens``,
    in document order."""
    chosen, used = [], 0
    for i in rank(passages, question):
        cost = count(passages[i].text) + 8
        if used + cost > budget_tokens:
            continue
        chosen.append(passages[i])
        used += cost
    return sorted(chosen, key=lambda p: p.index)
