"""The Filing Matrix's throughput: 8 documents x 6 fields on one model, against the same 48 requests
(a) sent one at a time, and (b) sent concurrently to vLLM's own server with response_format.

    .venv/bin/python bench/matrix.py [--docs 8] [--tokens 64] [--rounds 2]
    .venv/bin/python bench/matrix.py --kv-docs 2 [--docs 6] [--doc-sentences 24]   (bench/matrix_kv.py)

With --kv-docs N it compares instead, in one process on finspace's Engine, the Matrix's cells sent by document in
waves that fit the KV cache against every cell at once, on a KV pool that holds N documents (bench/matrix_kv.py).

The model is the catalogue's `demo` (bench-llama, random weights; --model-dir for another checkpoint), served
with max_model_len 4,096, float32, enforce_eager and the same KV pool everywhere. Each document is a 3-page PDF
(fpdf2; its first line names it, so no two share a prefix beyond the rules). Every mode sends exactly the same
48 requests: the matrix's own messages (finspace.matrix.cell_prompt: the rules and the document as the system
message, the field as the user's), the cell's JSON schema (finspace.matrix.cells), greedy, max_tokens --tokens:

* matrix: finspace's /matrix (gradio_client), from submit to the finished table: conversion included.
* (a) serial: finspace's /v1/chat/completions with response_format json_schema, one request after another.
* (b) vLLM: vLLM's OpenAI server (`python -m vllm.entrypoints.openai.api_server`, structured outputs with
  xgrammar and no whitespace, as finspace configures its engine), all 48 at once (asyncio + httpx).

finspace runs first (matrix and serial against one server), then vLLM's server. Figures are medians over
--rounds after a warm-up round. The matrix is timed end to end (its filings converted, a child process each,
one after another) and from its first update, sent once every cell is in the engine, to the table: (a) and (b)
get the filings already converted, so the last line compares that same work. Last line:
`matrix_over_serial=R1 matrix_over_vllm=R2`, each the speed ratio (time of the other / time of the matrix's
cells; targets: R1 >= 4, R2 >= 0.9); the line before it gives the end-to-end ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    MODEL_KEY,
    ROOT,
    ServerProcess,
    install_cleanup,
    prepare_model,  # noqa: E402
    start_pair_server,
    write_catalog,
)

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
import documents_gen as gen  # noqa: E402
from support.catalog import long_context_copy  # noqa: E402

CONTEXT = 4096
FIELDS = [
    {"name": "Revenue", "type": "money", "instruction": "Total revenue for the latest period"},
    {"name": "Net income", "type": "money", "instruction": "Net income for the latest period"},
    {"name": "Operating margin", "type": "percent", "instruction": "The operating margin"},
    {"name": "Auditor", "type": "text", "instruction": "The auditor that signed the report"},
    {"name": "Going concern", "type": "yesno", "instruction": "Is there a going-concern doubt?"},
    {"name": "Period end", "type": "date", "instruction": "The last day of the period covered"},
]


def make_documents(folder: Path, n: int, round_no: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [
        gen.pdf(
            folder / f"filing-{round_no}-{i}.pdf",
            pages=3,
            facts={1: f"Filing {round_no}-{i}. Revenue was ${10 + i}.{round_no} billion in fiscal 2024."},
        )
        for i in range(n)
    ]


def requests_for(paths: list[Path], tokens: int) -> list[dict]:
    """The matrix's 48 chat-completions bodies, exactly as finspace's engine sends its cells."""
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits
    from finspace.matrix import cell_prompt
    from finspace.matrix.cells import cell_schema
    from finspace.matrix.fields import parse_fields

    bodies = []
    for path in paths:
        doc = convert(path, path.name, DocumentLimits())
        for f in parse_fields(FIELDS):
            system = f"{cell_prompt.RULES}\n\n{cell_prompt.document_block(doc)}"
            bodies.append(
                {
                    "model": MODEL_KEY,
                    "temperature": 0.0,
                    "top_p": 1.0,
                    "max_tokens": tokens,
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": cell_prompt.field_message(f)},
                    ],
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": "cell", "schema": cell_schema(f, len(doc.pages))},
                    },
                }
            )
    return bodies


async def send_all(url: str, bodies: list[dict], concurrent: bool) -> tuple[float, int]:
    """Seconds for every body to be answered, and the completion tokens."""
    async with httpx.AsyncClient(timeout=600) as c:

        async def one(body: dict) -> int:
            r = await c.post(url + "/v1/chat/completions", json=body)
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:300]}")
            return int(r.json()["usage"]["completion_tokens"])

        t0 = time.perf_counter()
        if concurrent:
            counts = await asyncio.gather(*(one(b) for b in bodies))
        else:
            counts = [await one(b) for b in bodies]
        return time.perf_counter() - t0, sum(counts)


def run_matrix(url: str, paths: list[Path]) -> tuple[float, float, dict]:
    """(seconds from submit to the table, seconds from the first update, sent once the filings are converted and
    every cell is in the engine, to the table, the table)."""
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False)
    t0 = time.perf_counter()
    last, converted = None, None
    for last in client.submit([handle_file(str(p)) for p in paths], json.dumps(FIELDS), api_name="/matrix"):
        converted = converted or time.perf_counter()
    end = time.perf_counter()
    if not last or last["state"] != "done":
        raise RuntimeError(f"the matrix did not finish: {str(last)[:300]}")
    return end - t0, end - (converted or t0), last


def start(which: str, model_path: Path, catalog: Path, workdir: Path, kv_mib: int, tokens: int) -> ServerProcess:
    return start_pair_server(
        which,
        model_path,
        catalog,
        workdir,
        kv_mib,
        CONTEXT,
        finspace_env={"FINSPACE_MATRIX_REPLY_TOKENS": str(tokens), "FINSPACE_MATRIX_MAX_CELLS": "200"},
        vllm_args=("--structured-outputs-config", json.dumps({"backend": "xgrammar", "disable_any_whitespace": True})),
    )


def prepare(workdir: Path, model_dir: Path | None) -> tuple[Path, Path]:
    model_path, _, entry = prepare_model(workdir, model_dir)
    long_path = workdir / "models" / "matrix-4k"
    if not long_path.exists():
        long_context_copy(model_path, long_path, CONTEXT)
    entry = {**entry, "path": str(long_path), "serving": {**entry["serving"], "max_model_len": CONTEXT}}
    return long_path, write_catalog(workdir / "catalog4k", {MODEL_KEY: entry}, default=MODEL_KEY)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens of each cell (default 64)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kv-mib", type=int, default=512)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--model-dir", type=Path, help="a checkpoint to use instead of the generated demo")
    ap.add_argument("--kv-docs", type=int, help="waves against all at once, on a KV pool for this many documents")
    ap.add_argument("--doc-sentences", type=int, default=24, help="--kv-docs: each document's sentences")
    args = ap.parse_args()
    install_cleanup()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="finspace-bench-matrix-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    model_path, catalog = prepare(workdir, args.model_dir)
    if args.kv_docs:
        import matrix_kv

        return matrix_kv.main(args, model_path, catalog, MODEL_KEY, CONTEXT, FIELDS)
    rounds = [make_documents(workdir / "docs", args.docs, r) for r in range(args.rounds + 1)]  # 0: warm-up
    times: dict[str, list[float]] = {"matrix": [], "cells": [], "serial": [], "vllm": []}
    tokens: dict[str, int] = {}

    srv = start("finspace", model_path, catalog, workdir, args.kv_mib, args.tokens)
    try:
        for r, paths in enumerate(rounds):
            t_matrix, t_cells, last = run_matrix(srv.url, paths)
            t_serial, tokens["serial"] = asyncio.run(send_all(srv.url, requests_for(paths, args.tokens), False))
            if r:
                times["matrix"].append(t_matrix), times["cells"].append(t_cells), times["serial"].append(t_serial)
            else:
                print(
                    f"matrix: {last['total']} cells, checks {sorted({c['check'] for row in last['matrix']['rows'] for c in row['cells']})}"
                )
    finally:
        srv.stop()
    srv = start("vllm", model_path, catalog, workdir, args.kv_mib, args.tokens)
    try:
        for r, paths in enumerate(rounds):
            t_vllm, tokens["vllm"] = asyncio.run(send_all(srv.url, requests_for(paths, args.tokens), True))
            if r:
                times["vllm"].append(t_vllm)
    finally:
        srv.stop()

    med = {k: statistics.median(v) for k, v in times.items()}
    cells = args.docs * len(FIELDS)
    print(
        f"{cells} cells, max_tokens {args.tokens}; completion tokens: serial {tokens['serial']}, vLLM {tokens['vllm']}"
    )
    for k, label in (
        ("matrix", "finspace /matrix, end to end"),
        ("cells", "  of which its 48 cells"),
        ("serial", "(a) one at a time (/v1)"),
        ("vllm", "(b) vLLM server, concurrent"),
    ):
        print(f"{label:30} {med[k]:8.2f} s   rounds: {', '.join(f'{t:.2f}' for t in times[k])}")
    print(
        f"end to end (the filings converted too): matrix_over_serial={med['serial'] / med['matrix']:.2f} "
        f"matrix_over_vllm={med['vllm'] / med['matrix']:.2f}"
    )
    # the ratios on the same work: (a) and (b) get the filings already converted, so the matrix's cells are timed
    print(f"matrix_over_serial={med['serial'] / med['cells']:.2f} matrix_over_vllm={med['vllm'] / med['cells']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
