"""What Gradio answers, as it leaves the app: errors in finspace's shape, no server path in any error text.

``downstream`` calls the app behind the guard. On Gradio's routes a bare 500 becomes a 400
with a message and no traceback, any other 4xx becomes ``{"error": message}``, and an
app that fails after its response has started still ends that response cleanly (an
empty last chunk: no truncated chunked reply). ``PathScrubber`` takes server paths out
of error texts: Gradio's own file-check message lists every blocked folder (its
``blocked_paths``; with ``show_error`` on it reaches the client whole), so error events
in a result stream (``"success": false``, ``unexpected_error``, ``event: error``) and
Gradio's 4xx texts pass through it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

log = logging.getLogger("finspace.wall.guard")

FILE_REFUSED = (
    "a file reference was refused: finspace takes no files here, and a document only as an upload to the chat"
)
# Gradio's file checks (gradio.processing_utils._check_allowed and friends): the sentence names the file and folders
_GRADIO_PATH_ERROR = re.compile(
    r"(Cannot move|Dotfiles located|File not allowed|is not in the upload folder)"
    r"[^\"\n]*"
)
_ERROR_MARKERS = (b'"success":false', b'"success": false', b"unexpected_error", b"event: error")


def json_response(status: int, message: str, headers: dict[str, str] | None = None, path: str = ""):
    """The start and body messages of ``{"error": message}`` (OpenAI's error object under /v1/)."""
    if path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        error: Any = {"message": message, "type": kind, "param": None, "code": None}
    else:
        error = message
    body = json.dumps({"error": error}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return {"type": "http.response.start", "status": status, "headers": raw}, {
        "type": "http.response.body",
        "body": body,
    }


class PathScrubber:
    """Hides absolute paths that start at one of this machine's top-level folders (/etc, /home, /tmp, /proc,
    and whatever else / holds), single folders included: a route (/gradio_api/info, /v1) is not one."""

    def __init__(self, roots: list[str] | None = None):
        if roots is None:
            try:
                roots = [n for n in os.listdir("/") if os.path.isdir("/" + n)]
            except OSError:
                roots = []
        names = sorted({r.strip("/") for r in roots if r.strip("/")}, key=len, reverse=True)
        alternatives = "|".join(re.escape(n) for n in names) or "(?!)"
        self._paths = re.compile(r"(?<![\w.~-])/(?:" + alternatives + r")(?=[/\s'\"`,;:)\]]|$)[^\s'\"`,;)\]]*")

    def text(self, text: str) -> str:
        text = _GRADIO_PATH_ERROR.sub(FILE_REFUSED, text)
        return self._paths.sub("…", text)

    def event_chunk(self, chunk: bytes) -> bytes:
        """A chunk of a result stream, its error messages scrubbed (other messages untouched)."""
        if not any(m in chunk for m in _ERROR_MARKERS):
            return chunk
        return self.text(chunk.decode("utf-8", "replace")).encode("utf-8")


def error_text(body: bytes, status: int) -> str:
    """The message of a Gradio error body: {"error": ...}, {"detail": "..."} or pydantic's list, or plain text."""
    try:
        value = json.loads(body)
    except ValueError:
        value = body.decode("utf-8", "replace").strip()
    if isinstance(value, dict):
        value = value.get("error") or value.get("detail") or value
    if isinstance(value, list):
        value = "; ".join(
            f"{'.'.join(str(x) for x in e.get('loc', ()) if x != 'body') or 'body'}: {e.get('msg')}"
            if isinstance(e, dict)
            else str(e)
            for e in value[:5]
        )
    text = value if isinstance(value, str) else json.dumps(value)[:300]
    return text[:500] or f"the request was refused ({status}); see /gradio_api/info for the endpoints"


def _kept_headers(start: dict) -> dict[str, str]:
    drop = (b"content-length", b"content-type")
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", ()) if k.lower() not in drop}


async def downstream(
    app, scope, receive, send, path: str, scrub: PathScrubber, stream: bool = False, keep_4xx: bool = False
):
    """Call the app. On Gradio's routes a bare 500 becomes a 400 with a message and no traceback, any other 4xx
    becomes finspace's ``{"error": message}`` (Gradio answers ``{"detail": ...}`` or plain text), error texts lose
    their server paths (in a result ``stream``, its error events'), and a response the app abandons half-way is ended
    cleanly. ``keep_4xx``: a 4xx passes as the app wrote it (MCP's JSON-RPC errors, which its clients parse)."""
    started, swallowed, ended = [False], [False], [False]
    held: list = []  # a Gradio 4xx: its start message, then its body chunks
    gradio = path.startswith("/gradio_api/") or path in ("/config", "/info")

    async def send_checked(message):
        if message["type"] == "http.response.start":
            status = message["status"]
            if gradio and status == 500 and not started[0]:
                swallowed[0] = started[0] = ended[0] = True
                for m in json_response(
                    400,
                    "the request could not be processed: check it against "
                    "/gradio_api/info (endpoint, number and types of inputs)",
                ):
                    await send(m)
                return
            started[0] = True
            encoded = any(k.lower() == b"content-encoding" for k, _ in message.get("headers", ()))
            if gradio and not keep_4xx and 400 <= status < 500 and not encoded:
                held.append(message)
                return
        elif swallowed[0]:
            return
        elif held:
            held.append(message.get("body", b""))
            if not message.get("more_body", False):
                ended[0] = True
                start, body = held[0], b"".join(held[1:])
                for m in json_response(
                    start["status"], scrub.text(error_text(body, start["status"])), _kept_headers(start)
                ):
                    await send(m)
            return
        elif message["type"] == "http.response.body":
            if stream and message.get("body"):
                message = {**message, "body": scrub.event_chunk(message["body"])}
            ended[0] = not message.get("more_body", False)
        await send(message)

    try:
        await app(scope, receive, send_checked)
    except Exception as exc:  # noqa: BLE001 - the boundary
        if not gradio and not swallowed[0]:
            raise
        log.warning(
            "refused a malformed request to %s (%s: %s)", path[:80], type(exc).__name__, scrub.text(str(exc))[:120]
        )
        if not started[0]:
            for m in json_response(400, "the request could not be processed: check it against /gradio_api/info"):
                await send(m)
        elif not ended[0] and not held:
            await send({"type": "http.response.body", "body": b"", "more_body": False})  # a complete reply
