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

A chat's document has its own share: the Matrix converts its filings one after another (``bulk=True``), and
all matrices together hold at most ``total - 1`` slots, so one slot is always left to the chats (with the
default 2: matrices convert one filing at a time in all, a chat's document never waits behind them). Two
matrices of slow PDFs held both slots and a 22-byte text file waited 40 s (issue 33, finding 4). A matrix's
filing waits for the share up to ``BULK_WAITS`` x ``wait_s``: the share goes round the matrices filing by
filing, so it waits for one conversion of each other matrix (each within its time bound), never the whole set.

A newcomer has a quick lane: when every slot is held, a chat's document from a client that holds none takes one
more child (the lane, one at a time) whose conversion is cut at ``quick_s`` (FINSPACE_DOCUMENT_QUICK_S, default
10 s) and then refused as busy (429, "send it again shortly"). Two clients' hour-long conversions held both slots
and a third client's 60-byte document waited the whole conversion (issue 41, finding 4: the slot kept for chats
was kept against matrices only); now it converts at once. A document that needs longer than the lane waits for
a slot as before. A newcomer waits for whichever frees first, the lane or a slot: the lane's holder is gone
within ``quick_s``. So the children's peak is ``total + 1`` x the child's cap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

from finspace.documents.limits import DocumentLimits
from finspace.errors import Busy

BULK_WAITS = 3  # a matrix's filing waits up to this many conversion bounds for the matrices' share


class ConversionGate:
    def __init__(self, total: int, per_client: int, wait_s: float, quick_s: float = 0.0):
        # one client never holds every slot, whatever FINSPACE_MAX_CONVERSIONS_PER_CLIENT says (issue 41); with one
        # slot in all that cannot hold, and a client's documents past it wait as everyone's do
        per_client = max(1, min(per_client, total - 1)) if total > 1 else per_client
        self.total, self.per_client, self.wait_s, self.quick_s = total, per_client, wait_s, quick_s
        self._slots: asyncio.Semaphore | None = None  # made in the serving loop, on first use
        self._bulk: asyncio.Semaphore | None = None  # the matrices' share of the slots: total - 1 (at least 1)
        self._quick: asyncio.Semaphore | None = None  # the newcomers' lane: one child, cut at quick_s
        self._held: Counter[str] = Counter()  # running or waiting, per client

    @classmethod
    def of(cls, limits: DocumentLimits) -> ConversionGate:
        return cls(
            limits.max_conversions,
            limits.max_conversions_per_client,
            limits.convert_timeout_s,
            min(limits.quick_s, limits.convert_timeout_s),
        )

    @contextlib.asynccontextmanager
    async def slot(self, client: str | None, bulk: bool = False) -> AsyncIterator[float | None]:
        """Hold one conversion slot for ``client`` (Busy when its bound or the wait is past); ``bulk``: a matrix's
        filing, which takes a slot only within the matrices' share. Yields the quick lane's time bound when the
        conversion runs in it (the converter is cut there: ``convert_upload(quick_s=...)``), else None."""
        key = client or "local"
        if self._held[key] >= self.per_client:
            raise Busy(
                f"you already have {self._held[key]} document(s) converting; the limit is {self.per_client} "
                "per client at a time (FINSPACE_MAX_CONVERSIONS_PER_CLIENT): wait for them to finish"
            )
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.total)
            self._bulk = asyncio.Semaphore(max(1, self.total - 1))
            self._quick = asyncio.Semaphore(1)
        newcomer = not bulk and self.quick_s > 0 and self._held[key] == 0
        self._held[key] += 1
        try:
            async with contextlib.AsyncExitStack() as held:
                loop = asyncio.get_running_loop()
                wait_s = self.wait_s * (BULK_WAITS if bulk else 1)
                deadline = loop.time() + wait_s
                if bulk:
                    held.callback((await self._take((self._bulk,), deadline, wait_s)).release)
                lanes = (self._slots, self._quick) if newcomer else (self._slots,)
                got = await self._take(lanes, deadline, wait_s)
                held.callback(got.release)
                yield self.quick_s if got is self._quick else None
        finally:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

    async def _take(self, sems: tuple, deadline: float, wait_s: float) -> asyncio.Semaphore:
        """The first of ``sems`` to be free (acquired; the others left as they were), or Busy at ``deadline``."""
        for sem in sems:  # a free one at once, in order: a slot before the lane
            if not sem.locked():
                await sem.acquire()
                return sem
        tries = {asyncio.ensure_future(sem.acquire()): sem for sem in sems}
        try:
            await asyncio.wait(
                tries,
                timeout=max(0.0, deadline - asyncio.get_running_loop().time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except BaseException:  # the caller left while waiting: nothing stays taken
            await _settle(tries, keep=0)
            raise
        won = await _settle(tries, keep=1)
        if not won:
            raise Busy(
                f"the server is converting {self.total} documents, its limit at once "
                f"(FINSPACE_MAX_CONVERSIONS), and none finished within {wait_s:g} s; "
                "send the document again shortly",
                retry_after_s=10,
            )
        return won[0]


async def _settle(tries: dict, keep: int) -> list:
    """Stop the acquisitions still waiting; of those that got their semaphore, keep ``keep`` and give the rest
    back. The kept ones."""
    for t in tries:
        t.cancel()
    await asyncio.gather(*tries, return_exceptions=True)
    won = [sem for t, sem in tries.items() if not t.cancelled() and t.exception() is None]
    for sem in won[keep:]:
        sem.release()
    return won[:keep]
