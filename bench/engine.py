"""Benchmark: finspace's Engine against vLLM's AsyncLLM driven directly, side by side.

    make bench-engine        (or: .venv/bin/python bench/engine.py [--tokens 128] [--reps 2])

Both engines serve the catalogue's `demo` model (bench-llama: hidden 512, 8 layers,
head_dim 64, random weights; generated on first use) in the same process, with the
same prompts (the same templated token ids) and greedy sampling, so every request
generates exactly --tokens tokens. Concurrency levels are interleaved (raw, ours,
raw, ours) and the best of --reps runs is kept for each.

Then the switch: request-to-first-token when finspace switches from `demo-qwen3`
to `demo`, against a fresh AsyncLLM start of `demo` plus its first token.

Last line: ratio_at_16=R switch_ratio=S (ours / raw throughput at 16; our switch / fresh load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

PROMPTS = [
    "Summarise the company's free cash flow trend and what drives it.",
    "What does a widening credit spread tell us about default risk?",
    "Explain duration and convexity for a bond portfolio manager.",
    "How would you value a bank with a dividend discount model?",
]
LEVELS = (1, 4, 16, 32)


async def drive(n: int, run_one) -> tuple[float, int]:
    """n concurrent requests; returns (seconds, output tokens)."""
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(run_one(i) for i in range(n)))
    return time.perf_counter() - t0, sum(counts)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=128, help="output tokens per request (default 128)")
    ap.add_argument("--reps", type=int, default=2, help="runs per level and side; the best is kept (default 2)")
    args = ap.parse_args()

    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    from finspace.models.catalog import load_catalog
    from finspace.models.demo import ensure_demo_model
    from finspace.engine import ChatSettings, Engine
    from finspace.host.gpu import MemoryMonitor
    from finspace.settings import Settings

    catalog = load_catalog(ROOT / "models.yaml")
    demo, other = catalog.get("demo"), catalog.get("demo-qwen3")
    for e in (demo, other):
        ensure_demo_model(e.local_path, e.generate)

    records = []  # every load's stage_seconds: where a switch spends its time
    # the app's engine settings (FINSPACE_CPU_KV_CACHE_MIB, FINSPACE_STOP_GRACE_S, ...): the engine reads no environment
    ours = Engine(
        catalog, MemoryMonitor(nvml=None), on_load=records.append, **Settings.from_env(os.environ).engine_options()
    )
    await ours.load("demo")
    kwargs = ours._engine_kwargs(demo, str(demo.local_path), ours.plan)
    raw = await asyncio.to_thread(AsyncLLM.from_engine_args, AsyncEngineArgs(**kwargs))
    tok = raw.get_tokenizer()
    settings = ChatSettings(temperature=0.0, max_tokens=args.tokens, system_prompt="")
    messages = [[{"role": "user", "content": p}] for p in PROMPTS]

    def ids_for(i: int) -> list[int]:
        out = tok.apply_chat_template(messages[i % len(PROMPTS)], tokenize=True, add_generation_prompt=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, output_kind=RequestOutputKind.DELTA)

    async def raw_one(i: int) -> int:
        n = 0
        async for o in raw.generate({"prompt_token_ids": ids_for(i)}, params, f"raw-{uuid.uuid4().hex}"):
            n += len(o.outputs[0].token_ids)
        return n

    async def ours_one(i: int) -> int:
        from finspace.engine import ChatInfo

        info = ChatInfo()
        async for _ in ours.chat(messages[i % len(PROMPTS)], settings, info):
            pass
        return info.output_tokens

    await drive(4, raw_one)  # warm both paths
    await drive(4, ours_one)
    rows = []
    for n in LEVELS:
        best = {"raw": 0.0, "ours": 0.0}
        for _ in range(args.reps):
            for side, fn in (("raw", raw_one), ("ours", ours_one)):
                secs, toks = await drive(n, fn)
                assert toks == n * args.tokens, f"{side} generated {toks} tokens, expected {n * args.tokens}"
                best[side] = max(best[side], toks / secs)
        rows.append((n, best["raw"], best["ours"], best["ours"] / best["raw"]))
    raw.shutdown()

    # Switch: our request-to-first-token on the new model vs a fresh engine start + first token.
    first_prompt = [{"role": "user", "content": PROMPTS[0]}]

    async def first_token() -> None:
        async for _ in ours.chat(first_prompt, ChatSettings(temperature=0.0, max_tokens=4)):
            return

    switch_times, fresh_times, switch_stages = [], [], []
    for _ in range(args.reps):
        await ours.load("demo-qwen3")
        t0 = time.perf_counter()
        await ours.load("demo")
        await first_token()
        switch_times.append(time.perf_counter() - t0)
        switch_stages.append(records[-1].stage_seconds)

        await ours.unload()
        t0 = time.perf_counter()
        fresh = await asyncio.to_thread(AsyncLLM.from_engine_args, AsyncEngineArgs(**kwargs))
        async for _ in fresh.generate(
            {"prompt_token_ids": ids_for(0)},
            SamplingParams(temperature=0.0, max_tokens=4, output_kind=RequestOutputKind.DELTA),
            f"fresh-{uuid.uuid4().hex}",
        ):
            break
        fresh_times.append(time.perf_counter() - t0)
        fresh.shutdown()
        await asyncio.sleep(2)
        await ours.load("demo")
    await ours.close()

    print(
        f"\nmodel: demo (bench-llama: hidden 512, 8 layers, head_dim 64, fp32), {args.tokens} tokens/request, greedy;"
        f" {os.cpu_count()} CPUs; best of {args.reps}"
    )
    print(f"{'concurrency':>11}  {'AsyncLLM tok/s':>14}  {'finspace tok/s':>14}  {'ratio':>6}")
    for n, r, o, ratio in rows:
        print(f"{n:>11}  {r:>14.1f}  {o:>14.1f}  {ratio:>6.3f}")
    for i, st in enumerate(switch_stages):
        print(f"switch {i + 1} stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in st.items()))
    sw, fr = statistics.median(switch_times), statistics.median(fresh_times)
    print(
        f"switch to demo, request to first token: {sw:.2f} s (median); fresh AsyncLLM start + first token: {fr:.2f} s"
    )
    ratio16 = next(r for n, _, _, r in rows if n == 16)
    print(f"ratio_at_16={ratio16:.3f} switch_ratio={sw / fr:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
