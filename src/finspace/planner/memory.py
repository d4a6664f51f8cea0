"""Per-rank memory: weights, KV cache, activation peak and overhead, in integer bytes.

What vLLM does, and where (0.19.0 and 0.32/0.33 wheels, see
shared/vllm-memory-mechanism.md):

* Weights (``model_runner.model_memory_usage``, logged "Model loading took"):
  parameters (``shape.inventory``) times the serving dtype or the quantized
  bytes per parameter, plus the rotary cos/sin caches vLLM registers as buffers
  (``vllm/model_executor/layers/rotary_embedding/base.py``: ``max_positions x
  rotary_dim`` in the model dtype; linear/dynamic/YaRN scaling multiplies the
  positions by ``factor``, ``linear_scaling_rope.py``).
* Activation peak: ``GPUModelRunner.profile_run`` (``gpu_model_runner.py``):
  multimodal encoder profile, one dummy forward of ``max_num_batched_tokens``
  tokens, then ``_dummy_sampler_run`` over ``min(max_num_seqs, tokens)``
  requests' logits (full vocab on every rank). Fitted to the 0.19 H100 logs
  (see ``activation_bytes``).
* Overhead: non-torch memory and, from vLLM 0.21 on, the CUDA-graph estimate
  (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 0 in 0.19, 1 since 0.21).
* KV bytes: page per layer per block = ``2 x block_size x kv_heads_per_rank x
  head_dim x kv_dtype_bytes`` (``vllm/v1/kv_cache_interface.py::AttentionSpec``),
  ``kv_heads_per_rank = max(1, kv_heads // tp)`` (``ModelConfig.get_num_kv_heads``);
  MLA (``MLAAttentionSpec``): ``block_size x (kv_lora_rank + qk_rope_head_dim) x
  kv_dtype_bytes``, one latent on every rank.
  fp8 KV = 1 byte. Hybrid sliding-window models (Gemma 2/3): layers grouped by
  spec, ``group_size = min(#layers per type)`` (max if max < 1.5 min), one
  shared block pool of ``group_size x page`` bytes per block
  (``kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size``); a sliding
  layer needs ``cdiv(min(window - 1 + T, max_model_len), block_size) + 1``
  blocks per request (``SlidingWindowSpec.max_admission_blocks_per_request``),
  ``T = max_num_batched_tokens`` in 0.19 and ``max_in_flight_tokens =
  2 x max_num_batched_tokens`` (async scheduling) in 0.32.
* Reported capacity: tokens = ``num_blocks // num_groups x block_size`` and
  concurrency = ``num_blocks / sum over groups of blocks per request``
  (``_report_kv_cache_config``, ``get_max_concurrency_for_kv_cache_config``);
  ``estimate_max_model_len`` binary-searches the largest length that fits.

Calibration (tests/test_calibration.py, ten vLLM 0.19 H100 start-up logs):
mean |error| weights 0.10%, KV cache 0.07%; worst weights -0.74% (GPTQ w4a16),
worst KV +0.27% (float32). The weights and KV-layout formulas are derived, not
fitted; the activation and non-torch constants below were fitted on those same
logs, so the KV figures are in-sample. The Gemma 3 rotary cache (0.56 GiB: the
global layers' linear x8 scaling makes it 1,048,576 positions long) explains
most of the gap between its parameters (22.70 GiB) and vLLM's 23.31 GiB.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

from finspace.errors import BadInput
from finspace.planner.settings import Settings, resolve_dtype, version
from finspace.planner.experts import moe_workspace_bytes, mxfp4_expert_params
from finspace.planner.shape import DTYPE_BYTES, ModelShape, QuantScheme, cdiv, inventory
from finspace.units import GIB

# --- fitted constants (priors from vllm-figures.yaml; see module docstring) ---
#: Sampler profile: bytes per (request x vocab entry): fp32 logits, softmax,
#: top-k/top-p sort values and int64 indices. Llama-3.1-8B 1.89 GiB, Qwen3-8B
#: 2.21 GiB at 1024 requests x 8192 tokens.
SAMPLER_BYTES_PER_LOGIT = 14
#: Hidden states held through the profile: copies of tokens x hidden x dtype.
#: Fitted with the float32 case (2.21 GiB).
HELD_HIDDEN_COPIES = 3
#: Multimodal encoder profile and encoder cache, in copies of tokens x text
#: hidden x dtype over the encoder budget (gemma-3-12b-it: 3.94 GiB in total).
VISION_PROFILE_COPIES = 4.5
#: Non-torch memory growth (cuBLAS workspaces; NCCL buffers with tp >= 2).
#: One GPU: 0.25 GiB in every TP1 log of vllm-figures.yaml.
NON_TORCH_TP1_BYTES = int(0.25 * GIB)
#: Tensor parallel: 2.07 GiB at TP2 and 2.13 GiB at TP4 (llmd019-llama31-8b-h100-tp2/tp4), fitted as 2.1.
#: It does not grow with the group's size, so it is per communicator, not per peer: the TP group's
#: device communicator (PyNccl + torch's ProcessGroupNCCL) and custom allreduce, whose IPC buffer is
#: only 8 MiB (``max_size=8192 * 1024``, vllm 0.32 ``device_communicators/custom_all_reduce.py``).
NON_TORCH_TP_BYTES = int(2.1 * GIB)
#: What a communicator adds over one GPU: 2.1 - 0.25 = 1.85 GiB.
NON_TORCH_GROUP_BYTES = NON_TORCH_TP_BYTES - NON_TORCH_TP1_BYTES
#: A pipeline stage at TP 1: 0.07 GiB of non-torch growth, in both PP rows of vllm-figures.yaml
#: (llmd019-llama31-8b-h100-pp2 and -pp4; 0.25 on one GPU). The stage's own communicator (vllm 0.32
#: ``parallel_state.py``: ``_PP = init_model_parallel_group(..., group_name="pp")``; ``cuda_communicator.py``
#: gives every group but "tp" PyNccl only: no custom allreduce, no symm-mem, so no all-reduce buffers) is
#: built before the worker's memory snapshot (init non-torch 1.43 GiB at PP 2 against 0.51 at TP 1), so it is
#: in the baseline the budget leaves out (``INIT_NON_TORCH_*``), not in this growth. Its send/recv of hidden
#: states allocates nothing that persists. Measured at TP 1 only: a stage with TP > 1 is given the TP group's
#: measured figure (2.1 GiB), with nothing more for PP (assumed).
NON_TORCH_PP_STAGE_BYTES = int(0.07 * GIB)
#: Non-torch memory held before vLLM's memory snapshot (the CUDA context; with TP or PP the communicators
#: too), outside ``requested``: 0.51 GiB at TP 1 (every TP1 log: "cuda_memory=0.51GiB"); 1.43 to 1.55 GiB with
#: a TP or PP group (PP2 1.43, PP4 1.48, TP2 1.51, TP4 1.53; the smallest is used). vLLM's budget never counts
#: it; what it leaves free matters only after start, to the sampler warm-up (planner/warmup.py).
INIT_NON_TORCH_TP1_BYTES = int(0.51 * GIB)
INIT_NON_TORCH_GROUP_BYTES = int(1.43 * GIB)
#: CUDA-graph estimate (vLLM >= 0.21 subtracts it): base + per decoder layer.
#: From the 0.19 estimates: 0.84 GiB (32 layers), 1.02 GiB (48 layers).
CUDAGRAPH_BASE_BYTES = int(0.48 * GIB)
CUDAGRAPH_PER_LAYER_BYTES = int(0.01125 * GIB)


@dataclass(frozen=True)
class Weights:
    """One rank's weights, with the pieces behind the total."""

    bytes: int  # tensors + rotary buffers
    parts: tuple[tuple[str, int, float], ...]  # (kind, params, bytes/param)
    buffer_bytes: int  # rotary caches
    source: str  # "config", or "total_size" when scaled to the checkpoint's size
    rank_params: int


def weights(
    shape: ModelShape,
    quant: QuantScheme | None,
    dtype: str,
    tp: int,
    total_size: int | None,
    whole: ModelShape | None = None,
    marlin: bool = False,
) -> Weights:
    """Parameters by kind x bytes per parameter, plus the rotary caches.

    With the checkpoint's ``total_size`` (safetensors index) the tensors are
    scaled to it, unless the weights are quantized at load time or the
    checkpoint's dtype differs from the serving dtype. ``whole``: the whole
    model when ``shape`` is one pipeline stage of it. ``marlin``: mxfp4 experts
    run on Marlin and are padded (``experts.mxfp4_expert_params``).
    """
    dbytes = DTYPE_BYTES[dtype]
    inv = inventory(shape, tp)
    parts: list[tuple[str, int, float]] = []
    q_bpp = quant.bytes_per_param if quant else float(dbytes)
    lin_bpp = float(dbytes) if (quant and quant.experts_only) else q_bpp  # mxfp4: experts only
    parts.append(("linear", inv["linear"], lin_bpp))
    if inv["expert"]:
        experts = inv["expert"]
        if quant is not None and quant.method == "mxfp4" and shape.moe is not None:  # kernel padding
            experts = sum(shape.moe.is_moe) * mxfp4_expert_params(shape.moe, shape.hidden_size, tp, marlin)
        parts.append(("expert", experts, q_bpp))
    vis_q = quant is not None and quant.quantize_vision
    if inv["vision_linear"]:
        parts.append(("vision_linear", inv["vision_linear"], q_bpp if vis_q else float(dbytes)))
    parts.append(("embedding", inv["embedding"], float(dbytes)))
    parts.append(("other", inv["other"], float(dbytes)))
    tensor_bytes = int(sum(n * b for _, n, b in parts))
    source = "config"
    ckpt_bytes = DTYPE_BYTES.get(shape.torch_dtype or "", None)
    if total_size is not None and not (quant and quant.online) and (ckpt_bytes in (None, dbytes)):
        full = inventory(whole or shape, 1)  # the checkpoint holds the whole model, not one stage
        full_bytes = int(
            full["linear"] * lin_bpp
            + full["expert"] * q_bpp
            + full["vision_linear"] * (q_bpp if vis_q else dbytes)
            + (full["embedding"] + full["other"]) * dbytes
        )
        tensor_bytes = round(total_size * tensor_bytes / full_bytes)
        source = "total_size"
    buffers = sum(pos * rd * dbytes for pos, rd in shape.rope_caches)
    return Weights(tensor_bytes + buffers, tuple(parts), buffers, source, sum(inv.values()))


def cudagraphs_counted(s: Settings) -> bool:
    """vLLM >= 0.21 subtracts the CUDA-graph estimate from the budget (unless eager)."""
    return version(s.vllm_version) >= (0, 21) and not s.enforce_eager


def non_torch_bytes(tp: int, pp: int) -> int:
    """Non-torch memory growth per rank during the profile: one GPU's; with TP the TP group's communicator
    (measured); a pipeline stage at TP 1 its own small figure (measured, see NON_TORCH_PP_STAGE_BYTES)."""
    if tp > 1:
        return NON_TORCH_TP_BYTES
    return NON_TORCH_PP_STAGE_BYTES if pp > 1 else NON_TORCH_TP1_BYTES


def init_non_torch_bytes(tp: int, pp: int) -> int:
    """Non-torch memory held before the memory snapshot, outside the budget (see INIT_NON_TORCH_TP1_BYTES)."""
    return INIT_NON_TORCH_GROUP_BYTES if tp > 1 or pp > 1 else INIT_NON_TORCH_TP1_BYTES


def cudagraph_bytes(shape: ModelShape) -> int:
    """The CUDA-graph estimate: base + per decoder layer (fitted, see CUDAGRAPH_BASE_BYTES)."""
    return CUDAGRAPH_BASE_BYTES + CUDAGRAPH_PER_LAYER_BYTES * shape.num_layers


def overhead(shape: ModelShape, s: Settings) -> tuple[int, int]:
    """(non-torch bytes, CUDA-graph bytes counted in the budget) per rank."""
    non_torch = non_torch_bytes(s.tensor_parallel_size, s.pipeline_parallel_size)
    cudagraph = cudagraph_bytes(shape) if cudagraphs_counted(s) else 0
    return non_torch, cudagraph


def activation_bytes(shape: ModelShape, dtype_bytes: int, mnbt: int, max_num_seqs: int, tp: int) -> dict[str, int]:
    """Torch activation peak of the profiling run, per rank, in parts.

    Peak = held hidden states + max(sampler, forward) + vision profile, where
      sampler = min(max_num_seqs, tokens) x vocab x 14 B (fp32 logits, probs,
                sort values and int64 indices; the full vocab on every rank;
                only the last pipeline stage samples),
      forward = tokens x dtype x (2 x hidden + 3 x intermediate / tp)
                (hidden in/out, gate_up and act outputs); for MoE models
                tokens x dtype x 2 x hidden + fused_experts' workspace
                (``experts.moe_workspace_bytes``),
      held    = tokens x hidden x dtype x 3,
      vision  = encoder budget (max(tokens, tokens per image)) x text hidden x dtype x 4.5.
    Calibrated on vLLM 0.19 H100 logs at 8192 tokens / 1024 sequences
    (Llama-3.1-8B 1.89 GiB, Qwen3-8B 2.21, float32 Llama 2.21, gemma-3-12b-it
    3.94), where the sampler dominates and tensor parallelism does not change
    the peak. At the in-process default (2048 / 128) it is extrapolated.
    """
    reqs = min(max_num_seqs, mnbt)
    sampler = reqs * shape.vocab_size * SAMPLER_BYTES_PER_LOGIT if shape.has_lm_head else 0
    inter = shape.intermediate_size // tp
    if shape.moe is not None:  # MoE: fused_experts' workspace replaces the dense MLP's outputs
        forward = mnbt * dtype_bytes * 2 * shape.hidden_size
        forward += moe_workspace_bytes(shape.moe, shape.hidden_size, mnbt, dtype_bytes, tp)
    else:
        forward = mnbt * dtype_bytes * (2 * shape.hidden_size + (3 if shape.mlp_gated else 2) * inter)
    held = mnbt * shape.hidden_size * dtype_bytes * HELD_HIDDEN_COPIES
    vision = 0
    image = shape.vision or shape.tower
    if image is not None and shape.has_embedding:
        budget = max(mnbt, image.tokens_per_image)
        vision = int(budget * shape.hidden_size * dtype_bytes * VISION_PROFILE_COPIES)
    return {
        "sampler": sampler,
        "forward": forward,
        "held": held,
        "vision": vision,
        "total": held + max(sampler, forward) + vision,
    }


@dataclass(frozen=True)
class KvLayout:
    page: int
    block_bytes: int
    groups: tuple[str, ...]  # kind of each group
    group_size: int
    counts: dict[str, Any]
    window: int | None
    block_size: int
    in_flight: int

    def need_per_layer(self, kind: str, length: int) -> int:
        bs = self.block_size
        if kind == "sliding" and self.window is not None:  # a sliding layer always has its window
            n = min(self.window - 1 + self.in_flight, length)
            return (cdiv(n, bs) + 1) * self.page
        return cdiv(length, bs) * self.page

    def request_bytes(self, length: int) -> int:
        """vLLM's check: sum over real layers of max_memory_usage_bytes."""
        return sum(n * self.need_per_layer(k, length) for k, n in self.counts.items())

    def blocks_per_request(self, length: int) -> int:
        return sum(cdiv(self.need_per_layer(k, length), self.page) for k in self.groups)


def kv_layout(shape: ModelShape, s: Settings, kv_bytes: int, tp: int, mnbt: int, v: tuple[int, int]) -> KvLayout:
    page = s.block_size * shape.kv_entry(tp) * kv_bytes  # MLA: one latent, not K and V per head
    counts = {"full": shape.num_full_layers, "sliding": shape.num_sliding_layers}
    counts = {k: n for k, n in counts.items() if n}
    groups: tuple[str, ...]
    if len(counts) == 1:
        kind = next(iter(counts))
        groups, group_size = (kind,), shape.num_layers
    else:
        lo, hi = min(counts.values()), max(counts.values())
        group_size = hi if hi < 1.5 * lo else lo
        groups = tuple(k for k, n in counts.items() for _ in range(cdiv(n, group_size)))
    in_flight = mnbt * (1 if v <= (0, 19) else 2)
    return KvLayout(page, group_size * page, groups, group_size, counts, shape.sliding_window, s.block_size, in_flight)


def kv_dtype_bytes(kv_cache_dtype: str, dtype: str) -> int:
    """fp8 variants: 1 byte; auto: the model dtype (fp32 -> 4)."""
    if kv_cache_dtype.startswith("fp8"):
        return 1
    return DTYPE_BYTES.get(kv_cache_dtype) or DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class KvCapacity:
    blocks: int
    tokens: int  # blocks // groups x block_size, as vLLM logs "GPU KV cache size"
    max_concurrency: float  # requests of max_model_len at once
    request_bytes: int  # one max_model_len request (vLLM's start check)
    groups: int
    block_bytes: int


def kv_capacity(shape: ModelShape, settings: Settings, kv_cache_bytes: int) -> KvCapacity:
    """What a KV pool of ``kv_cache_bytes`` holds under ``settings``.

    ``settings`` must be resolved: max_model_len and max_num_batched_tokens set
    (``Plan.settings`` is). Used by ``plan`` and by the worked checks in tests.
    """
    s = settings
    if s.max_model_len is None or s.max_model_len < 1 or s.max_num_batched_tokens is None:
        raise BadInput("kv_capacity needs resolved settings: max_model_len and max_num_batched_tokens set")
    kv_el = kv_dtype_bytes(s.kv_cache_dtype, resolve_dtype(s, shape))
    kv = kv_layout(shape, s, kv_el, s.tensor_parallel_size, s.max_num_batched_tokens, version(s.vllm_version))
    blocks = max(0, kv_cache_bytes) // kv.block_bytes
    bpr = kv.blocks_per_request(s.max_model_len)
    return KvCapacity(
        blocks,
        blocks // len(kv.groups) * s.block_size,
        round(blocks / bpr, 2),
        kv.request_bytes(s.max_model_len),
        len(kv.groups),
        kv.block_bytes,
    )


def max_len_that_fits(kv: KvLayout, available: int, cap: int) -> int:
    """estimate_max_model_len: binary search over max_model_len."""
    if available <= 0 or kv.request_bytes(1) > available:
        return 0
    lo, hi, best = 1, cap, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if kv.request_bytes(mid) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
