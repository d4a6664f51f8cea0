"""xgrammar's compile time against finspace.structured.cost's figure, on seeded generated schemas.

    .venv/bin/python bench/schemas.py [--schemas 300] [--seed 0] [--rejected 0]

The tokenizer is the CPU default model's, smollm2-135m (SmolLM2-135M-Instruct, a 49,152-token vocabulary;
converted into data/models/ on first use), compiled as vLLM's xgrammar backend compiles (8 threads, compact JSON)
with no cache. First a baseline: the Matrix's costliest cell schema (a text field; matrix/cells.py), the bound's
reference. Then each generated schema (tests/support/schema_gen.py) is checked by finspace.structured: every
accepted one is compiled and timed; with --rejected K, the first K refused ones under three times the bound too
(slow: they are what the bound refuses). Prints the 15 slowest accepted schemas (seed, figure, seconds, seconds
per 10,000 units) and ends with:

    schemas=N accepted=A worst_accepted_compile_s=S baseline_s=B worst_over_baseline=R
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rejected", type=int, default=0)
    args = ap.parse_args()
    from finspace.matrix.cells import cell_schema
    from finspace.matrix.fields import MatrixField
    from finspace.structured import MAX_GRAMMAR_COST, check_schema, schema_cost
    from support.schema_gen import compile_s, compiler, fuzz, schema
    from support.smollm import converted

    comp = compiler(str(converted()))
    compile_s(comp, {"type": "string"})  # the compiler's first use
    reference = cell_schema(MatrixField("Auditor", "text", "x"), 300)
    base = compile_s(comp, reference)
    print(f"baseline: the Matrix's text cell, figure {schema_cost(reference):,}, {base:.2f} s", flush=True)
    t0 = time.monotonic()
    out = fuzz(comp, range(args.seed, args.seed + args.schemas), check_schema, schema_cost)
    ok = sorted((r for r in out["rows"] if r["accepted"]), key=lambda r: -r["compile_s"])
    for r in ok[:15]:
        print(
            f"seed {r['seed']:5d} figure {r['cost']:8,} {r['compile_s']:7.2f} s "
            f"{r['compile_s'] / max(1, r['cost']) * 1e4:5.2f} s/10k"
        )
    refused = [r for r in out["rows"] if not r["accepted"] and r["cost"] <= 3 * MAX_GRAMMAR_COST][: args.rejected]
    for r in refused:
        r["compile_s"] = compile_s(comp, schema(r["seed"]))
        print(f"refused seed {r['seed']:5d} figure {r['cost']:8,} {r['compile_s']:7.2f} s", flush=True)
    w = out["worst"]
    print(f"took {time.monotonic() - t0:.0f} s; worst accepted: seed {w['seed']}, figure {w['cost']:,}")
    print(
        f"schemas={args.schemas} accepted={out['accepted']} worst_accepted_compile_s={w['compile_s']:.2f} "
        f"baseline_s={base:.2f} worst_over_baseline={w['compile_s'] / base:.2f}"
    )


if __name__ == "__main__":
    main()
