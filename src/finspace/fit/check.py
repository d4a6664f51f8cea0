"""Will it fit? One call for the UI (or any caller): a config.json, a GPU, settings -> the plan and its text.

``plan_for_config(config, "l40s")`` returns ``(Plan, breakdown)``: the planner's
plan and the same step-by-step breakdown ``python -m finspace fit --config``
prints. ``plan_for_repo("OWNER/NAME", "l40s")`` first reads the repo's
config.json and exact weight bytes through ``finspace.fit.hub`` (HubError when the
Hub and its cache cannot give them). Errors are finspace's domain errors
(ConfigError, BadInput, HubError), each with a message to show as is.
"""

from __future__ import annotations

from dataclasses import fields, replace

from finspace import planner

from finspace.fit import render
from finspace.errors import BadInput
from finspace.host.hardware import KNOWN_GPUS, GPUSpec
from finspace.planner.cluster import ClusterPlan, size_cluster

_SETTING_NAMES = tuple(f.name for f in fields(planner.Settings))


def _gpu(gpu: str | GPUSpec) -> GPUSpec:
    if isinstance(gpu, GPUSpec):
        return gpu
    key = str(gpu).lower()
    if key not in KNOWN_GPUS:
        raise BadInput(f"unknown GPU {gpu!r}; use one of {', '.join(KNOWN_GPUS)}")
    return KNOWN_GPUS[key]


def plan_for_config(
    config: dict,
    gpu: str | GPUSpec = "l40s",
    gpus: int | None = None,
    settings: planner.Settings | None = None,
    *,
    total_size_bytes: int | None = None,
    label: str = "",
    **overrides,
) -> tuple[planner.Plan, str]:
    """Plan ``config`` on ``gpus`` GPUs of type ``gpu`` (a KNOWN_GPUS key or a GPUSpec).

    ``settings`` (default: vLLM's defaults) with ``overrides`` applied by name,
    e.g. ``quantization="fp8", max_model_len=32768, pipeline_parallel_size=2``.
    ``gpus`` defaults to tensor_parallel_size x pipeline_parallel_size.
    """
    p, text, _ = plan_cluster(config, gpu, gpus, settings, total_size_bytes=total_size_bytes, label=label, **overrides)
    return p, text


def plan_cluster(
    config: dict,
    gpu: str | GPUSpec = "l40s",
    gpus: int | None = None,
    settings: planner.Settings | None = None,
    *,
    total_size_bytes: int | None = None,
    label: str = "",
    **overrides,
) -> tuple[planner.Plan, str, ClusterPlan | None]:
    """``plan_for_config``, and with ``gpus`` > 1 the cluster's layout (``planner.cluster.size_cluster``; a
    tensor/pipeline_parallel_size among ``overrides`` is the layout as given): (one replica's plan, the
    breakdown with the layout under it, the ClusterPlan or None)."""
    unknown = sorted(set(overrides) - set(_SETTING_NAMES))
    if unknown:
        raise BadInput(f"unknown setting(s) {', '.join(unknown)}; use {', '.join(_SETTING_NAMES)}")
    s = replace(settings or planner.Settings(), **overrides)
    name = label or str(config.get("_name_or_path") or config.get("model_type") or "")
    if gpus is not None and gpus > 1:
        c = size_cluster(
            config,
            _gpu(gpu),
            s,
            gpus,
            tp=overrides.get("tensor_parallel_size"),
            pp=overrides.get("pipeline_parallel_size"),
            total_size_bytes=total_size_bytes,
        )
        return c.replica, render.breakdown(c.replica, name) + "\n\n" + render.cluster_text(c), c
    n = gpus if gpus is not None else s.tensor_parallel_size * s.pipeline_parallel_size
    p = planner.plan(config, _gpu(gpu), s, gpus=n, total_size_bytes=total_size_bytes)
    return p, render.breakdown(p, name), None


def plan_for_repo(
    repo_id: str,
    gpu: str | GPUSpec = "l40s",
    gpus: int | None = None,
    settings: planner.Settings | None = None,
    *,
    token: str | None = None,
    **overrides,
) -> tuple[planner.Plan, str]:
    """``plan_for_config`` for a Hub repo: its config.json and safetensors total_size via finspace.fit.hub."""
    p, text, _ = plan_repo_cluster(repo_id, gpu, gpus, settings, token=token, **overrides)
    return p, text


def plan_repo_cluster(
    repo_id: str,
    gpu: str | GPUSpec = "l40s",
    gpus: int | None = None,
    settings: planner.Settings | None = None,
    *,
    token: str | None = None,
    **overrides,
) -> tuple[planner.Plan, str, ClusterPlan | None]:
    """``plan_cluster`` for a Hub repo: its config.json and safetensors total_size via finspace.fit.hub."""
    from finspace.fit.hub import read_repo

    repo = read_repo(repo_id, token=token)
    return plan_cluster(
        repo.config, gpu, gpus, settings, total_size_bytes=repo.total_size_bytes, label=repo_id, **overrides
    )
