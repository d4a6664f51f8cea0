"""The Scoreboard's throughput: 100 items of one set run as finspace runs them (every item sent to the engine at
once, so vLLM batches them) against the same items asked one at a time, on the same engine.

    .venv/bin/python bench/evals.py [--items 100] [--tokens 128] [--file tatqa_dataset_dev.json]

The model is the CPU default, smollm2-135m (SmolLM2-135M-Instruct, float32, its 2,048-token context), in an
engine of this process (finspace.engine.Engine, as `python -m finspace eval` runs it), with a 1 GiB KV pool.
The items: TAT-QA's dev split (the published file: --file, else the session's mirror of NExTplusplus/TAT-QA,
else the set's default copy); the first --items of it, or as many as there are (n is printed).

* batched: finspace's run (ScoreDesk.start: every item's request in the engine at once), from start to result.
* serial: the same items through the same function (finspace.scoreboard.run.run_item: the same messages, context
  budget, greedy settings and max_tokens --tokens), one after another.

The batched run goes first and again last (serial between them), so drift on this shared machine shows; its
figure is the mean of the two. Each of the three starts on a freshly loaded engine (the model loaded again), so
no run finds the others' prompts in vLLM's prefix cache (the items' prompts are the same in every mode). tok/s = completion tokens / wall time. Last line: `eval_over_serial=R`, the speed
ratio (serial's time / batched's), target 4x; the lines above it give the paired figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

KEY = "smollm2-135m"


def items_file(given: str | None, folder: Path) -> Path | None:
    if given:
        return Path(given)
    from support.evalsets import tatqa_dev

    return tatqa_dev(folder / "tatqa_dataset_dev.json")


async def batched(svc, path: Path | None, n: int) -> tuple[float, dict]:
    t0 = time.monotonic()
    job = await svc.scoreboard.start("tatqa", n, internal=True, path=str(path) if path else None)
    await svc.scoreboard.wait(job)
    return time.monotonic() - t0, job.result


async def serial(svc, job_result: dict, path: Path | None, n: int) -> tuple[float, int, int]:
    from finspace.scoreboard import asking as prompt, score
    from finspace.scoreboard.run import item_settings, run_item
    from finspace.scoreboard.sets import load_set

    engine = svc.engine
    items = load_set("tatqa", limit=n, path=path, data_dir=svc.settings.data_dir).items
    settings = item_settings(engine.entry, svc.scoreboard.limits.reply_tokens)
    t0 = time.monotonic()
    tokens = correct = 0
    for item in items:
        r = await run_item(
            engine,
            "tatqa",
            item,
            settings,
            context_chars=job_result["context_chars"],
            prompt_mod=prompt,
            score_mod=score,
        )
        tokens, correct = tokens + r.output_tokens, correct + r.correct
    return time.monotonic() - t0, tokens, correct


async def bench(args, workdir: Path) -> None:
    from dataclasses import replace

    from finspace.models.catalog import load_catalog
    from finspace.engine import Engine
    from finspace.scoreboard.limits import EvalLimits
    from finspace.host.gpu import MemoryMonitor
    from finspace.service import Service
    from finspace.settings import Settings
    from support.catalog import write_catalog
    from support.smollm import MODELS, catalog_entry, converted

    converted(MODELS)
    catalog = load_catalog(str(write_catalog(workdir / "catalog", {KEY: catalog_entry(temperature=0.0)}, KEY)))
    settings = replace(
        Settings(data_dir=str(workdir / "data")),
        evals=EvalLimits(max_items=max(args.items, 1), reply_tokens=args.tokens),
    )
    monitor = MemoryMonitor()
    engine = Engine(catalog, monitor, cpu_kv_cache_bytes=args.kv_mib << 20, models_dir=MODELS)
    svc = Service(engine, catalog, monitor, settings=settings)
    path = items_file(args.file, workdir)
    try:
        await svc.load(KEY)
        print(
            f"model {KEY}: context {engine.max_model_len}, items from {path.name if path else 'the default copy'}",
            flush=True,
        )
        b1, result = await batched(svc, path, args.items)
        await svc.load(KEY)  # a fresh engine: an empty prefix cache
        n = result["n"]
        print(
            f"batched (1st): {n} items in {b1:.1f} s, {result['completion_tokens']} tokens, "
            f"{result['completion_tokens'] / b1:.1f} tok/s, score {result['score']:.3f}, errors {result['errors']}",
            flush=True,
        )
        s, s_tokens, s_correct = await serial(svc, result, path, args.items)
        await svc.load(KEY)
        print(
            f"serial: {n} items in {s:.1f} s, {s_tokens} tokens, {s_tokens / s:.1f} tok/s, "
            f"score {s_correct / max(1, n):.3f}",
            flush=True,
        )
        b2, result2 = await batched(svc, path, args.items)
        print(
            f"batched (2nd): {n} items in {b2:.1f} s, {result2['completion_tokens']} tokens, "
            f"{result2['completion_tokens'] / b2:.1f} tok/s",
            flush=True,
        )
    finally:
        await svc.close()
    b = (b1 + b2) / 2
    print(f"{'mode':<10} {'items':>6} {'wall s':>8} {'tokens':>8} {'tok/s':>8}")
    print(f"{'batched':<10} {n:>6} {b:>8.1f} {result['completion_tokens']:>8} {result['completion_tokens'] / b:>8.1f}")
    print(f"{'serial':<10} {n:>6} {s:>8.1f} {s_tokens:>8} {s_tokens / s:>8.1f}")
    print(
        f"n={n} batched_s={b:.1f} (runs {b1:.1f}, {b2:.1f}) serial_s={s:.1f} "
        f"tok_s_ratio={(result['completion_tokens'] / b) / (s_tokens / s):.2f}"
    )
    print(f"eval_over_serial={s / b:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=100, help="items of the set (default 100)")
    ap.add_argument("--tokens", type=int, default=128, help="max_tokens per answer (default 128)")
    ap.add_argument("--kv-mib", type=int, default=1024, help="the CPU KV pool in MiB (default 1024)")
    ap.add_argument("--file", default=None, help="TAT-QA's published dev file (default: this machine's copy)")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with tempfile.TemporaryDirectory(prefix="bench-evals-") as tmp:
        asyncio.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    main()
