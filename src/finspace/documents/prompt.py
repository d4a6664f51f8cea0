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

from collections.abc import Callable
from dataclasses import dataclass

from finspace.documents import passages as psg
from finspace.documents.convert import Document

INSTRUCTION = ("Answer the user's questions from the document below. After each fact you use, cite where it is, "
               "as (page 7). If the document does not say, say so.")
TEMPLATE_ROOM_TOKENS = 64  # the chat template's own tokens around the messages


@dataclass(frozen=True)
class Prepared:
    text: str  # what goes after the system prompt
    whole: bool
    summary: str  # for the usage line: "document: 12 of 40 pages (5 passages)"


def whole_block(doc: Document) -> str:
    return f"{INSTRUCTION}\n\n<document name=\"{doc.name}\">\n{doc.text}\n</document>"


def passages_block(doc: Document, chosen: list[psg.Passage], total: int) -> str:
    body = "\n\n".join(f"[{p.label}]\n{p.text}" if p.label else p.text for p in chosen)
    return (f"{INSTRUCTION}\nThe document is too long for this model: below are the {len(chosen)} passages of "
            f"{total} most relevant to the question, in document order, each with its page.\n\n"
            f"<document name=\"{doc.name}\">\n{body}\n</document>")


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
        total += count(text[start:start + COUNT_PIECE_CHARS])
        if total > limit:
            break
    return total


def budget(max_model_len: int, reply_tokens: int, conversation_tokens: int) -> int:
    """Tokens left for the document block: the context less the reply, the conversation and the template."""
    return max(0, max_model_len - reply_tokens - conversation_tokens - TEMPLATE_ROOM_TOKENS)
