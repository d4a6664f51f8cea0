"""The stable JSON of a plan: ``plan_json`` (the ``fit --json`` object, the ledger's and the API's).

It lives in the planner so that ``finspace.planner.plan_json`` needs no import of ``finspace.fit.render``
(which imports the planner): the dependency points one way. ``finspace.fit.render`` re-exports both names.
"""

from __future__ import annotations

from typing import Any

from finspace.planner.cluster import ClusterPlan
from finspace.planner.result import Plan
from finspace.planner.settings import Settings
from finspace.units import in_gib


def settings_json(s: Settings) -> dict[str, Any]:
    """The settings as JSON; pipeline_parallel_size only when > 1 (the object is unchanged without it)."""
    pp = {"pipeline_parallel_size": s.pipeline_parallel_size} if s.pipeline_parallel_size > 1 else {}
    return {
        "dtype": s.dtype,
        "quantization": s.quantization,
        "kv_cache_dtype": s.kv_cache_dtype,
        "max_model_len": s.max_model_len,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "tensor_parallel_size": s.tensor_parallel_size,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "block_size": s.block_size,
        "enforce_eager": s.enforce_eager,
        "usage_context": s.usage_context,
        "vllm_version": s.vllm_version,
        **pp,
    }


def plan_json(p: Plan) -> dict[str, Any]:
    """The ``--json`` object. Names are stable; GiB values are rounded to 0.01."""
    d = p.detail
    return {
        "gpu": p.gpu.key,
        "gpu_name": p.gpu.name,
        "gpu_total_gib": in_gib(p.gpu.total_bytes),
        "gpus": p.gpus,
        "settings": settings_json(p.settings),
        "dtype": d.dtype,
        "quantization": d.quant,
        "num_params": d.num_params,
        "weights_gib": in_gib(p.weights_bytes),
        "weights_bytes": p.weights_bytes,
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "activation_gib": in_gib(p.activation_bytes),
        "activation_bytes": p.activation_bytes,
        "overhead_gib": in_gib(p.overhead_bytes),
        "overhead_bytes": p.overhead_bytes,
        "non_torch_gib": in_gib(d.non_torch_bytes),
        "cudagraph_gib": in_gib(d.cudagraph_bytes),
        "requested_gib": in_gib(p.requested_bytes),
        "requested_bytes": p.requested_bytes,
        "kv_cache_gib": in_gib(p.kv_cache_bytes),
        "kv_cache_bytes": p.kv_cache_bytes,
        "kv_cache_tokens": p.kv_cache_tokens,
        "kv_cache_blocks": d.kv_cache_blocks,
        "kv_request_gib": in_gib(d.request_kv_bytes),
        "max_model_len": p.max_model_len,
        "max_model_len_that_fits": p.max_model_len_that_fits,
        "model_max_len": d.model_max_len,
        "max_concurrency": p.max_concurrency,
        "fits": p.fits,
        "reason": p.reason,
        "suggestions": [
            {
                "title": sg.title,
                "why": sg.why,
                "max_model_len": sg.plan_max_model_len,
                "gpus": sg.gpus,
                "kv_cache_tokens": sg.kv_cache_tokens,
                "checkpoint": sg.config_change,
                "settings": settings_json(sg.settings),
            }
            for sg in p.suggestions
        ],
        "notes": list(p.notes),
        **(
            {
                "stages": [
                    {
                        "stage": st.index,
                        "layers": [st.first_layer, st.end_layer],
                        "weights_bytes": st.weights_bytes,
                        "activation_bytes": st.activation_bytes,
                        "kv_cache_bytes": st.kv_cache_bytes,
                        "kv_cache_tokens": st.kv_cache_tokens,
                        "max_model_len_that_fits": st.max_model_len_that_fits,
                        "fits": st.fits,
                    }
                    for st in p.stages
                ]
            }
            if p.stages
            else {}
        ),
    }


def cluster_json(c: ClusterPlan) -> dict[str, Any]:
    """The layout of a model on a cluster: TP x PP x DP, KV capacity and concurrency per replica and in total."""
    return {
        "gpus": c.gpus,
        "gpus_per_node": c.gpus_per_node,
        "chosen": c.chosen,
        "tensor_parallel_size": c.tp,
        "pipeline_parallel_size": c.pp,
        "data_parallel_size": c.dp,
        "idle_gpus": c.idle_gpus,
        "fits": c.fits,
        "context": c.context,
        "kv_cache_tokens_per_replica": c.kv_tokens_per_replica,
        "kv_cache_tokens_total": c.kv_tokens_total,
        "max_concurrency_per_replica": c.concurrency_per_replica,
        "max_concurrency_total": c.concurrency_total,
        "max_num_seqs": c.replica.settings.max_num_seqs,
        "concurrent_seqs_per_replica": c.seqs_per_replica,
        "concurrent_seqs_total": c.seqs_total,
        "sampler_warmup": warmup_json(c.replica),
        "tried": [
            {"tensor_parallel_size": t, "pipeline_parallel_size": p, "starts": conc > 0, "max_concurrency": conc}
            for t, p, conc in c.tried
        ],
    }


def warmup_json(p: Plan) -> dict[str, Any]:
    """The sampler warm-up's verdict (the last pipeline stage's, which samples)."""
    w = p.stages[-1] if p.stages else p.detail
    return {
        "requests": w.warmup_requests,
        "peak_bytes": w.warmup_bytes,
        "free_bytes": w.warmup_free_bytes,
        "fits": w.warmup_bytes <= w.warmup_free_bytes,
        "stage": p.stages[-1].index if p.stages else 0,
    }
