"""The wall in front of every route: what an anonymous request may send before anything else reads it.

A Space is public: anyone can call every route, Gradio's own included, with any
payload. ``Guard`` is a pure ASGI middleware around the whole app (REST and the
mounted Gradio UI). In order, it:

- answers 404 for routes finspace does not offer: FastAPI's /docs and /openapi.json (unless
  FINSPACE_API_DOCS=1), Gradio's /monitoring, Gradio's direct routes (/gradio_api/run/..., /gradio_api/api/...,
  /run/..., /api/...: they skip the queue), and /gradio_api/call/<name> for any name that is not a public
  endpoint; then lets through only the routes and methods the page and the public API use
  (``finspace.wall.surface``: 404, or 405 for a wrong method), so no other Gradio route (the streaming-input
  route ``/gradio_api/stream/<event_id>`` among them) ever receives event data;
- takes uploads only when the app names Gradio's upload folder (a document for the chat): one file per
  request, named with a document's extension, as python-multipart parses the body (``finspace.wall.uploads``),
  the body bounded by the document size limit; refuses them otherwise; each stored file is its sender's own;
- bounds every body before it is read: Content-Length first, then the bytes as they arrive (413 with the
  limit), so a 100 MB body costs nothing, with or without a token;
- reads the JSON of Gradio's event routes strictly (no NaN, no binary: 400) and refuses any Gradio FileData
  reference in it (``{"path": ..., "meta": {"_type": "gradio.FileData"}}``): no payload can name a file on the
  server. The one exception is the document a chat carries: on the events marked as taking one
  (``document_events``: the chat box's submit and Send events and the /chat endpoint, by fn_index), a reference
  whose real path lies inside Gradio's upload folder (and whose url, if any, is that file's own) passes; any other
  path, any other event, is refused as before. Gradio skips its own check of such paths when an app is mounted
  rather than launched; this wall does not depend on Gradio's version;
- checks ``fn_index`` against the app's events, and bounds the events each client
  has queued or running (``EventTracker``, 429 past the bound; the check takes the
  place in the same step, so simultaneous joins see each other);
- answers a result stream opened for a session Gradio no longer holds (its events
  swept or done) with a 404 naming FINSPACE_STREAM_OPEN_S;
- bounds MCP requests (``POST /gradio_api/mcp/``, finspace.mcp_server) as it does Gradio events: the body
  (the Matrix's filings as base64 at most), strict JSON, and a place among the client's events for as long as
  the call runs (429 past the bound, the same count as its Gradio events);
- turns a bare 500 from Gradio's routes (a payload its parser chokes on) into a
  400 with finspace's ``{"error": ...}``, logged in one line without a traceback, and
  takes server paths out of Gradio's error texts (``finspace.wall.gradio_replies``).

The client is the TCP peer, or behind a proxy named in FINSPACE_TRUSTED_PROXIES the address it forwards
(``finspace.wall.clients``); the guard takes it once and puts it in the request's state for the routes behind.

Every refusal is ``{"error": message}`` naming the fix; under /v1/ (the OpenAI-compatible API) it is
OpenAI's error object, ``{"error": {"message", "type", "param", "code"}}``, and a chat-completions body may
be as large as a Gradio event's.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Mapping
from urllib.parse import parse_qs

from finspace.wall import surface

from finspace.wall import uploads
from finspace.wall.bodies import Refusal, check_event_body, find_file_reference, strict_json
from finspace.wall.clients import STATE_KEY, client_address  # noqa: F401 - client_address: the one place, re-exported
from finspace.wall.events import EventTracker  # noqa: F401 - the app builds it beside the guard
from finspace.wall.gradio_replies import PathScrubber, downstream, json_response
from finspace.settings import Limits

log = logging.getLogger("finspace.wall.guard")

_DIRECT = re.compile(r"^/(gradio_api/)?(run|api)(/|$)")
_CALL = re.compile(r"^/gradio_api/call/([^/]*)(?:/(.*?))?/?$")
_JSON_ROUTES = ("/gradio_api/queue/join", "/gradio_api/cancel")
UPLOAD = "/gradio_api/upload"
V1_CHAT = "/v1/chat/completions"  # the OpenAI-compatible chat: a conversation's body, like a Gradio event's
# MCP over streamable HTTP (finspace.mcp_server); ".../mcp/mcp": what MCP Inspector 0.15 makes of ".../mcp/"
MCP_PATHS = ("/gradio_api/mcp", "/gradio_api/mcp/", "/gradio_api/mcp/mcp", "/gradio_api/mcp/mcp/")


# ------------------------------------------------------------------ the middleware
class Guard:
    """ASGI middleware; see the module docstring. ``events`` gives the Blocks' events: fn_index -> (api_name,
    number of inputs[, number required]); ``document_events`` the fn_indexes whose input may carry an uploaded
    document; both read when first needed (the Blocks are complete by then). ``upload_dir``: Gradio's upload
    folder; None refuses uploads. ``upload_bytes``: the upload route's body bound; ``upload_files``: documents in
    one upload (the chat sends one, the Matrix tab its filings together), each of at most ``upload_file_bytes``."""

    def __init__(
        self,
        app,
        *,
        limits: Limits,
        public_api: tuple[str, ...],
        events: Callable[[], Mapping[int, tuple]],
        tracker: EventTracker,
        api_docs: bool = False,
        upload_dir: str | None = None,
        upload_bytes: int = 0,
        upload_files: int = 1,
        upload_file_bytes: int | None = None,
        document_events: Callable[[], Collection[int]] = frozenset,
        mcp_bytes: int = 0,
        held: uploads.Held | None = None,
        stored: Callable[[list[str]], None] = lambda paths: None,
        heard: Callable[[str], None] = lambda path: None,
        upload_types: tuple[str, ...] = (".pdf", ".html", ".htm", ".docx", ".xlsx", ".csv", ".txt", ".md"),
    ):
        self.app = app
        self.limits = limits
        self.public_api = public_api
        self._events_of = events
        self._events: Mapping[int, tuple] | None = None
        self._documents_of = document_events
        self._documents: frozenset[int] | None = None
        self.tracker = tracker
        self.api_docs = api_docs
        self.upload_dir = upload_dir
        self.upload_bytes = upload_bytes
        self.upload_files = upload_files
        self.upload_file_bytes = upload_file_bytes
        self.upload_types = upload_types
        self.mcp_bytes = mcp_bytes or limits.event_body_bytes
        self.held = held  # uploaded files per client, bounded (None: unbounded); each owned by its client
        self.stored = stored  # told the paths of each upload (Gradio's cache sweep removes them if never used)
        self.heard = heard  # told each GET's path: a page's heartbeat keeps its session (wall.sessions)
        self.scrub = PathScrubber()
        self.carried = uploads.Carried(limits.upload_client_bytes)  # MCP bodies in flight per client

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        client = client_address(headers, (scope.get("client") or (None,))[0], self.limits.trusted_proxies)
        scope.setdefault("state", {})[STATE_KEY] = client
        try:
            await self._route(scope, receive, send, headers, client)
        except Refusal as r:
            start, body = json_response(r.status, r.message, r.headers, scope.get("path", ""))
            await send(start)
            await send(body)

    async def _route(self, scope, receive, send, headers, client):
        path, method = scope["path"], scope["method"]
        self._refuse_closed_routes(path, method)
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            body = await self._read_body(receive, headers, self._body_limit(path), path)
            session = None
            call = _CALL.match(path) if method == "POST" else None
            is_join = path == "/gradio_api/queue/join" or call is not None
            if path in _JSON_ROUTES or is_join:
                value = strict_json(body)
                if is_join:
                    if self._events is None:
                        self._events = dict(self._events_of())
                        self._documents = frozenset(self._documents_of())
                    sent = (
                        len(value["data"]) if isinstance(value, dict) and isinstance(value.get("data"), list) else None
                    )
                    owned = (lambda p: self.held.owns(client, p)) if self.held is not None else None
                    _, session = check_event_body(
                        value,
                        self._events,
                        call.group(1) if call else None,
                        self._documents or (),
                        self.upload_dir,
                        owned,
                    )
                    if sent is not None and len(value["data"]) != sent:  # optional inputs were padded
                        body = json.dumps(value).encode()
                    refusal = self.tracker.admit(client)  # a place taken now, given back in _join
                    if refusal:
                        raise Refusal(429, refusal, {"Retry-After": "2"})
                elif find_file_reference(value) is not None:
                    raise Refusal(400, "file references are not accepted here; finspace takes no files")
            elif path in MCP_PATHS:
                strict_json(body)  # no NaN, no binary, no nesting past the parser's depth: 400 before the SDK
                refusal = self.carried.admit(client, len(body))  # its bytes, and one of the client's places
                if refusal is None and (refusal := self.tracker.admit(client)):
                    self.carried.release(client, len(body))
                if refusal:
                    raise Refusal(429, refusal, {"Retry-After": "2"})
                try:
                    return await downstream(
                        self.app, scope, _replay(body, receive), send, path, self.scrub, keep_4xx=True
                    )
                finally:
                    self.tracker.settle(client)
                    self.carried.release(client, len(body))
            elif path == UPLOAD:
                try:
                    stored = uploads.check_parts(
                        body,
                        headers.get("content-type", ""),
                        self.upload_types,
                        self.upload_files,
                        self.upload_file_bytes,
                    )
                except uploads.BadUpload as exc:
                    raise Refusal(413 if isinstance(exc, uploads.TooLarge) else 400, str(exc)) from None
                if self.held is not None:
                    reservation, refusal = self.held.admit(client, [size for _name, size in stored])
                    if refusal:
                        raise Refusal(429, refusal, {"Retry-After": "10"})
                    return await self._upload(scope, _replay(body, receive), send, client, reservation)
            receive = _replay(body, receive)
            if is_join:
                return await self._join(scope, receive, send, client, session)
        if method == "GET" and (self.heard(path) or path == "/gradio_api/queue/data"):  # heard: a heartbeat?
            session = (parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash") or [""])[0]
            return await self._stream(scope, receive, send, session)
        call = _CALL.match(path)
        if method == "GET" and call and call.group(2):
            session = self.tracker.session_of(call.group(2)) or call.group(2)
            return await self._stream(scope, receive, send, session)
        await downstream(self.app, scope, receive, send, path, self.scrub)

    def _refuse_closed_routes(self, path: str, method: str) -> None:
        if not self.api_docs and (path in ("/docs", "/openapi.json", "/redoc") or path.startswith("/docs/")):
            raise Refusal(
                404,
                "the API docs are off on this app (FINSPACE_API_DOCS=1 turns them on); "
                "the API tab of the page lists the endpoints",
            )
        if path.startswith(("/monitoring", "/gradio_api/monitoring")):
            raise Refusal(404, "Gradio's monitoring dashboard is off on this app")
        if _DIRECT.match(path):
            raise Refusal(
                404,
                "direct calls are off on this app: they skip the queue. Use gradio_client, "
                "or POST /gradio_api/call/<name> and read GET /gradio_api/call/<name>/<event_id>",
            )
        call = _CALL.match(path)
        if call and call.group(1) not in self.public_api:
            names = ", ".join("/" + n for n in self.public_api)
            raise Refusal(404, f"no public endpoint named {call.group(1)[:60]!r}; the public ones are {names}")
        if path.startswith(UPLOAD) and method == "POST" and (self.upload_dir is None or path != UPLOAD):
            raise Refusal(403, "this app takes no file uploads; send the text itself")
        refused = surface.refusal(method, path, self.api_docs)
        if refused:
            log.info("refused %s %s: not a route the page or the API uses", method[:10], path[:80])
            status, message = refused
            allow = {"Allow": ", ".join(surface.methods(path, self.api_docs))} if status == 405 else None
            raise Refusal(status, message, allow)

    def _body_limit(self, path: str) -> int:
        if path == UPLOAD:
            return self.upload_bytes
        if path.startswith("/gradio_api/queue/join") or path.startswith("/gradio_api/call/"):
            return self.limits.event_body_bytes
        if path == V1_CHAT:
            return self.limits.event_body_bytes
        if path in MCP_PATHS:
            return self.mcp_bytes
        return self.limits.rest_body_bytes

    async def _read_body(self, receive, headers: Mapping[str, str], limit: int, path: str) -> bytes:
        what = (
            "an MCP call carries at most the Matrix's filings as base64: send documents by url, or fewer at a time"
            if path in MCP_PATHS
            else "a chat message's limit is 64,000 characters, a conversation's 256,000"
            if limit == self.limits.event_body_bytes
            else f"a document may be {((self.upload_file_bytes or limit) >> 20)} MiB at most (FINSPACE_DOCUMENT_MAX_MIB), "
            f"and one upload holds at most {self.upload_files}"
            if path == UPLOAD
            else "the body of a REST call is a small JSON object, such as {\"model\": KEY}"
        )
        too_big = Refusal(413, f"the body is larger than {path[:60]} takes ({limit:,} bytes); send less: {what}")
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                raise Refusal(400, "Content-Length must be a whole number of bytes")
            if int(declared) > limit:
                raise too_big
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Refusal(400, "the client went away before sending its body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _forward(self, scope, receive, send, done) -> None:
        """Pass the request to Gradio and its answer to the client; then ``done(body)``: the answer's body when
        it was a 200, else None (also when the request failed on the way)."""
        captured: list[bytes] = []
        status = [0]

        async def capture(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and status[0] == 200:
                captured.append(message.get("body", b""))
            await send(message)

        body = None
        try:
            await downstream(self.app, scope, receive, capture, scope["path"], self.scrub)
            body = b"".join(captured) if status[0] == 200 else None
        finally:
            done(body)

    async def _join(self, scope, receive, send, client: str, session: str | None):
        def settle(body: bytes | None) -> None:
            try:
                event_id = json.loads(body).get("event_id") if body is not None else None
            except (ValueError, AttributeError):
                event_id = None
            self.tracker.settle(client, event_id if isinstance(event_id, str) else None, session)

        await self._forward(scope, receive, send, settle)

    async def _upload(self, scope, receive, send, client: str, reservation: list) -> None:
        """Gradio's upload route, its answer (the stored paths, each moved to a folder of its own first:
        ``uploads.owned_copies``) held against the client's bound: the client that sent a file owns it alone."""
        got: list[dict] = []  # the answer (a short JSON list), held back until its paths are the client's own

        async def capture(message):
            got.append(message)

        body, ok = None, False
        try:
            await downstream(self.app, scope, receive, capture, scope["path"], self.scrub)
            body = b"".join(m.get("body", b"") for m in got if m["type"] == "http.response.body")
            if (ok := bool(got) and got[0]["status"] == 200) and self.upload_dir is not None:
                body = uploads.owned_copies(body, self.upload_dir)
                self.stored([p for p in json.loads(body) if isinstance(p, str)])
        finally:
            self.held.settle(client, reservation, body if ok else None)
        if got:
            headers = [(k, v) for k, v in got[0].get("headers", []) if k.lower() != b"content-length"]
            await send({**got[0], "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

    async def _stream(self, scope, receive, send, session: str):
        if not self.tracker.has_session(session):
            raise Refusal(
                404,
                "no event is queued or running for this session: it ended, or it was cancelled "
                f"because its result stream was not opened within {self.limits.stream_open_s:g} s "
                "(FINSPACE_STREAM_OPEN_S); join again and open the result stream at once",
            )
        self.tracker.stream_opened(session)
        finished = [False]  # Gradio ended the stream itself ("close_stream"): nothing was left to deliver on it

        async def watched(message):
            if message["type"] == "http.response.body" and b'"close_stream"' in message.get("body", b""):
                finished[0] = True
            await send(message)

        try:
            await downstream(self.app, scope, receive, watched, scope["path"], self.scrub, stream=True)
        finally:
            self.tracker.stream_closed(session, finished=finished[0])


def _replay(body: bytes, receive):
    """The body already read, then the connection's own messages (a disconnect)."""
    sent = [False]

    async def replayed():
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
