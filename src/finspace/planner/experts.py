"""Mixture-of-experts and multi-head latent attention (MLA): their config fields and parameters.

What vLLM builds, and where:

* Routed experts (``vllm/model_executor/layers/fused_moe/layer.py::FusedMoE``):
  every expert is on every rank, each split over tensor parallel along its
  intermediate dimension (no expert parallelism unless asked), w13 = 2 x
  intermediate x hidden and w2 = hidden x intermediate per expert. The router
  (``gate``) is a ReplicatedLinear kept unquantized. qwen2_moe adds a shared
  expert MLP and a 1 x hidden ``shared_expert_gate``; deepseek adds
  ``n_shared_experts`` x moe_intermediate as one MLP and dense MLPs on the first
  ``first_k_dense_replace`` layers; gpt_oss has biases on the router and experts.
* The profiling run's MoE workspace (``fused_moe.py::fused_experts_impl``):
  ``cache13`` = M x top_k x max(N, K) and ``intermediate_cache2`` = M x top_k x N/2
  in the activation dtype, M = the batch's tokens, N = 2 x intermediate / tp,
  K = hidden (no chunking in vLLM 0.32).
* MLA (``deepseek_v2.py``; ``MLAAttentionSpec``): the KV cache holds one latent
  of kv_lora_rank + qk_rope_head_dim per token per layer, on every rank (MQA:
  one "head", not split by tensor parallel).
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass


@dataclass(frozen=True)
class MoeShape:
    num_experts: int
    top_k: int
    expert_intermediate: int
    is_moe: tuple[bool, ...]  # per decoder layer: routed experts (else the dense MLP)
    shared_intermediate: int = 0  # shared expert(s) as one MLP
    shared_gate: bool = False  # qwen2_moe: shared_expert_gate (1 x hidden)
    expert_bias: bool = False  # gpt_oss: router and expert biases
    router_bias: bool = False  # gpt_oss router bias; deepseek_v3 e_score_correction_bias


@dataclass(frozen=True)
class MlaShape:
    kv_lora_rank: int
    q_lora_rank: int  # 0: q_proj straight from hidden
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def latent_dim(self) -> int:
        """What one token of one layer stores: the compressed kv latent and the shared rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


def _int(text: dict[str, Any], *keys: str, default: int = 0) -> int:
    for k in keys:
        v = text.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return int(v)
    return default


def parse_moe(model_type: str, text: dict[str, Any], layers: int) -> MoeShape | None:
    """The experts of a mixture-of-experts config (None for a dense model)."""
    if model_type in ("qwen3_moe", "qwen2_moe"):
        step = _int(text, "decoder_sparse_step", default=1)
        dense_only = set(text.get("mlp_only_layers") or [])
        moe_layers = tuple(i not in dense_only and (i + 1) % step == 0 for i in range(layers))
        shared = _int(text, "shared_expert_intermediate_size") if model_type == "qwen2_moe" else 0
        return MoeShape(
            _int(text, "num_experts"),
            _int(text, "num_experts_per_tok", default=1),
            _int(text, "moe_intermediate_size"),
            moe_layers,
            shared,
            shared_gate=shared > 0,
        )
    if model_type == "mixtral":
        return MoeShape(
            _int(text, "num_local_experts"),
            _int(text, "num_experts_per_tok", default=2),
            _int(text, "intermediate_size"),
            (True,) * layers,
        )
    if model_type == "gpt_oss":
        return MoeShape(
            _int(text, "num_local_experts", "num_experts"),
            _int(text, "num_experts_per_tok", "experts_per_token", default=4),
            _int(text, "intermediate_size"),
            (True,) * layers,
            expert_bias=True,
            router_bias=True,
        )
    if model_type in ("deepseek_v2", "deepseek_v3"):
        first_dense = _int(text, "first_k_dense_replace")
        freq = _int(text, "moe_layer_freq", default=1)
        moe_layers = tuple(i >= first_dense and i % freq == 0 for i in range(layers))
        inter = _int(text, "moe_intermediate_size")
        return MoeShape(
            _int(text, "n_routed_experts"),
            _int(text, "num_experts_per_tok", default=6),
            inter,
            moe_layers,
            _int(text, "n_shared_experts") * inter,
            router_bias=model_type == "deepseek_v3",
        )
    return None


def parse_mla(model_type: str, text: dict[str, Any]) -> MlaShape | None:
    if model_type not in ("deepseek_v2", "deepseek_v3"):
        return None
    return MlaShape(
        _int(text, "kv_lora_rank"),
        _int(text, "q_lora_rank"),
        _int(text, "qk_nope_head_dim"),
        _int(text, "qk_rope_head_dim"),
        _int(text, "v_head_dim"),
    )


def mla_attention_params(mla: MlaShape, hidden: int, heads: int, tp: int) -> tuple[int, int]:
    """(linear, other) parameters of one MLA attention block on one rank.

    fused q_a/kv_a projections are replicated; q_b (or q_proj), kv_b are column-parallel, o_proj row-parallel.
    """
    h_rank = heads // tp
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    lin = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim)  # kv_a_proj_with_mqa
    lin += mla.kv_lora_rank * h_rank * (mla.qk_nope_head_dim + mla.v_head_dim)  # kv_b_proj
    lin += h_rank * mla.v_head_dim * hidden  # o_proj
    other = mla.kv_lora_rank  # kv_a_layernorm
    if mla.q_lora_rank:
        lin += hidden * mla.q_lora_rank + mla.q_lora_rank * h_rank * qk_head  # q_a_proj, q_b_proj
        other += mla.q_lora_rank  # q_a_layernorm
    else:
        lin += hidden * h_rank * qk_head  # q_proj
    return lin, other


def moe_layer_params(moe: MoeShape, hidden: int, tp: int) -> tuple[int, int, int]:
    """(routed-expert, other linear, other) parameters of one MoE layer's MLP on one rank."""
    inter = moe.expert_intermediate // tp
    experts = moe.num_experts * 3 * hidden * inter
    router = moe.num_experts * hidden
    lin = 3 * hidden * (moe.shared_intermediate // tp) if moe.shared_intermediate else 0
    other = router + (hidden if moe.shared_gate else 0) + (moe.num_experts if moe.router_bias else 0)
    if moe.expert_bias:
        other += moe.num_experts * (2 * inter + hidden)
    return experts, lin, other


def moe_workspace_bytes(moe: MoeShape, hidden: int, tokens: int, dtype_bytes: int, tp: int) -> int:
    """fused_experts_impl's cache13 + intermediate_cache2 for ``tokens`` tokens, plus the router logits."""
    n = 2 * (moe.expert_intermediate // tp)
    per_token = moe.top_k * (max(n, hidden) + n // 2) * dtype_bytes
    return tokens * (per_token + moe.num_experts * 4)


def mxfp4_expert_params(moe: MoeShape, hidden: int, tp: int, marlin: bool) -> int:
    """Routed-expert parameters of one MoE layer on one rank as the mxfp4 kernels lay them out.

    ``mxfp4_round_up_hidden_size_and_intermediate_size``
    (``fused_moe/oracle/mxfp4.py``): Marlin (GPUs without the OAI Triton
    kernels, compute capability < 9.0 such as the L40S) pads the intermediate
    size per rank to 128 and hidden to 256; the Triton backend (Hopper and
    newer) pads the intermediate size per rank to 64.
    """
    inter = moe.expert_intermediate // tp
    inter = -(-inter // (128 if marlin else 64)) * (128 if marlin else 64)
    h = -(-hidden // 256) * 256 if marlin else hidden
    return moe.num_experts * 3 * h * inter
