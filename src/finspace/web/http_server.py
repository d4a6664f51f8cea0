"""uvicorn, configured for a public Space: bounded connections, keep-alive, deadlines for headers and bodies.

uvicorn closes idle keep-alive connections (``timeout_keep_alive``) and refuses
work past ``limit_concurrency`` (503), but it waits forever for a request's
headers and body: 300 connections that never finish them stay open, and a join
that declares 1,000 bytes and sends one every 5 s was still open at 47 s.
``HeaderDeadline`` adds both deadlines to uvicorn's protocol: a connection must
finish each request's headers within ``header_timeout_s`` of opening (or of the
request's first byte), and its body within ``body_timeout_s`` of its headers, or
it is closed (a 408 naming the setting first, when no answer has started).
uvicorn's proxy-header handling is off: finspace.wall.clients takes the client's
address, from the proxies FINSPACE_TRUSTED_PROXIES names.
"""

from __future__ import annotations

import json
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from finspace.settings import Limits

log = logging.getLogger("finspace.http")


class HeaderDeadline(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for each request's headers."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._header_timer = None
        self._body_timer = None
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        if any(
            name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0"))
            for name, value in self.headers or ()
        ):
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_too_slow)

    def on_message_complete(self) -> None:
        self._disarm_body()
        super().on_message_complete()

    def connection_lost(self, exc) -> None:
        self._disarm()
        self._disarm_body()
        super().connection_lost(exc)

    def _disarm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        """The body is late: answer 408 if nothing was answered yet, and close; the app's receive() sees a
        disconnect."""
        self._body_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            body = json.dumps(
                {
                    "error": f"the request body did not arrive within {self.body_timeout_s:g} s of its "
                    "headers (FINSPACE_BODY_TIMEOUT_S); send the whole body at once"
                }
            ).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
        if cycle is not None:
            cycle.disconnected = True
            cycle.message_event.set()
        log.info("closed a connection whose request body was not sent within %g s", self.body_timeout_s)
        self.transport.close()

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
    return type(
        "FinspaceHttp",
        (HeaderDeadline,),
        {"header_timeout_s": limits.header_timeout_s, "body_timeout_s": limits.body_timeout_s},
    )


def uvicorn_config(app, host: str, port: int, limits: Limits):
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        timeout_graceful_shutdown=5,
        http=protocol_for(limits),
        timeout_keep_alive=int(limits.keep_alive_s),
        limit_concurrency=limits.max_connections,
        server_header=False,
        proxy_headers=False,
    )  # finspace.wall.clients reads X-Forwarded-For, from trusted proxies only
