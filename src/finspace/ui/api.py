"""The named Gradio API: /chat and /chat_with_thinking (streaming), /load_model, /models, /health, /loads.

These are ``gr.api`` endpoints: no UI components, raw JSON in and out, typed by
the signatures below (kept free of ``from __future__ import annotations``:
Gradio reads the hints at run time). Inputs are validated here and by the
engine; every failure reaches the client as a ``gr.Error`` with an actionable
message, never a traceback.

    from gradio_client import Client
    c = Client("http://127.0.0.1:7860/")
    for reply_so_far in c.submit("What is EBITDA?", [], api_name="/chat"): ...   # the answer only
    c.predict("What was net income?", [], None, None, None, handle_file("10-K.pdf"), api_name="/chat")  # a document
    for part in c.submit("What is EBITDA?", [], api_name="/chat_with_thinking"): ...  # {"thinking", "answer"}
    c.predict("demo-qwen3", "", api_name="/load_model")
    c.predict(api_name="/models"); c.predict(api_name="/health"); c.predict(20, api_name="/loads")
    for progress in c.submit([handle_file("a.pdf"), handle_file("b.pdf")], "income-statement", api_name="/matrix"):
        ...  # {"done", "total", "state", "matrix"}: the last holds every cell's value, page, quote and check
"""

import asyncio
import contextlib
import logging
from typing import Any, AsyncIterator, Callable

import gradio as gr

from finspace.documents import desk as docs
from finspace.documents.upload import remove_upload
from finspace.engine.prompt import allowed_template_kwargs
from finspace.errors import BadInput, FinspaceError
from finspace.matrix.table import to_json
from finspace.service import ChatInfo, ChatSettings, Service
from finspace.ui.chat import coalesce_parts, interval_for
from finspace.ui.documents import takes_document

log = logging.getLogger("finspace.api")

CHAT_CONCURRENCY_ID = "chat"


def user_error(svc: Service, exc: BaseException) -> gr.Error:
    """The one translation from a domain error (or a surprise) to what a Gradio client sees."""
    if isinstance(exc, FinspaceError):
        return gr.Error(svc.redact(str(exc)), print_exception=False)
    log.error("unexpected %s in an API call", type(exc).__name__, exc_info=exc)
    return gr.Error(
        f"unexpected server error ({type(exc).__name__}); the request was dropped and the app is still running",
        print_exception=False,
    )


def chat_settings(system_prompt: Any, temperature: Any, max_tokens: Any, enable_thinking: Any = None) -> ChatSettings:
    """Type checks the engine can't do on None-able values; ranges are the engine's (clear BadInput)."""
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise BadInput(f"system_prompt must be text or null, got {type(system_prompt).__name__}")
    for name, value in (("temperature", temperature), ("max_tokens", max_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise BadInput(f"{name} must be a number or null, got {type(value).__name__}")
    if enable_thinking is not None and not isinstance(enable_thinking, bool):
        raise BadInput(f"enable_thinking must be true, false or null, got {type(enable_thinking).__name__}")
    kwargs = None if enable_thinking is None else {"enable_thinking": enable_thinking}
    return ChatSettings(
        system_prompt=system_prompt or None, temperature=temperature, max_tokens=max_tokens, chat_template_kwargs=kwargs
    )


def api_messages(message: Any, history: Any) -> list:
    if not isinstance(message, str):
        raise BadInput(f"message must be text, got {type(message).__name__}")
    if history is None:
        history = []
    if not isinstance(history, list):
        raise BadInput(f"history must be a list of {{'role', 'content'}} objects, got {type(history).__name__}")
    return [*history, {"role": "user", "content": message}]


async def stream_parts(
    svc: Service,
    messages: list,
    settings: ChatSettings,
    info: ChatInfo | None = None,
    calculator: str = "off",
    documents: Any = None,
) -> AsyncIterator[tuple[str, str]]:
    """The engine's reply as (thinking so far, answer so far), coalesced; counts the stream so intervals
    stretch under load. ``info`` is filled in by the engine (tokens, stop reason; the calculator's steps when
    ``calculator`` is "auto" or "always": Service.answer)."""
    svc.active_streams += 1
    info = info if info is not None else ChatInfo()
    try:
        async with contextlib.aclosing(
            svc.answer(messages, settings, info, calculator=calculator, documents=documents)
        ) as parts:
            async for pair in coalesce_parts(
                parts, lambda: interval_for(svc.active_streams, svc.settings.stream_interval_s)
            ):
                yield pair
    finally:
        svc.active_streams -= 1


async def stream_reply(
    svc: Service, messages: list, settings: ChatSettings, documents: Any = None
) -> AsyncIterator[str]:
    """The answer so far (a reasoning model's thinking left out), from ``documents`` (Attached) when given."""
    last = None
    async with contextlib.aclosing(stream_parts(svc, messages, settings, documents=documents)) as parts:
        async for _thinking, answer in parts:
            answer = answer.lstrip()
            if answer and answer != last:
                last = answer
                yield answer


async def attach_documents(svc: Service, document: Any, client: str | None = None) -> list:
    """The uploaded ``document`` (a gradio FileData: gradio_client's handle_file), or a list of them (several
    filings, each known by its file name without the extension), converted and measured (Attached); every upload
    is deleted whatever happens."""
    files = document if isinstance(document, list) else [document]
    paths = [d.get("path") if isinstance(d, dict) else None for d in files]
    if not files or not all(isinstance(p, str) for p in paths):
        raise BadInput("document must be a file sent with gradio_client's handle_file(...), a list of them, or null")
    atts: list = []
    try:
        svc.documents.check_count(len(files))
        for d, path in zip(files, paths):
            name = d.get("orig_name") if isinstance(d.get("orig_name"), str) else None
            atts.append(docs.with_id(await svc.documents.attach(path, name or path.rsplit("/", 1)[-1], client), atts))
    finally:
        for path in paths:
            remove_upload(path, docs.upload_folder(svc.settings))
    return atts


def matrix_files(documents: Any) -> list[tuple[str, str]]:
    """(path, name) of each handle_file(...) in ``documents``."""
    if not isinstance(documents, list) or not all(
        isinstance(d, dict) and isinstance(d.get("path"), str) for d in documents
    ):
        raise BadInput("documents must be a list of files sent with gradio_client's handle_file(...)")
    return [
        (d["path"], d["orig_name"] if isinstance(d.get("orig_name"), str) else d["path"].rsplit("/", 1)[-1])
        for d in documents
    ]


class Endpoints:
    """The named endpoints over one Service: each method is one ``gr.api`` endpoint, its signature and docstring
    the API's (Gradio reads them), every failure a ``gr.Error`` from user_error."""

    def __init__(self, svc: Service):
        self.svc = svc
        self.provenance = svc.provenance

    @takes_document
    async def chat(
        self,
        message: str,
        history: list[dict] | None = None,
        system_prompt: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        document: dict | list[dict] | None = None,
        request: gr.Request = None,
    ) -> str:
        """Stream a reply. history: earlier turns [{"role": "user"|"assistant", "content": str}];
        system_prompt/temperature/max_tokens: null for the model's defaults. document: a filing to answer from
        (handle_file("10-K.pdf"): PDF, HTML, DOCX, XLSX, CSV, TXT or MD), placed before the conversation, whole
        when it fits the model's context, else its most relevant passages with their pages. Yields the reply so far."""
        try:
            messages = api_messages(message, history)
            settings = chat_settings(system_prompt, temperature, max_tokens)
            atts = (
                await attach_documents(self.svc, document, self.svc.client_of(request))
                if document is not None
                else None
            )
            text = ""
            async for text in stream_reply(self.svc, messages, settings, atts):
                yield text
            if not text:
                yield ""
        except FinspaceError as exc:
            raise user_error(self.svc, exc) from None
        except Exception as exc:  # noqa: BLE001 - the boundary: never a traceback to the client
            raise user_error(self.svc, exc) from None

    chat.finspace_optional_inputs = (
        1  # the document: callers of the five-input /chat keep working (finspace.wall.guard)
    )

    async def chat_with_thinking(
        self,
        message: str,
        history: list[dict] | None = None,
        system_prompt: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        enable_thinking: bool | None = None,
    ) -> dict:
        """/chat with the thinking beside the answer: yields {"thinking": str, "answer": str} so far.
        enable_thinking: false asks a reasoning model (Qwen 3) to answer without thinking; null: the default.
        history holds answers only (send back "answer", never "thinking")."""
        try:
            messages = api_messages(message, history)
            entry = self.svc.serving.entry  # enable_thinking is a reasoning model's (Qwen 3) template variable
            thinks = entry is not None and allowed_template_kwargs(entry).get("enable_thinking") is bool
            settings = chat_settings(system_prompt, temperature, max_tokens, enable_thinking if thinks else None)
            out = {"thinking": "", "answer": ""}
            async for thinking, answer in stream_parts(self.svc, messages, settings):
                out = {"thinking": thinking.strip(), "answer": answer.lstrip()}
                yield out
            if not out["thinking"] and not out["answer"]:
                yield out
        except Exception as exc:  # noqa: BLE001 - the boundary: never a traceback to the client
            raise user_error(self.svc, exc) from None

    @takes_document
    async def matrix(
        self, documents: list[dict], fields: str | list[dict] = "income-statement", request: gr.Request = None
    ) -> dict:
        """The Filing Matrix: the same fields from several filings. documents: a list of handle_file(...) (PDF, HTML,
        DOCX, XLSX, CSV, TXT, MD); fields: a preset key from matrix.yaml (income-statement, balance-sheet, guidance,
        auditor, risk-factors) or a list of {"name", "type", "instruction"} (types: number, percent, money, date,
        text, list, yesno). Yields {"done", "total", "state", "matrix"} as cells finish; each cell of "matrix" has
        its value, page, verbatim quote and check (verified, not_on_page, value_not_in_quote, not_found, cut)."""
        try:
            files = matrix_files(documents)
            provenance = self.provenance()
            async for result in self.svc.matrix.fill(files, fields, self.svc.client_of(request), provenance):
                yield {"done": result.done, "total": result.total, "state": result.state, "matrix": to_json(result)}
        except Exception as exc:  # noqa: BLE001 - the boundary: never a traceback to the client
            raise user_error(self.svc, exc) from None

    async def load_model(self, model: str, admin_token: str | None = None, request: gr.Request = None) -> dict:
        """Switch to catalogue model `model` (a key from /models, never a repo id or path) and wait until it
        is ready. Needs admin_token when the Space sets FINSPACE_ADMIN_TOKEN. Returns /health."""
        try:
            self.svc.authorize(admin_token, client=self.svc.client_of(request))
            await self.svc.load(model)
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None
        return self.svc.health()[0]

    async def models(self) -> list[dict]:
        """The catalogue: each model's planner verdict for this hardware, max context, fixes, ledger mark."""
        try:
            return self.svc.models()
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None

    async def health(self) -> dict:
        """Status, model, engine state and stage, memory per GPU (or host RAM), uptime, version."""
        try:
            return self.svc.health()[0]
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None

    async def loads(self, limit: int = 50) -> list[dict]:
        """The last `limit` load records (planned vs actual KV tokens, errors) from the load ledger."""
        try:
            return await asyncio.to_thread(self.svc.loads, limit)  # file I/O off the serving loop
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None

    async def fit(
        self,
        repo: str | None = None,
        config_json: str | None = None,
        gpu: str | None = None,
        gpus: int | None = None,
        max_model_len: int | None = None,
        dtype: str | None = None,
        quantization: str | None = None,
        gpu_memory_utilization: float | None = None,
        tensor_parallel_size: int | None = None,
        pipeline_parallel_size: int | None = None,
        request: gr.Request = None,
    ) -> dict:
        """Will it fit? Any model before it is loaded: a catalogue key (as repo), a Hub repo id (OWNER/NAME) or its
        config.json as text, a GPU key (default: this machine's, else l40s) and count, and vLLM settings (null:
        vLLM's defaults).
        Returns fits, reason, max_model_len, the breakdown text, the ranked fixes, the plan's JSON, the sampler
        warm-up's verdict and, with gpus > 1, the cluster's layout (TP x PP x DP, KV tokens, concurrency).
        At most FINSPACE_FITS_PER_CLIENT checks at once per address, each answered within FINSPACE_FIT_TIMEOUT_S."""
        try:
            return await self.svc.fits.run(
                self.svc.client_of(request),
                config_json,
                repo,
                gpu,
                gpus,
                max_model_len=max_model_len,
                dtype=dtype,
                quantization=quantization,
                gpu_memory_utilization=gpu_memory_utilization,
                tensor_parallel_size=tensor_parallel_size,
                pipeline_parallel_size=pipeline_parallel_size,
            )
        except Exception as exc:  # noqa: BLE001
            raise user_error(self.svc, exc) from None


def register_api(svc: Service, *, chat_concurrency: int | None) -> None:
    """Add the named endpoints to the Blocks being built (call inside ``with gr.Blocks()``), in this order."""
    api = Endpoints(svc)
    endpoints: list[tuple[Callable, str, Any]] = [
        (api.chat, "chat", chat_concurrency),
        (api.chat_with_thinking, "chat_with_thinking", chat_concurrency),
        (api.load_model, "load_model", 4),
        (api.models, "models", None),
        (api.health, "health", None),
        (api.loads, "loads", None),
        (api.fit, "fit", 4),
        (api.matrix, "matrix", 4),
    ]
    for fn, name, limit in endpoints:
        gr.api(
            fn,
            api_name=name,
            concurrency_limit=limit,
            concurrency_id=CHAT_CONCURRENCY_ID if name.startswith("chat") else None,
        )
