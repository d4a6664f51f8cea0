"""Every catalogue model planned on one GPU: the rows of the fit table that `finspace fit` prints and the doctor
shows (render.fit_table), with the CLI's flags (an argparse namespace, or None for the catalogue's own settings)
applied to each entry's serving settings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from finspace import planner
from finspace.errors import FinspaceError
from finspace.host.hardware import GPUSpec

DEFAULT_GPU = "l40s"  # the Space's GPU, when none is detected


def overrides(args: Any, base: planner.Settings) -> planner.Settings:
    if args is None:
        return base
    changes = {}
    for name in (
        "gpu_memory_utilization",
        "max_model_len",
        "dtype",
        "kv_cache_dtype",
        "tensor_parallel_size",
        "max_num_batched_tokens",
        "max_num_seqs",
        "usage_context",
        "vllm_version",
        "pipeline_parallel_size",
    ):
        v = getattr(args, name)
        if v is not None:
            changes[name] = v
    if args.quantization is not None:
        changes["quantization"] = None if args.quantization == "none" else args.quantization
    return replace(base, **changes)


def entry_settings(entry: Any, args: Any) -> planner.Settings:
    """The entry's serving settings with the flags applied; max_model_len "auto" auto-fits (vLLM's -1)."""
    settings = overrides(args, entry.planner_settings())
    if getattr(args, "max_model_len", None) is None and getattr(entry.serving, "max_model_len", None) == "auto":
        settings = replace(settings, max_model_len=-1)
    return settings


def plan_rows(
    catalog: Any, gpu: GPUSpec, machine_gpus: int | None, args: Any = None
) -> list[tuple[str, planner.Plan | Exception]]:
    """Every catalogue model planned on ``gpu`` (the rows of render.fit_table); ``args``: fit's flags, None for
    the catalogue's own settings. A model the planner cannot read gets its error instead of a plan."""
    rows: list[tuple[str, planner.Plan | Exception]] = []
    for entry in catalog.entries:
        try:
            settings = entry_settings(entry, args)
            gpus = machine_gpus or settings.tensor_parallel_size * settings.pipeline_parallel_size
            rows.append(
                (
                    entry.key,
                    planner.plan(entry.config(), gpu, settings, gpus=gpus, total_size_bytes=entry.total_size_bytes),
                )
            )
        except FinspaceError as exc:
            rows.append((entry.key, exc))
    return rows
