"""One fake of the engine protocol (finspace.engine.api.EngineAPI) for the plumbing tests of the fast lane: the
service, its desks and the doors' logic built in-process with no vLLM. It serves a catalogue entry it never loads,
counts a token a word, and answers every request with ``reply`` (streamed a word at a time), recording what it
was sent. Whatever an issue names is still proven on the real engine by ``make test``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from finspace.engine.api import EngineAPI
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo, Health

if TYPE_CHECKING:
    from finspace.host.hardware import GPUSpec

T = TypeVar("T")


class FakeEngine:
    kind = "local"
    gpu: GPUSpec | None = None
    gpus = 0

    def __init__(
        self,
        entry: Any,
        reply: str = "Total net sales were $391,035 million (page 31).",
        max_model_len: int = 2048,
        kv_cache_tokens: int | None = None,
    ):
        self._entry, self.reply, self._max_model_len = entry, reply, max_model_len
        self._kv_cache_tokens = kv_cache_tokens  # what the Matrix's waves fit their cells into (None: unknown)
        self.sent: list[tuple[list[dict[str, Any]], ChatSettings]] = []  # each request's messages and settings
        self._since = time.time()

    # ----------------------------------------------------------------- state
    def health(self) -> Health:
        return Health(
            "ready", self._entry.key, self._entry.label, self._since, None, None, None, None, True, 0, None, 0, "cpu"
        )

    @property
    def entry(self) -> Any:
        return self._entry

    @property
    def plan(self) -> None:
        return None

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    @property
    def kv_cache_tokens(self) -> int | None:
        return self._kv_cache_tokens

    @property
    def ready(self) -> bool:
        return True

    def where(self) -> str:
        return "this machine"

    # ----------------------------------------------------------------- models
    def check_fits(self, entry: Any) -> None:
        return None

    async def load(self, key: str, progress: Any = None) -> Health:
        return self.health()

    def hardware_info(self) -> dict[str, Any]:
        return {"device": "cpu", "gpu": None, "gpu_key": "cpu", "count": 0, "total_bytes": None}

    # ------------------------------------------------------------------ work
    async def chat_parts(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[tuple[str, str], None]:
        self.sent.append((list(messages), settings or ChatSettings()))
        words = self.reply.split(" ")
        for i, word in enumerate(words):
            await asyncio.sleep(0)
            yield "", word if i == 0 else " " + word
        if info is not None:
            info.output_tokens, info.finish_reason, info.text = len(words), "stop", self.reply

    async def chat(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[str, None]:
        async for _thinking, delta in self.chat_parts(messages, settings, info):
            yield delta

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    async def measure(self, fn: Callable[[Callable[[str], int]], T], *, size: int | None = None) -> T:
        return await asyncio.to_thread(fn, lambda text: len(text.split()))

    # ------------------------------------------------------------- lifecycle
    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def read_memory(self, monitor: Any) -> list[Any]:
        return []


def _conforms(engine: FakeEngine) -> EngineAPI:  # mypy (make lint) checks the fake against the protocol
    return engine
