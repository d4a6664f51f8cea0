"""FitRunner: Will-it-fit checks bounded per client address and in time (finspace.fit.runner)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from finspace.errors import Busy
from finspace.fit.runner import FitRunner, FitTimeout


def slow(release: threading.Event, ran: list):
    def check(x):
        ran.append(x)
        release.wait(10)
        return {"x": x}

    return check


def test_a_client_past_its_bound_gets_busy_naming_it_and_others_are_served():
    async def main():
        release, ran = threading.Event(), []
        runner = FitRunner(slow(release, ran), per_client=2, timeout_s=10)
        first = [asyncio.ensure_future(runner.run("1.2.3.4", i)) for i in range(2)]
        await asyncio.sleep(0.1)
        with pytest.raises(Busy, match="the bound is 2 at once") as info:
            await runner.run("1.2.3.4", 3)
        assert info.value.http_status == 429
        other = asyncio.ensure_future(runner.run("5.6.7.8", 9))  # another address is not held up by the bound
        await asyncio.sleep(0.1)
        release.set()
        assert [r["x"] for r in await asyncio.gather(*first, other)] == [0, 1, 9]
        assert await runner.run("1.2.3.4", 4) == {"x": 4}  # the slots came back

    asyncio.run(main())


def test_a_slow_check_is_answered_at_the_time_bound_and_keeps_its_slot_until_its_thread_ends():
    async def main():
        release, ran = threading.Event(), []
        runner = FitRunner(slow(release, ran), per_client=1, timeout_s=0.3)
        t0 = time.monotonic()
        with pytest.raises(FitTimeout, match="took over 0.3 s"):
            await runner.run("c", 1)
        assert time.monotonic() - t0 < 2
        with pytest.raises(Busy):  # the abandoned check still runs: it still counts
            await runner.run("c", 2)
        release.set()
        for _ in range(50):
            if not runner._running:
                break
            await asyncio.sleep(0.05)
        assert await runner.run("c", 3) == {"x": 3}

    asyncio.run(main())
