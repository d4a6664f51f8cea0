"""uvicorn, configured for a public Space: bounded connections, keep-alive, and a deadline for request headers.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and refuses
work past ``limit_concurrency`` (503), but it waits forever for a request's
headers: 300 connections that never finish them stay open. ``HeaderDeadline``
adds that deadline to uvicorn's protocol: a connection must finish each request's
headers within ``header_timeout_s`` of opening (or of the request's first byte),
or it is closed.
"""

from __future__ import annotations

import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from finspace.settings import Limits

log = logging.getLogger("finspace.http")


class HeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers."""

    header_timeout_s: float = 10.0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._header_timer = None
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol_for(limits: Limits) -> type[HeaderDeadline]:
    return type("FinspaceHttp", (HeaderDeadline,), {"header_timeout_s": limits.header_timeout_s})


def uvicorn_config(app, host: str, port: int, limits: Limits):
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5,
                          http=protocol_for(limits), timeout_keep_alive=int(limits.keep_alive_s),
                          limit_concurrency=limits.max_connections, server_header=False)
