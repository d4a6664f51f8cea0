"""A run's stored result: what it scored (the model as served, the set, the prompt format), the figures, and
every item's answer. Built from a finished or cancelled run (finspace.scoreboard.desk)."""

from __future__ import annotations

import logging
import time
from typing import Any

from finspace.ledger_line import jsonable

log = logging.getLogger("finspace.scoreboard")

SCHEMA = 1
SCORED = (
    "score: the share of the n items asked whose answer the set's scorer marked correct (an item whose "
    "request failed counts as wrong); n: the items asked (fewer than the set's total when limited or "
    "cancelled); f1: the mean token F1 where the set defines one"
)


def _iso(ts: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else None


def provenance(served: dict[str, Any], device: str | None) -> dict:
    """A run's model as served, from the service's provenance (``svc.provenance()``, what a reply's and a
    matrix's export cite: key, repo, revision, quantization, dtype, context, the load ledger's record id), under
    the keys a stored result has kept since its schema 1, with the device it ran on."""
    return {
        "model_key": served["model_key"],
        "model_label": served["label"],
        "repo": served["repo"],
        "revision": served["revision"],
        "quantization": served["quantization"],
        "dtype": served["dtype"],
        "max_model_len": served["max_model_len"],
        "load_id": served["load_record_id"],
        "loaded_at": served["loaded_at"],
        "device": device,
    }


def _summary(set_name: str, scored: list) -> dict:
    """The set's own summary of the scored items (finspace.scoreboard.score.summarize), or {} if it fails."""
    try:
        from finspace.scoreboard import score as score_mod

        items = [
            score_mod.ItemScore(correct=r.correct, f1=r.f1, refused=r.refused, extracted=r.extracted) for r in scored
        ]
        return jsonable(score_mod.summarize(items)) if items else {}
    except Exception:  # noqa: BLE001 - the run's own figures stand without it
        log.exception("summarizing %s failed", set_name)
        return {}


def build(job: Any) -> dict:
    """The JSON a run is stored as (a cancelled run's holds the items that had finished, partial: true)."""
    from finspace.scoreboard import asking as prompt_mod

    run, s, prov = job.run, job.eval_set, job.provenance
    done = [run.results[i] for i in sorted(run.results)]
    n = len(done)
    correct = sum(1 for r in done if r.correct)
    f1s = [r.f1 if r.f1 is not None else 0.0 for r in done if r.f1 is not None or r.error]
    cut = max(200, int(getattr(job, "answer_chars", 2000)))
    items = [
        {
            "id": r.id,
            "answer": r.answer if len(r.answer) <= cut else r.answer[:cut] + "…[cut]",
            "extracted": jsonable(r.extracted),
            "correct": r.correct,
            "f1": r.f1,
            "refused": r.refused,
            "error": r.error,
            "output_tokens": r.output_tokens,
            "finish_reason": r.finish_reason,
            "context_chars": r.context_chars,
            "tool_calls": r.tool_calls,
            **({"document": r.document} if r.document else {}),
            **({"notes": list(r.notes)} if getattr(r, "notes", ()) else {}),
        }
        for r in done
    ]
    return {
        "v": SCHEMA,
        "at": job.at,
        "date": _iso(job.at),
        **prov,
        "set": s.name,
        "set_version": jsonable(s.version),
        "set_source": jsonable(s.source),
        "set_license": jsonable(s.license),
        "prompt_format": jsonable(getattr(job, "prompt_format", None) or getattr(prompt_mod, "PROMPT_FORMAT", None)),
        "temperature": 0.0,
        "reply_tokens": job.reply_tokens,
        "context_chars": job.context_chars,
        "n": n,
        "total": run.total,
        "partial": run.state != "done",
        "state": run.state,
        "score": round(correct / n, 4) if n else 0.0,
        "correct": correct,
        "f1": round(sum(f1s) / len(f1s), 4) if f1s else None,
        "refusals": sum(1 for r in done if r.refused),
        "errors": sum(1 for r in done if r.error),
        "completion_tokens": run.completion_tokens,
        "wall_s": round(run.wall_s, 2),
        "tokens_per_s": run.tokens_per_s,
        "scored": SCORED,
        "summary": _summary(s.name, [r for r in done if not r.error]),
        "items": items,
    }
