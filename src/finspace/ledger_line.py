"""One line of the load ledger: its schema and how any load record becomes it.

``normalize`` turns an engine's ``LoadRecord`` (or its dict, or an older line read back) into the JSON-able
dict the ledger writes, schema ``SCHEMA``: the plan's fields (``PLAN_FIELDS``), what vLLM did, the stage
times and, for a failure, the stage, type and message (``failure_reason`` says it in one line).
``kv_tokens_error_pct`` is the planner's error on the KV tokens, both counted as the engine counts them
(``_planned_pool_tokens``); ``record_id`` is the id a chat's export, a matrix and a Scoreboard run cite.
``jsonable`` is what JSON can say of any value, used wherever a record or a run is written.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, is_dataclass
from typing import Any

SCHEMA = 1

# The planner's prediction kept in a record (planner.plan_json names).
PLAN_FIELDS = (
    "gpu",
    "gpu_name",
    "gpus",
    "dtype",
    "quantization",
    "weights_gib",
    "weights_bytes",
    "kv_bytes_per_token",
    "requested_gib",
    "kv_cache_gib",
    "kv_cache_bytes",
    "kv_cache_tokens",
    "kv_cache_blocks",
    "max_model_len",
    "max_model_len_that_fits",
    "model_max_len",
    "max_concurrency",
    "fits",
    "reason",
    "block_size",
)
# Engine kwargs that are paths on this machine, not settings.
_NOT_SETTINGS = ("model", "tokenizer")


def int_or_none(v: Any) -> int | None:
    """``v`` as an int, or None (booleans and what int() refuses are None)."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def jsonable(v: Any) -> Any:
    """What JSON can say of ``v`` (no NaN or infinity: None); enums, paths and the like as text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in v]
    if is_dataclass(v) and not isinstance(v, type):
        return jsonable(asdict(v))
    return str(v)


def settings_of(settings: Any) -> dict:
    """The engine settings a record keeps (JSON-able; the paths on this machine left out)."""
    if not isinstance(settings, dict):
        return {}
    return {k: v for k, v in jsonable(settings).items() if k not in _NOT_SETTINGS}


def _plan(plan: Any) -> dict | None:
    """The prediction's fields from ``planner.plan_json`` (the block size comes from its settings)."""
    if not isinstance(plan, dict):
        return None
    out = {k: jsonable(plan[k]) for k in PLAN_FIELDS if k in plan}
    settings = plan.get("settings")
    if "block_size" not in out and isinstance(settings, dict) and "block_size" in settings:
        out["block_size"] = int_or_none(settings["block_size"])
    return out


def _planned_pool_tokens(plan: dict | None) -> int | None:
    """The planner's KV pool in the engine's units: blocks x block size.

    The engine records vLLM's ``num_gpu_blocks x block_size``: every block of the
    pool. The planner's ``kv_cache_tokens`` divides the pool among the KV groups
    of a hybrid model (sliding + full attention), as vLLM's log line does, so for
    those models it is not the same quantity. Blocks x block size is, for every
    model; for single-group models both are equal.
    """
    if not plan:
        return None
    blocks, block_size = int_or_none(plan.get("kv_cache_blocks")), int_or_none(plan.get("block_size"))
    if blocks is not None and block_size:
        return blocks * block_size
    return int_or_none(plan.get("kv_cache_tokens"))


def kv_tokens_error_pct(planned: Any, actual: Any) -> float | None:
    """The planner's error on KV tokens, in percent of what vLLM reported; None without both."""
    p, a = int_or_none(planned), int_or_none(actual)
    if p is None or a is None or a <= 0:
        return None
    return round((p - a) / a * 100, 2)


def record_id(rid: Any, at: Any, model_key: Any) -> str:
    """A load record's id (what a chat's export, a matrix's and a Scoreboard run cite): the one it was written
    with, or, for an older line without one, its time and model."""
    if isinstance(rid, str) and 0 < len(rid) <= 200:
        return rid
    at = at if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at) else 0.0
    return f"{at:.3f}-{model_key}"


def normalize(record: Any) -> dict:
    """A LoadRecord (or its dict, or a ledger line) -> the JSON-able dict the ledger writes."""
    if is_dataclass(record) and not isinstance(record, type):
        raw = asdict(record)
    elif isinstance(record, dict):
        raw = dict(record)
    else:
        raise TypeError(f"a load record must be a LoadRecord or a dict, got {type(record).__name__}")
    at = raw.get("at")
    at = float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at) else time.time()
    plan = _plan(raw.get("plan"))
    stages = raw.get("stage_seconds")
    stages = (
        {
            str(k): float(v)
            for k, v in stages.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if isinstance(stages, dict)
        else {}
    )
    settings = settings_of(raw.get("settings"))
    num_blocks, block_size = int_or_none(raw.get("num_gpu_blocks")), int_or_none(raw.get("block_size"))
    kv_tokens = int_or_none(raw.get("kv_cache_tokens"))
    if kv_tokens is None and num_blocks and block_size:
        kv_tokens = num_blocks * block_size
    outcome = "ok" if raw.get("outcome") == "ok" else "failed"
    max_len = int_or_none(raw.get("max_model_len"))
    if max_len is None and outcome == "ok":
        max_len = int_or_none(settings.get("max_model_len"))
    hardware = raw.get("hardware")
    planned = _planned_pool_tokens(plan)
    model_key = jsonable(raw.get("model_key"))
    ranks = raw.get("ranks")
    out = {
        "v": SCHEMA,
        "id": record_id(raw.get("id"), at, model_key),
        "at": at,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
        "model_key": model_key,
        "repo": jsonable(raw.get("repo")),
        "revision": jsonable(raw.get("revision")),
        "reason": jsonable(raw.get("reason") or "load"),
        "outcome": outcome,
        "hardware": jsonable(hardware) if isinstance(hardware, dict) else {},
        "settings": settings,
        "plan": plan,
        "num_gpu_blocks": num_blocks,
        "block_size": block_size,
        "kv_cache_tokens": kv_tokens,
        "max_model_len": max_len,
        "memory_used_bytes": int_or_none(raw.get("memory_used_bytes")),
        "memory_source": jsonable(raw.get("memory_source")),
        # tensor parallel: how many ranks, and each rank's memory (engine.records.rank_figures)
        "tensor_parallel_size": int_or_none(raw.get("tensor_parallel_size"))
        or int_or_none(settings.get("tensor_parallel_size"))
        or 1,
        "ranks": [jsonable(k) for k in (ranks if isinstance(ranks, list) else ()) if isinstance(k, dict)],
        "stage_seconds": stages,
        "load_seconds": round(sum(stages.values()), 3) if stages else None,
        "planned_kv_cache_tokens": planned,
        "kv_tokens_error_pct": kv_tokens_error_pct(planned, kv_tokens),
        "error_stage": jsonable(raw.get("error_stage")),
        "error_type": jsonable(raw.get("error_type")),
        "error_message": jsonable(raw.get("error_message")),
    }
    return out


def failure_reason(record: dict) -> str:
    """One line: where and why a load failed."""
    stage, kind, msg = record.get("error_stage"), record.get("error_type"), record.get("error_message")
    head = f"failed at stage '{stage}'" if stage else "failed"
    if msg and kind and not str(msg).startswith(f"{kind}:"):
        msg = f"{kind}: {msg}"
    return f"{head}: {msg or kind or 'no message recorded'}"
