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
import re
import sys
import tempfile
import uuid
from pathlib import Path
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any, Protocol

from finspace.documents import fit as fitting
from finspace.documents import placing
from finspace.documents.convert import Document, kind_of, short_name
from finspace.documents.gate import ConversionGate
from finspace.documents.limits import DocumentLimits
from finspace.documents.upload import convert_upload, remove_upload
from finspace.engine.api import EngineAPI
from finspace.engine.view import ServingView
from finspace.engine.prompt import ChatSettings, sampling_for, with_system
from finspace.errors import BadInput, NotReady
from finspace.tools import rendering as tool_prompt

V1_FOLDER = "finspace-v1"  # /v1's decoded files, inside the upload folder, deleted after conversion


MAX_ID_CHARS = 60
_ODD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclasses.dataclass(frozen=True)
class Attached:
    doc: Document
    tokens: int  # the whole document block, in the loaded model's tokens
    id: str = ""  # the short id the conversation knows it by (unique_id: its file name without the extension)

    def to_state(self) -> dict:
        return {"id": self.ident, "doc": self.doc.to_json(), "tokens": self.tokens}

    @property
    def ident(self) -> str:
        return self.id or unique_id(self.doc.name, ())

    @classmethod
    def from_state(cls, state: Any) -> Attached | None:
        if not isinstance(state, dict) or "doc" not in state:
            return None
        doc = Document.from_json(state["doc"])
        ident = state.get("id") if isinstance(state.get("id"), str) and state.get("id") else unique_id(doc.name, ())
        return cls(doc, int(state["tokens"]), ident[:MAX_ID_CHARS])

    def source(self) -> placing.Source:
        return placing.Source(self.ident, self.doc)


def unique_id(name: str, taken: Iterable[str] = ()) -> str:
    """The short id of a file called ``name`` (a conversation's documents, the filing tools' ``document``): its
    name without the extension ("aapl-10-k-2024-11-01"), spaces and odd characters made dashes, at most
    ``MAX_ID_CHARS``; "-2", "-3" ... added when ``taken`` (case folded: the model may write either) holds it."""
    stem = Path(str(name).replace("\\", "/")).name
    stem = stem.rsplit(".", 1)[0] if "." in stem.strip(".") else stem
    base = _ODD.sub("-", stem).strip("-.")[:MAX_ID_CHARS].strip("-.") or "document"
    used = {t.casefold() for t in taken}
    out, n = base, 1
    while out.casefold() in used:
        n += 1
        out = f"{base[: MAX_ID_CHARS - len(str(n)) - 1]}-{n}"
    return out


def attached_list(state: Any) -> list[Attached]:
    """The conversation's documents from the page's state: a list of ``to_state`` dicts (or one, as before)."""
    items = state if isinstance(state, list) else [state] if state is not None else []
    return [a for a in (Attached.from_state(x) for x in items) if a is not None]


def with_id(att: Attached, others: Any) -> Attached:
    """``att`` with an id none of ``others`` (Attached) has."""
    return dataclasses.replace(att, id=unique_id(att.doc.name, [o.ident for o in others]))


def upload_folder(settings: Any) -> str:
    """Gradio's upload folder (gradio.utils.get_upload_folder: GRADIO_TEMP_DIR, else <tmp>/gradio)."""
    return str(Path(settings.gradio_temp_dir or Path(tempfile.gettempdir()) / "gradio").resolve())


def count_tokens(tok: Any, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


class Answering(Protocol):
    """What a desk that answers from documents is given (the Companies desk, the Scoreboard's filings): the serving
    model's state, the documents desk, the settings, and the one way a question is answered (``Service``
    implements it; the desks hold this, never the engine)."""

    serving: ServingView
    documents: DocumentDesk
    settings: Any

    def answer(
        self, messages: Any, settings: ChatSettings, info: Any, *, calculator: str = "off", documents: Any = None
    ) -> AsyncGenerator[tuple[str, str], None]: ...


class DocumentDesk:
    """A conversation's documents (``Service.documents``): converted through the gate every conversion takes,
    measured and fitted in the serving model's tokens, placed in the prompt within its context. Its collaborators:
    the engine, the conversion gate, the documents' bounds and upload folder, the catalogue's rows (the fit table's
    other models) and a conversation's bound on documents."""

    def __init__(
        self,
        engine: EngineAPI,
        conversions: ConversionGate,
        limits: DocumentLimits,
        uploads: str,
        models: Callable[[], list[dict[str, Any]]],
        max_documents: int,
    ):
        self.engine, self.conversions, self.limits, self.uploads = engine, conversions, limits, uploads
        self.models, self.max_documents = models, max_documents

    def check_count(self, n: int) -> None:
        """BadInput past the conversation's bound on documents (the Matrix's: FINSPACE_MATRIX_MAX_DOCUMENTS, 20)."""
        limit = self.max_documents
        if n > limit:
            raise BadInput(f"{n} documents; a conversation holds at most {limit}: remove some, or ask about fewer")

    async def attach(self, path: str, name: str, client: str | None) -> Attached:
        """The upload at ``path`` (named ``name`` by the sender) converted and measured; the file is deleted.
        ``client``: the sender's address, for the bound on conversions at once (Service.conversions: 429 past it)."""
        if not self.engine.ready:
            raise NotReady(
                "no model is loaded yet; a document is measured in the loaded model's tokens: upload it "
                "again when the model is ready"
            )
        try:
            async with self.conversions.slot(client) as quick_s:
                doc = await convert_upload(path, name, self.limits, self.uploads, quick_s)
        finally:  # refused before converting (429): the upload goes all the same
            remove_upload(path, self.uploads)
        whole = placing.whole_block(doc)  # counted piece by piece: memory bounded by a piece, not by the document
        tokens = await self.engine.measure(lambda count: placing.count_upto(whole, sys.maxsize, count), size=len(whole))
        return Attached(doc, tokens)

    async def attach_bytes(self, name: Any, data: bytes, client: str | None) -> Attached:
        """A file sent inline (/v1's base64 file part): written into the upload folder, then ``attach``."""
        if not isinstance(name, str) or not Path(name).name.strip():
            raise BadInput(
                "a file part needs its filename (with the extension: .pdf, .html, .docx, .xlsx, .csv, .txt, .md)"
            )
        kind_of(name)
        limit = self.limits.max_bytes
        if len(data) > limit:
            raise BadInput(
                f"{short_name(name)} is {len(data) / (1 << 20):.1f} MiB; the limit is "
                f"{limit / (1 << 20):g} MiB per document"
            )
        folder = Path(self.uploads) / V1_FOLDER / uuid.uuid4().hex
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ("document" + Path(name).suffix.lower())
        path.write_bytes(data)
        return await self.attach(str(path), name, client)

    def reply_tokens(self, settings: ChatSettings | None = None) -> int:
        entry = self.engine.entry
        if entry is None:
            return 0
        return sampling_for(entry, settings or ChatSettings(), self.engine.max_model_len or 2)["max_tokens"]

    def fit_of(self, att: Attached | Any, settings: ChatSettings | None = None) -> fitting.Fit:
        """The fit of one document, or of several together (their tokens summed)."""
        entry = self.engine.entry
        atts = att if isinstance(att, (list, tuple)) else [att]
        return fitting.check(
            sum(a.tokens for a in atts),
            model_key=entry.key if entry else None,
            model_label=entry.label if entry else None,
            max_model_len=self.engine.max_model_len or 0,
            reply_tokens=self.reply_tokens(settings),
            models=self.models(),
        )

    async def prompt_tokens(self, messages: list[dict], settings: ChatSettings, tools: Any = None) -> int:
        """Tokens of everything that goes into the prompt besides the document: the system prompt, the tools' specs
        (``tools``, else the settings'), as the model's parser reads them, and the conversation with its tool calls
        and results. The chat template's own tokens are ``placing.TEMPLATE_ROOM_TOKENS``."""
        entry = self.engine.entry
        tools = list(tools if tools is not None else settings.tools or ())
        msgs = with_system(list(messages) or [{"role": "user", "content": ""}], entry, settings)
        if tools or any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs):
            msgs = tool_prompt.written(msgs, tools, getattr(entry, "tool_parser", None))
        texts = [m["content"] for m in msgs if isinstance(m.get("content"), str)]
        [used] = await self.engine.count_tokens(["\n".join(texts)])
        return used

    async def with_document(
        self,
        att: Attached | Any,
        messages: list[dict],
        settings: ChatSettings,
        tools: Any = None,
        reserve: int = 0,
        preamble: str = "",
    ) -> tuple[ChatSettings, str]:
        """``settings`` carrying the document, or several (a list of Attached): whole, or the passages for the last
        question that fit, ranked per document and labelled with its id and page; and the usage phrase ("document:
        12 of 40 pages (5 passages): aapl-10-k-2024-11-01 p. 31, 33"). ``tools``: the specs the chat will offer (the
        calculator's), counted with the rest of the prompt before the documents' budget is set, with room for a
        round of calls and ``reserve`` tokens more (a filing tool's result). ``preamble``: text before the
        documents' block (the filing tools' ids and outlines), counted first."""
        entry = self.engine.entry
        if entry is None:
            raise NotReady("no model is loaded; load one and ask again")
        atts = list(att) if isinstance(att, (list, tuple)) else [att]
        if not atts:
            return settings, None
        questions = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        question = questions[-1] if questions and isinstance(questions[-1], str) else ""
        used = await self.prompt_tokens(messages, settings, tools)
        if preamble:
            used += (await self.engine.count_tokens([preamble]))[0]
        calls = (placing.TOOL_ROUND_TOKENS if tools or settings.tools else 0) + reserve  # reserve: a tool result
        room = placing.budget(self.engine.max_model_len, self.reply_tokens(settings), used + calls)
        sources = [a.source() for a in atts]

        def prepared(count: Any) -> placing.Prepared:
            return placing.prepare_many(sources, question, room, count)

        out = await self.engine.measure(prepared, size=sum(len(a.doc.text) for a in atts))
        text = f"{preamble}\n\n{out.text}" if preamble else out.text
        return dataclasses.replace(settings, document=text), out.summary
