"""CPU priority of the serving process against its engine's processes.

The serving process (HTTP, Gradio, tokenizing, detokenizing) and vLLM's
engine-core process share the CPU cores. The engine core waits for each step
by polling (vLLM's shared-memory queues call ``sched_yield`` while they wait),
so it never sleeps, and the kernel lets any thread that wakes up preempt it:
each HTTP request or streamed update the serving process handles at the end of
a step holds that step back. On a 2-core machine at 16 users, lowering the
serving process's threads by ``nice`` 10 gave 2-3% more tokens/s, for finspace
and for vLLM's own server alike (README, Benchmarks).

A Linux thread's nice value is its own, inherited by the threads and processes
it creates, and an unprivileged process can only raise it (lower its priority),
never undo that. So the engine is started from a launcher thread that keeps the
priority the app was started with (the engine's processes inherit that), and
``lower_others`` then lowers every other thread of this process after each
start, including the threads the start created here (vLLM's socket threads).
Threads that the lowered ones create later inherit the lower priority.

Linux only; elsewhere, or where the kernel refuses, nothing changes.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from finspace.errors import BadInput

log = logging.getLogger(__name__)

MAX_NICE = 19


def parse_nice(value: str | None, default: int) -> int:
    """FINSPACE_FRONT_NICE: how many nice steps below its engine the serving process runs (0 = the same)."""
    if value is None or value.strip() == "":
        return default
    try:
        steps = int(value)
    except ValueError:
        raise BadInput(f"FINSPACE_FRONT_NICE={value!r} is not a whole number; use 0 (off) to {MAX_NICE}") from None
    if not 0 <= steps <= MAX_NICE:
        raise BadInput(f"FINSPACE_FRONT_NICE={steps} is out of range; use 0 (off) to {MAX_NICE}")
    return steps


def supported() -> bool:
    return hasattr(os, "getpriority") and os.path.isdir("/proc/self/task")


def thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return []


def nice_of(tid: int) -> int | None:
    """A thread's (or process's) nice value; None when it is gone."""
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return None


class Launcher:
    """A thread that keeps this process's starting priority, to start engines from; and the lowering of the
    others. ``steps`` 0: engines start from the caller's thread as usual and nothing is lowered."""

    def __init__(self, steps: int):
        self.steps = steps if supported() else 0
        self._pool: ThreadPoolExecutor | None = None
        self._tid: int | None = None
        self._base: int | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.steps > 0

    def pool(self) -> ThreadPoolExecutor | None:
        """The launcher's one-thread pool, made on first use (the thread is created then, at the caller's
        priority: the first start runs before anything is lowered)."""
        if not self.active:
            return None
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finspace-engine-launcher")
                self._tid = self._pool.submit(threading.get_native_id).result()
                self._base = nice_of(self._tid)
            return self._pool

    def lower_others(self) -> int:
        """Lower every thread of this process but the launcher to the launcher's nice + steps; returns how
        many were changed. Threads already there (or lower) are left alone."""
        if not self.active or self._tid is None or self._base is None:
            return 0
        target = min(MAX_NICE, self._base + self.steps)
        changed = 0
        for tid in thread_ids():
            if tid == self._tid:
                continue
            current = nice_of(tid)
            if current is None or current >= target:
                continue
            try:
                os.setpriority(os.PRIO_PROCESS, tid, target)
                changed += 1
            except OSError as exc:  # a thread that ended meanwhile, or a kernel that refuses
                log.debug("could not lower thread %d: %s", tid, exc)
        return changed

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
