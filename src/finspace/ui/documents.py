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
from typing import Any

import gradio as gr

from finspace.documents import chat as docs
from finspace.documents import fit as fitting
from finspace.documents.convert import KINDS
from finspace.documents.upload import remove_upload
from finspace.errors import FinspaceError

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


def build_attach(svc: Any):
    """The attach step: the chat box's value (with one file) -> (document state, fit table), or None when the
    file is refused (a warning says why). The upload is deleted whatever happens."""
    folder = docs.upload_folder(svc.settings)

    async def attach(message, client: str | None, settings: Any = None) -> tuple[dict, str] | None:
        """``settings``: the chat's (its max tokens is the reply the fit table leaves room for)."""
        files = message.get("files") or []
        try:
            if len(files) > 1:
                raise FinspaceError("attach one document at a time")
            path = str(message_file(message))
            att = await docs.attach(svc, path, Path(path).name, client)
        except FinspaceError as exc:
            gr.Warning(html.escape(svc.redact(str(exc))))
            return None
        finally:
            for f in files:  # whatever happened, no upload stays on the server
                remove_upload(f.get("path") if isinstance(f, dict) else str(f), folder)
        return att.to_state(), fitting.table(docs.fit_of(svc, att, settings), att.doc)

    return attach


def fit_table(svc: Any, doc_state: Any, settings: Any) -> str | None:
    """The fit table of the conversation's document for these settings (None without one)."""
    att = docs.Attached.from_state(doc_state)
    return fitting.table(docs.fit_of(svc, att, settings), att.doc) if att is not None else None
