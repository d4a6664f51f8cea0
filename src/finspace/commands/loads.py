"""`python -m finspace loads`: the load ledger as a table, with the planner's error per load.

Each row is one load attempt the app made: when (UTC), the model, the hardware,
the outcome, the KV tokens the planner predicted beside the ones vLLM reported,
the planner's error ((planned - actual) / actual), the load time and, for a
failure, where and why. ``--json`` prints the records themselves.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from finspace.fit import render
from finspace.commands.args import positive_int
from finspace.errors import FinspaceError
from finspace.units import fmt_size

DEFAULT_LIMIT = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "loads",
        help="the load ledger: each load's plan beside what vLLM did",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument(
        "--limit",
        type=positive_int("20"),
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show the last N loads (default {DEFAULT_LIMIT})",
    )
    p.add_argument("--json", action="store_true", help="print the records as a JSON array")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="the app's data folder (default: $FINSPACE_DATA_DIR, /data on a Space, else ./data)",
    )
    p.set_defaults(func=run)


def _hardware(hw: object) -> str:
    if not isinstance(hw, dict) or not hw:
        return "?"
    total = hw.get("total_bytes")
    size = f" ({fmt_size(total, places=1)} GiB)" if isinstance(total, (int, float)) and total else ""
    if hw.get("device") == "gpu":
        name = str(hw.get("gpu") or hw.get("gpu_key") or "GPU").replace("NVIDIA ", "")
        count = hw.get("count") or 1
        return f"{count} x {name}{size}"
    return f"CPU{size}"


def _tokens(v: object) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else "-"


def _planned(record: dict, plan: dict) -> object:
    planned = record.get("planned_kv_cache_tokens")
    return planned if planned is not None else plan.get("kv_cache_tokens")


def _one_line(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(records: list[dict], total: int, path: Path) -> str:
    from finspace.ledger_line import failure_reason

    head = ("when (UTC)", "model", "hardware", "outcome", "planned KV", "actual KV", "planner error", "load s", "error")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for r in records:
        at = r.get("at")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) if isinstance(at, (int, float)) else "?"
        ok = r.get("outcome") == "ok"
        outcome = "ok" if ok else "FAILED"
        if r.get("reason") and r.get("reason") != "load":
            outcome += f" ({r['reason']})"
        plan = r.get("plan") if isinstance(r.get("plan"), dict) else {}
        err = r.get("kv_tokens_error_pct")
        err_text = f"{err:+.1f}%" if isinstance(err, (int, float)) else "-"
        secs = r.get("load_seconds")
        secs_text = f"{secs:.1f}" if isinstance(secs, (int, float)) else "-"
        error = "-"
        if not ok:
            reason = failure_reason(r)
            error = _one_line(reason.removeprefix("failed at stage "), 60)
            notes.append(f"{when} {r.get('model_key')}: {_one_line(reason, 400)}")
        rows.append(
            (
                when,
                str(r.get("model_key")),
                _hardware(r.get("hardware")),
                outcome,
                _tokens(_planned(r, plan)),
                _tokens(r.get("kv_cache_tokens")),
                err_text,
                secs_text,
                error,
            )
        )
    shown = f"the last {len(records)} of {total} loads" if total > len(records) else f"{total} load(s)"
    out = [f"load ledger {path}: {shown}", *render.columns(head, rows)]
    if notes:
        out.append("")
        out.extend(notes)
    out.append("")
    out.append(
        "planned KV: the planner's KV-cache blocks x block size; actual KV: vLLM's, after start; "
        "planner error: (planned - actual) / actual."
    )
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from finspace.ledger import FILENAME, Ledger, default_data_dir

    folder = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    if folder.exists() and not folder.is_dir():
        raise FinspaceError(f"--data-dir {folder} is a file, not a folder; give the app's data folder")
    ledger = Ledger(folder / FILENAME)
    records = ledger.records()
    total = len(records)
    records = records[-args.limit :]
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
        return 0
    if not records:
        where = ledger.path if folder.is_dir() else f"{folder} (the folder does not exist)"
        print(
            f"no loads recorded yet in {where}. The app records one line per model load "
            f"(python -m finspace serve); point --data-dir or FINSPACE_DATA_DIR at its data folder."
        )
        return 0
    print(table(records, total, ledger.path))
    return 0
