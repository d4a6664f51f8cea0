"""How many document conversions run at once: over the whole app, and per client.

Each conversion is a child process capped at ``upload.CHILD_MEMORY_BYTES`` of address space (a hostile file
peaked at 2.2 GiB before its time bound). Nothing else limited how many ran together, so a few clients could
take the machine's memory. The gate, on every way in (the page's chat box, /chat, /v1 file parts):

- at most ``total`` children at once (FINSPACE_MAX_CONVERSIONS); a conversion past it waits for a slot, up to
  ``wait_s``, then is refused (429) naming the bound;
- at most ``per_client`` conversions running or waiting per client address
  (FINSPACE_MAX_CONVERSIONS_PER_CLIENT); past it, refused at once (429) naming the bound.

So the children's peak stays under ``total`` x the child's cap, and one client holds at most ``per_client`` of
the slots' queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import AsyncIterator

from finspace.documents.limits import DocumentLimits
from finspace.errors import Busy


class ConversionGate:
    def __init__(self, total: int, per_client: int, wait_s: float):
        self.total, self.per_client, self.wait_s = total, per_client, wait_s
        self._slots: asyncio.Semaphore | None = None  # made in the serving loop, on first use
        self._held: Counter[str] = Counter()  # running or waiting, per client

    @classmethod
    def of(cls, limits: DocumentLimits) -> ConversionGate:
        return cls(limits.max_conversions, limits.max_conversions_per_client, limits.convert_timeout_s)

    @contextlib.asynccontextmanager
    async def slot(self, client: str | None) -> AsyncIterator[None]:
        """Hold one conversion slot for ``client`` (Busy when its bound or the wait is past)."""
        key = client or "local"
        if self._held[key] >= self.per_client:
            raise Busy(f"you already have {self._held[key]} document(s) converting; the limit is {self.per_client} "
                       "per client at a time (FINSPACE_MAX_CONVERSIONS_PER_CLIENT): wait for them to finish")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.total)
        self._held[key] += 1
        try:
            try:
                await asyncio.wait_for(self._slots.acquire(), self.wait_s)
            except (asyncio.TimeoutError, TimeoutError):
                raise Busy(f"the server is converting {self.total} documents, its limit at once "
                           f"(FINSPACE_MAX_CONVERSIONS), and none finished within {self.wait_s:g} s; "
                           "send the document again shortly", retry_after_s=10) from None
            try:
                yield
            finally:
                self._slots.release()
        finally:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]
