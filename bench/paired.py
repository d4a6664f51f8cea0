"""Paired A/B: several servers up at once, measured in turn, round after round, at one concurrency level.

    .venv/bin/python bench/paired.py [--rounds 10] [--level 16] SPEC [SPEC ...]

SPEC is a (finspace, app.py), b (vLLM's OpenAI server) or g (bench/bare_gradio.py: AsyncLLM behind a bare
Gradio /chat, no finspace, driven like (a)), with optional extra environment for (a):
``a:FINSPACE_STREAM_INTERVAL_MS=100,FINSPACE_CHAT_CONCURRENCY=32``. The same demo model, prompts and engine
settings as bench/serving.py (whose drivers this uses). ``paired.py g a b``: a/g is what finspace adds to
a bare Gradio app, g/b what Gradio and gradio_client cost against vLLM's own server.

Why: on this machine a run's tokens/s drifts by 5-10% over tens of seconds, whichever server it is, so
one server measured after another compares two moments as much as two servers. Here every server is up
for the whole run and each round measures all of them back to back, in alternating order; each round's
tokens/s is divided by the last SPEC's in the same round, and the median of those paired ratios is far
less noisy than a ratio of two separate best runs. The price: each run shares the machine with the other,
idle, servers (idle app 0.04-0.05 cores, mostly Gradio's queue checking for work every 1 ms; idle vLLM
server 0.01). Use it to decide whether a change of a few percent is real, comparing like with like;
bench/serving.py is the full table (and keeps servers apart).

Printed per SPEC, as medians over the rounds: tokens/s, TTFT p50 and TPOT p50 (each run's p50), then the
paired ratio. Last line: ``paired_<spec>_over_<last>=R`` for each SPEC but the last (the median ratio).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import serving  # noqa: E402
from common import install_cleanup, percentile, prepare_model, stop_all  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="+", help="a[:KEY=VALUE,...], b or g; ratios are against the last one")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--level", type=int, default=16, help="concurrent users (default 16)")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--kv-mib", type=int, default=256)
    ap.add_argument("--model-dir", type=Path, help="reuse/generate the demo checkpoint here")
    args = ap.parse_args()
    for spec in args.specs:
        if spec.partition(":")[0] not in ("a", "b", "g") or (spec[0] in "bg" and len(spec) > 1):
            ap.error(f"{spec!r}: a SPEC is 'b', 'g' or 'a' with optional ':KEY=VALUE,...' for the app")
        if any("=" not in item for item in spec.partition(":")[2].split(",") if item):
            ap.error(
                f"{spec!r}: the app's settings are KEY=VALUE pairs separated by commas, e.g. "
                f"a:FINSPACE_STREAM_INTERVAL_MS=100"
            )
    if len(set(args.specs)) != len(args.specs):
        ap.error("each SPEC once: give the app different settings to compare two (a)s")

    install_cleanup()
    t0 = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="finspace-paired-"))
    runners, clients = {}, []
    failed = True
    try:
        model_path, catalog, entry = prepare_model(workdir, args.model_dir)
        servers = []
        for i, spec in enumerate(args.specs):
            which, _, env = spec.partition(":")
            opts = argparse.Namespace(kv_mib=args.kv_mib, app_env=[e for e in env.split(",") if e])
            (workdir / str(i)).mkdir()
            servers.append((spec, which, serving.start_server(which, opts, model_path, catalog, workdir / str(i))))
        users = max(args.level, 4)
        for spec, which, server in servers:
            up = server.wait_ready(timeout=300)
            if which in ("a", "g"):
                gradio_users = serving.GradioUsers(server.url, users, iterate=False)
                clients.append(gradio_users)
                run = (lambda u, s: lambda n, name, t: u.run_level(n, name, t, s))(gradio_users, server)
            else:
                run = (lambda s: lambda n, name, t: serving.run_level_http("b", s.url, entry, n, name, t, s))(server)
            # the same warm-up as bench/serving.py: a whole request, every user once, then 4 users
            run(1, "warm1", args.tokens)
            run(users, "warm-users", 4)
            run(4, "warm4", args.tokens)
            runners[spec] = run
            print(f"{spec}: ready in {up:.0f} s and warm", flush=True)

        rates: dict[str, list[float]] = {s: [] for s in args.specs}
        ttfts: dict[str, list[float]] = {s: [] for s in args.specs}
        tpots: dict[str, list[float]] = {s: [] for s in args.specs}
        for r in range(args.rounds):
            order = args.specs if r % 2 == 0 else args.specs[::-1]
            for spec in order:
                res = runners[spec](args.level, f"{args.level}.{r}", args.tokens)
                bad = [x.tokens for x in res.requests if x.tokens != args.tokens]
                if bad:
                    raise RuntimeError(f"{spec}: requests generated {bad[:5]} tokens, expected {args.tokens}")
                rates[spec].append(res.tok_s)
                ttfts[spec].append(percentile([x.ttft for x in res.requests], 50))
                tpots[spec].append(percentile([x.tpot for x in res.requests], 50))
            print(f"round {r + 1}: " + "  ".join(f"{s} {rates[s][-1]:.0f}" for s in args.specs), flush=True)
        failed = False
    finally:
        for c in clients:
            c.close()
        stop_all()
        if failed:
            print(f"failed; server logs in {workdir}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    base = args.specs[-1]
    print(
        f"\n{args.rounds} rounds at {args.level} users, {args.tokens} tokens/request, greedy; "
        f"whole run {time.monotonic() - t0:.0f} s"
    )
    print(
        f"{'spec':<44} {'tok/s median':>12} {'best':>7} {'TTFT p50':>9} {'TPOT p50':>9}  "
        f"paired ratio to {base}: median (range)"
    )
    last = []
    for spec in args.specs:
        paired = [x / y for x, y in zip(rates[spec], rates[base])]
        print(
            f"{spec:<44} {statistics.median(rates[spec]):>12.1f} {max(rates[spec]):>7.1f} "
            f"{statistics.median(ttfts[spec]) * 1e3:>7.0f}ms {statistics.median(tpots[spec]) * 1e3:>7.2f}ms  "
            f"{statistics.median(paired):.3f} "
            f"({min(paired):.3f}-{max(paired):.3f})"
        )
        if spec != base:
            last.append(f"paired_{spec}_over_{base}={statistics.median(paired):.3f}")
    print(" ".join(last))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
