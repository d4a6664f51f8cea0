"""The routes a client may reach: the page, the public API and the REST routes, by method; nothing else.

Gradio 6.31 mounts about sixty routes (gradio/routes.py). The page and gradio_client
use a handful: the page's HTML, scripts and styles, its config and API info, the
queue (join, result stream, heartbeat, cancel, reset), uploads and the files an event
returns, and /gradio_api/call/<name> for the named endpoints. Everything else is
refused before Gradio sees it, whether or not it carries event data: the
streaming-input route (``POST /gradio_api/stream/<event_id>`` replaced a queued
event's data behind the guard's back), the component server, recordings, the
run-history and vibe-editing routes, login and proxy routes. ``allowed`` is the
one list; ``refusal`` says why a request is not on it, naming what to call instead.
"""

from __future__ import annotations

import re

_READ = frozenset({"GET", "HEAD", "OPTIONS"})
_WRITE = frozenset({"POST", "OPTIONS"})

# (methods, pattern over the whole path): what the page (gradio 6.31's frontend) and gradio_client 2.7 call
_ROUTES: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = tuple(
    (m, re.compile(p))
    for m, p in (
        # the page and its files
        (_READ, r"/|/config/?|/theme\.css|/gradio_api/theme\.css|/favicon\.ico|/manifest\.json|/robots\.txt"),
        (_READ, r"/pwa_icon(/\d{1,4})?|/(assets|static|svelte)/[^\x00]+"),
        (_READ, r"/gradio_api/info/?|/gradio_api/app_id/?|/gradio_api/startup-events"),
        # the queue: join an event, read its results, keep the session alive, stop it
        (_WRITE, r"/gradio_api/queue/join|/gradio_api/cancel|/gradio_api/reset/?"),
        (_READ, r"/gradio_api/queue/data|/gradio_api/heartbeat/[^/]{1,128}"),
        # the named endpoints (which names are public: the guard's own check)
        (_WRITE, r"/gradio_api/call/[^/]*/?"),
        (_READ, r"/gradio_api/call/[^/]*/[^/]+/?"),
        # a document for the chat, and the files an event returns (Gradio's own file checks apply)
        (_WRITE, r"/gradio_api/upload"),
        (_READ, r"/gradio_api/upload_progress|/gradio_api/file=[^\x00]*"),
        # finspace's REST routes and the OpenAI-compatible API
        (_READ, r"/health|/models|/loads|/scores|/v1/models|/edgar/(company|filings|facts)"),
        (_WRITE, r"/load-model|/scores/run|/scores/cancel|/v1/chat/completions"),
        # MCP over streamable HTTP (finspace.mcp_server): stateless, one POST per JSON-RPC exchange
        # (…/mcp/mcp too: MCP Inspector 0.15 turns a URL that ends in "/" into one that ends in "/mcp")
        (_WRITE, r"/gradio_api/mcp(/mcp)?/?"),
    )
)
_DOCS = (_READ, re.compile(r"/docs|/docs/oauth2-redirect|/openapi\.json"))


def allowed(method: str, path: str, api_docs: bool = False) -> bool:
    """Whether ``method`` on ``path`` is one the page or the public API uses."""
    rules = _ROUTES + ((_DOCS,) if api_docs else ())
    return any(method in methods and pattern.fullmatch(path) for methods, pattern in rules)


def known(path: str, api_docs: bool = False) -> bool:
    """Whether ``path`` is on the list for some method (a wrong method is 405, an unknown path 404)."""
    rules = _ROUTES + ((_DOCS,) if api_docs else ())
    return any(pattern.fullmatch(path) for _, pattern in rules)


def methods(path: str, api_docs: bool = False) -> list[str]:
    """The methods ``path`` accepts, for a 405's ``Allow`` header (HTTP requires one)."""
    rules = _ROUTES + ((_DOCS,) if api_docs else ())
    return sorted({m for ms, pattern in rules if pattern.fullmatch(path) for m in ms})


def refusal(method: str, path: str, api_docs: bool = False) -> tuple[int, str] | None:
    """(status, message) for a request not on the list, else None. The message names no server path."""
    if allowed(method, path, api_docs):
        return None
    if known(path, api_docs) and path.startswith("/gradio_api/mcp"):
        return 405, (
            f"{method[:10]} is not accepted on the MCP endpoint: it is MCP's streamable HTTP, stateless, "
            "one POST per JSON-RPC exchange with no event stream to open by GET"
        )
    if known(path, api_docs):
        return 405, (
            f"{method[:10]} is not accepted on {path[:60]}; the page and gradio_client use GET for "
            "reading and POST for sending, as /gradio_api/info lists"
        )
    return 404, (
        f"{path[:60]} is not a route this app offers: the page is at /, the API is the named endpoints "
        "of /gradio_api/info (with gradio_client, or POST /gradio_api/call/<name>), and the REST routes "
        "are /health, /models, /loads, /load-model, /scores and /v1; MCP is POST /gradio_api/mcp/"
    )
