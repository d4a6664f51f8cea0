"""Work that stops when its caller leaves: the one race every door runs (/v1's requests, MCP's calls)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def unless_gone(work: Awaitable, gone: Awaitable) -> tuple[bool, Any]:
    """(True, ``work``'s result); or (False, None) when ``gone`` (the caller leaving) completes first: ``work`` is
    then cancelled and awaited, so its engine stream is closed (an abort) and its slots are freed."""
    task, watch = asyncio.ensure_future(work), asyncio.ensure_future(gone)
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False, None
    return True, task.result()
