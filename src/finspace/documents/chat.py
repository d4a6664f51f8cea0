"""A document in a chat, the same for the three ways in (the page, the /chat API, /v1/chat/completions).

``attach`` converts an upload (finspace.documents.upload: child process, time
bound, deleted after) and counts it in the loaded model's tokens; ``fit_of``
checks it against the loaded model and the catalogue (``Service.models()``: the
planner's context for each model on this machine); ``with_document`` gives the
chat settings that carry it, whole when it fits the budget left by the reply
and the conversation, else the passages most relevant to the last question.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from finspace.documents import fit as fitting
from finspace.documents import prompt
from finspace.documents.convert import Document, kind_of, short_name
from finspace.documents.upload import convert_upload, remove_upload
from finspace.engine.prompt import ChatSettings, sampling_for, with_system
from finspace.errors import BadInput, NotReady

V1_FOLDER = "finspace-v1"  # /v1's decoded files, inside the upload folder, deleted after conversion


@dataclasses.dataclass(frozen=True)
class Attached:
    doc: Document
    tokens: int  # the whole document block, in the loaded model's tokens

    def to_state(self) -> dict:
        return {"doc": self.doc.to_json(), "tokens": self.tokens}

    @classmethod
    def from_state(cls, state: Any) -> Attached | None:
        if not isinstance(state, dict) or "doc" not in state:
            return None
        return cls(Document.from_json(state["doc"]), int(state["tokens"]))


def upload_folder(settings: Any) -> str:
    """Gradio's upload folder (gradio.utils.get_upload_folder: GRADIO_TEMP_DIR, else <tmp>/gradio)."""
    return str(Path(settings.gradio_temp_dir or Path(tempfile.gettempdir()) / "gradio").resolve())


def count_tokens(tok: Any, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


async def attach(svc: Any, path: str, name: str, client: str | None) -> Attached:
    """The upload at ``path`` (named ``name`` by the sender) converted and measured; the file is deleted.
    ``client``: the sender's address, for the bound on conversions at once (Service.conversions: 429 past it)."""
    if not svc.engine.ready:
        raise NotReady("no model is loaded yet; a document is measured in the loaded model's tokens: upload it "
                       "again when the model is ready")
    try:
        async with svc.conversions.slot(client):
            doc = await convert_upload(path, name, svc.settings.documents, upload_folder(svc.settings))
    finally:  # refused before converting (429): the upload goes all the same
        remove_upload(path, upload_folder(svc.settings))
    whole = prompt.whole_block(doc)  # counted piece by piece: memory bounded by a piece, not by the document
    tokens = await svc.engine.measure(lambda count: prompt.count_upto(whole, sys.maxsize, count), size=len(whole))
    return Attached(doc, tokens)


async def attach_bytes(svc: Any, name: Any, data: bytes, client: str | None) -> Attached:
    """A file sent inline (/v1's base64 file part): written into the upload folder, then ``attach``."""
    if not isinstance(name, str) or not Path(name).name.strip():
        raise BadInput("a file part needs its filename (with the extension: .pdf, .html, .docx, .xlsx, .csv, .txt, "
                       ".md)")
    kind_of(name)
    limit = svc.settings.documents.max_bytes
    if len(data) > limit:
        raise BadInput(f"{short_name(name)} is {len(data) / (1 << 20):.1f} MiB; the limit is "
                       f"{limit / (1 << 20):g} MiB per document")
    folder = Path(upload_folder(svc.settings)) / V1_FOLDER / uuid.uuid4().hex
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("document" + Path(name).suffix.lower())
    path.write_bytes(data)
    return await attach(svc, str(path), name, client)


def reply_tokens(svc: Any, settings: ChatSettings | None = None) -> int:
    entry = svc.engine.entry
    if entry is None:
        return 0
    return sampling_for(entry, settings or ChatSettings(), svc.engine.max_model_len or 2)["max_tokens"]


def fit_of(svc: Any, att: Attached, settings: ChatSettings | None = None) -> fitting.Fit:
    entry = svc.engine.entry
    return fitting.check(att.tokens, model_key=entry.key if entry else None, model_label=entry.label if entry else None,
                         max_model_len=svc.engine.max_model_len or 0, reply_tokens=reply_tokens(svc, settings),
                         models=svc.models())


async def with_document(svc: Any, att: Attached, messages: list[dict],
                        settings: ChatSettings) -> tuple[ChatSettings, str]:
    """``settings`` carrying the document (whole, or the passages for the last question that fit) and the usage
    phrase ("document: 12 of 40 pages (5 passages)")."""
    entry = svc.engine.entry
    if entry is None:
        raise NotReady("no model is loaded; load one and ask again")
    questions = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    question = questions[-1] if questions and isinstance(questions[-1], str) else ""
    texts = [m["content"] for m in with_system(list(messages) or [{"role": "user", "content": ""}], entry, settings)
             if isinstance(m.get("content"), str)]
    [used] = await svc.engine.count_tokens(["\n".join(texts)])
    room = prompt.budget(svc.engine.max_model_len, reply_tokens(svc, settings), used)

    def prepared(count: Any) -> prompt.Prepared:
        return prompt.prepare(att.doc, question, room, count)

    out = await svc.engine.measure(prepared, size=len(prompt.whole_block(att.doc)))
    return dataclasses.replace(settings, document=out.text), out.summary
