"""GPU-memory planner: will this model start under vLLM on this GPU, and with what context?

Pure arithmetic on a model's config.json: no torch, no vllm, no I/O. Every figure
is per GPU (per tensor-parallel rank), in integer bytes, like vLLM's own logs.
The rules follow vLLM 0.19.0 and 0.32/0.33 (shared/vllm-memory-mechanism.md,
checked against the installed vllm 0.32 source); each module names the vLLM
code it models.

One module per concept, each importing only those above it:

* ``shape``: config.json to ``ModelShape`` (parameters per rank, KV heads, layer
  types, rotary caches, quantization_config).
* ``settings``: ``Settings`` (vLLM engine arguments), their vocabularies, the one
  validation (``gpu_memory_utilization`` included) and what they resolve to.
* ``memory``: weights, activation peak, overhead and the KV-cache layout; the
  fitted constants and their calibration.
* ``suggest``: ranked fixes for a plan that does not start, each re-checked.
* ``plan``: the budget, the start check and the verdict; ``plan()`` is the
  entry point.

``plan_json`` (below) is the stable JSON of a plan.
"""

from __future__ import annotations

from finspace.planner.memory import KvCapacity, activation_bytes, kv_capacity
from finspace.planner.plan import Plan, PlanDetail, plan
from finspace.planner.settings import (
    CURRENT_VLLM, KV_CACHE_DTYPES, QUANTIZATIONS, USAGE_CONTEXTS, VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
    VLLM_VERSIONS, Settings, batch_defaults, check_gpu_memory_utilization,
)
from finspace.planner.shape import (
    SUPPORTED_ARCHITECTURES, ModelShape, QuantScheme, VisionShape, model_shape, tp_on_machine,
)
from finspace.planner.suggest import MIN_USEFUL_CONTEXT, SAFE_MAX_UTILIZATION, Suggestion, awq_variant
from finspace.units import in_gib

__all__ = [
    "CURRENT_VLLM", "KV_CACHE_DTYPES", "MIN_USEFUL_CONTEXT", "QUANTIZATIONS", "SAFE_MAX_UTILIZATION",
    "SUPPORTED_ARCHITECTURES", "USAGE_CONTEXTS", "VLLM_DEFAULT_GPU_MEMORY_UTILIZATION", "VLLM_VERSIONS",
    "KvCapacity", "ModelShape", "Plan", "PlanDetail", "QuantScheme", "Settings", "Suggestion", "VisionShape",
    "activation_bytes", "awq_variant", "batch_defaults", "check_gpu_memory_utilization", "kv_capacity",
    "model_shape", "plan", "plan_json", "settings_json", "tp_on_machine",
]



# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


def settings_json(s: Settings) -> dict:
    return {
        "dtype": s.dtype, "quantization": s.quantization, "kv_cache_dtype": s.kv_cache_dtype,
        "max_model_len": s.max_model_len, "gpu_memory_utilization": s.gpu_memory_utilization,
        "tensor_parallel_size": s.tensor_parallel_size, "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs, "block_size": s.block_size, "enforce_eager": s.enforce_eager,
        "usage_context": s.usage_context, "vllm_version": s.vllm_version,
    }


def plan_json(p: Plan) -> dict:
    """The ``--json`` object. Names are stable; GiB values are rounded to 0.01."""
    d = p.detail
    return {
        "gpu": p.gpu.key, "gpu_name": p.gpu.name, "gpu_total_gib": in_gib(p.gpu.total_bytes), "gpus": p.gpus,
        "settings": settings_json(p.settings),
        "dtype": d.dtype, "quantization": d.quant,
        "num_params": d.num_params,
        "weights_gib": in_gib(p.weights_bytes), "weights_bytes": p.weights_bytes,
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "activation_gib": in_gib(p.activation_bytes), "activation_bytes": p.activation_bytes,
        "overhead_gib": in_gib(p.overhead_bytes), "overhead_bytes": p.overhead_bytes,
        "non_torch_gib": in_gib(d.non_torch_bytes), "cudagraph_gib": in_gib(d.cudagraph_bytes),
        "requested_gib": in_gib(p.requested_bytes), "requested_bytes": p.requested_bytes,
        "kv_cache_gib": in_gib(p.kv_cache_bytes), "kv_cache_bytes": p.kv_cache_bytes,
        "kv_cache_tokens": p.kv_cache_tokens, "kv_cache_blocks": d.kv_cache_blocks,
        "kv_request_gib": in_gib(d.request_kv_bytes),
        "max_model_len": p.max_model_len, "max_model_len_that_fits": p.max_model_len_that_fits,
        "model_max_len": d.model_max_len,
        "max_concurrency": p.max_concurrency, "fits": p.fits, "reason": p.reason,
        "suggestions": [
            {"title": sg.title, "why": sg.why, "max_model_len": sg.plan_max_model_len, "gpus": sg.gpus,
             "kv_cache_tokens": sg.kv_cache_tokens, "checkpoint": sg.config_change,
             "settings": settings_json(sg.settings)}
            for sg in p.suggestions
        ],
        "notes": list(p.notes),
    }
