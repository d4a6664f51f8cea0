"""What a plan is: the frozen results the planner returns (``Plan`` and its parts) and the fixes it offers.

Only data, no arithmetic: ``plan`` builds these, ``suggest`` fills ``Suggestion``, ``render`` and the
front ends read them. Kept apart so that ``plan`` -> ``suggest`` -> ``result`` points one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from finspace.host.hardware import GPUSpec
from finspace.planner.settings import Settings


@dataclass(frozen=True)
class Suggestion:
    title: str  # e.g. "use kv_cache_dtype fp8"
    settings: Settings
    plan_max_model_len: int
    why: str
    gpus: int = 1  # GPUs the suggested plan needs
    kv_cache_tokens: int = 0
    config_change: str | None = None  # e.g. "an AWQ 4-bit checkpoint" when the repo must change


@dataclass(frozen=True)
class PlanDetail:
    """The pieces behind the totals, for showing the arithmetic."""

    architecture: str = ""
    num_params: int = 0
    rank_params: int = 0
    dtype: str = "bfloat16"  # resolved serving dtype
    kv_dtype_bytes: int = 2
    quant: str = "none"
    weight_parts: tuple[tuple[str, int, float], ...] = ()  # (kind, params, bytes/param)
    buffer_bytes: int = 0  # rotary caches
    weights_source: str = "config"  # or "total_size"
    non_torch_bytes: int = 0
    cudagraph_bytes: int = 0  # subtracted from the budget (0 under 0.19 rules)
    sampler_bytes: int = 0
    forward_bytes: int = 0
    held_bytes: int = 0
    vision_bytes: int = 0
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0
    model_max_len: int = 0
    kv_heads_per_rank: int = 0
    mla_latent: int = 0  # MLA: elements of the latent one token stores per layer (0: K and V per head)
    page_bytes: int = 0  # one layer, one block
    block_bytes: int = 0  # one block of the shared pool (group_size layers)
    num_groups: int = 1
    group_size: int = 0
    full_layers: int = 0
    sliding_layers: int = 0
    sliding_window: int | None = None
    in_flight_tokens: int = 0
    kv_cache_blocks: int = 0
    request_kv_bytes: int = 0  # one max_model_len request
    available_kv_bytes: int = 0  # what the start check compares against (may be < 0)
    warmup_requests: int = 0  # the sampler warm-up's requests (0: not the last pipeline stage)
    warmup_bytes: int = 0  # its transient peak (planner/warmup.py)
    warmup_free_bytes: int = 0  # what is free for it once the KV cache and CUDA graphs are in place


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage's figures (per GPU of that stage)."""

    index: int
    first_layer: int
    end_layer: int  # exclusive
    weights_bytes: int
    activation_bytes: int
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_model_len_that_fits: int
    fits: bool
    warmup_requests: int = 0  # the sampler warm-up: only the last stage samples
    warmup_bytes: int = 0
    warmup_free_bytes: int = 0


@dataclass(frozen=True)
class Plan:
    """One model on one machine, per GPU, in integer bytes, like vLLM's own logs."""

    gpu: GPUSpec
    gpus: int
    settings: Settings  # as resolved: max_model_len, max_num_batched_tokens, max_num_seqs filled in
    weights_bytes: int
    kv_bytes_per_token: int
    activation_bytes: int
    overhead_bytes: int  # non-torch + CUDA graphs (when counted)
    requested_bytes: int  # total x utilization, per GPU
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_model_len: int
    max_model_len_that_fits: int
    max_concurrency: float
    fits: bool
    reason: str
    suggestions: tuple[Suggestion, ...] = ()
    detail: PlanDetail = field(default_factory=PlanDetail)
    notes: tuple[str, ...] = ()
    stages: tuple[StagePlan, ...] = ()  # pipeline_parallel_size > 1: every stage; the plan is the tightest's


@dataclass(frozen=True)
class Verdict:
    """Why a plan does not start, and the planner's own fix when a setting is the cause."""

    problem: str
    kind: str  # "setting" (a setting cannot work here), "weights", "budget" or "kv" (memory)
    own_fix: str = ""  # a sentence, for a setting problem
    fix_settings: Settings | None = None  # the settings with that one setting fixed
