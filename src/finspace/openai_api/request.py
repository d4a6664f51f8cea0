"""An OpenAI chat-completions request, checked: what finspace serves, and a 400 naming the field for the rest.

Pure: a JSON object in, a ``ChatRequest`` out (or ``ApiError``). The messages and
sampling bounds are the engine's own (``finspace.engine.prompt``), the same ones
Gradio's /chat goes through; nothing a client sends is silently ignored: a field
finspace does not implement (n > 1, logprobs, images...) is refused by name. Tools are checked by
``finspace.tools.spec``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from finspace.engine.prompt import SERVER_SET, ChatSettings, normalize_messages
from finspace.errors import BadInput
from finspace.structured import response_format_schema
from finspace.tools.spec import ToolRequest, parse_tools

MAX_STOP = 4  # OpenAI's bound on "stop" sequences
MAX_STOP_CHARS = 200
MAX_TEMPLATE_KWARGS = 16

# Fields accepted only with the value that means "the default": anything else is a feature finspace lacks.
_DEFAULT_ONLY: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "functions": (None, []),
    "function_call": (None, "none"),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "store": (None, False),
    "modalities": (None, ["text"]),
    "prediction": (None,),
    "audio": (None,),
    "web_search_options": (None,),
    "service_tier": (None, "auto", "default"),
    "reasoning_effort": (None,),
    "metadata": (None, {}),
}
_WHY = {
    "n": "finspace returns one choice per request; send n=1 or leave it out",
    "functions": "the legacy functions field is not supported; send the same functions as \"tools\"",
    "function_call": "the legacy function_call field is not supported; use \"tool_choice\"",
    "logprobs": "finspace does not return log probabilities",
    "top_logprobs": "finspace does not return log probabilities",
}
_KNOWN = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "chat_template_kwargs",
    "user",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    *_DEFAULT_ONLY,
}
_MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id"}


class ApiError(Exception):
    """An OpenAI-shaped error: HTTP ``status``, ``message``, the offending ``param`` and a ``code``."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


def error_type(status: int) -> str:
    return {
        401: "authentication_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "invalid_request_error" if status < 500 else "server_error")


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict]
    settings: ChatSettings
    stream: bool
    include_usage: bool
    files: tuple[tuple[str, bytes], ...] = ()  # documents sent as file parts: (filename, bytes) each
    tools: ToolRequest | None = None  # the functions the model may call (finspace.tools.spec)


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}", param=param, code="invalid_value")


def _number(body: dict, name: str, integer: bool = False) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (integer and isinstance(value, float) and not value.is_integer())
    ):
        raise bad(name, f"must be {'a whole number' if integer else 'a number'} or null, got {type(value).__name__}")
    return int(value) if integer else value


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise bad("stop", "must be a non-empty string or a list of them")
    if len(stops) > MAX_STOP or any(len(s) > MAX_STOP_CHARS for s in stops):
        raise bad("stop", f"at most {MAX_STOP} sequences of at most {MAX_STOP_CHARS} characters")
    return tuple(stops)


def _template_kwargs(value: Any) -> dict | None:
    """Shape only: the names a model's template takes are checked against the catalogue by the engine
    (``prompt.check_template_kwargs``: 400 naming the allowed ones). A template is never taken from a caller."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) > MAX_TEMPLATE_KWARGS:
        raise bad("chat_template_kwargs", f"must be an object of at most {MAX_TEMPLATE_KWARGS} entries")
    for k, v in value.items():
        if k in SERVER_SET:
            raise bad(
                "chat_template_kwargs",
                f"{k!r} is set by the server and cannot be overridden; finspace uses the model's own chat template",
            )
        if not (isinstance(v, (bool, int, float)) or v is None or (isinstance(v, str) and len(v) <= 1000)):
            raise bad("chat_template_kwargs", f"{str(k)[:40]!r} must be a boolean, number, short text or null")
    return dict(value)


def _file(i: int, value: Any) -> tuple[str, bytes]:
    """An OpenAI file part's ``file`` object: {"file_data": "data:<type>;base64,<data>", "filename": "x.pdf"}."""
    if not isinstance(value, dict) or "file_id" in value:
        raise bad(
            "messages",
            f"message {i}: a file part is {{\"type\": \"file\", \"file\": {{\"file_data\": "
            "\"data:application/pdf;base64,...\", \"filename\": \"10-K.pdf\"}}; file_id is not supported",
        )
    data, name = value.get("file_data"), value.get("filename")
    if not isinstance(data, str) or not data.startswith("data:") or ";base64," not in data[:200]:
        raise bad(
            "messages",
            f"message {i}: file_data must be a data: URL with base64 content (data:application/pdf;base64,...)",
        )
    if not isinstance(name, str) or not name.strip():
        raise bad("messages", f"message {i}: a file part needs its filename, with the extension (.pdf, .html, ...)")
    try:
        return name, base64.b64decode(data.split(";base64,", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        raise bad("messages", f"message {i}: file_data is not valid base64") from None


def _file_parts(messages: list) -> tuple[list, tuple[tuple[str, bytes], ...]]:
    """The messages without their file parts (in user messages) and those files, in order: several filings in
    one conversation, each known by its file name without the extension."""
    found, out = [], []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "file" for p in content):
            if m.get("role") != "user":
                raise bad("messages", f"message {i}: documents go in a user message")
            found += [_file(i, p.get("file")) for p in content if isinstance(p, dict) and p.get("type") == "file"]
            m = {**m, "content": [p for p in content if not (isinstance(p, dict) and p.get("type") == "file")]}
        out.append(m)
    return out, tuple(found)


def _messages(value: Any) -> tuple[list[dict], tuple[tuple[str, bytes], ...]]:
    if not isinstance(value, list):
        raise bad("messages", "must be a list of {\"role\", \"content\"} objects")
    value, file = _file_parts(value)
    out = []
    for i, m in enumerate(value):
        if isinstance(m, dict):
            extra = sorted(set(m) - _MESSAGE_KEYS)
            if extra:
                raise bad(
                    "messages",
                    f"message {i} has {extra[0][:40]!r}; finspace takes role, content (text), "
                    "name, tool_calls and tool_call_id (no audio or refusals)",
                )
            if "tool_calls" in m and m.get("role") != "assistant" or "tool_call_id" in m and m.get("role") != "tool":
                raise bad(
                    "messages",
                    f"message {i}: tool_calls belong to an assistant message and tool_call_id "
                    "to a role \"tool\" message",
                )
            if m.get("role") == "developer":  # OpenAI's newer name for the system role
                m = {**m, "role": "system"}
            m = {k: v for k, v in m.items() if k != "name"}
        out.append(m)
    try:
        messages = normalize_messages(out)
    except BadInput as exc:
        raise bad("messages", str(exc)) from None
    for i, m in enumerate(out):  # as OpenAI: a tool's result names the call it answers
        call_id = m.get("tool_call_id")
        if m.get("role") == "tool" and not (isinstance(call_id, str) and call_id.strip()):
            raise bad(
                "messages",
                f"message {i}: a role \"tool\" message needs its tool_call_id, the id of the "
                "assistant's call it answers (tool_calls[].id)",
            )
    return messages, file


def _response_format(value: Any) -> dict | None:
    """The JSON schema the answer must follow (finspace.structured), or None for text."""
    try:
        return response_format_schema(value)
    except BadInput as exc:
        raise bad("response_format", str(exc)) from None


def _stream_options(value: Any, stream: bool) -> bool:
    if value is None:
        return False
    if not stream:
        raise bad("stream_options", "only allowed with stream: true")
    if not isinstance(value, dict) or set(value) - {"include_usage"}:
        raise bad("stream_options", "only {\"include_usage\": true|false} is supported")
    include = value.get("include_usage", False)
    if not isinstance(include, bool):
        raise bad("stream_options", "include_usage must be true or false")
    return include


def parse_chat(body: Any) -> ChatRequest:
    """``body`` (parsed JSON) as a ChatRequest, or ApiError(400) naming the first bad or unsupported field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object with \"model\" and \"messages\"", code="invalid_body")
    for name in sorted(body):
        if name not in _KNOWN:
            raise bad(name[:60], "is not a chat-completions field finspace supports; remove it")
        if name in _DEFAULT_ONLY and body[name] not in _DEFAULT_ONLY[name]:
            raise bad(name, _WHY.get(name, "is not supported by finspace; leave it out or send its default"))
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "is required: a model id from GET /v1/models")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise bad("stream", "must be true or false")
    if "user" in body and body["user"] is not None and not isinstance(body["user"], str):
        raise bad("user", "must be text")
    json_schema = _response_format(body.get("response_format"))
    mt, mct = _number(body, "max_tokens", integer=True), _number(body, "max_completion_tokens", integer=True)
    if mt is not None and mct is not None and mt != mct:
        raise bad("max_completion_tokens", "differs from max_tokens; send one of them")
    settings = ChatSettings(
        temperature=_number(body, "temperature"),
        top_p=_number(body, "top_p"),
        max_tokens=mct if mct is not None else mt,
        seed=_number(body, "seed", integer=True),
        stop=_stop(body.get("stop")),
        chat_template_kwargs=_template_kwargs(body.get("chat_template_kwargs")),
        json_schema=json_schema,
    )
    messages, file = _messages(body.get("messages"))
    return ChatRequest(
        model=model,
        messages=messages,
        settings=settings,
        stream=stream,
        include_usage=_stream_options(body.get("stream_options"), stream),
        files=file,
        tools=_tools(body),
    )


def _tools(body: dict) -> ToolRequest | None:
    try:
        return parse_tools(body.get("tools"), body.get("tool_choice"), body.get("parallel_tool_calls"))
    except BadInput as exc:
        msg = str(exc)
        param = next((p for p in ("tool_choice", "parallel_tool_calls") if msg.startswith(p)), "tools")
        raise ApiError(400, msg, param=param, code="invalid_value") from None
