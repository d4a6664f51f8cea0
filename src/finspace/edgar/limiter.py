"""At most N requests a second to SEC for the whole Space: one limiter per app, shared by every door.

Each request takes the next free slot (slots are 1/N s apart). A caller whose slot is further away than
``max_wait_s`` is refused at once with Busy (429, "retry in a few seconds") instead of joining an endless queue,
so 200 users at once each either wait their turn or get a clear answer.

Then, on the clock: a request may go only when the one N places before it has finished (its answer came, or it
failed) at least ``WINDOW_S`` ago. So whatever delays a request on its way (a busy event loop, the network), SEC
never receives more than N within a second: the (N+1)th leaves after the 1st was answered, hence after it arrived.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from finspace.errors import Busy

WINDOW_S = 1.05  # a second, and a margin


class Slot:
    """One request's place: ``done`` is when it finished (None while it goes)."""

    def __init__(self):
        self.done: float | None = None
        self.finished = asyncio.Event()


class RateLimiter:
    def __init__(self, per_s: float, max_wait_s: float, clock=time.monotonic):
        self.interval = 1.0 / per_s
        self.max_wait_s = max_wait_s
        self.clock = clock
        self._next = 0.0  # the next free slot
        self._sent: deque[Slot] = deque(maxlen=max(1, int(per_s)))  # the last N requests

    def reserve(self) -> float:
        """Seconds to wait before sending; Busy when the wait would pass ``max_wait_s``."""
        now = self.clock()
        slot = max(now, self._next)
        wait = slot - now
        if wait > self.max_wait_s:
            raise Busy(
                f"SEC allows {1 / self.interval:g} requests a second and this Space's share is taken for the "
                f"next {wait:.0f} s; try again in a few seconds",
                retry_after_s=max(1, round(wait)),
            )
        self._next = slot + self.interval
        return wait

    async def wait(self) -> Slot:
        """Wait for this request's turn; call ``finish`` with the slot when its answer came (or it failed)."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
        while len(self._sent) == self._sent.maxlen:
            oldest = self._sent[0]
            if oldest.done is None:
                await oldest.finished.wait()
                continue
            gap = WINDOW_S - (self.clock() - oldest.done)
            if gap <= 0:
                break
            await asyncio.sleep(gap)
        slot = Slot()
        self._sent.append(slot)
        return slot

    def finish(self, slot: Slot) -> None:
        if slot.done is None:
            slot.done = self.clock()
            slot.finished.set()
