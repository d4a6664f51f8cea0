"""The /health body: the engine's health (state, stage, restarts, the serving model), the machine's memory
readings (each GPU, the host's RAM and the engine workers' share of it, a remote endpoint's figures), and what
the service adds about itself (what blocks serving, access, the load ledger, uptime, versions), as one JSON view
with its HTTP status: 200 only when a model is ready and nothing blocks serving. A pure assembly: the service
gives it the engine, the readings and its own facts (finspace.service.Service.health).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil

from finspace.engine.api import EngineAPI
from finspace.engine.records import Health

MIB = 1 << 20


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def host_ram(readings: list) -> dict:
    """The host's RAM in MiB, with the engine's share and each engine worker's RSS when the readings hold them."""
    vm = psutil.virtual_memory()
    host = {
        "total_mib": vm.total // MIB,
        "used_mib": (vm.total - vm.available) // MIB,
        "free_mib": vm.available // MIB,
    }
    host_reading = next((r for r in readings if r.kind == "host"), None)
    if host_reading is not None and host_reading.engine_bytes is not None:
        host["engine_mib"] = host_reading.engine_bytes // MIB
        host["ranks"] = host_reading.as_mib()["ranks"]  # each engine worker (tensor-parallel rank): its RSS
    return host


def health_body(
    engine: EngineAPI,
    h: Health,
    readings: list,
    redact: Callable[[Any], Any],
    *,
    blocking: str | None,
    load_error: str | None,
    service: dict,
) -> tuple[dict, int]:
    """The /health body and its HTTP status from ``h`` (the engine's health, read before ``readings``);
    ``service`` holds the service's own members (uptime_s, version, admin_token_required, switching, blocking,
    ledger), placed last in its order."""
    last_error = blocking or h.last_error or (load_error if h.state != "ready" else None)
    body = {
        "status": "unavailable" if blocking else h.state,
        "ready": h.state == "ready" and blocking is None,
        "model": h.model_key,
        "model_label": h.model_label,
        "engine": {
            "state": h.state,
            "stage": h.stage,
            "progress": h.progress,
            "loading": h.loading_key,
            "alive": h.engine_alive,
            "restarts": h.restarts,
            "last_restart": h.last_restart,
            "running_requests": h.running_requests,
            "kind": engine.kind,
            "endpoint": engine.hardware_info().get("remote"),  # a remote endpoint's host[:port]
            "tools_refused": redact(getattr(engine, "tools_refused", None)),  # the chat's calculator
        },
        "loaded_since": iso(h.loaded_since),
        "last_error": redact(last_error),
        "device": h.device,
        "gpus": [r.as_mib() for r in readings if r.kind == "gpu"],
        **{r.kind: r.as_dict() for r in readings if r.kind == "remote"},
        "host_ram": host_ram(readings),
        **service,
    }
    return body, 200 if h.state == "ready" and blocking is None else 503
