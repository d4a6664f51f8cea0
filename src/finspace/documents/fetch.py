"""A filing named by URL, fetched for an MCP tool (and the address checks the EDGAR client shares: finspace.edgar):
public http(s) addresses only, bounded in size and time.

Refused before any connection, with a message naming the fix (``BadInput``):
- any scheme but http and https (``file:``, ``ftp:``, ``data:``...), a URL with credentials, a bad port;
- a host that is, or resolves to, this machine (127.0.0.0/8, ::1, localhost, 0.0.0.0, ::), a private
  (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10), link-local (169.254/16, fe80::/10: the cloud metadata
  address among them), multicast or reserved address. Every address the name resolves to is checked, and
  the connection is made to the checked address itself (the name is not looked up twice: no DNS rebinding
  between the check and the connection); TLS still verifies the certificate for the name.
Redirects are followed by hand, at most ``MAX_REDIRECTS``, each new location checked the same way. The body
is read to at most the document size limit (FINSPACE_DOCUMENT_MAX_MIB), within ``timeout_s`` in all.

``allow_loopback`` is for tests only (FINSPACE_TEST_MCP_FETCH_LOOPBACK=1): it lets 127.0.0.1 through, so a
test can serve a filing from its own local server; every other refusal stands.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

import httpcore

from finspace.documents.convert import KINDS
from finspace.errors import BadInput

MAX_REDIRECTS = 3
MAX_URL_CHARS = 2000
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not public either
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # an IPv4 address behind a NAT64 gateway


class Unresolved(BadInput):
    """The host's name could not be resolved (no network, or no such host)."""


@dataclass(frozen=True)
class Fetched:
    name: str  # a file name with a document's extension, for the converter
    data: bytes


def refused_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` may not be fetched from, else None."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:  # fec0::/10, deprecated but still routed inside some networks
            return "it is a site-local address (a private network)"
        embedded = (
            ip.ipv4_mapped
            or ip.sixtofour
            or (ip.teredo[1] if ip.teredo else None)
            or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        )
        if embedded is not None:  # 6to4 (2002:7f00:1::1 is 127.0.0.1), Teredo, NAT64: judged by the IPv4 inside
            return refused_address(embedded, allow_loopback)
    if ip.is_loopback:
        return None if allow_loopback else "it is this machine (a loopback address)"
    if ip.is_unspecified:
        return "it is this machine (an unspecified address)"
    if ip.is_link_local:
        return "it is a link-local address (such as a cloud metadata service)"
    if ip.is_private or (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED):
        return "it is a private network address"
    if ip.is_multicast or ip.is_reserved or not ip.is_global:
        return "it is not a public internet address"
    return None


def check_url(url: object) -> tuple[str, str, int, str]:
    """(scheme, host, port, url) of an acceptable URL, or BadInput naming what to send instead."""
    if not isinstance(url, str) or not url.strip():
        raise BadInput("url must be text: a public https:// address of the filing")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise BadInput(f"url has {len(url):,} characters; the limit is {MAX_URL_CHARS:,}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BadInput("url is not a valid URL; send a public https:// address of the filing") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise BadInput(
            f"url scheme {parts.scheme[:10]!r} is refused: only public http(s) addresses are fetched "
            "(no file:, no local paths); send the document's bytes as base64 \"data\" instead"
        )
    if parts.username or parts.password:
        raise BadInput("url must not carry a user name or password; send a public address without them")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise BadInput("url has no host; send a public https:// address of the filing")
    return parts.scheme.lower(), host, port or (443 if parts.scheme.lower() == "https" else 80), url


async def resolve(host: str, port: int, allow_loopback: bool = False) -> str:
    """The address to connect to for ``host``: every address it resolves to must be public (BadInput otherwise)."""
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        if not allow_loopback:
            raise BadInput(
                f"url host {host!r} is refused: it is this machine; send a public address, or the "
                "document's bytes as base64 \"data\""
            )
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), 10)
        except (OSError, asyncio.TimeoutError, UnicodeError):
            raise Unresolved(f"url host {host[:80]!r} could not be resolved; check the address") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for ip in addresses:
        why = refused_address(ip, allow_loopback)
        if why:
            raise BadInput(
                f"url host {host[:80]!r} is refused: {why}. Only public internet addresses are fetched; "
                "send the document's bytes as base64 \"data\" instead"
            )
    if not addresses:
        raise Unresolved(f"url host {host[:80]!r} could not be resolved; check the address")
    return str(addresses[0])


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the address that was checked, whatever the URL's host name resolves to by then."""

    def __init__(self, address: str):
        self.address = address
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return await self.inner.connect_tcp(
            self.address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def file_name(url: str, content_type: str) -> str:
    """A name with a document's extension: the URL path's last part, else from the Content-Type."""
    last = PurePosixPath(unquote(urlsplit(url).path)).name
    suffix = PurePosixPath(last).suffix.lower()
    if suffix in KINDS:
        return last
    ctype = content_type.split(";")[0].strip().lower()
    by_type = {
        "application/pdf": ".pdf",
        "text/html": ".html",
        "application/xhtml+xml": ".html",
        "text/csv": ".csv",
        "text/plain": ".txt",
        "text/markdown": ".md",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    }
    if ctype in by_type:
        return (last or "document").rsplit(".", 1)[0][:80] + by_type[ctype]
    raise BadInput(
        f"the URL's document type is not one finspace reads (Content-Type {ctype[:40]!r}); send a PDF, "
        "HTML, DOCX, XLSX, CSV, TXT or MD file"
    )


async def fetch(url: object, max_bytes: int, timeout_s: float = 30.0, allow_loopback: bool = False) -> Fetched:
    """The document at ``url`` (see the module docstring); BadInput naming the reason for any refusal."""
    try:
        return await asyncio.wait_for(_fetch(url, max_bytes, allow_loopback), timeout_s)
    except asyncio.TimeoutError:
        raise BadInput(
            f"fetching the URL took longer than {timeout_s:g} s, the limit; send the document's bytes "
            "as base64 \"data\" instead"
        ) from None


async def _fetch(url: object, max_bytes: int, allow_loopback: bool) -> Fetched:
    scheme, host, port, current = check_url(url)
    for _hop in range(MAX_REDIRECTS + 1):
        address = await resolve(host, port, allow_loopback)
        async with httpcore.AsyncConnectionPool(
            network_backend=PinnedBackend(address), retries=0, max_connections=1
        ) as pool:
            try:
                async with pool.stream(
                    "GET", current, headers={"User-Agent": "finspace-mcp/1", "Accept-Encoding": "identity"}
                ) as response:
                    status = response.status
                    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
                    if status in (301, 302, 303, 307, 308):
                        location = headers.get("location")
                        if not location:
                            raise BadInput("the URL redirected without a Location; check the address")
                        scheme, host, port, current = check_url(urljoin(current, location))
                        continue
                    if status != 200:
                        raise BadInput(f"the URL answered HTTP {status}; check the address")
                    declared = headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > max_bytes:
                        raise _too_big(max_bytes)
                    chunks, size = [], 0
                    async for chunk in response.aiter_stream():
                        size += len(chunk)
                        if size > max_bytes:
                            raise _too_big(max_bytes)
                        chunks.append(chunk)
                    return Fetched(file_name(current, headers.get("content-type", "")), b"".join(chunks))
            except httpcore.TimeoutException:
                raise BadInput("the URL did not answer in time; check the address") from None
            except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
                raise BadInput(f"the URL could not be fetched ({type(exc).__name__}); check the address") from None
    raise BadInput(f"the URL redirected more than {MAX_REDIRECTS} times; send the final address")


def _too_big(max_bytes: int) -> BadInput:
    return BadInput(
        f"the document at the URL is larger than {max_bytes / (1 << 20):g} MiB, the limit per document "
        "(FINSPACE_DOCUMENT_MAX_MIB); send a smaller file or the part you need"
    )
