"""Will the document fit? Its size in the loaded model's tokens against the context, and who would hold it.

The document is counted with the loaded model's tokenizer (the engine's); other
models' tokenizers differ by a few percent, which ``SAFETY`` covers. The models
that would hold it come from the planner's views (``Service.models()``: each
catalogue model's planned max context on this machine), never a guess.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from finspace.documents.convert import Document
from finspace.documents.placing import TEMPLATE_ROOM_TOKENS

QUESTION_ROOM_TOKENS = 256  # a question and the system prompt beside the document
SAFETY = 1.1  # another model's tokenizer may need this many times the tokens


@dataclass(frozen=True)
class Holder:
    key: str
    label: str
    max_model_len: int


@dataclass(frozen=True)
class Fit:
    doc_tokens: int
    model_label: str | None
    max_model_len: int
    reply_tokens: int
    fits: bool
    holders: tuple[Holder, ...]

    @property
    def needed(self) -> int:
        return self.doc_tokens + QUESTION_ROOM_TOKENS + TEMPLATE_ROOM_TOKENS + self.reply_tokens


def check(
    doc_tokens: int,
    *,
    model_key: str | None,
    model_label: str | None,
    max_model_len: int,
    reply_tokens: int,
    models: Sequence[dict],
) -> Fit:
    """Whether ``doc_tokens`` fit the loaded model with room for a question and a ``reply_tokens`` reply, and
    the catalogue models (``Service.models()`` rows) whose planned context would hold it whole."""
    need = doc_tokens + QUESTION_ROOM_TOKENS + TEMPLATE_ROOM_TOKENS + reply_tokens
    holders = tuple(
        sorted(
            (
                Holder(m["key"], m["label"], int(m["max_model_len"]))
                for m in models
                if m.get("fits")
                and m.get("max_model_len")
                and m["key"] != model_key
                and int(m["max_model_len"]) >= need * SAFETY
            ),
            key=lambda h: (h.max_model_len, h.key),
        )
    )
    return Fit(
        doc_tokens, model_label, max_model_len, reply_tokens, bool(max_model_len) and need <= max_model_len, holders
    )


def table(fit: Fit, doc: Document | Sequence[tuple[str, Document, int]]) -> str:
    """The fit as Markdown for the page: the document (or each of several: (id, document, tokens), the fit
    covering them together), the loaded model's verdict, the models that hold it, and the two ways on when it
    does not fit."""
    named = list(doc) if not isinstance(doc, Document) else []
    model = html.escape(fit.model_label or "no model loaded")
    if isinstance(doc, Document):
        doc_rows = [_doc_row(None, doc, fit.doc_tokens, model)]
        notes = doc.notes
    else:
        doc_rows = [_doc_row(ident, d, tokens, model) for ident, d, tokens in named]
        notes = tuple(n for _i, d, _t in named for n in d.notes)
        if len(named) > 1:
            doc_rows.append(f"| **{len(named)} documents together** | {fit.doc_tokens:,} | |")
    verdict = "**fits**" if fit.fits else "**does not fit**"
    rows = [
        "| | tokens | |",
        "| --- | ---: | --- |",
        *doc_rows,
        f"| {model} | {fit.max_model_len:,} context | {verdict} with room for a question and a "
        f"{fit.reply_tokens:,}-token reply ({fit.needed:,} needed) |",
    ]
    for h in fit.holders:
        rows.append(
            f"| {html.escape(h.label)} (`{h.key}`) | {h.max_model_len:,} context | would hold it whole "
            "(planned for this machine) |"
        )
    out = "\n".join(rows)
    for note in notes:
        out += f"\n\n*{html.escape(note)}.*"
    if fit.fits:
        return out + "\n\nAsk away: the whole document goes to the model, before your question."
    ways = (
        "\n\n**Two ways on:** switch to a model that holds it whole ("
        + ", ".join(f"`{h.key}`" for h in fit.holders)
        + ", in the model picker), or ask now and the answer "
        "comes from the most relevant passages, with their pages."
        if fit.holders
        else "\n\nNo catalogue model holds it whole on this machine: ask now and the answer comes from the most "
        "relevant passages (BM25), with their pages."
    )
    return out + ways


def _doc_row(ident: str | None, doc: Document, tokens: int, model: str) -> str:
    pages = len([p for p in doc.pages if p.label])
    size = f"{pages} {'sheets' if doc.kind == 'xlsx' else 'pages'}, " if pages else ""
    name = html.escape(doc.name)
    first = f"`{html.escape(ident)}`: {name}" if ident else f"**{name}**"
    return f"| {first} ({size}{doc.kind.upper()}) | {tokens:,} | counted with {model}'s tokenizer |"
