"""Will it fit? for the page and the Gradio API: a pasted config.json or a Hub repo id, a GPU, settings -> a verdict.

``check_fit`` validates what a visitor sends (one source, a JSON object of bounded
size, a known GPU, settings the planner accepts), plans it with
``finspace.fit.check`` and returns the answer as plain JSON: the verdict, the
step-by-step breakdown, the ranked fixes and the plan's stable JSON. A repo id is
read through ``finspace.fit.hub`` (the network; HF_TOKEN for gated repos), so callers
run this in a worker thread. Every refusal is a domain error with its fix.
"""

from __future__ import annotations

import json
import math
from typing import Any

from finspace.fit import check as fitcheck

from finspace.fit import render
from finspace.errors import BadInput
from finspace.host.hardware import KNOWN_GPUS
from finspace.planner.bounds import MAX_POSITIONS, check_config

MAX_CONFIG_CHARS = 200_000  # the largest published config.json files are a few tens of KB
SETTINGS = (
    "max_model_len",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
)


def _config_from_text(text: str) -> dict:
    if len(text) > MAX_CONFIG_CHARS:
        raise BadInput(
            f"the config.json has {len(text):,} characters; the limit is {MAX_CONFIG_CHARS:,}: paste the "
            f"model's config.json itself"
        )
    try:
        config = json.loads(text)  # NaN and Infinity parse, to be refused by name (check_config)
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"the config.json is not valid JSON ({str(exc)[:80]}); paste the file as it is") from None
    if not isinstance(config, dict):
        raise BadInput("the config.json must be a JSON object ({...}), as a model's config.json is")
    check_config(config)  # every number finite and plausible: a 4xx naming the field, before any planning
    return config


def _settings(values: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in values.items():
        if name not in SETTINGS:
            raise BadInput(f"unknown setting {name!r}; use {', '.join(SETTINGS)}")
        if value in (None, "", "auto"):
            continue
        if name in ("max_model_len", "tensor_parallel_size", "pipeline_parallel_size"):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BadInput(f"{name} must be a positive whole number, got {str(value)[:20]}")
            bound = MAX_POSITIONS if name == "max_model_len" else 64
            if value > bound:
                raise BadInput(f"{name} must be at most {bound:,}, got {str(value)[:20]}")
        if name == "gpu_memory_utilization" and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        ):
            raise BadInput(f"gpu_memory_utilization must be a number in (0, 1], got {str(value)[:20]}")
        if name in ("dtype", "quantization", "kv_cache_dtype") and not isinstance(value, str):
            raise BadInput(f"{name} must be text, got {type(value).__name__}")
        out[name] = value
    return out


def _catalogue_entry(catalog: Any, repo: Any) -> Any:
    """The catalogue entry ``repo`` names by its key (as the page's model picker shows it), else None; a name
    that is neither a key nor OWNER/NAME is refused naming the keys."""
    if catalog is None or not isinstance(repo, str) or not repo or "/" in repo:
        return None
    entry = next((e for e in catalog.entries if e.key == repo), None)
    if entry is None:
        raise BadInput(
            f"{repo[:60]!r} is neither a catalogue key ({', '.join(e.key for e in catalog.entries)}) "
            "nor a Hub repo id OWNER/NAME"
        )
    return entry


def check_fit(
    config_text: Any,
    repo: Any,
    gpu: Any,
    gpus: Any = None,
    *,
    default_gpu: str = "l40s",
    hf_token: str | None = None,
    catalog: Any = None,
    **settings: Any,
) -> dict:
    """The verdict for one model on ``gpus`` x ``gpu``; exactly one of ``config_text`` (a config.json as text,
    or as the JSON object itself, as MCP clients send it) and ``repo`` (a Hub repo id, or a key of ``catalog``:
    its bundled config.json, no Hub)."""
    if isinstance(config_text, dict):
        config_text = json.dumps(config_text)
    config_text = config_text.strip() if isinstance(config_text, str) else config_text
    repo = repo.strip() if isinstance(repo, str) else repo
    if bool(config_text) == bool(repo):
        raise BadInput("give either a Hub repo id (OWNER/NAME) or a pasted config.json, not both and not neither")
    for name, value in (("config_json", config_text), ("repo", repo)):
        if value and not isinstance(value, str):
            raise BadInput(f"{name} must be text, got {type(value).__name__}")
    key = (gpu or default_gpu) if isinstance(gpu, str) or gpu is None else gpu
    if not isinstance(key, str) or key.lower() not in KNOWN_GPUS:
        raise BadInput(f"unknown GPU {str(key)[:40]!r}; use one of {', '.join(KNOWN_GPUS)}")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 64):
        raise BadInput(f"gpus must be a whole number from 1 to 64, got {str(gpus)[:20]}")
    overrides = _settings(settings)
    entry = _catalogue_entry(catalog, repo)
    if entry is not None:
        plan, breakdown, cluster = fitcheck.plan_cluster(
            entry.config(), key.lower(), gpus, total_size_bytes=entry.total_size_bytes, label=entry.label, **overrides
        )
        source = f"{entry.key} (catalogue{', ' + entry.repo if entry.repo else ''})"
    elif repo:
        plan, breakdown, cluster = fitcheck.plan_repo_cluster(repo, key.lower(), gpus, token=hf_token, **overrides)
        source = repo
    else:
        plan, breakdown, cluster = fitcheck.plan_cluster(_config_from_text(config_text), key.lower(), gpus, **overrides)
        source = "pasted config.json"
    return {
        "source": source,
        "gpu": plan.gpu.name,
        "gpus": cluster.gpus if cluster is not None else plan.gpus,
        "fits": plan.fits,
        "reason": plan.reason,
        "max_model_len": plan.max_model_len,
        "breakdown": breakdown,
        "suggestions": [
            {"title": s.title, "max_model_len": s.plan_max_model_len, "gpus": s.gpus, "why": s.why}
            for s in plan.suggestions
        ],
        "plan": render.plan_json(plan),
        "sampler_warmup": render.warmup_json(plan),
        "cluster": render.cluster_json(cluster) if cluster is not None else None,  # gpus > 1: TP x PP x DP
    }
