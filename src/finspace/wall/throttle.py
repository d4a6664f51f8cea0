"""Wrong secrets, counted per client address: past a bound in a window, that address waits (429).

Used by every place that checks the admin token or an API key (finspace.service). ``None`` as the client is an
internal call and is never throttled. The table is bounded: past 10,000 addresses the oldest is forgotten.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from finspace.errors import Busy
from finspace.settings import Limits

MAX_CLIENTS = 10_000


class Throttle:
    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self._failures: dict[str, deque] = {}  # client -> times of its recent wrong secrets

    def check(self, client: str | None) -> None:
        """Busy (429, with the wait) while ``client`` has had its bound of wrong secrets within the window."""
        if client is None:
            return
        times = self._failures.get(client)
        now = self.clock()
        while times and now - times[0] > self.limits.token_window_s:
            times.popleft()
        if times is not None and not times:
            del self._failures[client]
        elif times is not None and len(times) >= self.limits.token_failures:
            wait = max(1, int(self.limits.token_window_s - (now - times[0])) + 1)
            raise Busy(
                f"too many wrong admin tokens or API keys from this address ({self.limits.token_failures} "
                f"in {self.limits.token_window_s:.0f} s); wait {wait} s before trying again",
                retry_after_s=wait,
            )

    def failed(self, client: str | None) -> None:
        if client is None:
            return
        if client not in self._failures and len(self._failures) >= MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))
        self._failures.setdefault(client, deque(maxlen=self.limits.token_failures)).append(self.clock())
