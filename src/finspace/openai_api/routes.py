"""The OpenAI-compatible routes on finspace's FastAPI app: /v1/chat/completions and /v1/models.

Same engine, same bounds as Gradio's /chat, not through Gradio's queue. A request
is checked (``request.parse_chat``), its model compared with the loaded one, then
``Engine.chat`` is started and its first delta awaited before any byte is sent:
every refusal (busy, bad settings, no model) is an HTTP status with OpenAI's error
object. Streaming is server-sent events in OpenAI's chunk format ending with
``data: [DONE]``; an error after the stream began (a model switch) is one
``data: {"error": ...}`` event, as vLLM's server sends it, then ``[DONE]``. A
client that goes away closes the engine's stream, which aborts the vLLM request.

A document comes as an OpenAI file part in a user message, ``{"type": "file", "file": {"file_data":
"data:application/pdf;base64,...", "filename": "10-K.pdf"}}`` (one per request; file_id is not supported): it is
decoded into Gradio's upload folder, converted like the page's upload (finspace.documents) and placed before the
conversation, whole or as its most relevant passages. The body bound is the chat's (6 MiB), so a document sent
this way is at most about 4.5 MB; larger ones go through the page or /chat (gradio_client's handle_file).

Tools (``tools``, ``tool_choice``, ``parallel_tool_calls``; finspace.tools): checked with the request, offered
to models whose catalogue entry has a ``tool_parser`` (400 naming those that do, otherwise), a forced choice
made a JSON schema for structured outputs; the reply's calls are read by vLLM's parser (openai_api.toolcalls)
and sent as ``message.tool_calls`` / ``delta.tool_calls`` with ``finish_reason: "tool_calls"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from finspace.engine import ChatInfo
from finspace.errors import BadInput, Busy, FinspaceError, NotReady, http_headers
from finspace.documents import desk as docs
from finspace.wall.clients import bearer, request_client
from finspace.wall.leaving import unless_gone
from finspace.openai_api.request import ApiError, ChatRequest, error_body, parse_chat
from finspace.openai_api.toolcalls import joined, tool_deltas
from finspace.tools.calls import CallReader, forced_schema
from finspace.tools.spec import check_rounds
from finspace.structured.compiles import CompileGate

if TYPE_CHECKING:
    from finspace.service import Service

log = logging.getLogger("finspace.openai")

_FIELDS = ("temperature", "top_p", "max_tokens", "seed", "stop")
CHECK_THREADS = 4  # /v1 requests checked at once (each check bounded in work: finspace.structured.cost)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def api_error(svc: Service, exc: BaseException) -> ApiError:
    """The one translation of a domain error (or a surprise) at this boundary."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BadInput):  # OpenAI answers every invalid request with 400
        msg = svc.redact(str(exc))
        param = next((f for f in _FIELDS if msg.startswith(f)), None)
        return ApiError(400, msg, param=param, code="invalid_value")
    if isinstance(exc, Busy):
        return ApiError(429, str(exc), code="server_busy", headers=http_headers(exc))
    if isinstance(exc, FinspaceError):
        return ApiError(exc.http_status, svc.redact(str(exc)), headers=http_headers(exc) or None)
    log.error("unexpected %s in /v1", type(exc).__name__, exc_info=exc)
    return ApiError(500, f"unexpected server error ({type(exc).__name__}); the app is still running")


def error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(
        error_body(err.status, err.message, err.param, err.code), status_code=err.status, headers=err.headers or None
    )


def check_key(svc: Service, request: Request) -> None:
    """401 unless FINSPACE_API_KEYS is unset or the request carries one of them (constant-time compare)."""
    keys = svc.settings.api_keys
    if not keys:
        return
    client = request_client(request, svc.settings.limits.trusted_proxies)
    svc.check_throttle(client)
    if not svc.is_api_key(bearer(request)):
        svc.note_failure(client)
        raise ApiError(
            401,
            "this /v1 API needs an API key: send 'Authorization: Bearer <key>' with one of the "
            "server's FINSPACE_API_KEYS",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )


def check_model(svc: Service, model: str) -> str:
    """The loaded model's key when ``model`` names it; 404 naming the loaded model and how to switch, else."""
    h = svc.serving.health()
    if h.model_key is None or h.state != "ready":
        raise NotReady(
            f"no model is ready ({h.state}{', loading ' + h.loading_key if h.loading_key else ''}); "
            "try again when GET /health says ready"
        )
    if model != h.model_key:
        raise ApiError(
            404,
            f"the model {model[:80]!r} is not loaded; this server runs {h.model_key!r} (GET "
            f"/v1/models). Send model={h.model_key!r}, or switch models with POST /load-model "
            "{\"model\": KEY} (the admin token when one is set) or the page's model picker",
            param="model",
            code="model_not_found",
        )
    return h.model_key


class _ClosingStream(StreamingResponse):
    """A StreamingResponse that always closes its body generator, at once, when it stops: a client that went
    away ends the engine's stream (and its vLLM request) now, not when the garbage collector gets to it."""

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            with contextlib.suppress(Exception):
                await self.body_iterator.aclose()


def add_openai_routes(app: FastAPI, svc: Service) -> None:
    """Register /v1/chat/completions and /v1/models on ``app`` (before the Gradio mount at "/")."""
    compiles = CompileGate()  # a client's new response_format schemas compiling at once (finspace.structured)
    checks = anyio.CapacityLimiter(CHECK_THREADS)  # requests being checked at once, in worker threads

    @app.get("/v1/models", summary="OpenAI-compatible: the loaded model")
    async def list_models(request: Request):
        try:
            check_key(svc, request)
        except Exception as exc:  # noqa: BLE001 - the boundary
            return error_response(api_error(svc, exc))
        h = svc.serving.health()
        since = int(h.loaded_since or svc.started_at)
        data = (
            [
                {
                    "id": h.model_key,
                    "object": "model",
                    "created": since,
                    "owned_by": "finspace",
                    "root": h.model_key,
                    "max_model_len": svc.serving.max_model_len or None,
                }
            ]
            if h.model_key
            else []
        )
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", summary="OpenAI-compatible chat completions (streaming or not)")
    async def chat_completions(request: Request):
        try:
            check_key(svc, request)
            raw = await request.body()
            # the checks walk caller-controlled structure (a schema, tools): bounded in work (structured.cost),
            # and off the event loop, a few at a time, so no request's check holds the other routes
            req, key = await anyio.to_thread.run_sync(_checked, svc, raw, limiter=checks)
            atts: list = []
            if req.files:  # documents: converted like the page's, placed before the conversation
                svc.documents.check_count(len(req.files))
                for name, data in req.files:
                    atts.append(
                        docs.with_id(await svc.documents.attach_bytes(name, data, svc.client_of(request)), atts)
                    )
                settings, _ = await svc.with_document(atts, req.messages, req.settings)
                req = dataclasses.replace(req, settings=settings, files=())
            hold = compiles.hold(svc.client_of(request), req.settings.json_schema)
            return await _until_disconnect(request, _start(svc, req, key, hold, atts))
        except Exception as exc:  # noqa: BLE001 - the boundary: OpenAI's error object, never a traceback
            return error_response(api_error(svc, exc))

    @app.api_route("/v1/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
    async def not_offered(rest: str):
        return error_response(
            ApiError(
                404,
                f"/v1/{rest[:60]} is not offered here; finspace serves POST /v1/chat/completions and GET /v1/models",
                code="unknown_url",
            )
        )


def _checked(svc: Service, raw: bytes) -> tuple[ChatRequest, str]:
    """The request read and checked (JSON, fields, schema, tools) and the model's key: run in a worker thread."""
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "the body is not valid JSON; send a chat-completions object", code="invalid_json") from None
    req = parse_chat(body)
    key = check_model(svc, req.model)
    return with_tools(svc, req), key


def with_tools(svc: Service, req: ChatRequest) -> ChatRequest:
    """The request with its tools in the settings (and, for a forced choice, the schema of the call): 400 for a
    model without a tool parser, naming the ones that have one, and for too many tool rounds in a row."""
    try:
        check_rounds(req.messages)
    except BadInput as exc:
        raise ApiError(400, str(exc), param="messages", code="invalid_value") from None
    if req.tools is None:
        return req
    entry = svc.serving.entry
    if svc.serving.tool_parser is None:
        having = [e.key for e in svc.catalog.entries if e.tool_parser]
        raise ApiError(
            400,
            f"tools: the model {getattr(entry, 'key', req.model)!r} has no tool parser (the "
            f"catalogue's tool_parser field), so its calls could not be read; models that call "
            f"tools: {', '.join(having)}",
            param="tools",
            code="tools_not_supported",
        )
    if req.tools.choice == "none":  # the functions are not offered: a plain reply
        return dataclasses.replace(req, tools=None)
    schema = req.settings.json_schema
    if req.tools.forced:
        if schema is not None:
            raise ApiError(
                400,
                "response_format: a forced tool_choice (required or a named function) already "
                "decides the reply's JSON; send one of them",
                param="response_format",
            )
        try:
            schema = forced_schema(req.tools)
        except BadInput as exc:
            raise ApiError(400, str(exc), param="tools", code="invalid_value") from None
    settings = dataclasses.replace(req.settings, tools=req.tools.specs, json_schema=schema)
    return dataclasses.replace(req, settings=settings)


async def _until_disconnect(request: Request, work):
    """``work``'s result; cancelled (which closes the engine's stream: an abort) if the client goes away first,
    as vLLM's server does. A streaming response is returned as soon as its first delta is there."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    finished, value = await unless_gone(work, gone())
    if not finished:
        log.info("a /v1 client went away before its reply was ready; the request was aborted")
        return Response(status_code=499)  # nobody reads it
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


async def _openai_deltas(parts) -> AsyncIterator[dict]:
    """The engine's (thinking, answer) pieces as OpenAI deltas: reasoning_content, then content."""
    async with contextlib.aclosing(parts):
        async for thinking, answer in parts:
            if thinking:
                yield {"reasoning_content": thinking}
            if answer:
                yield {"content": answer}


async def _start(
    svc: Service, req: ChatRequest, key: str, hold: contextlib.AbstractContextManager, atts: list | None = None
):
    """The reply (or its stream) once its first delta is there; ``hold``: the request's compile slot, held until
    then (its schema is compiled once the first token comes). ``atts``: the request's documents: the answer's
    figures are checked against the pages they cite, in the extension field ``finspace_checks`` of the choice
    (beside the message; the finish chunk's when streaming), which a plain OpenAI client ignores."""
    info = ChatInfo()
    entry = svc.serving.entry
    reasoning_model = bool(entry is not None and getattr(entry, "reasoning", None))
    # the thinking is split off by the engine with vLLM's reasoning parser (engine/reasoning.py)
    with hold as compile_slot:
        parts = svc.generate(req.messages, req.settings, info)
        reader = None
        if req.settings.tools:  # the calls are read from the answer by vLLM's tool parser (tools/calls.py)
            reader = svc.call_reader(req.tools)
            deltas = tool_deltas(parts, reader)
        else:
            deltas = _openai_deltas(parts)
        try:
            first = await anext(deltas)  # refusals (busy, bad settings) come before any byte is sent
        except StopAsyncIteration:
            first = None
        except BaseException:
            await deltas.aclose()
            raise
        compile_slot.compiled()
    meta = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": key}
    if req.stream:
        body = _sse(svc, deltas, first, info, meta, req.include_usage, reader, atts)
        return _ClosingStream(body, media_type="text/event-stream", headers=SSE_HEADERS)
    async with contextlib.aclosing(deltas):
        pieces = [first] if first else []
        pieces += [d async for d in deltas]
    message = joined(pieces)
    if not reasoning_model:
        message.pop("reasoning_content")
    checks = {"finspace_checks": (await svc.check_answer(message.get("content") or "", atts))["checks"]} if atts else {}
    return {
        "object": "chat.completion",
        **meta,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(info, reader), **checks}
        ],
        "usage": _usage(info),
    }


def _finish(info: ChatInfo, reader: CallReader | None) -> str:
    """OpenAI's finish reason: tool_calls when the reply is calls, else the engine's. A forced reply cut by
    max_tokens says "length" with the calls it holds (a named call's arguments as written, the calls of
    ``required`` that completed), as vLLM's own server does."""
    if reader is not None and reader.calls and not (reader.req.forced and info.finish_reason == "length"):
        return "tool_calls"
    return info.finish_reason or "stop"


def _usage(info: ChatInfo) -> dict:
    return {
        "prompt_tokens": info.prompt_tokens,
        "completion_tokens": info.output_tokens,
        "total_tokens": info.prompt_tokens + info.output_tokens,
    }


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def _sse(
    svc: Service,
    deltas: AsyncIterator[dict],
    first: dict | None,
    info: ChatInfo,
    meta: dict,
    include_usage: bool,
    reader: CallReader | None = None,
    atts: list | None = None,
) -> AsyncIterator[bytes]:
    """The chunks: the role, each delta (split into reasoning and content for a reasoning model), the finish
    reason, the usage when asked, [DONE]. Closing this generator closes the engine's stream (an abort)."""
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict, finish: str | None = None, more: dict | None = None) -> bytes:
        return _event(
            {
                "object": "chat.completion.chunk",
                **meta,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **(more or {})}],
                **extra,
            }
        )

    svc.active_streams += 1
    try:
        yield chunk({"role": "assistant", "content": ""})
        text = []
        async with contextlib.aclosing(deltas):
            delta = first
            while delta is not None:
                yield chunk(delta)
                text.append(delta.get("content") or "")
                delta = await anext(deltas, None)
        checks = {"finspace_checks": (await svc.check_answer("".join(text), atts))["checks"]} if atts else None
        yield chunk({}, _finish(info, reader), checks)
        if include_usage:
            yield _event({"object": "chat.completion.chunk", **meta, "choices": [], "usage": _usage(info)})
    except Exception as exc:  # noqa: BLE001 - after the stream began: one error event, as vLLM's server sends it
        err = api_error(svc, exc)
        yield _event(error_body(err.status, err.message, err.param, err.code or type(exc).__name__))
    finally:
        svc.active_streams -= 1
    yield b"data: [DONE]\n\n"
