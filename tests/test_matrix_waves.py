"""The Matrix's cells go to the engine by document, in waves that fit the KV cache it reports (issue 32.6), and the
conversion gate leaves the chats a slot of their own (issue 33.4). Pure logic here, with a small fake engine; the
same waves on the real vLLM engine are in tests/test_matrix_waves_engine.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest

from finspace.documents.convert import Document, Page
from finspace.documents.gate import ConversionGate
from finspace.errors import BadInput, Busy
from finspace.matrix import run
from finspace.matrix.fields import parse_fields
from finspace.matrix.table import MatrixResult, Row
from finspace.matrix.waves import Waves
from support.fake_engine import FakeEngine as SharedFake

FIELDS = parse_fields(
    [
        {"name": "Revenue", "type": "number", "instruction": "Total revenue"},
        {"name": "Auditor", "type": "text", "instruction": "The auditor"},
        {"name": "Profitable", "type": "yesno", "instruction": "Profitable?"},
    ]
)
NOT_FOUND = json.dumps({"found": False, "quote": "", "page": None, "value": None})


class FakeEngine(SharedFake):
    """The shared fake (tests/support/fake_engine.py) that also counts cells: each takes a moment, and it records
    which documents have cells in flight."""

    def __init__(self, kv_cache_tokens, fail: str | None = None, hold_until: int = 0):
        super().__init__(None, reply=NOT_FOUND, max_model_len=4096, kv_cache_tokens=kv_cache_tokens)
        self.hold_until = hold_until  # cells wait (up to 10 s) until this many have started
        self.in_flight: dict[str, int] = {}  # document name -> its cells in flight
        self.seen: list[frozenset[str]] = []  # the documents in flight, at each cell's start
        self.order: list[str] = []
        self.fail = fail
        self.measured: list[str] = []

    async def measure(self, fn, *, size=None):
        out = await asyncio.to_thread(fn, lambda text: len(text.split()))
        self.measured.append(out.doc.name)
        if out.doc.name == self.fail:
            raise BadInput(f"templating and tokenizing {out.doc.name} took too long")
        return out

    async def chat_parts(self, messages, settings=None, info=None):
        name = settings.document.split('name="', 1)[1].split('"', 1)[0]
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        self.seen.append(frozenset(self.in_flight))
        self.order.append(name)
        try:
            await asyncio.sleep(0.01)
            for _ in range(1000):
                if len(self.order) >= self.hold_until:
                    break
                await asyncio.sleep(0.01)
            yield "", NOT_FOUND
        finally:
            self.in_flight[name] -= 1
            if not self.in_flight[name]:
                del self.in_flight[name]


def doc(name: str, words: int) -> Document:
    return Document(name, "txt", (Page("page 1", " ".join(["word"] * words)),))


def result_for(docs) -> MatrixResult:
    return MatrixResult(FIELDS, tuple(Row(d.name, 1) for d in docs))


async def fill(engine, docs, reply_tokens=16):
    result, waves = result_for(docs), []
    gen = run.fill(
        engine,
        result,
        docs,
        reply_tokens=reply_tokens,
        on_wave=lambda row, kv, w: waves.append((row, kv, w.used, w.capacity)),
    )
    async with contextlib.aclosing(gen) as updates:
        async for _ in updates:
            pass
    return result, waves


def test_waves_keep_the_documents_in_flight_within_the_kv_cache():
    docs = [doc(f"d{i}", 500) for i in range(6)]
    one = asyncio.run(fill(FakeEngine(None), docs[:1]))[1][0][1]  # one document's KV tokens, as the run counts it
    # a KV cache that holds two documents, not three; the cells wait until the first two documents' have started
    engine = FakeEngine(2 * one + one // 2, hold_until=6)
    result, waves = asyncio.run(fill(engine, docs))
    assert result.state == "done" and result.done == 18
    assert all(used <= cap for _r, _kv, used, cap in waves), waves
    assert max(len(s) for s in engine.seen) == 2, engine.seen  # two documents at once, never three
    assert [r for r, *_ in waves] == list(range(6))  # in order, each document once
    # a document's cells go together: its three cells start before any later document's
    assert engine.order == [f"d{i}" for i in (0, 0, 0, 1, 1, 1)] + engine.order[6:]
    assert sorted(engine.order) == sorted(f"d{i}" for i in range(6) for _ in range(3))


def test_unknown_capacity_sends_every_document_at_once():
    engine = FakeEngine(None, hold_until=12)
    result, _ = asyncio.run(fill(engine, [doc(f"d{i}", 200) for i in range(4)]))
    assert result.state == "done" and max(len(s) for s in engine.seen) == 4


def test_a_document_larger_than_the_cache_goes_alone_and_the_rest_follow():
    engine = FakeEngine(100)  # smaller than any one document
    result, waves = asyncio.run(fill(engine, [doc(f"d{i}", 300) for i in range(3)]))
    assert result.state == "done" and result.done == 9
    assert max(len(s) for s in engine.seen) == 1
    assert len(waves) == 3


def test_a_document_that_fails_to_prepare_says_why_and_the_rest_complete():
    engine = FakeEngine(None, fail="d1")
    result, _ = asyncio.run(fill(engine, [doc(f"d{i}", 100) for i in range(3)]))
    assert result.state == "done" and result.done == 6 and result.total == 6
    assert "took too long" in result.rows[1].error
    assert {k[0] for k in result.cells} == {0, 2}


def test_closing_the_matrix_stops_the_preparation_at_its_next_count():
    stop_seen = threading.Event()
    counted = []

    class Slow(FakeEngine):
        async def measure(self, fn, *, size=None):
            def count(text):
                counted.append(text)
                if len(counted) > 1:
                    stop_seen.wait(5)  # the second count waits until the matrix is closed
                return len(text.split())

            return await asyncio.to_thread(fn, count)

    async def main():
        result = result_for([doc("d0", 10)])
        gen = run.fill(Slow(None), result, [doc("d0", 10)])
        task = asyncio.ensure_future(gen.__anext__())
        while len(counted) < 2:
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await gen.aclose()
        stop_seen.set()
        await asyncio.sleep(0.2)
        return result

    result = asyncio.run(main())
    assert result.state == "cancelled"
    assert len(counted) == 2, "the preparation went on counting after the matrix was closed"


def test_waves_admit_by_capacity():
    w = Waves(100)
    assert w.fits(500)  # nothing in flight: a big one goes alone
    w.start(0, 60)
    assert w.fits(40) and not w.fits(41)
    w.finish(0)
    assert w.fits(100)
    assert Waves(None).fits(10**9)


def test_the_chats_keep_a_conversion_slot_while_matrices_hold_theirs():
    async def main():
        gate = ConversionGate(total=2, per_client=1, wait_s=0.3)
        async with gate.slot("m1", bulk=True):
            with pytest.raises(Busy):  # a second matrix waits for the matrices' share
                async with gate.slot("m2", bulk=True):
                    pass
            async with gate.slot("chat") as quick:  # a chat's document still converts, in a slot
                assert quick is None
                with pytest.raises(Busy):
                    async with gate.slot("chat2"):  # both slots taken now (no quick lane at this gate)
                        pass
        quick_gate = ConversionGate(total=2, per_client=1, wait_s=0.3, quick_s=5.0)
        async with quick_gate.slot("a"), quick_gate.slot("b"):
            async with quick_gate.slot("c") as quick:  # a newcomer beside two clients' conversions: the lane
                assert quick == 5.0
                with pytest.raises(Busy):
                    async with quick_gate.slot("d"):  # slots and lane all held
                        pass
        async with gate.slot("m2", bulk=True):  # the share is back
            pass

    asyncio.run(main())


def test_a_newcomer_waits_for_the_lane_or_a_slot_and_leaves_nothing_taken_when_it_goes():
    async def main():
        gate = ConversionGate(total=2, per_client=1, wait_s=5.0, quick_s=5.0)

        async def hold(client, s):
            async with gate.slot(client):
                await asyncio.sleep(s)

        holders = [asyncio.create_task(hold(c, s)) for c, s in (("a", 2), ("b", 2), ("c", 0.2))]
        await asyncio.sleep(0.05)  # a and b hold the slots, c the lane
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with gate.slot("d") as quick:  # the lane frees first: d does not wait for a slot
            assert quick == 5.0 and loop.time() - t0 < 1.0
        async with gate.slot("e") as quick:  # e holds the lane; f waits for it or a slot
            assert quick == 5.0
            waiter = asyncio.create_task(hold("f", 0))
            await asyncio.sleep(0.05)
            assert not waiter.done()
            waiter.cancel()  # f leaves while waiting
            await asyncio.gather(waiter, return_exceptions=True)
        await asyncio.gather(*holders)
        assert (gate._slots._value, gate._quick._value, dict(gate._held)) == (2, 1, {})

    asyncio.run(main())


def test_a_document_is_counted_only_until_it_cannot_fit():
    calls = []

    def count(text):
        calls.append(len(text))
        return len(text.split())

    text = " ".join(["word"] * 100_000)  # 500,000 characters
    assert run.count_upto(count, text, limit=10**9, piece_chars=20_000) >= 100_000  # all of it: exact plus slack
    assert run.count_upto(count, text, limit=10**9, piece_chars=20_000) <= 100_000 + len(text) // 19_000
    calls.clear()
    assert run.count_upto(count, text, limit=1_000, piece_chars=20_000) > 1_000
    assert len(calls) == 1  # one piece told it: the rest is never counted
    assert run.count_upto(count, "short text", limit=1_000) == 2


def test_a_preparation_past_its_time_bound_stops_too():
    """The tokenizer lane answers BadInput after its bound while its thread goes on: that thread must stop."""
    counted, released = [], threading.Event()

    class Bounded(FakeEngine):
        async def measure(self, fn, *, size=None):
            def count(text):
                counted.append(text)
                released.wait(5) if len(counted) == 2 else None
                return len(text.split())

            job = asyncio.ensure_future(asyncio.to_thread(fn, count))
            try:
                return await asyncio.wait_for(asyncio.shield(job), 0.3)
            except asyncio.TimeoutError:
                self.job = job
                raise BadInput("templating and tokenizing this request took over 0.3 s") from None

    async def main():
        engine = Bounded(None)
        result, _ = await fill(engine, [doc("d0", 10)])
        released.set()
        with contextlib.suppress(Exception):
            await engine.job
        return result, engine.job

    result, job = asyncio.run(main())
    assert "took over 0.3 s" in result.rows[0].error
    assert isinstance(job.exception(), run.Stopped) and len(counted) == 2
