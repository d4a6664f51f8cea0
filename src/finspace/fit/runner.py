"""Will-it-fit checks for the public (the tab and the /fit API): a bound per client address, and in time.

``FitRunner.run(client, ...)`` runs the synchronous check (``Service.check_fit``:
parsing, the planner, maybe a Hub read) in a worker thread. A client may have
``per_client`` checks running at once; one more is Busy (429) naming the bound.
A check is answered after ``timeout_s`` at the latest ("took too long"); its
slot stays taken until its thread really ends, so abandoned checks still count
against their client. With the planner's bounds (planner/bounds.py) a check
takes milliseconds; the bounds here keep it so for whatever comes next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from finspace.errors import Busy, FinspaceError


class FitTimeout(FinspaceError):
    http_status = 504


class FitRunner:
    def __init__(self, check: Callable[..., dict], per_client: int = 2, timeout_s: float = 30.0):
        self.check, self.per_client, self.timeout_s = check, per_client, timeout_s
        self._running: dict[str, int] = {}

    def _take(self, client: str) -> None:
        if self._running.get(client, 0) >= self.per_client:
            raise Busy(
                f"{self.per_client} Will-it-fit checks are already running for your address (the bound is "
                f"{self.per_client} at once); wait for them to finish, then try again",
                retry_after_s=2,
            )
        self._running[client] = self._running.get(client, 0) + 1

    def _release(self, client: str) -> None:
        left = self._running.get(client, 1) - 1
        if left > 0:
            self._running[client] = left
        else:
            self._running.pop(client, None)

    async def run(self, client: str | None, *args: Any, **kwargs: Any) -> dict:
        """``check(*args, **kwargs)`` off the serving loop: Busy past the client's bound, FitTimeout past the
        time bound."""
        key = client or "unknown"
        self._take(key)  # no await between the check and the count: two requests can't both pass at the bound
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, lambda: self.check(*args, **kwargs))
        future.add_done_callback(lambda _f: self._release(key))  # when the thread ends, not when we stop waiting
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
        except asyncio.TimeoutError:
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody reads it: no warning
            raise FitTimeout(
                f"the Will-it-fit check took over {self.timeout_s:g} s and was abandoned; check the "
                f"config.json or repo id and try again"
            ) from None
