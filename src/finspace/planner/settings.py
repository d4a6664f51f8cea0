"""The planner's settings: vLLM engine arguments, their vocabularies and their one validation.

``validate`` refuses what vLLM would refuse outright (BadInput);
``check_gpu_memory_utilization`` is the one check of that fraction for the
planner, the catalogue and the ``fit`` command. ``resolve_*`` turn settings
and a model shape into what vLLM actually serves: the dtype ("auto" follows
torch_dtype, float32 checkpoints serve as bf16:
``vllm/config/model.py::_resolve_auto_dtype``), the quantization (online fp8
keeps embeddings and lm_head in bf16, ``layers/quantization/fp8.py``) and the
batch sizes (``EngineArgs.get_batch_defaults``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from finspace.errors import BadInput, ConfigError
from finspace.host.hardware import GPUSpec
from finspace.planner.shape import DTYPE_ALIASES, ModelShape, QuantScheme
from finspace.units import GIB

#: vLLM 0.32's default (``CacheConfig.gpu_memory_utilization``; 0.9 in 0.19).
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
CURRENT_VLLM = "0.32"
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")
QUANTIZATIONS = ("fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "bitsandbytes", "mxfp4")
USAGE_CONTEXTS = ("engine", "serve", "llm")
VLLM_VERSIONS = ("0.19", "0.32")


@dataclass(frozen=True)
class Settings:
    """vLLM engine arguments the planner models (names as in vLLM's EngineArgs).

    max_model_len: None -> the model's derived maximum (vLLM's default);
    -1 -> auto-fit: the largest length that fits (vLLM's ``--max-model-len -1``).
    max_num_batched_tokens / max_num_seqs: None -> vLLM's default for
    ``usage_context`` on this GPU ("engine": AsyncLLM.from_engine_args, as the
    app runs it; "serve": ``vllm serve``; "llm": the ``LLM`` class).
    vllm_version: "0.32" (default; CUDA graphs counted in the budget,
    2 in-flight batches for sliding windows, null block held back) or "0.19"
    (the calibration logs' rules).
    """

    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float = VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    tensor_parallel_size: int = 1
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    enforce_eager: bool = False
    usage_context: str = "engine"
    vllm_version: str = CURRENT_VLLM
    pipeline_parallel_size: int = 1  # stages; each holds a slice of the layers (planned per stage)


def version(s: str) -> tuple[int, int]:
    """ "0.32" -> (0, 32); BadInput for anything else."""
    try:
        major, minor = str(s).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise BadInput(f"vllm_version {s!r} is not like '0.32'; use one of {', '.join(VLLM_VERSIONS)}") from None


def utilization_ok(u: object) -> TypeGuard[float]:
    """A fraction of GPU memory in (0, 1], the bounds vLLM's ``CacheConfig`` enforces."""
    return not isinstance(u, bool) and isinstance(u, (int, float)) and 0 < u <= 1


def check_gpu_memory_utilization(u: object) -> float:
    """The one validation of gpu_memory_utilization (planner and catalogue): BadInput outside (0, 1]."""
    if not utilization_ok(u):
        raise BadInput(f"gpu_memory_utilization must be in (0, 1], got {u!r}; e.g. 0.90")
    return u


def _positive(name: str, v: object, allow_none: bool = True) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise BadInput(f"{name} must be a positive integer, got {v!r}")


def validate(s: Settings, gpus: int) -> None:
    """BadInput naming the first setting vLLM would refuse outright (and a bad GPU count)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise BadInput(f"gpus must be a positive integer, got {gpus!r}")
    check_gpu_memory_utilization(s.gpu_memory_utilization)
    if s.max_model_len is not None and s.max_model_len != -1:
        _positive("max_model_len", s.max_model_len)
    _positive("tensor_parallel_size", s.tensor_parallel_size, allow_none=False)
    _positive("pipeline_parallel_size", s.pipeline_parallel_size, allow_none=False)
    _positive("max_num_batched_tokens", s.max_num_batched_tokens)
    _positive("max_num_seqs", s.max_num_seqs)
    _positive("block_size", s.block_size, allow_none=False)
    if str(s.dtype).lower() not in DTYPE_ALIASES:
        raise BadInput(f"unknown dtype {s.dtype!r}; use auto, bfloat16, float16 or float32")
    if s.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise BadInput(f"unknown kv_cache_dtype {s.kv_cache_dtype!r}; use one of {', '.join(KV_CACHE_DTYPES)}")
    if s.quantization is not None and s.quantization not in QUANTIZATIONS:
        raise BadInput(f"unknown quantization {s.quantization!r}; use one of {', '.join(QUANTIZATIONS)} (or none)")
    if s.usage_context not in USAGE_CONTEXTS:
        raise BadInput(f"unknown usage_context {s.usage_context!r}; use one of {', '.join(USAGE_CONTEXTS)}")
    version(s.vllm_version)


def resolve_dtype(s: Settings, shape: ModelShape) -> str:
    """The dtype vLLM serves in: "auto" follows torch_dtype, float32 checkpoints serve as bfloat16."""
    d = DTYPE_ALIASES[str(s.dtype).lower()]
    if d == "auto":
        d = shape.torch_dtype or "float32"
        if d == "float32":
            d = "bfloat16"
    if d == "float16" and (
        shape.model_type in ("gemma2", "gemma3", "gemma3_text") or shape.text_type in ("gemma2", "gemma3_text")
    ):
        raise BadInput(f"vLLM refuses dtype float16 for {shape.model_type} (numerical instability); use bfloat16")
    return d


def resolve_quant(s: Settings, shape: ModelShape) -> QuantScheme | None:
    """How the weights are stored: the checkpoint's quantization_config, or one applied at load time."""
    q = s.quantization
    cq = shape.quantization
    if q is None:
        return cq
    base = {"awq_marlin": "awq", "gptq_marlin": "gptq"}.get(q, q)
    if cq is not None:
        if base == cq.method or (base == "gptq" and cq.method == "compressed-tensors"):
            return cq
        raise BadInput(
            f"quantization {q!r} does not match the checkpoint's quantization_config ({cq.method}); "
            f"leave quantization unset (vLLM reads it from config.json) or set it to {cq.method!r}"
        )
    if base == "fp8":
        return QuantScheme("fp8", 8, online=True)
    if base == "bitsandbytes":
        return QuantScheme("bitsandbytes", 4, 64, False, 4, online=True)
    raise ConfigError(
        f"quantization {q!r} needs a pre-quantized checkpoint whose config.json has a quantization_config "
        f"(quant_method {base}); this config has none. Use quantization fp8 to quantize at load time, "
        f"or plan with the {base.upper()} repo's config.json"
    )


def batch_defaults(gpu: GPUSpec, usage_context: str = "engine", vllm_version: str = CURRENT_VLLM) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM picks when they are not given.

    ``EngineArgs.get_batch_defaults``; ENGINE_CONTEXT (AsyncLLM.from_engine_args)
    is not in its table and falls back to SchedulerConfig's 2048 / 128.
    """
    if usage_context == "engine":
        return 2048, 128
    total = gpu.total_bytes
    if total >= 160 * GIB and version(vllm_version) >= (0, 32):
        return 16384, 1024
    if total >= 70 * GIB and "a100" not in gpu.name.lower():
        return (16384 if usage_context == "llm" else 8192), 1024
    return (8192 if usage_context == "llm" else 2048), 256


def resolve_batch(s: Settings, gpu: GPUSpec, length: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for a ``length``-token max_model_len: the given ones, else
    vLLM's defaults, the batch capped at max_num_seqs x length and the sequences at the batch."""
    d_mnbt, d_seqs = batch_defaults(gpu, s.usage_context, s.vllm_version)
    seqs = s.max_num_seqs if s.max_num_seqs is not None else d_seqs
    if s.max_num_batched_tokens is not None:
        mnbt = s.max_num_batched_tokens
    else:
        mnbt = min(d_mnbt, seqs * length)
    if s.max_num_seqs is None:
        seqs = min(seqs, mnbt)
    return mnbt, seqs
