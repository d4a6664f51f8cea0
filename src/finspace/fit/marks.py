"""The catalogue as /models lists it: each model's verdict on this machine, and what the load ledger knows of it on
this GPU (verified, with the context it served, or failed here, with the redacted reason; the ledger read once
per change of its file)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("finspace.fit.marks")


class LedgerMarks:
    def __init__(self, ledger: Any, catalog: Any, redact: Callable[[Any], Any]):
        self.ledger, self.catalog, self.redact = ledger, catalog, redact
        self._cache: tuple[tuple[int, int], dict[str, dict[str, Any]]] | None = None

    def read(self, gpu_key: str | None, on_gpu: bool) -> dict[str, dict[str, Any]]:
        """Each model's mark on ``gpu_key`` ({} without a ledger, or when it cannot be read: logged)."""
        if self.ledger is None:
            return {}
        path = getattr(self.ledger, "path", None)
        try:
            stamp = (os.stat(path).st_mtime_ns, os.stat(path).st_size) if path is not None else None
        except OSError:
            stamp = (0, 0)
        if stamp is not None and self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        try:
            if hasattr(self.ledger, "statuses"):
                statuses = self.ledger.statuses(gpu_key)
            else:
                statuses = {e.key: self.ledger.status_for(e.key, gpu_key) for e in self.catalog.entries}
        except Exception:
            log.exception("reading the load ledger failed")
            return {}
        marks = {k: self._mark(st, on_gpu) for k, st in statuses.items() if st is not None}
        if stamp is not None:
            self._cache = (stamp, marks)
        return marks

    def _mark(self, st: Any, on_gpu: bool) -> dict[str, Any]:
        verified = bool(getattr(st, "verified", False))
        tokens = getattr(st, "max_model_len", None)
        kv_tokens = getattr(st, "kv_cache_tokens", None)
        reason = self.redact(getattr(st, "reason", None))
        where = "this GPU" if on_gpu else "this machine"
        if verified:
            text = f"verified on {where}" + (f" ({tokens:,} tokens)" if isinstance(tokens, int) else "")
        else:
            text = f"failed here: {reason or 'see Load history'}"
        return {
            "verified": verified,
            "max_model_len": tokens,
            "kv_cache_tokens": kv_tokens,
            "reason": reason,
            "text": text,
        }


def model_rows(
    entries: Any, verdict: Callable[[Any], Any], marks: dict[str, dict[str, Any]], serving: str | None
) -> list[dict[str, Any]]:
    """/models and the Gradio API's models: each catalogue entry with the planner's verdict for this machine
    (``verdict(entry)``), its suggestions and plan, and the ledger's mark; ``serving``: the serving model's key."""
    from finspace import planner

    out = []
    for e in entries:
        v = verdict(e)
        p = v.plan
        out.append(
            {
                "key": e.key,
                "label": e.label,
                "description": e.description,
                "source": e.repo or "local",
                "loaded": e.key == serving,
                "fits": v.fits,
                "reason": v.reason,
                "max_model_len": v.max_model_len,
                "kv_cache_tokens": p.kv_cache_tokens if p is not None else None,
                "suggestions": [
                    {"title": s.title, "max_model_len": s.plan_max_model_len, "gpus": s.gpus, "why": s.why}
                    for s in (p.suggestions if p is not None else ())
                ],
                "plan": planner.plan_json(p) if p is not None else None,
                "ledger": marks.get(e.key),
            }
        )
    return out
