"""One chat as a streamed ``/v1/chat/completions`` request to the endpoint, yielding (thinking, answer) deltas.

The request is checked by finspace first, with the same rules as the local engine (finspace.engine.prompt:
messages, sampling bounds against the endpoint's context, the chat-template variables the model takes), then
mapped: the system prompt and the document as the first message, ``temperature``/``top_p``/``max_tokens``/
``seed``/``stop``, ``json_schema`` as ``response_format`` (json_schema), ``chat_template_kwargs``, and Continue
as vLLM's ``continue_final_message: true, add_generation_prompt: false``. The thinking is the server's
``reasoning_content`` (``reasoning`` in newer vLLM), present when it runs with a reasoning parser. The usage
chunk (``stream_options.include_usage``) fills ChatInfo. Closing the generator closes the HTTP stream, which
aborts the request in vLLM. Every failure becomes a finspace error; a stream cut after text was written says
so (the caller keeps the partial text).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from finspace.engine.prompt import ChatSettings, check_template_kwargs, normalize_messages, sampling_for, with_system
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, Busy, EngineFailed, FinspaceError, ToolsRefused
from finspace.remote.endpoint import reason_for
from finspace.tools import rendering as tool_prompt

FailureFn = Callable[[str, int | None], Any]  # (reason, HTTP status or None): the engine notes the endpoint down


def request_for(model: str, entry: Any, max_len: int, messages: Any, settings: ChatSettings) -> dict:
    """The openai client's keyword arguments for this chat (BadInput for what finspace refuses)."""
    cont = settings.continue_final_message
    msgs = with_system(normalize_messages(messages, continue_final=cont), entry, settings)
    sp = sampling_for(entry, settings, max_len)
    kwargs = check_template_kwargs(entry, settings.chat_template_kwargs)
    extra: dict = {}
    if kwargs:
        extra["chat_template_kwargs"] = kwargs
    if cont:
        extra.update(continue_final_message=True, add_generation_prompt=False)
    req = {
        "model": model,
        "messages": [_wire(m) for m in msgs],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": sp["temperature"],
        "top_p": sp["top_p"],
        "max_tokens": sp["max_tokens"],
    }
    if sp["seed"] is not None:
        req["seed"] = sp["seed"]
    if settings.stop:
        req["stop"] = list(settings.stop)
    if settings.json_schema is not None:
        req["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": settings.json_schema, "strict": True},
        }
    if settings.tools:  # passed through: the endpoint's own tool parser reads its model's calls
        req["tools"] = list(settings.tools)
    if extra:
        req["extra_body"] = extra
    return req


def _wire(m: dict) -> dict:
    """A message as the API takes it: a call's arguments as JSON text (finspace holds them parsed)."""
    if not m.get("tool_calls"):
        return m
    calls = [
        {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
        for c in m["tool_calls"]
    ]
    return {**m, "tool_calls": calls}


async def stream(
    client: Any,
    host: str,
    req: dict,
    info: ChatInfo,
    model_key: str,
    on_failure: FailureFn,
    tool_parser: str = "hermes",
) -> AsyncGenerator[tuple[str, str], None]:
    """The endpoint's deltas as (thinking, answer); ``info`` filled from the chunks and the usage chunk.

    The openai client sends the request (its auth, timeouts and status errors); the stream's lines are read
    raw (``with_streaming_response``) and decoded with json: building the client's typed chunk objects took
    a third of a millisecond per token, CPU that vLLM needs on the same machine (bench/serving.py (e))."""
    import openai

    info.model_key = model_key
    raw: list[str] = []
    calls: dict[int, dict] = {}  # the endpoint's tool calls, by index, as their deltas add up
    written = False
    try:
        async with client.chat.completions.with_streaming_response.create(**req) as response:
            async for line in response.iter_lines():
                event = _event(line)
                if event is None:
                    continue
                if event is _DONE:
                    break
                for thinking, answer in _read(event, info, calls):
                    written = True
                    raw.append(answer)
                    yield thinking, answer
        if calls:  # written back as the model family's text: finspace reads every model's calls one way
            text = tool_prompt.written_calls(tool_parser, [calls[i] for i in sorted(calls)])
            raw.append(text)
            yield "", text
        if info.finish_reason is None:  # the stream ended without its last chunk: the server went away
            raise _translate(ConnectionError("the stream ended early"), host, on_failure, written)
    except openai.APIError as exc:
        error = _translate(exc, host, on_failure, written)
        if "tools" in req and not written and type(error) is BadInput and "tool" in str(error).lower():
            error = ToolsRefused(
                f"{error}. The calculator needs a server that takes tools: start vLLM with "
                "--enable-auto-tool-choice --tool-call-parser <the model's parser>"
            )
        raise error from None
    except FinspaceError:
        raise
    except Exception as exc:  # httpx errors that the stream lets through (a cut connection)
        if type(exc).__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore", "h11", "anyio"):
            raise
        raise _translate(exc, host, on_failure, written) from None
    finally:
        info.text = "".join(raw)


_DONE = object()


def _event(line: str) -> Any:
    """One SSE line: its JSON object, _DONE for the end, None for anything else (comments, blank lines)."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        event = json.loads(data)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _read(event: dict, info: ChatInfo, calls: dict | None = None) -> list[tuple[str, str]]:
    """A chunk's (thinking, answer) pairs; its usage and finish reason into ``info``; an error event raised."""
    if isinstance(event.get("error"), dict):  # vLLM reports a failure inside a started stream this way
        raise EngineFailed(f"the model server stopped this reply: {str(event['error'].get('message'))[:300]}")
    info.request_id = info.request_id or str(event.get("id") or "")
    usage = event.get("usage")
    if isinstance(usage, dict):
        info.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        info.output_tokens = int(usage.get("completion_tokens") or 0)
    out = []
    for choice in event.get("choices") or ():
        if choice.get("finish_reason"):
            info.finish_reason = choice["finish_reason"]
        thinking, answer = _parts(choice.get("delta"))
        if calls is not None:
            _add_calls(calls, choice.get("delta"))
        if thinking or answer:
            if info.first_token_at is None:
                info.first_token_at = time.monotonic()
            out.append((thinking, answer))
    return out


def _add_calls(calls: dict, delta: Any) -> None:
    """A delta's ``tool_calls`` pieces added to ``calls`` (index -> {"function": {"name", "arguments"}})."""
    pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
    for piece in pieces if isinstance(pieces, list) else ():
        fn = piece.get("function") if isinstance(piece, dict) else None
        if not isinstance(fn, dict) or not isinstance(piece.get("index", 0), int) or len(calls) > 16:
            continue
        c = calls.setdefault(piece.get("index", 0), {"function": {"name": "", "arguments": ""}})
        c["function"]["name"] += fn.get("name") if isinstance(fn.get("name"), str) else ""
        c["function"]["arguments"] += fn.get("arguments") if isinstance(fn.get("arguments"), str) else ""


def _parts(delta: Any) -> tuple[str, str]:
    """A delta's thinking (``reasoning_content``, or ``reasoning`` in newer vLLM) and answer text."""
    if not isinstance(delta, dict):
        return "", ""
    thinking = delta.get("reasoning_content") or delta.get("reasoning") or ""
    answer = delta.get("content") or ""
    return (thinking if isinstance(thinking, str) else ""), (answer if isinstance(answer, str) else "")


def _translate(exc: BaseException, host: str, on_failure: FailureFn, written: bool) -> FinspaceError:
    """The endpoint's failure as a finspace error; down-like failures also mark the endpoint (``on_failure``)."""
    import openai

    status = getattr(exc, "status_code", None) if isinstance(exc, openai.APIStatusError) else None
    if status is not None and status < 500 and status not in (401, 403, 408, 429):
        detail = _detail(exc)
        return BadInput(f"the model server refused this request ({status}){': ' + detail if detail else ''}")
    reason = reason_for(exc, host, status)
    if status == 429:
        return Busy(f"the model server is busy: {reason}; retry in a few seconds", retry_after_s=5)
    on_failure(reason, status)
    if written:
        return EngineFailed(
            f"the reply was cut off: {reason} mid-reply. The partial reply is kept above, "
            "incomplete; send it again when the model server is back (see /health)"
        )
    return EngineFailed(
        f"the model server is unreachable: {reason}; finspace retries it every few seconds (see /health)"
    )


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    msg = body.get("message") if isinstance(body, dict) else None
    if not isinstance(msg, str):
        msg = getattr(exc, "message", "") or ""
    return str(msg)[:300]
