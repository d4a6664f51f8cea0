"""One pipeline stage's memory budget on one GPU, before the KV cache and beside it: what comes off the requested
memory (weights, activation, non-torch overhead, CUDA graphs: ``stage_budget``), the sampler's warm-up after the
profile (``stage_warmup``), and the ``PlanDetail`` that records every figure behind a plan's totals
(``plan_detail``). ``finspace.planner.plan`` sizes the KV cache from what is left and gives the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from finspace.host.hardware import GPUSpec
from finspace.planner import warmup
from finspace.planner.memory import (
    KvLayout,
    Weights,
    activation_bytes,
    init_non_torch_bytes,
    overhead,
    weights,
)
from finspace.planner.result import PlanDetail
from finspace.planner.settings import Settings, resolve_batch, resolve_dtype, resolve_quant
from finspace.planner.shape import DTYPE_BYTES, ModelShape, QuantScheme


@dataclass(frozen=True)
class StageBudget:
    """What comes off one GPU's requested memory before the KV cache, for the layers one stage holds."""

    dtype: str
    quant: QuantScheme | None
    max_num_batched_tokens: int
    max_num_seqs: int
    weights: Weights
    activation: dict[str, int]  # total, sampler, forward, held, vision (memory.activation_bytes)
    non_torch_bytes: int
    cudagraph_bytes: int
    requested_bytes: int  # ceil(total x gpu_memory_utilization)

    @property
    def available_kv_bytes(self) -> int:
        """What the KV cache gets: the request less weights, activation and overhead (negative: none)."""
        return (
            self.requested_bytes
            - self.weights.bytes
            - self.activation["total"]
            - self.non_torch_bytes
            - self.cudagraph_bytes
        )


def stage_budget(
    shape: ModelShape, whole: ModelShape, gpu: GPUSpec, s: Settings, total_size: int | None, length: int
) -> StageBudget:
    """The budget for ``shape``'s layers (one stage of ``whole``, or all of it) at ``length`` tokens."""
    tp = s.tensor_parallel_size
    dtype = resolve_dtype(s, shape)
    quant = resolve_quant(s, shape)
    mnbt, seqs = resolve_batch(s, gpu, length)
    w = weights(shape, quant, dtype, tp, total_size, whole, marlin=gpu.compute_capability < (9, 0))
    act = activation_bytes(shape, DTYPE_BYTES[dtype], mnbt, seqs, tp)
    non_torch, cudagraph = overhead(shape, s)
    requested = math.ceil(gpu.total_bytes * s.gpu_memory_utilization)
    return StageBudget(dtype, quant, mnbt, seqs, w, act, non_torch, cudagraph, requested)


def stage_warmup(
    shape: ModelShape, gpu: GPUSpec, s: Settings, b: StageBudget, graphs_outside: int, v: tuple[int, int]
) -> warmup.Warmup:
    """The sampler warm-up on this stage's rank, with the CUDA graphs that lie outside the budget."""
    return warmup.sampler_warmup(
        shape,
        gpu.total_bytes,
        b.requested_bytes,
        b.activation["total"],
        graphs_outside,
        init_non_torch_bytes(s.tensor_parallel_size, s.pipeline_parallel_size),
        b.max_num_seqs,
        b.max_num_batched_tokens,
        transient_freed=warmup.transient_freed(shape, v),
    )


def plan_detail(
    shape: ModelShape,
    b: StageBudget,
    kv: KvLayout,
    kv_el: int,
    blocks: int,
    length: int,
    warm: warmup.Warmup,
    model_max: int,
    tp: int,
) -> PlanDetail:
    """Every figure behind the plan's totals, for showing the arithmetic (finspace.fit.render)."""
    return PlanDetail(
        architecture=shape.architecture,
        num_params=shape.num_params,
        rank_params=b.weights.rank_params,
        dtype=b.dtype,
        kv_dtype_bytes=kv_el,
        quant=b.quant.label if b.quant else "none",
        weight_parts=b.weights.parts,
        buffer_bytes=b.weights.buffer_bytes,
        weights_source=b.weights.source,
        non_torch_bytes=b.non_torch_bytes,
        cudagraph_bytes=b.cudagraph_bytes,
        sampler_bytes=b.activation["sampler"],
        forward_bytes=b.activation["forward"],
        held_bytes=b.activation["held"],
        vision_bytes=b.activation["vision"],
        max_num_batched_tokens=b.max_num_batched_tokens,
        max_num_seqs=b.max_num_seqs,
        model_max_len=model_max,
        kv_heads_per_rank=1 if shape.mla else max(1, shape.num_kv_heads // tp),
        mla_latent=shape.mla.latent_dim if shape.mla else 0,
        page_bytes=kv.page,
        block_bytes=kv.block_bytes,
        num_groups=len(kv.groups),
        group_size=kv.group_size,
        full_layers=shape.num_full_layers,
        sliding_layers=shape.num_sliding_layers,
        sliding_window=shape.sliding_window,
        in_flight_tokens=kv.in_flight,
        kv_cache_blocks=blocks,
        request_kv_bytes=kv.request_bytes(length),
        available_kv_bytes=b.available_kv_bytes,
        warmup_requests=warm.requests,
        warmup_bytes=warm.peak_bytes,
        warmup_free_bytes=warm.free_bytes,
    )
