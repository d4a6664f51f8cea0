"""One cell's prompt: the document first (so a document's cells share vLLM's prefix cache), the field last.

The system message holds the extraction rules and the document, numbered by page from 1 (a PDF's page 7 is
"[page 7]"; a sheet is "[page 2: sheet Income]"), so the page a cell cites is the index into the document's
pages. The user message names the field. When the whole document does not fit the loaded model's context,
the document block is the BM25 passages most relevant to that field's instruction, each with its page
(finspace.documents.passages: the document's index is built once, for all its fields), and those cells share
no prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from finspace.documents import passages as psg
from finspace.documents.convert import Document, Page
from finspace.matrix.fields import TYPE_HELP, MatrixField

RULES = (
    "You extract one field from the document below and reply with JSON only, with four keys:\n"
    "- found: true if the document states the field, else false;\n"
    "- quote: the sentence of the document that states it, copied character for character, or \"\";\n"
    "- page: the number of the page where that sentence is (the [page N] mark above it), or null;\n"
    "- value: the field's value taken from the quote, or null.\n"
    "Never guess: when the document does not state the field, reply found false, page null, quote \"\", value null."
)
TEMPLATE_ROOM_TOKENS = 64


@dataclass(frozen=True)
class CellPrompt:
    document: str  # after the rules in the system message (ChatSettings.document): the shared prefix
    user: dict[str, Any]  # the field's message
    whole: bool  # the whole document, or passages for this field


def page_mark(index: int, page: Page) -> str:
    """The mark a cell cites: "[page 23]", "[page 23 (printed 21)]" (a filing's printed number beside it), or
    "[page 2: sheet Income]" where the label is another name."""
    if page.label in ("", f"page {index}"):
        return f"[page {index}]"
    return f"[{page.label}]" if page.label.startswith(f"page {index} (") else f"[page {index}: {page.label}]"


def numbered(doc: Document) -> dict[int, str]:
    """The document's pages by the number a cell cites (1-based)."""
    return {i: p.text for i, p in enumerate(doc.pages, 1)}


def document_block(doc: Document, chosen: list[psg.Passage] | None = None) -> str:
    """The document (or the ``chosen`` passages) under page marks; it follows ``RULES`` in the system message."""
    if chosen is None:
        body = "\n\n".join(f"{page_mark(i, p)}\n{p.text}" for i, p in enumerate(doc.pages, 1))
        return f"<document name=\"{doc.name}\">\n{body}\n</document>"
    index = {p.label: i for i, p in enumerate(doc.pages, 1)}
    body = "\n\n".join(
        f"{page_mark(index.get(p.label, 1), doc.pages[index.get(p.label, 1) - 1])}\n{p.text}" for p in chosen
    )
    return (
        f"The document is too long for this model: below are the passages most relevant to the field, in "
        f"document order, each under its page mark.\n<document name=\"{doc.name}\">\n{body}\n</document>"
    )


def field_message(field: MatrixField) -> str:
    return (
        f"Field: {field.name}. Find in the document: {field.instruction}.\n"
        f"Copy the sentence of the document that states it as the quote, give the number of its page, and give "
        f"the value as {TYPE_HELP[field.type]}."
    )


def cell_prompt(
    doc: Document, field: MatrixField, budget_tokens: int, count: Callable[[str], int], whole_tokens: int | None = None
) -> CellPrompt:
    """One cell's document block and field message: the whole document when the rules, it and the field's message
    fit ``budget_tokens`` (``whole_tokens``: the block's and the longest field message's count, when known for
    this document), else the passages for the field's instruction that fit."""
    user = {"role": "user", "content": field_message(field)}
    whole = document_block(doc)
    fixed = count(RULES)
    if fixed + (whole_tokens if whole_tokens is not None else count(whole) + count(user["content"])) <= budget_tokens:
        return CellPrompt(whole, user, True)
    head = fixed + count(document_block(doc, [])) + count(user["content"])
    longest = max((page_mark(i, p) for i, p in enumerate(doc.pages, 1)), key=len, default="[page 1]")
    label = max(8, count(f"\n\n{longest}\n"))  # each passage's page mark, as long as the longest
    chosen = psg.index_of(doc).select(
        f"{field.name} {field.instruction}", max(0, budget_tokens - head), count, label_tokens=label
    )
    return CellPrompt(document_block(doc, chosen), user, False)


def budget(max_model_len: int, reply_tokens: int) -> int:
    """Tokens left for the document block in one cell's prompt."""
    return max(0, max_model_len - reply_tokens - TEMPLATE_ROOM_TOKENS)
