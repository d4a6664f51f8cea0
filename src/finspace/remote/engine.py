"""RemoteEngine: ``finspace.engine.api.EngineAPI`` over an OpenAI-compatible vLLM endpoint.

States (``health().state``): "none" until the first probe (or when the endpoint serves no model), "ready",
and "remote-unreachable" (down, too slow, 401/403, 429 or 5xx), with the reason naming the host only. A
background probe re-reads ``/v1/models`` and ``/metrics`` every ``probe_s`` seconds (every 2 s or sooner while
the endpoint is down, and at once after a chat failed), so the app recovers by itself when the endpoint comes
back. Nothing here waits past the settings' timeouts.

The served models are a live catalogue (``RemoteCatalog``): ``load(key)`` only selects one (instant, nothing
moves in memory). A served model whose id (or root) is a catalogue model's repo or key takes that entry's
label, system prompt, sampling defaults and reasoning parser; others get plain defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from finspace.models.catalog import ModelEntry, Sampling, Serving
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo, Health
from finspace.errors import Busy, EngineFailed, NotReady, ToolsRefused, UnknownModel
from finspace.remote import chat as remote_chat
from finspace.remote.endpoint import Endpoint, Unreachable
from finspace.remote.metrics import RemoteReading
from finspace.settings import RemoteSettings

log = logging.getLogger("finspace.remote")

UNREACHABLE = "remote-unreachable"
DOWN_PROBE_S = 2.0  # the probe's interval while the endpoint is down (or the configured one, if shorter)


class RemoteCatalog:
    """The endpoint's served models, with the surface of finspace.models.catalog.Catalog (always current)."""

    path = None

    def __init__(self, engine: RemoteEngine):
        self._engine = engine

    @property
    def entries(self) -> tuple[ModelEntry, ...]:
        return self._engine.served

    def get(self, key: object) -> ModelEntry:
        for e in self.entries:
            if e.key == key:
                return e
        served = ", ".join(self.keys()) or "none (the endpoint is not answering: see /health)"
        raise UnknownModel(f"unknown model {repr(key)[:80]}; the endpoint serves: {served}")

    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self.keys()

    def default_key(self, has_gpu: bool) -> str | None:
        return self._engine.health().model_key


class RemoteEngine:
    kind = "remote"
    gpu = None
    gpus = 0
    plan = None

    def __init__(
        self, settings: RemoteSettings, *, catalog: Any = None, preferred: str | None = None, max_in_flight: int = 256
    ):
        self.settings = settings
        self.endpoint = Endpoint(settings)
        self.known = catalog  # the local catalogue: labels and defaults for served models it names
        self.preferred = preferred  # FINSPACE_MODEL: the served model to select first
        self.max_in_flight = max_in_flight
        self.catalog = RemoteCatalog(self)
        self.served: tuple[ModelEntry, ...] = ()
        self._lens: dict[str, int] = {}
        self._selected: str | None = None
        self._state = "none"
        self._last_error: str | None = None
        self._since: float | None = None
        self._active = 0
        self._reading: RemoteReading | None = None
        self._client: Any = None
        self._probe: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._closed = False
        self.tools_refused: str | None = None  # why the server refused tools (the chat's calculator), if it did

    # ------------------------------------------------------------------ state
    @property
    def host(self) -> str:
        return self.endpoint.host

    def where(self) -> str:
        return f"remote endpoint {self.host}"

    @property
    def entry(self) -> ModelEntry | None:
        return next((e for e in self.served if e.key == self._selected), None)

    @property
    def max_model_len(self) -> int:
        return self._lens.get(self._selected or "", 0)

    @property
    def kv_cache_tokens(self) -> int | None:
        """Not known: an OpenAI-compatible endpoint does not report its KV cache (the Matrix sends all at once)."""
        return None

    @property
    def ready(self) -> bool:
        return self._state == "ready" and self.entry is not None

    def health(self) -> Health:
        entry = self.entry
        return Health(
            state=self._state,
            model_key=entry.key if entry else None,
            model_label=entry.label if entry else None,
            loaded_since=self._since,
            stage=None,
            progress=None,
            loading_key=None,
            last_error=self._last_error,
            engine_alive=self._state == "ready",
            restarts=0,
            last_restart=None,
            running_requests=self._active,
            device="remote",
        )

    def hardware_info(self) -> dict:
        return {"remote": self.host}

    def check_fits(self, entry: Any) -> None:
        """Nothing to plan: the endpoint serves what it serves."""
        return None

    def read_memory(self, monitor: Any) -> list:
        return [self._reading] if self._reading is not None else []

    def engine_pids(self) -> tuple[int, ...]:
        return ()

    # ----------------------------------------------------------------- models
    async def load(self, key: str, progress: Any = None) -> Health:
        """Select served model ``key`` (no load: the endpoint already serves it)."""
        entry = self.catalog.get(key)
        if entry.key != self._selected:
            self._selected, self._since = entry.key, time.time()
            log.info("selected %s on %s", entry.key, self.host)
        return self.health()

    def _entry_for(self, model: dict) -> ModelEntry:
        mid, root = model["id"], model.get("root")
        length = model.get("max_model_len")
        serving = Serving(max_model_len=int(length) if isinstance(length, int) and length > 0 else "auto")
        for e in getattr(self.known, "entries", ()):
            if mid in (e.key, e.repo) or (root and root in (e.key, e.repo)):
                return dataclasses.replace(
                    e,
                    key=mid,
                    serving=serving,
                    local_path=None,
                    generate=None,
                    config_path=None,
                    convert=None,
                    repo=mid,
                )
        return ModelEntry(
            key=mid,
            label=mid,
            description=f"served by {self.host}",
            architecture="llama",
            repo=None,
            revision=None,
            local_path=None,
            generate=None,
            config_path=None,
            total_size_bytes=None,
            system_prompt="",
            serving=serving,
            sampling=Sampling(),
        )

    # ------------------------------------------------------------------ probe
    async def open(self) -> None:
        """The openai client and the probe, in the serving loop; the first probe is awaited (bounded)."""
        import openai

        # openai's own Timeout: its client is built on httpx2 (openai>=3.5x), whose newer releases refuse httpx's
        self._client = openai.AsyncOpenAI(
            base_url=self.endpoint.base,
            api_key=self.settings.api_key or "none",
            max_retries=0,
            timeout=openai.Timeout(self.settings.timeout_s, connect=self.settings.connect_timeout_s),
        )
        self._wake = asyncio.Event()
        await self.probe()
        self._probe = asyncio.get_running_loop().create_task(self._probe_loop(), name="finspace-remote-probe")

    async def probe(self) -> None:
        """Read /v1/models (the state) and /metrics (the panel) once."""
        try:
            models = await self.endpoint.models(min(self.settings.timeout_s, 5.0))
        except Unreachable as exc:
            self._down(str(exc))
            self._reading = RemoteReading(endpoint=self.host, at=time.time(), error=str(exc))
            return
        metrics = await self.endpoint.metrics()  # before the state changes: /health shows both together
        self._adopt(models)
        if self._state != "ready" and self._selected:
            log.info("the endpoint %s answers; serving %s", self.host, self._selected)
            self.tools_refused = None  # a server started again may take tools now
        self._state, self._last_error = ("ready", None) if self._selected else ("none", f"{self.host} serves no model")
        self._reading = metrics

    def prime(self) -> None:
        """Read the served models once, blocking (bounded), before the page is built: its defaults are the
        selected model's. A failure here only leaves the list empty; the probe reads it again."""
        try:
            self._adopt(self.endpoint.models_sync(min(self.settings.timeout_s, 5.0)))
        except Unreachable as exc:
            self._last_error = str(exc)

    def _adopt(self, models: list[dict]) -> None:
        self.served = tuple(self._entry_for(m) for m in models)
        self._lens = {m["id"]: int(m.get("max_model_len") or 0) for m in models}
        if self._selected not in self._lens:
            keys = list(self._lens)
            self._selected = self.preferred if self.preferred in self._lens else (keys[0] if keys else None)
            self._since = time.time() if self._selected else None

    def _down(self, reason: str, status: int | None = None) -> None:
        if self._state != UNREACHABLE or self._last_error != reason:
            log.warning("the model server is unreachable: %s", reason)
        self._state, self._last_error = UNREACHABLE, reason
        if self._wake is not None:
            self._wake.set()  # probe again soon

    async def _probe_loop(self) -> None:
        while not self._closed:
            delay = self.settings.probe_s if self._state == "ready" else min(self.settings.probe_s, DOWN_PROBE_S)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            if self._wake.is_set():
                self._wake.clear()
                await asyncio.sleep(0.2)  # a burst of failures is one probe
            try:
                await self.probe()
            except Exception:  # noqa: BLE001 - the probe must outlive any surprise
                log.exception("probing %s failed", self.host)

    # ------------------------------------------------------------------- chat
    def _check_ready(self) -> ModelEntry:
        if self._state == UNREACHABLE:
            raise EngineFailed(
                f"the model server is unreachable: {self._last_error}; finspace retries it every "
                f"few seconds (see /health)"
            )
        entry = self.entry
        if entry is None or self._client is None:
            raise NotReady(f"no model is ready ({self._last_error or 'waiting for ' + self.host})")
        return entry

    async def chat_parts(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[tuple[str, str], None]:
        settings = settings or ChatSettings()
        info = info if info is not None else ChatInfo()
        entry = self._check_ready()
        if self._active >= self.max_in_flight:
            raise Busy(f"the server is busy ({self._active} requests running); retry in 5 s", retry_after_s=5)
        req = remote_chat.request_for(entry.key, entry, self.max_model_len or 2, messages, settings)
        self._active += 1
        try:
            parts = remote_chat.stream(
                self._client, self.host, req, info, entry.key, self._down, entry.tool_parser or "hermes"
            )
            async with contextlib.aclosing(parts):
                async for pair in parts:
                    yield pair
        except ToolsRefused as exc:
            self.tools_refused = str(exc)  # the chat stops offering the calculator (finspace.engine.tool_loop)
            raise
        finally:
            self._active -= 1

    async def chat(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[str, None]:
        async with contextlib.aclosing(self.chat_parts(messages, settings, info)) as parts:
            async for _thinking, answer in parts:
                if answer:
                    yield answer

    # ----------------------------------------------------------------- tokens
    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        entry = self._check_ready()
        try:
            return await self.endpoint.tokenize(entry.key, list(texts))
        except Unreachable as exc:
            raise self._token_error(exc) from None

    async def measure(self, fn: Any, *, size: int | None = None) -> Any:
        """``fn(count)`` in a worker thread; ``count`` asks the endpoint's /tokenize (remembered per text)."""
        entry = self._check_ready()
        try:
            return await asyncio.to_thread(fn, lambda text: self.endpoint.count_sync(entry.key, text))
        except Unreachable as exc:
            raise self._token_error(exc) from None

    def _token_error(self, exc: Unreachable) -> EngineFailed:
        if exc.status is None or exc.status >= 500 or exc.status in (401, 403):
            self._down(str(exc), exc.status)
        return EngineFailed(f"the model server could not count tokens: {exc}")

    # ------------------------------------------------------------------ close
    async def close(self) -> None:
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(BaseException):
                await self._probe
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
        await self.endpoint.close()
