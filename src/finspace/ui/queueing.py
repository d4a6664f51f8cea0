"""Gradio's event queue, made cheap to keep running in a Space that is busy (or idle) all day.

Two costs of Gradio 6's queue that finspace does not need, each measured in the app process:

- **Analytics.** After every event it finishes, the queue rebuilds a pandas summary of up to 10,000 past
  events in a worker thread, for its /monitoring page: 1.3 ms of CPU per event with 1,000 events recorded,
  5.5 ms with 10,000, and every open page's memory tick is an event. ``quiet_analytics`` rebuilds it every
  ``ANALYTICS_EVERY`` events, over the last ``ANALYTICS_EVERY`` (bench/serving.py at 16 and 32 users: 2-3% more
  tokens/s in two A/B pairs, within the noise of one server start).
- **A 1 ms poll.** The loop that starts queued events sleeps 1 ms whenever nothing can start, so the serving
  process wakes 1,000 times a second for as long as it runs, busy or idle: 3.7% of a core in an idle app here
  (vLLM's own idle server: 1.1%), and on a small machine each wake-up preempts the engine's processes.
  ``wake_on_events`` runs the same loop, but it waits for a reason to look again: an event pushed, or one
  finished (which frees a slot and a concurrency unit). A ``FALLBACK_S`` timeout (Gradio's own poll interval
  on Windows) bounds what a missed wake-up could cost. Idle app, process tree: 0.019 cores instead of 0.050.
  Serving is unchanged within the noise: 10 interleaved rounds at 16 users, tokens/s against vLLM's server
  in the same round, median 0.99 with this loop and 1.01 with Gradio's (FINSPACE_QUEUE_POLL=gradio).

``wake_on_events`` mirrors ``Queue.start_processing`` of Gradio ``GRADIO_VERSION``; under any other version it
leaves Gradio's loop alone (and logs that), so a Gradio upgrade can never run a stale copy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import gradio
from gradio import queueing as gradio_queueing
from gradio.utils import run_coro_in_background, set_task_name

log = logging.getLogger("finspace.ui")

ANALYTICS_EVERY = 1000
GRADIO_VERSION = "6.31.0"  # the Queue.start_processing that WakingQueue.start_processing mirrors
FALLBACK_S = 0.05


def quiet_analytics(queue: Any) -> None:
    """Gradio reads these from GRADIO_ANALYTICS_CACHE_FREQUENCY / GRADIO_ANALYTICS_MAX_EVENTS when the queue is
    made (1 and 10,000); set on the queue itself, not in the process's environment. A larger frequency or a
    smaller bound given in the environment is kept."""
    if hasattr(queue, "ANAYLTICS_CACHE_FREQUENCY"):  # sic: Gradio's spelling
        queue.ANAYLTICS_CACHE_FREQUENCY = max(int(queue.ANAYLTICS_CACHE_FREQUENCY), ANALYTICS_EVERY)
    if hasattr(queue, "ANALYTICS_MAX_EVENTS"):
        queue.ANALYTICS_MAX_EVENTS = min(int(queue.ANALYTICS_MAX_EVENTS), ANALYTICS_EVERY)


def wake_on_events(queue: Any) -> bool:
    """Make ``queue`` (a Blocks' ``_queue``, before the app starts) wait for events instead of polling every
    1 ms. Returns whether it did: only for Gradio GRADIO_VERSION's own Queue class."""
    if type(queue) is not gradio_queueing.Queue or gradio.__version__ != GRADIO_VERSION:
        log.info("Gradio %s: its queue keeps its 1 ms poll (the event-driven loop mirrors Gradio %s)",
                 gradio.__version__, GRADIO_VERSION)
        return False
    queue.__class__ = WakingQueue
    return True


class WakingQueue(gradio_queueing.Queue):
    """Gradio's Queue whose start loop sleeps until an event is pushed or finishes (or FALLBACK_S passes)."""

    _wake_event: asyncio.Event | None = None
    idle_waits = 0  # how often the loop waited: a count for tests and benchmarks

    def _wake(self) -> None:
        if self._wake_event is not None:
            self._wake_event.set()

    async def _idle(self, wake: asyncio.Event) -> None:
        self.idle_waits += 1
        try:
            async with asyncio.timeout(FALLBACK_S):
                await wake.wait()
        except TimeoutError:
            pass

    async def push(self, *args: Any, **kwargs: Any):
        try:
            return await super().push(*args, **kwargs)
        finally:
            self._wake()

    async def process_events(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().process_events(*args, **kwargs)
        finally:
            self._wake()  # a slot and a concurrency unit are free again

    async def start_processing(self) -> None:
        # Gradio 6.31.0's loop, line for line, except that "sleep 1 ms" is "wait for a wake-up". The event is
        # cleared before the checks, so a push between a check and the wait still ends the wait at once.
        wake = self._wake_event = asyncio.Event()
        try:
            while not self.stopped:
                wake.clear()
                if len(self) == 0 or None not in self.active_jobs:
                    await self._idle(wake)
                    continue

                async with self.delete_lock:
                    event_batch = self.get_events()

                if not event_batch:
                    await self._idle(wake)
                    continue
                events, batch, concurrency_id = event_batch
                self.active_jobs[self.active_jobs.index(None)] = events
                event_queue = self.event_queue_per_concurrency_id[concurrency_id]
                event_queue.current_concurrency += 1
                start_time = time.time()
                fn = events[0].fn
                event_queue.start_times_per_fn[fn].add(start_time)
                for event in events:
                    if (a := self.event_analytics.get(event._id)) is not None:
                        a["status"] = "processing"
                process_event_task = run_coro_in_background(self.process_events, events, batch, start_time, fn)
                set_task_name(process_event_task, events[0].session_hash, fn._id, events[0]._id, batch)
                self._asyncio_tasks.add(process_event_task)
                process_event_task.add_done_callback(self._asyncio_tasks.discard)
                if self.live_updates:
                    self.broadcast_estimations(concurrency_id)
        finally:
            self.stopped = True
            self._cancel_asyncio_tasks()
