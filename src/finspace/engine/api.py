"""The engine seam: the one interface the service, /v1, the UI, the documents, the matrix and the scoreboard use.

Two implementations, and nobody outside them imports either:

- ``finspace.engine.core.Engine`` (with ``engine.chatting``, ``engine.render``): vLLM in this process's
  children; it plans, fetches, starts, switches, watches and restarts models; tokens are counted with the
  model's own tokenizer in the renderer's lanes;
- ``finspace.remote.RemoteEngine``: an OpenAI-compatible vLLM endpoint (FINSPACE_ENGINE_URL): the models are
  the endpoint's ``/v1/models``, choosing one is a selection (no load), tokens are counted by its ``/tokenize``,
  the memory panel reads its ``/metrics``, and its health is re-probed on a short interval.

Who owns what: the implementations own their state and translate their own failures into finspace.errors
(NotReady, ModelSwitching, EngineFailed, Busy, BadInput); the callers see only this interface and those errors.
``server.run`` picks the implementation from the settings (the only place that names both).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo, Health

if TYPE_CHECKING:
    from finspace.host.hardware import GPUSpec
    from finspace.models.catalog import ModelEntry
    from finspace.planner.result import Plan

T = TypeVar("T")
Counter = Callable[[str], int]  # tokens of one text, in the serving model's tokenizer


@runtime_checkable
class ServingState(Protocol):
    """The engine's state, never its work: what serves, where, with what context. The engine implements it, and
    so does ``finspace.engine.view.ServingView`` (``svc.serving``, what the doors read); the functions that only
    decide from the serving model (which tools a reply offers, a result's share of the context) take this."""

    @property
    def kind(self) -> str: ...  # "local" (vLLM in-process) or "remote" (an endpoint)

    @property
    def gpu(self) -> GPUSpec | None: ...  # the local GPU's spec (None on CPU and in remote mode)

    @property
    def gpus(self) -> int: ...

    def health(self) -> Health: ...

    @property
    def entry(self) -> ModelEntry | None: ...  # the serving model (catalogue entry, or the endpoint's model)

    @property
    def plan(self) -> Plan | None: ...  # the planner's plan for the serving model (None in remote mode)

    @property
    def max_model_len(self) -> int: ...

    @property
    def ready(self) -> bool: ...  # a model answers now (chat, token counts)

    def where(self) -> str: ...  # what serves, for the page: "this machine" or "remote endpoint HOST"


@runtime_checkable
class EngineAPI(ServingState, Protocol):
    """The state above, and the work: loads, chats, token counts, the memory panel's readings."""

    kind: str
    gpu: GPUSpec | None
    gpus: int

    @property
    def kv_cache_tokens(self) -> int | None: ...  # the KV cache's capacity in tokens; None when not known (remote)

    # ----------------------------------------------------------------- models
    def check_fits(self, entry: ModelEntry) -> Plan | None: ...  # None: nothing is planned (remote); DoesNotFit

    async def load(self, key: str, progress: Any = None) -> Health: ...  # remote: a selection, instant

    def hardware_info(self) -> dict[str, Any]: ...

    # ------------------------------------------------------------------ work
    def chat_parts(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[tuple[str, str], None]: ...

    def chat(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[str, None]: ...

    async def count_tokens(self, texts: Sequence[str]) -> list[int]: ...

    async def measure(self, fn: Callable[[Counter], T], *, size: int | None = None) -> T: ...

    """``fn(count)`` off the serving loop, ``count(text)`` the serving model's token count of ``text``."""

    # ------------------------------------------------------------- lifecycle
    async def open(self) -> None: ...  # once, in the serving loop, at start

    async def close(self) -> None: ...

    def read_memory(self, monitor: Any) -> list[Any]: ...  # the memory panel's readings (never blocks the loop)
