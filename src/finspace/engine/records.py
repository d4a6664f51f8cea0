"""What the engine reports: its health, a chat's outcome, and one load attempt's record and stages.

Plain dataclasses and the helpers that fill them; no vLLM, no engine state. The
load record's fields are the ledger's schema (finspace.ledger normalises them).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from finspace.host.hardware import GPUSpec

log = logging.getLogger("finspace.engine")

STAGES = ("plan", "fetch", "stop", "release", "start", "warmup", "ready")
# Where each stage starts on the progress bar (fractions of the whole load).
STAGE_PROGRESS = {"plan": 0.0, "fetch": 0.05, "stop": 0.35, "release": 0.4, "start": 0.45, "warmup": 0.9, "ready": 1.0}

ProgressFn = Callable[[str, float, str], Any]


@dataclass
class ChatInfo:
    """Filled in by ``Engine.chat`` for callers that want to know what happened."""

    request_id: str = ""
    model_key: str = ""
    trimmed_messages: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    first_token_at: float | None = None
    text: str = ""  # the raw reply, thinking tags included (what a Continue resumes from)
    tool_steps: list = field(default_factory=list)  # the chat's calculator calls and results (finspace.tools)
    notes: list = field(default_factory=list)  # what the reply's line says besides its figures ("calculator off: ...")
    documents: str | None = None  # the documents placed in the prompt ("document: 12 of 40 pages ..."), if any


EngineState = Literal["none", "loading", "ready", "switching", "failed"]


@dataclass(frozen=True)
class Health:
    state: EngineState
    model_key: str | None
    model_label: str | None
    loaded_since: float | None
    stage: str | None
    progress: float | None
    loading_key: str | None
    last_error: str | None
    engine_alive: bool
    restarts: int
    last_restart: str | None
    running_requests: int
    device: str  # "gpu" or "cpu"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadRecord:
    """What one load attempt planned and what vLLM did; handed to ``on_load`` (the ledger)."""

    at: float
    model_key: str
    repo: str
    revision: str | None
    hardware: dict
    settings: dict
    plan: dict | None
    outcome: str = "failed"  # "ok" or "failed"
    reason: str = "load"  # load / restore / restart
    stage_seconds: dict = field(default_factory=dict)
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = None
    max_model_len: int | None = None
    memory_used_bytes: int | None = None
    memory_source: str | None = None  # "processes", "load delta" (NVML in a container), "device" (all in use)
    tensor_parallel_size: int = 1
    ranks: list = field(default_factory=list)  # per rank: {"rank", "device", "memory_bytes"} (rank_figures)
    error_stage: str | None = None
    error_type: str | None = None
    error_message: str | None = None


class StageError(Exception):
    """A load stage failed with ``cause`` (vLLM's own exception, or the checkpoint's)."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(str(cause))
        self.stage = stage
        self.cause = cause


@contextlib.contextmanager
def in_stage(name: str):
    """Any failure inside is stage ``name``'s: a StageError, which the switch turns into a rollback."""
    try:
        yield
    except Exception as exc:
        raise StageError(name, exc) from exc


class StageClock:
    """The stage a load is in: reported to ``report`` as it starts, its seconds kept in ``record``."""

    def __init__(self, record: LoadRecord, report: Callable[..., None]):
        self.record, self.report = record, report
        self.stage, self.started = "plan", time.monotonic()

    def enter(self, name: str, message: str) -> None:
        now = time.monotonic()
        self.record.stage_seconds[self.stage] = round(now - self.started, 3)
        self.stage, self.started = name, now
        self.report(name, message)

    def within(self, fraction: float, message: str) -> None:
        """How far the current stage is (0 to 1): the progress bar moves toward the next stage's start."""
        self.report(self.stage, message, fraction)

    def stop(self) -> None:
        self.record.stage_seconds[self.stage] = round(time.monotonic() - self.started, 3)


def emit(on_load: Callable[[LoadRecord], Any] | None, record: LoadRecord) -> None:
    """Hand ``record`` to ``on_load`` (the ledger); a failing callback is logged, never raised."""
    if on_load is not None:
        try:
            on_load(record)
        except Exception:
            log.exception("load record callback failed")


def note_engine(record: LoadRecord, cache_config: Any, max_model_len: int, readings: list) -> None:
    """What the started engine reports (its KV blocks, block size, context) and the memory it uses."""
    record.num_gpu_blocks = cache_config.num_gpu_blocks
    record.block_size = cache_config.block_size
    record.max_model_len = max_model_len
    if cache_config.num_gpu_blocks:
        record.kv_cache_tokens = int(cache_config.num_gpu_blocks) * int(cache_config.block_size)
    record.memory_used_bytes = sum((r.engine_bytes if r.engine_bytes is not None else r.used_bytes) for r in readings)
    sources = {r.engine_source if r.engine_bytes is not None else "device" for r in readings if r.kind == "gpu"}
    record.memory_source = ", ".join(sorted(s for s in sources if s)) or None
    record.tensor_parallel_size = int(record.settings.get("tensor_parallel_size") or 1)
    record.ranks = rank_figures(readings, record.tensor_parallel_size)


def rank_figures(readings: list, tp: int) -> list[dict]:
    """Each rank's memory: on CPU each worker process's resident memory (the host reading's ranks), on GPUs the
    engine's share of GPU n for rank n (the first ``tp`` GPUs: vLLM gives local rank n device n)."""
    host = next((r for r in readings if r.kind == "host"), None)
    if host is not None:
        return [{"rank": k.name, "device": "host", "pid": k.pid, "memory_bytes": k.rss_bytes} for k in host.ranks]
    return [
        {"rank": f"rank {r.index}", "device": f"GPU {r.index}", "memory_bytes": r.engine_bytes}
        for r in [r for r in readings if r.kind == "gpu"][:tp]
    ]


def failure_message(label: str, stage: str, error: str, planned: dict) -> str:
    """A failed load for people: the stage, the (trimmed, redacted) error, and what the planner predicted."""
    reading = (
        f"planner: weights {planned['weights_gib']:.2f} GiB, KV cache {planned['kv_cache_gib']:.2f} GiB "
        f"({planned['kv_cache_tokens']:,} tokens), max_model_len {planned['max_model_len']}, "
        f"fits={planned['fits']}"
    )
    return f"loading {label} failed at stage '{stage}': {error} | {reading}"


def hardware_info(gpu: GPUSpec | None, gpus: int, ram_bytes: int | None) -> dict:
    """The machine a load ran on: ``gpus`` x ``gpu``, or (``gpu`` None) the CPU with ``ram_bytes`` of RAM."""
    if gpu is not None:
        return {"device": "gpu", "gpu": gpu.name, "gpu_key": gpu.key, "count": gpus, "total_bytes": gpu.total_bytes}
    return {"device": "cpu", "gpu": None, "gpu_key": "cpu", "count": 0, "total_bytes": ram_bytes}


def stage_fraction(stage: str, within: float = 0.0) -> float:
    """Where the load is on the progress bar: ``within`` (0 to 1) of the way through ``stage``."""
    start = STAGE_PROGRESS[stage]
    nxt = min((v for v in STAGE_PROGRESS.values() if v > start), default=start)
    return start + max(0.0, min(1.0, within)) * (nxt - start)


def reporter(progress: ProgressFn | None, on_stage: Callable[[str, float], None]) -> Callable[..., None]:
    """A stage report: ``on_stage`` (the engine's state), the log, and ``progress`` (a broken one is logged)."""

    def report(stage: str, message: str, within: float = 0.0) -> None:
        fraction = stage_fraction(stage, within)
        on_stage(stage, fraction)
        log.info("load stage %s: %s", stage, message)
        if progress is not None:
            try:
                progress(stage, fraction, message)
            except Exception:  # a broken progress bar must not break a load
                log.exception("progress callback failed")

    return report
