"""SEC's EDGAR over HTTP, as SEC asks: its two hosts only, a User-Agent with a contact, 10 requests a second for the
whole Space, bodies cached on disk with their validators, retries with backoff on 429 and 5xx, every body and time
bounded.

Every URL is checked by the document fetcher's rules (finspace.documents.fetch: scheme, credentials, public
addresses only, the connection made to the checked address) and must be on one of the configured hosts (SEC's
www.sec.gov and data.sec.gov unless a test points them at its own server). No redirect is followed. Offline, a
look-up says "SEC cannot be reached" (503), or answers from the cache when it holds the body.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any

import httpcore

from finspace.documents.fetch import PinnedBackend, Unresolved, check_url, resolve
from finspace.edgar.cache import DiskCache, Entry
from finspace.edgar.config import OFF_MESSAGE, EdgarSettings
from finspace.edgar.limiter import RateLimiter
from finspace.errors import BadInput, Busy, DataUnavailable, Forbidden, NotFound

FOREVER = float("inf")


class _Retry(Exception):
    def __init__(self, status: int, after: float | None):
        self.status, self.after = status, after


class SecClient:
    def __init__(self, settings: EdgarSettings, cache_dir: str):
        self.settings = settings
        self.cache = DiskCache(cache_dir)
        self.limiter = RateLimiter(settings.requests_per_s, settings.max_wait_s)
        self.sent = 0  # requests sent to SEC (tests and the bench read it)
        self._inflight: dict[str, asyncio.Future] = {}

    def check_on(self) -> None:
        if not self.settings.enabled:
            raise Forbidden(OFF_MESSAGE)

    def url(self, host: str, path: str) -> str:
        base = self.settings.www_url if host == "www" else self.settings.data_url
        return base + path

    async def json(self, url: str, max_bytes: int, what: str, fresh_s: float | None = None) -> Any:
        body = await self.get(url, max_bytes, what, fresh_s)
        try:
            return await asyncio.to_thread(json.loads, body)
        except (ValueError, RecursionError):
            raise DataUnavailable(f"SEC answered {what} with something that is not JSON; try again later") from None

    async def get(self, url: str, max_bytes: int, what: str, fresh_s: float | None = None) -> bytes:
        """The body at ``url`` (one of the configured hosts), from the cache while fresh, else from SEC. Identical
        look-ups at once share one request."""
        self.check_on()
        fresh_s = self.settings.fresh_s if fresh_s is None else fresh_s
        cached = await asyncio.to_thread(self.cache.get, url)
        if cached is not None and cached.age() < fresh_s and len(cached.body) <= max_bytes:
            return cached.body
        running = self._inflight.get(url)
        if running is not None:
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if running.cancelled() and task is not None and not task.cancelling():
                    return await self.get(url, max_bytes, what, fresh_s)  # the first caller left: ask again
                raise
        future = asyncio.get_running_loop().create_future()
        self._inflight[url] = future
        try:
            body = await self._fetch(url, max_bytes, what, cached)
            future.set_result(body)
            return body
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter, if any, gets it
            raise
        except BaseException:  # cancelled: a waiter asks again itself
            future.cancel()
            raise
        finally:
            self._inflight.pop(url, None)

    async def _fetch(self, url: str, max_bytes: int, what: str, cached: Entry | None) -> bytes:
        s = self.settings
        _scheme, host, port, url = check_url(url)
        if host not in s.hosts:
            raise BadInput(
                f"{host[:80]!r} is not one of SEC's hosts; finspace fetches EDGAR data from "
                f"{', '.join(sorted(s.hosts))} only"
            )
        for attempt in range(s.retries + 1):
            try:
                slot = await self.limiter.wait()
                try:
                    entry = await asyncio.wait_for(self._once(url, host, port, max_bytes, what, cached), s.timeout_s)
                finally:
                    self.limiter.finish(slot)
                return entry.body
            except _Retry as retry:
                if attempt == s.retries:
                    return self._stale(cached, retry.status, what)
                delay = s.backoff_s * 2**attempt
                if retry.after is not None:
                    delay = min(max(delay, retry.after), s.backoff_s * 4 * 2**attempt)
                await asyncio.sleep(delay)
            except (asyncio.TimeoutError, TimeoutError):
                if cached is not None:
                    return cached.body
                raise DataUnavailable(
                    f"SEC did not answer {what} within {s.timeout_s:g} s (FINSPACE_EDGAR_TIMEOUT_S); try again later"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _stale(self, cached: Entry | None, status: int, what: str) -> bytes:
        if cached is not None:
            return cached.body
        if status == 429:
            raise Busy(
                f"SEC asked this Space to slow down (HTTP 429) while fetching {what}; try again in a minute",
                retry_after_s=60,
            )
        raise DataUnavailable(
            f"SEC answered HTTP {status} for {what} after {self.settings.retries + 1} tries; try again later"
        )

    async def _once(self, url: str, host: str, port: int, max_bytes: int, what: str, cached: Entry | None) -> Entry:
        s = self.settings
        try:
            address = await resolve(host, port, s.allow_loopback)
        except Unresolved:
            if cached is not None:
                return cached
            raise DataUnavailable(
                "SEC cannot be reached from this Space (no network to sec.gov); company look-ups "
                "need it: try again later"
            ) from None
        headers = {"User-Agent": s.user_agent, "Accept-Encoding": "gzip"}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached is not None and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
        self.sent += 1
        async with httpcore.AsyncConnectionPool(
            network_backend=PinnedBackend(address), retries=0, max_connections=1
        ) as pool:
            try:
                async with pool.stream("GET", url, headers=list(headers.items())) as response:
                    h = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
                    return await self._answer(url, response, response.status, h, max_bytes, what, cached)
            except (
                httpcore.NetworkError,
                httpcore.TimeoutException,
                httpcore.ProtocolError,
                httpcore.UnsupportedProtocol,
            ):
                if cached is not None:
                    return cached
                raise DataUnavailable("SEC cannot be reached from this Space right now; try again later") from None

    async def _answer(self, url, response, status, h, max_bytes, what, cached) -> Entry:
        if status == 304 and cached is not None:
            return await asyncio.to_thread(self.cache.touch, url, cached)
        if status == 429 or status >= 500:
            after = h.get("retry-after", "")
            raise _Retry(status, float(after) if after.isdigit() else None)
        if status == 404:
            raise NotFound(f"EDGAR has no {what}")
        if status == 403:
            raise DataUnavailable(
                "SEC refused the request (HTTP 403): it refuses programs without a User-Agent with "
                "a contact, or that send too much; check FINSPACE_EDGAR_CONTACT and try later"
            )
        if status != 200:
            raise DataUnavailable(f"SEC answered HTTP {status} for {what}; try again later")
        body = await _read(response, h, max_bytes, what)
        return await asyncio.to_thread(self.cache.put, url, body, h.get("etag"), h.get("last-modified"))


async def _read(response, h: dict, max_bytes: int, what: str) -> bytes:
    """The body, decompressed when gzipped, at most ``max_bytes`` (BadInput naming the bound otherwise)."""
    gz = "gzip" in h.get("content-encoding", "").lower()
    declared = h.get("content-length", "")
    if not gz and declared.isdigit() and int(declared) > max_bytes:
        raise _too_big(what, max_bytes)
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
    chunks, size = [], 0
    async for chunk in response.aiter_stream():
        if inflate is not None:
            try:
                chunk = inflate.decompress(chunk, max_bytes + 1 - size)
            except zlib.error:
                raise DataUnavailable(f"SEC's {what} arrived garbled (bad gzip); try again later") from None
        size += len(chunk)
        if size > max_bytes:
            raise _too_big(what, max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_big(what: str, max_bytes: int) -> BadInput:
    return BadInput(
        f"SEC's {what} is larger than {max_bytes / (1 << 20):.1f} MiB, this Space's bound for it "
        "(FINSPACE_EDGAR_SUBMISSIONS_MIB / FINSPACE_EDGAR_FACTS_MIB set it); it was not read"
    )
