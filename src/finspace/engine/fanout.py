"""Many engine requests at once (the Matrix's cells, a Scoreboard run's items): their results as they finish,
and the rest cancelled when the caller stops early. vLLM batches what is in flight together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any, TypeVar

K = TypeVar("K")


async def finished(tasks: Mapping[asyncio.Task, K]) -> AsyncGenerator[list[tuple[K, Any]], None]:
    """(key, result) of the tasks that ended, a list per wake-up (several may end together), until all have."""
    pending = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        yield [(tasks[task], task.result()) for task in done]


async def cancel_all(tasks: Mapping[asyncio.Task, Any]) -> None:
    """Cancel the tasks still running and wait until every one has ended (finished ones are left as they are)."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
