"""finspace as an MCP server: the official ``mcp`` SDK's streamable HTTP transport at /gradio_api/mcp/.

Why the SDK and not Gradio's built-in MCP server (``mcp_server=True``): vLLM 0.32 requires ``mcp>=2,<3``, and
gradio 6.31's MCP server is written for ``mcp<2`` (it registers its handlers with the 1.x decorators
``@server.list_tools()`` / ``@server.call_tool()``, which 2.x removed), so the two cannot run in one
environment; ``pip install gradio[mcp]`` (which a Space builder may run after requirements.txt) would put mcp 1.x
back, so the server here runs on either SDK major (2.x by constructor, 1.x by decorator: ``_manager``), and an SDK
it cannot use turns MCP off with a 503 naming why, never the app. The SDK also lets finspace decide what Gradio would infer: each tool's description and schema is
written for a model (``tools``), ``load_model`` exists only for a caller with the admin token, and every tool
calls the app's ``Service`` in-process. Gradio's server on a mounted app calls queued endpoints back over HTTP
through the public URL; here there is no such loop, so each call passes the guard once and counts its client once.

The transport is stateless and answers JSON (``stateless=True, json_response=True``): each POST is one
JSON-RPC exchange that the guard can bound (body size, the client's places, like a Gradio event), with no
server-side session to hold or sweep. Every failure is a tool result with ``isError`` and a message naming the
fix (secrets redacted); a surprise is logged, answered "unexpected server error", never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import anyio

from finspace.wall.clients import bearer, request_client
from finspace.errors import FinspaceError
from finspace.mcp_server import arguments
from finspace.mcp_server.calls import Caller, ToolCalls
from finspace.wall.leaving import unless_gone
from finspace.mcp_server.tools import tool_specs

if TYPE_CHECKING:
    from finspace.service import Service

log = logging.getLogger("finspace.mcp")

MCP_PATH = "/gradio_api/mcp"  # where a Gradio Space serves MCP; the other paths served: finspace.wall.guard.MCP_PATHS
CHECK_THREADS = 4  # calls whose arguments are checked at once, in worker threads
SDK_MAJORS = ("1", "2")
INSTRUCTIONS = (
    "Finance LLMs on vLLM: check whether a model fits a GPU (will_it_fit), extract fields from filings "
    "with page-cited quotes (extract_matrix), ask one filing a question (ask_document); models, health "
    "and scores describe the app."
)


def sdk_problem() -> str | None:
    """Why the installed ``mcp`` SDK cannot serve (None when it can): finspace's server is written for 2.x."""
    try:
        got = version("mcp")
    except PackageNotFoundError:
        return "the mcp package is not installed (requirements.txt pins mcp==2.3.0)"
    if got.split(".")[0] not in SDK_MAJORS:
        return f"this build has mcp {got}; finspace's MCP server takes mcp 1.x or 2.x (requirements.txt pins 2.3.0)"
    return None


class McpEndpoint:
    """The ASGI app at MCP_PATH and the lifespan it needs (``async with endpoint.run(): ...``)."""

    def __init__(self, svc: Service, *, max_body_bytes: int, allow_loopback: bool = False):
        self.svc = svc
        self.calls = ToolCalls(svc, allow_loopback=allow_loopback)
        self.checks = anyio.CapacityLimiter(CHECK_THREADS)
        self.problem = sdk_problem()
        self.manager = None
        if self.problem is None:
            try:
                self.manager = self._manager(max_body_bytes)
            except Exception as exc:  # noqa: BLE001 - an SDK that changed: MCP is off, the app serves the rest
                self.problem = f"the mcp SDK {version('mcp')} could not be set up ({type(exc).__name__})"
        if self.problem is not None:
            log.warning("MCP is off: %s", self.problem)

    # ------------------------------------------------------------------ the SDK's server
    def _manager(self, max_body_bytes: int):
        """The SDK's stateless JSON transport over a low-level server with finspace's two handlers. mcp 2.x takes
        the handlers in the constructor; 1.x (what a builder's gradio[mcp] installs) by decorator: both served."""
        import inspect

        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        info = {"version": self.svc.versions.get("finspace") or "0", "instructions": INSTRUCTIONS}
        if "on_call_tool" in inspect.signature(Server.__init__).parameters:  # mcp 2.x
            server = Server("finspace", **info, on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        else:  # mcp 1.x
            server = Server("finspace", **info)

            @server.list_tools()
            async def _tools():
                return (await self._list_tools(server.request_context, None)).tools

            @server.call_tool(validate_input=False)  # finspace's own check names the argument and the fix
            async def _call(name, arguments):
                return await self._call_tool(server.request_context, _Params(name, arguments))

        extra = (
            {"max_request_body_size": max_body_bytes}
            if "max_request_body_size" in inspect.signature(StreamableHTTPSessionManager.__init__).parameters
            else {}
        )
        return StreamableHTTPSessionManager(server, json_response=True, stateless=True, **extra)

    def run(self):
        """The SDK's task group, for the app's lifespan."""
        return self.manager.run() if self.manager is not None else contextlib.nullcontext()

    async def __call__(self, scope, receive, send):
        if self.manager is None:
            body = json.dumps({"error": f"MCP is off on this app: {self.problem}"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await _cancelled_when_gone(self.manager.handle_request, scope, receive, send)

    # ------------------------------------------------------------------ who is calling
    def _caller(self, ctx: Any) -> Caller:
        request = getattr(ctx, "request", None)
        if request is None:
            return Caller(None)
        return Caller(request_client(request, self.svc.settings.limits.trusted_proxies), bearer(request))

    def _is_admin(self, caller: Caller) -> bool:
        if self.svc.switching == "off":
            return False
        if self.svc.switching == "open":
            return True
        if caller.token is None:
            return False
        try:
            self.svc.authorize(caller.token, client=caller.client)
        except FinspaceError:
            return False
        return True

    def specs(self, admin: bool) -> list[dict]:
        s = self.svc.settings
        return tool_specs(s.matrix.max_documents, s.documents.max_bytes / (1 << 20), admin)

    # ------------------------------------------------------------------ handlers
    async def _list_tools(self, ctx: Any, params: Any):
        from mcp import types

        admin = self._is_admin(self._caller(ctx))
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in self.specs(admin)])

    async def _call_tool(self, ctx: Any, params: Any):
        from mcp import types

        caller = self._caller(ctx)
        name = params.name if isinstance(params.name, str) else ""
        try:
            value = await _until_gone(self.call(name, params.arguments, caller), _gone_event(ctx))
        except FinspaceError as exc:
            return _error(types, self.svc.redact(str(exc)))
        except Exception as exc:  # noqa: BLE001 - the boundary: a named error, never a traceback
            log.error("unexpected %s in the MCP tool %s", type(exc).__name__, name[:40], exc_info=exc)
            return _error(
                types,
                f"unexpected server error ({type(exc).__name__}) in {name[:40]}; the app is still "
                "running: try again, or report it",
            )
        structured = value if isinstance(value, dict) else {"result": value}  # the views are redacted already
        text = json.dumps(structured, ensure_ascii=False, default=str)
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": text}], "structuredContent": json.loads(text)}
        )

    async def call(self, name: str, args: Any, caller: Caller) -> Any:
        """Run tool ``name`` with ``args`` for ``caller``: FinspaceError (BadInput...) naming the fix otherwise."""
        admin_only = name == "load_model"
        specs = {t["name"]: t for t in self.specs(admin=True)}
        if name not in specs or (admin_only and not self._is_admin(caller)):
            public = ", ".join(n for n in specs if n != "load_model")
            if admin_only:
                raise _Refused(
                    "load_model is not a tool for this caller: switching models needs the admin token "
                    "(Authorization: Bearer <FINSPACE_ADMIN_TOKEN>) on an app that has one"
                )
            raise _Refused(f"unknown tool {name[:60]!r}; the tools are {public} (tools/list describes them)")
        # the caller's structure (fields, documents) is walked off the event loop, a few calls at a time
        args = await anyio.to_thread.run_sync(arguments.check, specs[name]["inputSchema"], args, limiter=self.checks)
        return await getattr(self.calls, name)(args, caller)


GONE = "finspace.mcp.gone"  # the ASGI scope's key for the event set when the caller disconnects


async def _cancelled_when_gone(handle, scope, receive, send) -> None:
    """``handle`` the request, with an event in its scope set when the caller disconnects. The stateless JSON
    transport reads the body and then never reads again, so it would not notice a caller that went away: once
    the body is in, this reads on for ``http.disconnect``, as /v1 and Gradio's queue do (the tool's work is
    cancelled then, ``_until_gone``: a generation aborted, a Matrix slot freed at once)."""
    gone, body_in = asyncio.Event(), asyncio.Event()

    async def reading():
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
        elif not message.get("more_body"):
            body_in.set()
        return message

    async def watch():
        await body_in.wait()
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.ensure_future(watch())
    try:
        await handle({**scope, GONE: gone}, reading, send)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher


def _gone_event(ctx: Any) -> asyncio.Event | None:
    request = getattr(ctx, "request", None)
    return getattr(request, "scope", {}).get(GONE) if request is not None else None


async def _until_gone(work, gone: asyncio.Event | None) -> Any:
    """``work``'s result; cancelled (its engine stream closed, its slots freed) if the caller goes away first."""
    if gone is None:
        return await work
    finished, value = await unless_gone(work, gone.wait())
    if not finished:
        log.info("an MCP caller went away before its result was ready; the call was cancelled")
        raise _Gone("the caller went away; the call was cancelled")
    return value


class _Gone(FinspaceError):
    http_status = 499


class _Params:
    """mcp 1.x hands the call's name and arguments; 2.x its params object: the handler reads this shape."""

    def __init__(self, name: Any, arguments: Any):
        self.name, self.arguments = name, arguments


class _Refused(FinspaceError):
    http_status = 404


def _error(types: Any, message: str):
    return types.CallToolResult.model_validate({"content": [{"type": "text", "text": message}], "isError": True})
