"""What the page shows, as plain data: banner and picker text, memory tables for the plots, load history rows.

No Gradio here: every function takes the Service (or plain values) and returns
strings, lists and DataFrames, so the formatting is testable without a browser.
"""

from __future__ import annotations

import html
import time
from typing import Any

import pandas as pd

from finspace.service import Service

GIB = 1 << 30
MIB = 1 << 20

STATE_WORDS = {
    "none": "no model loaded",
    "loading": "loading",
    "switching": "switching",
    "ready": "ready",
    "failed": "failed",
    "remote-unreachable": "model server unreachable",
}
PARTS = ("weights", "KV cache", "activation", "overhead", "free")
PART_COLORS = {
    "weights": "#2563eb",
    "KV cache": "#16a34a",
    "activation": "#f59e0b",
    "overhead": "#9333ea",
    "free": "#d1d5db",
    "engine": "#0ea5e9",
    "other processes": "#64748b",
}


def esc(text: Any) -> str:
    """Escape text for Markdown/HTML output (model labels and errors may contain anything)."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.1f} MiB"


# ----------------------------------------------------------------------- banner
def banner(svc: Service) -> str:
    h = svc.serving.health()
    if svc.serving.kind == "remote":
        where = f"**Remote model server** ({esc(svc.serving.where())}): its models, served by vLLM there."
    elif svc.on_gpu:
        gpu = svc.serving.gpu
        where = f"**{svc.serving.gpus} × {esc(gpu.name)}** ({gpu.total_bytes / GIB:.1f} GiB each)"
    else:
        where = (
            "**No NVIDIA GPU: running a small model on CPU.** SmolLM2 135M answers in plain English (often "
            "wrong on facts: it is tiny); the demo models stream random-weight nonsense. The memory panel "
            "shows host RAM."
        )
    if h.state == "ready":
        state = f"Model: **{esc(h.model_label)}**"
    elif h.state in ("loading", "switching"):
        state = f"Loading **{esc(_label(svc, h.loading_key))}** ({esc(h.stage or 'starting')}); chat resumes when it is ready."
    elif h.state == "remote-unreachable":
        state = (
            f"⚠ **The model server is unreachable:** {esc(svc.redact(h.last_error))}. Retrying every few "
            "seconds; chat resumes when it answers."
        )
    elif h.state == "failed":
        state = f"⚠ No model is serving: {esc(svc.redact(h.last_error) or 'the last load failed')}"
    else:
        err = svc.redact(h.last_error) or svc.load_error
        state = "No model loaded yet." + (
            f" Last error: {esc(err)}" if err else " Pick one under Model and press Load."
        )
    if svc.blocking:
        state = f"⚠ **This machine cannot serve a model:** {esc(svc.blocking)}"
    note = f"  \n⚠ {esc(svc.storage_note)}" if svc.storage_note else ""
    return f"### finspace · finance LLMs on vLLM\n{where}  \n{state}{note}"


def _label(svc: Service, key: str | None) -> str:
    if key is None:
        return "a model"
    try:
        return svc.catalog.get(key).label
    except Exception:
        return key


# ----------------------------------------------------------------- model picker
def choice_label(svc: Service, key: str) -> str:
    """'Llama 3.1 8B Financial — 32,768 tokens', plus the ledger's mark when there is one."""
    entry = svc.catalog.get(key)
    v = svc.verdict(entry)
    text = f"{entry.label} — {v.max_model_len:,} tokens" if v.max_model_len else entry.label
    mark = svc.ledger_mark(key)
    if mark is not None:  # the short form; the full text is under the current model and in /models
        text += " · ✓ verified here" if mark["verified"] else " · ✗ failed here"
    return text


def picker_choices(svc: Service) -> list[tuple[str, str]]:
    return [(choice_label(svc, e.key), e.key) for e in svc.catalog.entries if svc.verdict(e).fits]


def unfit_markdown(svc: Service) -> str:
    """Models the planner says won't start here, each with its reason and the planner's fix."""
    lines = []
    for e in svc.catalog.entries:
        v = svc.verdict(e)
        if v.fits:
            continue
        fixes = [
            s.title + (f" (max context {s.plan_max_model_len:,})" if s.plan_max_model_len else "")
            for s in (v.plan.suggestions if v.plan is not None else ())[:2]
        ]
        already = bool(fixes) and fixes[0].split(" (max context")[0].lower() in v.reason.lower()
        fix = f"  \n  *Fix:* {esc('; or '.join(fixes))}" if fixes and not already else ""
        mark = svc.ledger_mark(e.key)
        seen = f"  \n  *Ledger:* {esc(mark['text'])}" if mark else ""
        lines.append(f"- **{esc(e.label)}** (`{esc(e.key)}`): {esc(v.reason)}{fix}{seen}")
    if svc.serving.kind == "remote":
        return (
            f"The models {esc(svc.serving.where())} serves (its /v1/models). Choosing one selects it for "
            "this app at once: nothing is loaded or unloaded here."
        )
    if not lines:
        return "Every catalogue model fits this machine."
    where = "this GPU" if svc.on_gpu else "this machine"
    return f"**Not offered on {where}** (the planner says vLLM would refuse to start them):\n\n" + "\n".join(lines)


def current_model(svc: Service) -> str:
    h = svc.serving.health()
    if h.state in ("loading", "switching"):
        stage, fraction, message = svc.load_progress or (h.stage or "start", h.progress or 0.0, "")
        return (
            f"**Loading {esc(_label(svc, h.loading_key))}**: stage *{esc(stage)}* "
            f"({fraction * 100:.0f}%) {esc(message)}"
        )
    if h.model_key is None:
        return "**No model loaded.**" + (f"  \n{esc(svc.redact(h.last_error))}" if h.last_error else "")
    plan = svc.serving.plan
    ctx = f"{svc.serving.max_model_len or (plan.max_model_len if plan else 0):,}"
    since = time.strftime("%H:%M:%S", time.localtime(h.loaded_since)) if h.loaded_since else "?"
    mark = svc.ledger_mark(h.model_key)
    extra = f"  \n{esc(mark['text'])}" if mark else ""
    warn = f"  \n⚠ {esc(svc.redact(h.last_error))}" if h.last_error else ""
    score = latest_line(svc, h.model_key)  # the Scoreboard's latest complete score for this model
    extra += f"  \n{score}" if score else ""
    return f"Serving **{esc(h.model_label)}** (`{esc(h.model_key)}`), context {ctx} tokens, since {since}.{extra}{warn}"


def latest_line(svc: Service, model_key: str | None) -> str:
    """The picker's line: the loaded model's latest complete Scoreboard score ('' when none)."""
    try:
        r = svc.scoreboard.latest(model_key)
    except Exception:  # noqa: BLE001 - the picker must render whatever the results folder holds
        return ""
    if not r or not isinstance(r.get("score"), (int, float)):
        return ""
    return f"Scoreboard: {esc(r.get('set'))} {r['score'] * 100:.1f}% (n={esc(r.get('n'))}, {esc(r.get('date'))})"


def load_notice(svc: Service) -> str:
    """The notice over the chat input while a switch runs ('' when chat is open)."""
    h = svc.serving.health()
    if h.state in ("loading", "switching") or svc.load_running:
        target = _label(svc, h.loading_key or svc.loading_key)
        return (
            f"**Chat is paused:** switching to {esc(target)}. Your conversation is kept; send again when it is ready."
        )
    if h.state == "remote-unreachable":
        return f"⚠ **Chat is unavailable:** the model server is unreachable ({esc(svc.redact(h.last_error))})."
    if h.state == "failed" or h.model_key is None:
        return "⚠ **Chat is unavailable:** no model is loaded. Load one under *Model*."
    return ""


# ----------------------------------------------------------------------- memory
def memory_markdown(svc: Service, readings: list) -> str:
    if not readings:
        return "No memory readings yet."
    if readings[0].kind == "remote":
        return remote_markdown(readings[0])
    at = time.strftime("%H:%M:%S", time.localtime(readings[0].at))
    rows = []
    if not svc.on_gpu:
        rows.append("**No NVIDIA GPU detected**: showing host RAM instead of GPU memory.")
    rows.append("| device | used / total | engine | free |")
    rows.append("|---|---|---|---|")
    for r in readings:
        share = (
            "?"
            if r.engine_bytes is None
            else f"{r.engine_bytes / MIB:,.0f} MiB ({r.engine_bytes / max(r.total_bytes, 1):.0%})"
        )
        if r.engine_source == "load delta":
            share += " †"
        name = f"GPU {r.index}: {esc(r.name)}" if r.kind == "gpu" else esc(r.name)
        rows.append(
            f"| {name} | {r.used_bytes / MIB:,.0f} / {r.total_bytes / MIB:,.0f} MiB "
            f"({r.used_bytes / max(r.total_bytes, 1):.0%}) | {share} | {r.free_bytes / MIB:,.0f} MiB |"
        )
        rows.extend(f"| ↳ {esc(k.name)} (pid {k.pid}) | | {k.rss_bytes / MIB:,.0f} MiB | |" for k in r.ranks)
    note = "engine = the vLLM processes and this app"
    if any(r.ranks for r in readings):
        note += "; ↳ each engine worker (tensor-parallel rank) and its resident memory"
    if any(r.engine_source == "load delta" for r in readings):
        note += (
            "; † NVML lists no process of this app (a container shows the host's ids): the engine's share is "
            "the memory added since its load began"
        )
    rows.append(f"\n<small>sampled {at} · every 2 s · {note}</small>")
    return "\n".join(rows)


def remote_markdown(r: Any) -> str:
    """The remote endpoint's /metrics: KV-cache usage, running and waiting requests."""
    at = time.strftime("%H:%M:%S", time.localtime(r.at))
    if r.error:
        return f"**remote** · {esc(r.endpoint)}: /metrics unavailable ({esc(r.error)})\n\n<small>sampled {at}</small>"
    kv = "?" if r.kv_cache_usage is None else f"{r.kv_cache_usage:.1%}"
    num = lambda v: "?" if v is None else f"{v:,}"  # noqa: E731
    engines = f" across {r.engines} engines" if r.engines > 1 else ""
    return (
        "**remote** · the model server's own /metrics (no local GPU memory to show)\n\n"
        "| endpoint | KV cache usage | running requests | waiting requests |\n|---|---|---|---|\n"
        f"| {esc(r.endpoint)} | {kv}{engines} | {num(r.running)} | {num(r.waiting)} |\n\n"
        f"<small>sampled {at} · read every few seconds from vLLM's Prometheus metrics</small>"
    )


def memory_frame(svc: Service) -> pd.DataFrame:
    """The line plot's data: used and engine memory (GiB) per device over the last minutes."""
    rows = []
    for t, readings in svc.history():
        stamp = pd.Timestamp(t, unit="s", tz="UTC").tz_convert(None)
        for r in readings:
            if r.kind == "remote":  # no bytes to plot: the table shows its KV usage and requests
                continue
            dev = f"GPU {r.index}" if r.kind == "gpu" else "host RAM"
            rows.append({"time": stamp, "GiB": round(r.used_bytes / GIB, 3), "series": f"{dev} used"})
            if r.engine_bytes is not None:
                rows.append({"time": stamp, "GiB": round(r.engine_bytes / GIB, 3), "series": f"{dev} engine"})
            if len(r.ranks) > 1:  # tensor parallel on CPU: a line per rank
                rows.extend({"time": stamp, "GiB": round(k.rss_bytes / GIB, 3), "series": k.name} for k in r.ranks)
    if not rows:
        return pd.DataFrame(
            {
                "time": pd.Series([], dtype="datetime64[ns]"),
                "GiB": pd.Series([], dtype=float),
                "series": pd.Series([], dtype=str),
            }
        )
    return pd.DataFrame(rows)


def breakdown_frame(svc: Service, readings: list) -> pd.DataFrame:
    """The stacked bars: the loaded model's planned breakdown against capacity, and what is in use now.

    Every (bar, part) row is always present (zeros when unknown): the browser's plot keeps the colour scale
    of its first data, so a part that appears later would be drawn without its colour.
    """
    plan = svc.serving.plan if svc.serving.health().state == "ready" else None
    reading = readings[0] if readings and readings[0].kind != "remote" else None
    planned = dict.fromkeys(("weights", "KV cache", "activation", "overhead", "free"), 0)
    if plan is not None:
        planned.update(
            {
                "weights": plan.weights_bytes,
                "KV cache": plan.kv_cache_bytes,
                "activation": plan.activation_bytes,
                "overhead": plan.overhead_bytes,
            }
        )
        capacity = plan.gpu.total_bytes  # per GPU; on CPU the planner's "GPU" is host RAM
        planned["free"] = max(0, capacity - sum(planned.values()))
    now = dict.fromkeys(("engine", "other processes", "free"), 0)
    if reading is not None:
        engine = reading.engine_bytes or 0
        now.update(
            {"engine": engine, "other processes": max(0, reading.used_bytes - engine), "free": reading.free_bytes}
        )
    rows = [{"bar": "planned", "part": k, "GiB": round(v / GIB, 3)} for k, v in planned.items()]
    rows += [{"bar": "in use now", "part": k, "GiB": round(v / GIB, 3)} for k, v in now.items()]
    return pd.DataFrame(rows, columns=["bar", "part", "GiB"])


def breakdown_caption(svc: Service) -> str:
    h = svc.serving.health()
    if h.state in ("loading", "switching"):
        return f"Loading {esc(_label(svc, h.loading_key))}: its planned breakdown shows when it is ready."
    plan = svc.serving.plan
    if svc.serving.kind == "remote":
        return "Remote model server: its memory is planned and held there (see its KV-cache usage above)."
    if plan is None or h.state != "ready":
        return "No model loaded: no planned breakdown."
    label = esc(svc.serving.entry.label if svc.serving.entry else "?")
    if svc.on_gpu:
        where = f"{plan.gpu.name} ({_gib(plan.gpu.total_bytes)})"
    else:
        where = "host RAM (on CPU the KV cache is the fixed FINSPACE_CPU_KV_CACHE_MIB pool)"
    kv, tokens = plan.kv_cache_bytes, plan.kv_cache_tokens
    return (
        f"Planned for **{label}** on {esc(where)}: weights {_gib(plan.weights_bytes)}, "
        f"KV cache {_gib(kv)} (~{tokens:,} tokens), activation {_gib(plan.activation_bytes)}, "
        f"overhead {_gib(plan.overhead_bytes)}."
    )


# ---------------------------------------------------------------- load history
HISTORY_COLUMNS = [
    "when",
    "model",
    "why",
    "outcome",
    "planned KV tokens",
    "actual KV tokens",
    "planner error %",
    "max context",
    "load s",
    "error",
]


def _get(rec: dict, *paths: str) -> Any:
    for path in paths:
        cur: Any = rec
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is not None:
            return cur
    return None


def history_rows(records: list[dict]) -> list[list]:
    """One row per load attempt, newest first: planned vs actual KV tokens, and the error for failures."""
    rows = []
    for rec in reversed(records):
        at = _get(rec, "at")
        when = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
            if isinstance(at, (int, float))
            else _get(rec, "when")
        )
        seconds = _get(rec, "load_seconds")
        stages = _get(rec, "stage_seconds")
        if seconds is None and isinstance(stages, dict):
            seconds = sum(v for v in stages.values() if isinstance(v, (int, float)))
        err = _get(rec, "error_message")
        stage = _get(rec, "error_stage")
        rows.append(
            [
                str(when or ""),
                str(_get(rec, "model_key") or ""),
                str(_get(rec, "reason") or ""),
                str(_get(rec, "outcome") or ""),
                _get(rec, "planned_kv_cache_tokens", "plan.kv_cache_tokens"),
                _get(rec, "kv_cache_tokens"),
                _get(rec, "kv_tokens_error_pct"),
                _get(rec, "max_model_len", "plan.max_model_len", "settings.max_model_len"),
                round(seconds, 1) if isinstance(seconds, (int, float)) else None,
                ((f"[{stage}] " if stage else "") + str(err)[:300]) if err else "",
            ]
        )
    return rows
