"""The chat box's attachment: a filing dropped on the input is converted, measured and shown as a fit table.

Pressing Enter (or Send) with a file attached runs ``attach`` first, inside the chat's own event: the upload
is converted (off the serving loop, time-bounded, deleted after: finspace.
documents), counted in the loaded model's tokens, and the table under the chat
says whether it fits the loaded model and which catalogue models would hold it.
With no question typed, nothing more runs; with one, the answer follows, from
the whole document or its most relevant passages. The document stays with the
conversation until Clear. A bad file is refused with its reason and no answer.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from finspace.documents import desk as docs
from finspace.documents import fit as fitting
from finspace.documents.convert import KINDS
from finspace.documents.upload import remove_upload
from finspace.errors import FinspaceError

if TYPE_CHECKING:
    from finspace.service import Service

FILE_TYPES = sorted(KINDS)  # the multimodal textbox offers these extensions


def takes_document(fn):
    """Mark an event function whose input may carry an uploaded file (finspace.wall.guard lets a FileData inside
    Gradio's upload folder through to these events only)."""
    fn.finspace_takes_document = True
    return fn


def message_text(message: Any) -> str:
    """The text of the multimodal textbox's value ({"text", "files"}), or of a plain string."""
    if isinstance(message, dict):
        return message.get("text") or ""
    return message if isinstance(message, str) else ""


def message_file(message: Any) -> str | None:
    files = message.get("files") if isinstance(message, dict) else None
    if not files:
        return None
    first = files[0]
    return first.get("path") if isinstance(first, dict) else first


def fit_view(svc: Service, atts: list, settings: Any = None) -> str:
    """The fit table of the conversation's documents together ("" when there are none); ``settings``: the chat's
    (its max tokens is the reply the table leaves room for)."""
    if not atts:
        return ""
    return fitting.table(svc.documents.fit_of(atts, settings), [(a.ident, a.doc, a.tokens) for a in atts])


def doc_list(atts: list) -> Any:
    """The conversation's documents by id, each checked: unchecking one removes it (``build_remove``)."""
    ids = [a.ident for a in atts]
    return gr.update(choices=ids, value=ids, visible=bool(ids))


def build_attach(svc: Service):
    """The attach step: the chat box's value (with one file) and the conversation's documents (``doc_state``)
    -> (the documents with the new one added under its own id, fit table), or None when the file is refused (a
    warning says why). A second filing joins the first; the upload is deleted whatever happens."""
    folder = docs.upload_folder(svc.settings)

    async def attach(
        message, client: str | None, doc_state: Any = None, settings: Any = None
    ) -> tuple[list, str] | None:
        """``settings``: the chat's (its max tokens is the reply the fit table leaves room for)."""
        files = message.get("files") or []
        have = docs.attached_list(doc_state)
        try:
            if len(files) > 1:
                raise FinspaceError("attach one document at a time")
            svc.documents.check_count(len(have) + 1)
            path = str(message_file(message))
            att = docs.with_id(await svc.documents.attach(path, Path(path).name, client), have)
        except FinspaceError as exc:
            gr.Warning(html.escape(svc.redact(str(exc))))
            return None
        finally:
            for f in files:  # whatever happened, no upload stays on the server
                remove_upload(f.get("path") if isinstance(f, dict) else str(f), folder)
        atts = [*have, att]
        return [a.to_state() for a in atts], fit_view(svc, atts, settings)

    return attach


def fit_table(svc: Service, doc_state: Any, settings: Any) -> str | None:
    """The fit table of the conversation's documents for these settings (None without any)."""
    atts = docs.attached_list(doc_state)
    return fit_view(svc, atts, settings) if atts else None


def build_remove(svc: Service):
    """The documents list's handler: the documents whose ids stay checked, and their fit table."""

    def remove(kept: Any, doc_state: Any):
        kept = set(kept) if isinstance(kept, list) else set()
        atts = [a for a in docs.attached_list(doc_state) if a.ident in kept]
        return ([a.to_state() for a in atts] or None), fit_view(svc, atts), doc_list(atts)

    return remove
