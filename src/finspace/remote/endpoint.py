"""The endpoint's routes besides chat, over httpx: ``/v1/models``, ``/tokenize``, ``/metrics``.

``Unreachable`` carries why the endpoint did not answer as a sentence that names its host only: never the
key, never the URL's path or query. Every call is bounded by the settings' timeouts; nothing retries here
(the engine's probe re-reads the endpoint on its interval).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from urllib.parse import urlsplit

import httpx

from finspace.remote.metrics import RemoteReading, reading
from finspace.settings import RemoteSettings

COUNT_CACHE = 2048  # texts whose token counts are remembered (a document's passages are counted again and again)


class Unreachable(Exception):
    """The endpoint did not answer usefully; ``str()`` is the reason, safe to show. ``status``: its HTTP status."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.status = status


def host_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "the endpoint"


def reason_for(exc: BaseException, host: str, status: int | None = None) -> str:
    """Why ``host`` failed, in words: a refused connection, a timeout, a status (401, 429, 5xx)."""
    if status is not None:
        if status in (401, 403):
            return f"{host} refused the API key ({status}): check FINSPACE_ENGINE_API_KEY"
        if status == 429:
            return f"{host} is overloaded (429 Too Many Requests)"
        if status >= 500:
            return f"{host} answered {status} (a server error)"
        return f"{host} answered {status}"
    if isinstance(exc, httpx.TimeoutException) or "timeout" in type(exc).__name__.lower():
        return f"{host} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, (httpx.ConnectError, ConnectionError)) or "connect" in type(exc).__name__.lower():
        return f"{host} cannot be reached (connection refused or no route)"
    return f"{host} failed ({type(exc).__name__})"


class Endpoint:
    """One OpenAI-compatible vLLM server: ``url`` is its ".../v1" base; the other routes are at its root."""

    def __init__(self, settings: RemoteSettings):
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self.root = self.base[:-3] if self.base.endswith("/v1") else self.base
        self.host = host_of(self.base)
        self.headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.timeout = httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._sync: httpx.Client | None = None
        self._sync_lock = threading.Lock()
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:  # made in the serving loop, on first use
            self._client = httpx.AsyncClient(headers=self.headers, timeout=self.timeout)
        return self._client

    async def _get(self, url: str, timeout: float | None = None) -> httpx.Response:
        try:
            r = await self.client.get(url, timeout=timeout or self.timeout)
        except httpx.HTTPError as exc:
            raise Unreachable(reason_for(exc, self.host)) from None
        if r.status_code >= 400:
            raise Unreachable(reason_for(None, self.host, r.status_code), r.status_code)
        return r

    async def models(self, timeout: float | None = None) -> list[dict]:
        """The served models (``id``, ``root``, ``max_model_len``)."""
        return self._models_of(await self._get(f"{self.base}/models", timeout))

    def models_sync(self, timeout: float) -> list[dict]:
        """The same, blocking: once at start-up, before the page is built (server.run)."""
        try:
            r = httpx.get(f"{self.base}/models", headers=self.headers, timeout=timeout)
        except httpx.HTTPError as exc:
            raise Unreachable(reason_for(exc, self.host)) from None
        if r.status_code >= 400:
            raise Unreachable(reason_for(None, self.host, r.status_code), r.status_code)
        return self._models_of(r)

    def _models_of(self, r: httpx.Response) -> list[dict]:
        try:
            data = r.json().get("data")
        except ValueError:
            raise Unreachable(f"{self.host} did not answer /v1/models with JSON") from None
        if not isinstance(data, list):
            raise Unreachable(f"{self.host} answered /v1/models without a model list")
        return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    async def metrics(self) -> RemoteReading:
        now = time.time()
        try:
            r = await self._get(f"{self.root}/metrics", min(self.settings.timeout_s, 5.0))
            return reading(r.text, self.host, now)
        except Unreachable as exc:
            return RemoteReading(endpoint=self.host, at=now, error=str(exc))
        except Exception as exc:  # a body the parser cannot read
            return RemoteReading(
                endpoint=self.host, at=now, error=f"{self.host}/metrics unreadable ({type(exc).__name__})"
            )

    async def tokenize(self, model: str, texts: list[str]) -> list[int]:
        """Each text's token count by the server's tokenizer (no special tokens), one request per text."""
        out = []
        for text in texts:
            out.append(await self._count_async(model, text))
        return out

    async def _count_async(self, model: str, text: str) -> int:
        cached = self._cached(model, text)
        if cached is not None:
            return cached
        try:
            r = await self.client.post(f"{self.root}/tokenize", json=_tokenize_body(model, text))
        except httpx.HTTPError as exc:
            raise Unreachable(reason_for(exc, self.host)) from None
        return self._remember(model, text, r)

    def count_sync(self, model: str, text: str) -> int:
        """The same count from a worker thread (finspace.remote.engine's ``measure``)."""
        cached = self._cached(model, text)
        if cached is not None:
            return cached
        with self._sync_lock:
            if self._sync is None:
                self._sync = httpx.Client(headers=self.headers, timeout=self.timeout)
            client = self._sync
        try:
            r = client.post(f"{self.root}/tokenize", json=_tokenize_body(model, text))
        except httpx.HTTPError as exc:
            raise Unreachable(reason_for(exc, self.host)) from None
        return self._remember(model, text, r)

    def _cached(self, model: str, text: str) -> int | None:
        key = _key(model, text)
        with self._sync_lock:
            n = self._counts.get(key)
            if n is not None:
                self._counts.move_to_end(key)
            return n

    def _remember(self, model: str, text: str, r: httpx.Response) -> int:
        if r.status_code >= 400:
            raise Unreachable(reason_for(None, self.host, r.status_code) + " to /tokenize", r.status_code)
        try:
            body = r.json()
            n = int(body["count"]) if "count" in body else len(body["tokens"])
        except (ValueError, KeyError, TypeError):
            raise Unreachable(f"{self.host} answered /tokenize without a token count") from None
        with self._sync_lock:
            self._counts[_key(model, text)] = n
            while len(self._counts) > COUNT_CACHE:
                self._counts.popitem(last=False)
        return n

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._sync is not None:
            self._sync.close()
        self._client = self._sync = None


def _tokenize_body(model: str, text: str) -> dict:
    return {"model": model, "prompt": text, "add_special_tokens": False}


def _key(model: str, text: str) -> tuple[str, bytes]:
    return model, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
