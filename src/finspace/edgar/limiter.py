"""At most N requests a second to SEC for the whole Space: one limiter per app, shared by every door.

Each request takes the next free slot (slots are 1/N s apart). A caller whose slot is further away than
``max_wait_s`` is refused at once with Busy (429, "retry in a few seconds") instead of joining an endless queue,
so 200 users at once each either wait their turn or get a clear answer, and SEC never sees more than N a second.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from finspace.errors import Busy

WINDOW_S = 1.02  # a second, and a margin for the time between the wake-up and the bytes on the wire


class RateLimiter:
    def __init__(self, per_s: float, max_wait_s: float, clock=time.monotonic):
        self.interval = 1.0 / per_s
        self.max_wait_s = max_wait_s
        self.clock = clock
        self._next = 0.0  # the next free slot
        self._sent: deque[float] = deque(maxlen=max(1, int(per_s)))  # the last N sends' times

    def reserve(self) -> float:
        """Seconds to wait before sending; Busy when the wait would pass ``max_wait_s``."""
        now = self.clock()
        slot = max(now, self._next)
        wait = slot - now
        if wait > self.max_wait_s:
            raise Busy(f"SEC allows {1 / self.interval:g} requests a second and this Space's share is taken for the "
                       f"next {wait:.0f} s; try again in a few seconds", retry_after_s=max(1, round(wait)))
        self._next = slot + self.interval
        return wait

    async def wait(self) -> None:
        """Wait for this request's slot; then, measured on the clock, never more than N sends within a second (a
        request that woke late does not let the next ones through early)."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
        while len(self._sent) == self._sent.maxlen and (gap := WINDOW_S - (self.clock() - self._sent[0])) > 0:
            await asyncio.sleep(gap)
        self._sent.append(self.clock())
