"""The document's place in the prompt: before the question, so a follow-up shares the prefix.

The document goes at the end of the system message (``ChatSettings.document``;
finspace.engine.prompt.with_system puts it there), ahead of every turn. A
follow-up question on the same document then starts with the same tokens as the
first one, and vLLM's prefix caching (on by default in vLLM 0.32 for the
catalogue's decoder models: finspace does not set ``enable_prefix_caching``, so
``EngineArgs`` takes ``model_config.is_prefix_caching_supported``) reuses their
KV blocks instead of computing the document again. A document that does not fit
is answered from its most relevant passages (finspace.documents.passages); the
passages are chosen per question, so that prefix changes with the question.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from finspace.documents import passages as psg
from finspace.documents.convert import Document

INSTRUCTION = (
    "Answer the user's questions from the document below. After each fact you use, cite where it is, "
    "as (page 7). If the document does not say, say so."
)
INSTRUCTION_MANY = (
    "Answer the user's questions from the documents below, each known by its id. After each fact "
    "you use, cite its document and page, as [{example} p. 7]. If the documents do not say, say "
    "so."
)
_PAGE_NO = re.compile(r"^page (\d+)")
TEMPLATE_ROOM_TOKENS = 64  # the chat template's own tokens around the messages
TOOL_ROUND_TOKENS = 128  # with tools offered: a round of calls and their results (the calculator's are ~60)


@dataclass(frozen=True)
class Prepared:
    text: str  # what goes after the system prompt
    whole: bool
    summary: str  # for the usage line: "document: 12 of 40 pages (5 passages)"


def whole_block(doc: Document) -> str:
    return f"{INSTRUCTION}\n\n<document name=\"{doc.name}\">\n{doc.text}\n</document>"


def passages_block(doc: Document, chosen: list[psg.Passage], total: int) -> str:
    body = "\n\n".join(f"[{p.label}]\n{p.text}" if p.label else p.text for p in chosen)
    return (
        f"{INSTRUCTION}\nThe document is too long for this model: below are the {len(chosen)} passages of "
        f"{total} most relevant to the question, in document order, each with its page.\n\n"
        f"<document name=\"{doc.name}\">\n{body}\n</document>"
    )


def pages_phrase(doc: Document, chosen: list[psg.Passage], total_passages: int) -> str:
    labels = [p.label for p in doc.pages if p.label]
    if not labels:
        return f"document: {len(chosen)} of {total_passages} passages"
    used = len({p.label for p in chosen})
    unit = "sheets" if doc.kind == "xlsx" else "pages"
    return f"document: {used} of {len(labels)} {unit} ({len(chosen)} passage{'s' if len(chosen) != 1 else ''})"


COUNT_PIECE_CHARS = 32_768  # a document is counted in pieces of this many characters (``count_upto``)


def prepare(doc: Document, question: str, budget_tokens: int, count: Callable[[str], int]) -> Prepared:
    """The whole document when its block fits ``budget_tokens`` (``count``: tokens of a text), else the most
    relevant passages to ``question`` that fit it, in document order."""
    whole = whole_block(doc)
    if count_upto(whole, budget_tokens, count) <= budget_tokens:
        n = len([p for p in doc.pages if p.label])
        return Prepared(whole, True, f"document: whole ({n} pages)" if n else "document: whole")
    index = psg.index_of(doc)  # built once per document object
    total = len(index.passages)
    head = count(passages_block(doc, [], total))
    longest = max((p.label for p in doc.pages), key=len, default="")
    label = max(8, count(f"\n\n[{longest}]\n"))  # each passage's label line, as long as the longest
    chosen = index.select(question, max(0, budget_tokens - head), count, label_tokens=label)
    return Prepared(passages_block(doc, chosen, total), False, pages_phrase(doc, chosen, total))


def count_upto(text: str, limit: int, count: Callable[[str], int]) -> int:
    """``text``'s tokens counted piece by piece, stopping once past ``limit``: the work and the memory are bounded
    by the budget, not by the document (1.2 MB of text that is one token a character took the app +250 MiB to
    count whole). The pieces count about what the whole would (a token or so more at each cut)."""
    if len(text) <= COUNT_PIECE_CHARS:
        return count(text)
    total = 0
    for start in range(0, len(text), COUNT_PIECE_CHARS):
        total += count(text[start : start + COUNT_PIECE_CHARS])
        if total > limit:
            break
    return total


def budget(max_model_len: int, reply_tokens: int, conversation_tokens: int) -> int:
    """Tokens left for the document block: the context less the reply, the conversation and the template."""
    return max(0, max_model_len - reply_tokens - conversation_tokens - TEMPLATE_ROOM_TOKENS)


@dataclass(frozen=True)
class Source:
    """A document of the conversation, known by its short id (its file name without the extension)."""

    id: str
    doc: Document


def _tag(src: Source) -> str:
    return f"<document id=\"{src.id}\" name=\"{src.doc.name}\">"


def _instruction(sources: Sequence[Source]) -> str:
    return INSTRUCTION_MANY.format(example=sources[0].id) if len(sources) > 1 else INSTRUCTION


def whole_blocks(sources: Sequence[Source]) -> str:
    """Every document whole, each in its tagged block (one document: ``whole_block``)."""
    if len(sources) == 1:
        return whole_block(sources[0].doc)
    return _instruction(sources) + "\n\n" + "\n\n".join(f"{_tag(s)}\n{s.doc.text}\n</document>" for s in sources)


def page_no(label: str) -> str:
    """ "31" for "page 31 (printed 29)"; a sheet's label as it is."""
    m = _PAGE_NO.match(label)
    return m.group(1) if m else label


def pages_named(chosen: Sequence[tuple[Source, Sequence[psg.Passage]]]) -> str:
    """ "aapl-10-k-2024-11-01 p. 31, 33; nvda-10-k-2025-02-26 p. 50": the pages each document gave."""
    out = []
    for src, passages in chosen:
        pages = list(dict.fromkeys(page_no(p.label) for p in passages if p.label))
        if pages:
            out.append(f"{src.id} p. {', '.join(pages)}")
        elif passages:
            out.append(f"{src.id} ({len(passages)} passages)")
    return "; ".join(out)


def prepare_many(sources: Sequence[Source], question: str, budget_tokens: int, count: Callable[[str], int]) -> Prepared:
    """Every document whole when they fit ``budget_tokens`` together, else the passages most relevant to
    ``question`` from each: the budget is shared evenly and what a document leaves passes on to the next; each
    passage is labelled with its document's id and page, so an answer's citation can name the document."""
    if len(sources) == 1:
        one = prepare(sources[0].doc, question, budget_tokens, count)
        if one.whole:
            return one
    whole = whole_blocks(sources)
    if len(sources) > 1 and count(whole) <= budget_tokens:
        return Prepared(whole, True, "documents: " + ", ".join(f"{s.id} whole" for s in sources))
    instruction = _instruction(sources)
    head = (
        count(passages_block(sources[0].doc, [], len(psg.index_of(sources[0].doc).passages)))
        if len(sources) == 1
        else count(
            f"{instruction}\nThe documents are too long for this model: below are the passages most relevant to the "
            f"question, in document order, each with its document and page.\n\n"
        )
    )
    left = max(0, budget_tokens - head)
    chosen: list[tuple[Source, list[psg.Passage]]] = []
    totals = 0
    for n, src in enumerate(sources):
        index = psg.index_of(src.doc)
        totals += len(index.passages)
        share = left // (len(sources) - n)  # an even share of what is left: a document's unused room passes on
        longest = max((p.label for p in src.doc.pages), key=len, default="")
        one = len(sources) == 1
        label = max(8, count(f"\n\n[{longest}]\n" if one else f"\n\n[{src.id}, {longest}]\n"))
        shell = 0 if one else count(f"{_tag(src)}\n\n</document>\n\n")
        picked = index.select(question, max(0, share - shell), count, label_tokens=label) if share > shell else []
        left -= (shell + sum(count(p.text) + label for p in picked)) if picked else 0
        chosen.append((src, picked))
    n_passages = sum(len(p) for _s, p in chosen)
    if len(sources) == 1:  # one document: its passages as before, labelled by page ("[page 7]")
        src, picked = chosen[0]
        return Prepared(
            passages_block(src.doc, picked, totals),
            False,
            pages_phrase(src.doc, picked, totals) + (f": {named}" if (named := pages_named(chosen)) else ""),
        )
    blocks = []
    for src, picked in chosen:
        if picked:
            body = "\n\n".join(
                f"[{src.id}, {p.label}]\n{p.text}" if p.label else f"[{src.id}]\n{p.text}" for p in picked
            )
            blocks.append(f"{_tag(src)}\n{body}\n</document>")
    pages_total = sum(len([p for p in s.doc.pages if p.label]) for s in sources)
    pages_used = sum(len({p.label for p in picked if p.label}) for _s, picked in chosen)
    text = (
        f"{instruction}\nThe documents are too long for this model: below are the {n_passages} passages of "
        f"{totals} most relevant to the question, in document order, each with its document and page.\n\n"
        + "\n\n".join(blocks)
    )
    word = "document" if len(sources) == 1 else "documents"
    named = pages_named(chosen)
    summary = f"{word}: {pages_used} of {pages_total} pages ({n_passages} passage{'s' if n_passages != 1 else ''})" + (
        f": {named}" if named else ""
    )
    return Prepared(text, False, summary)
