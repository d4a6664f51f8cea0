"""Who is asking: one client address per request, taken in one place (the guard) and read everywhere else.

The per-client bounds (events queued or running, wrong tokens on /load-model, the UI and
/v1) count by this address. It is the TCP peer, unless the peer is a proxy this app
trusts (FINSPACE_TRUSTED_PROXIES: addresses or CIDR blocks; ``*`` trusts whatever
peer connects, as on a Space, where the Space's proxy is the only way in). Behind a
trusted proxy it is the right-most X-Forwarded-For hop that is not itself a trusted
proxy: a client can write anything at the left of that header, nothing at the
right. uvicorn's own proxy-header handling is off (finspace.web.http_server): it trusted
127.0.0.1 by default, so from loopback a new X-Forwarded-For each time was a new client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from finspace.settings import ANY_PROXY as ANY

STATE_KEY = "finspace_client"


@lru_cache(maxsize=64)
def _networks(trusted: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(ipaddress.ip_network(t, strict=False) for t in trusted if t != ANY)


def _is_trusted(address: str, trusted: tuple[str, ...]) -> bool:
    if ANY in trusted:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in _networks(trusted))


def client_address(headers: Mapping[str, str], peer: str | None, trusted: tuple[str, ...] | bool = ()) -> str:
    """The client: the TCP peer, or behind a trusted proxy the right-most untrusted X-Forwarded-For hop
    (with ``*``, the last hop: the address the Space's proxy itself saw). ``headers`` has lower-case names."""
    if isinstance(trusted, bool):
        trusted = (ANY,) if trusted else ()
    if not trusted or peer is None or not _is_trusted(peer, trusted):
        return peer or "unknown"
    hops = [h.strip() for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
    if not hops:
        return peer
    if ANY in trusted:
        return hops[-1][:64]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop[:64]
    return hops[0][:64]


def _scope_of(request: Any) -> dict | None:
    """The ASGI scope of a Starlette request, or of the one a gr.Request wraps (read from the objects' own
    attributes: gr.Request's __getattr__ turns whatever it finds into JSON, and a scope holds bytes)."""
    for obj in (getattr(request, "__dict__", {}).get("request"), request):
        scope = getattr(obj, "__dict__", {}).get("scope") if obj is not None else None
        if isinstance(scope, dict):
            return scope
    return None


def request_client(request: Any, trusted: tuple[str, ...] | bool = ()) -> str | None:
    """The address the guard took for this request (a Starlette or Gradio request); None without a request."""
    if request is None:
        return None
    scope = _scope_of(request)
    state = scope.get("state") if scope is not None else None
    if isinstance(state, dict) and isinstance(state.get(STATE_KEY), str):
        return state[STATE_KEY]
    headers = getattr(request, "headers", None) or {}
    peer = getattr(getattr(request, "client", None), "host", None)
    return client_address({k.lower(): v for k, v in dict(headers).items()}, peer, trusted)


def bearer(request: Any) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None without one): the one reading of it, for the
    admin token (REST, the Scoreboard's routes, MCP) and /v1's API keys alike."""
    headers = getattr(request, "headers", None) or {}
    scheme, _, given = str(headers.get("authorization", "")).partition(" ")
    return given.strip() or None if scheme.lower() == "bearer" else None
