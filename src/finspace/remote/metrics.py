"""vLLM's ``/metrics`` (Prometheus text) -> the memory panel's reading for a remote endpoint.

The panel shows what a remote server can tell: its KV-cache usage (``vllm:kv_cache_usage_perc``, called
``vllm:gpu_cache_usage_perc`` before vLLM 0.10), and its running and waiting requests. Several engines behind
one router (production-stack, llm-d) report one series each: usage is their mean, requests their sum.
"""

from __future__ import annotations

from dataclasses import dataclass

KV_NAMES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


@dataclass(frozen=True)
class RemoteReading:
    """One reading of the endpoint (kind "remote"); ``error`` when /metrics could not be read."""

    endpoint: str  # host[:port] only
    at: float
    kv_cache_usage: float | None = None  # 0..1
    running: int | None = None
    waiting: int | None = None
    engines: int = 0  # how many series reported KV usage
    error: str | None = None
    kind: str = "remote"
    index: int = 0
    name: str = "remote"

    def as_dict(self) -> dict:
        return {
            "kind": "remote",
            "endpoint": self.endpoint,
            "kv_cache_usage": self.kv_cache_usage,
            "running": self.running,
            "waiting": self.waiting,
            "engines": self.engines,
            "error": self.error,
        }


def samples(text: str) -> dict[str, list[float]]:
    """Every sample's value by metric name (prometheus_client's parser when installed, else a small one)."""
    out: dict[str, list[float]] = {}
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # pragma: no cover - prometheus_client comes with vLLM
        return _small_parse(text)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(float(s.value))
    return out


def _small_parse(text: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, rest = line.rpartition("}") if "}" in line else line.partition(" ")
        name = name_part.split("{", 1)[0].strip()
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        out.setdefault(name, []).append(value)
    return out


def reading(text: str, endpoint: str, at: float) -> RemoteReading:
    found = samples(text)
    kv = next((found[n] for n in KV_NAMES if found.get(n)), [])
    running, waiting = found.get(RUNNING), found.get(WAITING)
    return RemoteReading(
        endpoint=endpoint,
        at=at,
        kv_cache_usage=sum(kv) / len(kv) if kv else None,
        running=int(sum(running)) if running else None,
        waiting=int(sum(waiting)) if waiting else None,
        engines=len(kv),
    )
