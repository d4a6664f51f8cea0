"""The memory plot's readings: device readings taken on demand, at most every ``SAMPLE_EVERY_S``, each new one
kept with its time for the last ``HISTORY_SECONDS`` (the plot's window). ``MemoryHistory`` is given the function
that reads the devices (the engine's NVML/host RAM, or a remote endpoint's /metrics) and keeps the last reading
when one fails (NVML can fail transiently). Used by finspace.service.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

HISTORY_SECONDS = 300  # the memory plot's window
SAMPLE_EVERY_S = 1.5  # readings are taken on demand, at most this often


class MemoryHistory:
    def __init__(self, read: Callable[[], list]):
        self._read = read
        self.samples: deque = deque(maxlen=int(HISTORY_SECONDS / SAMPLE_EVERY_S) + 8)
        self._last_read: tuple[float, list] = (0.0, [])

    def read(self) -> list:
        """Device readings, at most every SAMPLE_EVERY_S; each new reading joins the plot's history."""
        now = time.time()
        at, readings = self._last_read
        if readings and now - at < SAMPLE_EVERY_S:
            return readings
        try:
            readings = self._read()
        except Exception:  # NVML can fail transiently; keep the last reading
            log.exception("reading device memory failed")
            return readings
        self._last_read = (now, readings)
        self.samples.append((now, readings))
        return readings

    def history(self) -> list[tuple[float, list]]:
        cutoff = time.time() - HISTORY_SECONDS
        return [(t, r) for t, r in self.samples if t >= cutoff]
