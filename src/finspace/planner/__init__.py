"""GPU-memory planner: will this model start under vLLM on this GPU, and with what context?

Pure arithmetic on a model's config.json: no torch, no vllm, no I/O. Every figure
is per GPU (per tensor-parallel rank), in integer bytes, like vLLM's own logs.
The rules follow vLLM 0.19.0 and 0.32/0.33 (shared/vllm-memory-mechanism.md,
checked against the installed vllm 0.32 source); each module names the vLLM
code it models.

One module per concept, each importing only those above it:

* ``defaults``: transformers' class defaults for the fields a config.json leaves
  out (one table, with its source).
* ``quant``: ``quantization_config`` to ``QuantScheme`` (mxfp4 experts included).
* ``experts``: mixture-of-experts and MLA fields, parameters and the fused-MoE
  workspace; ``towers``: vision towers and projectors of vision-language models.
* ``attention``: what a config says of positions: the derived context, which layers
  slide, the rotary caches.
* ``shape``: config.json to ``ModelShape`` (parameters per rank, KV heads, layer
  types, rotary caches) and pipeline-parallel stages (``stage``, ``pp_partition``).
* ``settings``: ``Settings`` (vLLM engine arguments), their vocabularies, the one
  validation (``gpu_memory_utilization`` included) and what they resolve to.
* ``memory``: weights, activation peak, overhead and the KV-cache layout; the
  fitted constants and their calibration.
* ``suggest``: ranked fixes for a plan that does not start, each re-checked.
* ``warmup``: the sampler warm-up vLLM runs after the KV cache and CUDA graphs are in place (a start
  check of its own, with vLLM's two fixes).
* ``budget``: one stage's budget before the KV cache (weights, activation, overhead),
  its sampler warm-up and the ``PlanDetail`` behind the totals.
* ``plan``: the KV cache, the start check and the verdict, per pipeline stage;
  ``plan()`` is the entry point.
* ``cluster``: a model on N GPUs: TP x PP per replica and DP replicas (``size_cluster``).

* ``result``: the frozen results (``Plan``, ``StagePlan``, ``Suggestion``) and nothing else, so that
  ``plan`` -> ``suggest`` -> ``result`` points one way.
* ``export``: the stable JSON of a plan (``plan_json``; ``finspace.fit.render`` re-exports it).

May import: errors, units, host (tests/test_imports.py).
"""

from __future__ import annotations

from finspace.planner.export import plan_json, settings_json
from finspace.planner.memory import KvCapacity, activation_bytes, kv_capacity
from finspace.planner.plan import Plan, StagePlan, plan
from finspace.planner.result import PlanDetail
from finspace.planner.settings import (
    CURRENT_VLLM,
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    USAGE_CONTEXTS,
    VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
    VLLM_VERSIONS,
    Settings,
    batch_defaults,
    check_gpu_memory_utilization,
    utilization_ok,
)
from finspace.planner.shape import (
    SUPPORTED_ARCHITECTURES,
    TEXT_ARCHITECTURES,
    ModelShape,
    QuantScheme,
    VisionShape,
    model_shape,
    tp_on_machine,
)
from finspace.planner.suggest import MIN_USEFUL_CONTEXT, SAFE_MAX_UTILIZATION, Suggestion, awq_variant

__all__ = [
    "CURRENT_VLLM",
    "KV_CACHE_DTYPES",
    "MIN_USEFUL_CONTEXT",
    "QUANTIZATIONS",
    "SAFE_MAX_UTILIZATION",
    "SUPPORTED_ARCHITECTURES",
    "TEXT_ARCHITECTURES",
    "USAGE_CONTEXTS",
    "VLLM_DEFAULT_GPU_MEMORY_UTILIZATION",
    "VLLM_VERSIONS",
    "KvCapacity",
    "ModelShape",
    "Plan",
    "PlanDetail",
    "QuantScheme",
    "Settings",
    "StagePlan",
    "Suggestion",
    "VisionShape",
    "activation_bytes",
    "awq_variant",
    "batch_defaults",
    "check_gpu_memory_utilization",
    "kv_capacity",
    "model_shape",
    "plan",
    "plan_json",
    "settings_json",
    "tp_on_machine",
    "utilization_ok",
]
