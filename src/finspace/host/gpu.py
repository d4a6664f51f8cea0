"""Live memory readings: NVML per GPU, host RAM when there is no NVIDIA GPU, and each rank's share.

NVML is reached only through the ``nvml`` object handed in (``pynvml`` by
default), so tests replace exactly that edge and nothing else.

Ranks: vLLM runs each tensor-parallel rank in a worker process titled ``VLLM::Worker_TP<n>``
(``VLLM::Worker`` with one rank; ``multiproc_executor.py``, ``setup_proc_title_and_log_prefix``). On CPU the
host reading lists each worker's resident memory; on a GPU, GPU n's reading is rank n's.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

import psutil

from finspace.host.hardware import GPUSpec, match_nvml_name

MIB = 1 << 20
# vLLM's worker title: "Worker", then _DP<n>, _PP<n>, _PCP<n>, _TP<n>, ... for each parallel size over 1
_WORKER_TITLE = re.compile(r"::Worker(?P<parts>(?:_[A-Z]+\d+)*)\b")


@dataclass(frozen=True)
class RankReading:
    """One engine worker's resident memory (CPU: its weights and KV pool live there)."""

    name: str  # "rank 0", "rank 1" (tensor parallel); "PP1 TP0" with pipeline stages
    pid: int
    rss_bytes: int

    def as_mib(self) -> dict:
        return {"name": self.name, "pid": self.pid, "rss_mib": self.rss_bytes // MIB}


@dataclass(frozen=True)
class DeviceReading:
    index: int
    name: str
    kind: str  # "gpu" or "host"
    total_bytes: int
    used_bytes: int
    free_bytes: int
    engine_bytes: int | None  # memory held by the engine's processes (None: unknown)
    at: float  # time.time() of the reading
    engine_source: str | None = None  # how engine_bytes was found: "processes", "load delta" or None (unknown)
    ranks: tuple[RankReading, ...] = ()  # host: each engine worker (rank) and its resident memory

    def as_mib(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "kind": self.kind,
            "total_mib": self.total_bytes // MIB,
            "used_mib": self.used_bytes // MIB,
            "free_mib": self.free_bytes // MIB,
            "engine_mib": None if self.engine_bytes is None else self.engine_bytes // MIB,
            "engine_source": self.engine_source,
            "ranks": [k.as_mib() for k in self.ranks],
        }


def _load_pynvml() -> Any | None:
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # no library, no driver, no GPU
        return None


class MemoryMonitor:
    """Reads device memory. ``nvml`` is the pynvml module (or a stand-in in tests)."""

    def __init__(self, nvml: Any | None = "auto"):
        self.nvml = _load_pynvml() if nvml == "auto" else nvml
        self._count = 0
        if self.nvml is not None:
            try:
                self._count = int(self.nvml.nvmlDeviceGetCount())
            except Exception:
                self._count = 0
        if self._count == 0:
            self.nvml = None
        self._baseline: dict[int, int] = {}  # GPU index -> bytes in use just before the engine started

    def note_baseline(self) -> None:
        """Remember each GPU's memory in use now, just before an engine starts. Inside a container NVML reports
        the host's process ids, so none matches the app's; the engine's share is then what was added since."""
        if self.has_gpu:
            self._baseline = {r.index: r.used_bytes for r in self.read()}

    @property
    def has_gpu(self) -> bool:
        return self._count > 0

    @property
    def gpu_count(self) -> int:
        return self._count

    def gpu_spec(self) -> GPUSpec | None:
        """The known GPU this machine has (first device), or None on CPU."""
        if not self.has_gpu:
            return None
        h = self.nvml.nvmlDeviceGetHandleByIndex(0)
        name = self.nvml.nvmlDeviceGetName(h)
        if isinstance(name, bytes):
            name = name.decode()
        total = int(self.nvml.nvmlDeviceGetMemoryInfo(h).total)
        return match_nvml_name(name, total)

    def read(self, engine_pids: Iterable[int] = ()) -> list[DeviceReading]:
        now = time.time()
        pids = set(engine_pids)
        if not self.has_gpu:
            vm = psutil.virtual_memory()
            engine = 0
            for pid in pids | {os.getpid()}:
                try:
                    engine += psutil.Process(pid).memory_info().rss
                except psutil.Error:
                    pass
            return [
                DeviceReading(
                    0,
                    "host RAM (no NVIDIA GPU)",
                    "host",
                    vm.total,
                    vm.total - vm.available,
                    vm.available,
                    engine,
                    now,
                    ranks=rank_readings(pids),
                )
            ]
        out = []
        for i in range(self._count):
            h = self.nvml.nvmlDeviceGetHandleByIndex(i)
            name = self.nvml.nvmlDeviceGetName(h)
            if isinstance(name, bytes):
                name = name.decode()
            mem = self.nvml.nvmlDeviceGetMemoryInfo(h)
            engine, source = self._engine_share(h, i, int(mem.used), pids)
            out.append(DeviceReading(i, name, "gpu", int(mem.total), int(mem.used), int(mem.free), engine, now, source))
        return out

    def _engine_share(self, handle: Any, index: int, used: int, pids: set[int]) -> tuple[int | None, str | None]:
        """The engine's bytes on one GPU: its processes' as NVML lists them, else (no process of ours listed: a
        container, where NVML gives host pids) the memory added since ``note_baseline``, else unknown."""
        mine = pids | {os.getpid()}
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            matched = [int(p.usedGpuMemory or 0) for p in procs if p.pid in mine]
        except Exception:
            matched = []
        if matched:
            return sum(matched), "processes"
        if pids and index in self._baseline:
            return max(0, used - self._baseline[index]), "load delta"
        return None, None


# ------------------------------------------------------------------ ranks
def rank_name(title: str) -> str | None:
    """A vLLM worker's name for people from its process title: "VLLM::Worker_TP1" -> "rank 1", "VLLM::Worker"
    -> "rank 0", "VLLM::Worker_PP1_TP0" -> "PP1 TP0"; None for any other process."""
    m = _WORKER_TITLE.search(title)
    if m is None:
        return None
    parts = re.findall(r"_([A-Z]+)(\d+)", m.group("parts"))
    if all(k == "TP" for k, _ in parts):
        return f"rank {parts[0][1] if parts else 0}"
    return " ".join(f"{k}{v}" for k, v in parts)


def rank_readings(pids: Iterable[int]) -> tuple[RankReading, ...]:
    """The engine workers among ``pids`` and their resident memory, in rank order."""
    found = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            name = rank_name(" ".join(proc.cmdline()))
            if name is not None:
                found.append(RankReading(name, pid, proc.memory_info().rss))
        except psutil.Error:
            continue
    return tuple(sorted(found, key=lambda k: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", k.name)]))
