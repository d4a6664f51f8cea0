"""`python -m finspace eval SET --limit N`: a Scoreboard run from the command line, in this process.

Loads the model (--model, else $FINSPACE_MODEL, else the catalogue's default for this hardware) in an engine of
its own, runs SET's items on it all at once (as the Scoreboard tab does), stores the result in the data folder
beside the load ledger (where the app's Scoreboard lists it) and prints the summary. Exit 2 on a domain error
(an unknown set, a corrupt data file, a model that does not fit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from finspace.commands.args import positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="score the model on a finance QA set (the Scoreboard's run), and store it",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("set", metavar="SET", help="the set: finqa, tatqa or financebench")
    p.add_argument(
        "--limit",
        type=positive_int("20"),
        default=None,
        metavar="N",
        help="run the first N items (default: all, up to FINSPACE_EVAL_MAX_ITEMS)",
    )
    p.add_argument("--model", default=None, help="catalogue key (default $FINSPACE_MODEL or the catalogue's default)")
    p.add_argument("--catalog", default=None, help="models.yaml (default $FINSPACE_CATALOG or the repo's)")
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="the data folder (default $FINSPACE_DATA_DIR, /data on a Space, else ./data)",
    )
    p.add_argument(
        "--file",
        default=None,
        metavar="PATH",
        help="the set's data file in its published format (default: the vendored subset)",
    )
    p.add_argument("--json", action="store_true", help="print the stored result as JSON")
    p.add_argument(
        "--calc",
        action="store_true",
        help="prompt format finspace-eval-v1+calc: the model may call the calculator (a tool parser needed)",
    )
    p.add_argument(
        "--filing",
        choices=("passages", "tools"),
        default=None,
        help="financebench over each question's whole filing (its PDF, fetched once and cached): the "
        "passages that fit, one shot (finspace-eval-v1+filing), or the filing tools "
        "(finspace-eval-v1+filing-tools, a tool parser needed)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from finspace.settings import Settings

    settings = Settings.from_env(os.environ)  # a bad variable: BadInput, exit 2 (finspace.cli)
    given = {"model": args.model, "catalog_path": args.catalog, "data_dir": args.data_dir}
    settings = replace(settings, **{k: v for k, v in given.items() if v is not None})
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = asyncio.run(_run(settings, args))
    if args.json:
        print(json.dumps(result, indent=1, ensure_ascii=False))
    else:
        print(summary(result))
    return 0


def summary(r: dict) -> str:
    head = (
        f"{r['set']} (version {r.get('set_version')}) on {r['model_key']} ({r.get('repo')}, "
        f"{r.get('dtype')}, quantization {r.get('quantization') or 'none'}, context {r.get('max_model_len')})"
    )
    return "\n".join(
        [
            head,
            f"score {r['score'] * 100:.1f}% ({r['correct']} of n={r['n']} correct){' PARTIAL' if r['partial'] else ''}; "
            f"refusals {r['refusals']}; errors {r['errors']}; {r.get('tokens_per_s') or 0:.1f} tokens/s; "
            f"{r.get('wall_s')} s",
            f"prompt format {r.get('prompt_format')}; stored as {r.get('file')}",
        ]
    )


async def _run(settings, args: argparse.Namespace) -> dict:
    from finspace.models.catalog import load_catalog
    from finspace.engine import Engine
    from finspace.host.gpu import MemoryMonitor
    from finspace.errors import FinspaceError
    from finspace.ledger import FILENAME, Ledger, default_data_dir
    from finspace.service import Service

    catalog = load_catalog(settings.catalog_path)
    monitor = MemoryMonitor()
    key = settings.model or catalog.default_key(monitor.has_gpu)
    folder = Path(settings.data_dir) if settings.data_dir else default_data_dir()
    ledger = Ledger(folder / FILENAME, max_bytes=settings.ledger_max_bytes)
    engine = Engine(catalog, monitor, on_load=ledger.append, models_dir=folder / "models", **settings.engine_options())
    svc = Service(engine, catalog, monitor, ledger=ledger, settings=settings)
    try:
        svc.scoreboard._check_args(args.set, args.limit)  # an unknown set is refused before the model loads
        print(f"loading {key}…", file=sys.stderr)
        await svc.load(key)
        fmt = "finspace-eval-v1+calc" if getattr(args, "calc", False) else None
        if getattr(args, "filing", None):
            fmt = "finspace-eval-v1+filing" + ("-tools" if args.filing == "tools" else "")
        job = await svc.scoreboard.start(args.set, args.limit, internal=True, path=args.file, prompt_format=fmt)
        while job.running:
            p = job.progress()
            print(f"\r{p['done']} of {p['total']} items", end="", file=sys.stderr, flush=True)
            await asyncio.wait({job.task}, timeout=1.0)
        print(file=sys.stderr)
        if job.result is None:
            raise FinspaceError(job.error or "the run ended without a result; see the log above")
        return {**job.result, "file": job.file}
    finally:
        await svc.close()
