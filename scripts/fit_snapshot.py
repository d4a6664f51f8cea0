"""Every `fit` output the planner gives, in one folder: to show a change moves no figure, or which ones it moves.

For each catalogue GPU and each vLLM rule set: the catalogue table (text and --json), and every config in
configs/ and tests/data/configs/ planned alone (text and --json), at the defaults and at PP 2. Compare two
snapshots with `diff -r`. Run: `.venv/bin/python scripts/fit_snapshot.py OUT_DIR`.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from finspace.cli import main
from finspace.host.hardware import KNOWN_GPUS

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(["fit", *args])
        except SystemExit as exc:
            code = exc.code
    return f"{out.getvalue()}\nexit {code}\n"


def snapshot(dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    configs = sorted([*ROOT.glob("configs/*.json"), *ROOT.glob("tests/data/configs/*.json")])
    n = 0
    for gpu in KNOWN_GPUS:
        for rules in ("0.19", "0.32"):
            base = ["--gpu", gpu, "--vllm-version", rules]
            (dest / f"catalogue-{gpu}-{rules}.txt").write_text(_run(base))
            (dest / f"catalogue-{gpu}-{rules}.json").write_text(_run([*base, "--json"]))
            n += 2
            for cfg in configs:
                for extra, tag in (([], "pp1"), (["--pipeline-parallel-size", "2", "--gpus", "2"], "pp2")):
                    args = [*base, "--config", str(cfg), "--max-model-len", "8192", *extra]
                    (dest / f"{cfg.stem}-{gpu}-{rules}-{tag}.json").write_text(_run([*args, "--json"]))
                    n += 1
    return n


if __name__ == "__main__":
    print(snapshot(Path(sys.argv[1])), "outputs written to", sys.argv[1])
