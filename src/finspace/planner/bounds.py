"""Plausible bounds on a config.json: every number finite and of sane size, every shape field within reach.

A pasted config.json is public input (the Will-it-fit tab and /fit): ``1e309``
parses to infinity, ``1e308`` and ``10**40`` overflow float arithmetic, and a
``num_hidden_layers`` of 10^8 would size the model for a minute. So before the
planner reads a config, ``check_config`` walks it once (nested configs too) and
refuses, naming the field and the bound:

* a non-finite number (NaN, Infinity: Python's json parses ``1e309`` as inf);
* any number past ``MAX_NUMBER`` (rope_theta, the largest honest number in a
  config, is at most about 10^9);
* a shape field past ``FIELDS``: each well above the largest published model
  (Llama 3.1 405B: 126 layers, hidden 16,384, vocab 128,256; DeepSeek V3: 256
  routed experts; Gemma 3: vocab 262,208; Llama 4 Scout: 10M positions).
"""

from __future__ import annotations

import math
from typing import Any

from finspace.errors import ConfigError

MAX_NUMBER = 1e15
MAX_LAYERS = 1024
MAX_POSITIONS = 1 << 25  # 33,554,432 tokens
_WIDTH = 1 << 17  # 131,072: hidden sizes
_FFN = 1 << 20  # 1,048,576: MLP widths
_HEADS = 4096
_HEAD_DIM = 4096
_EXPERTS = 4096

FIELDS: dict[str, int] = {
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "num_layers",
            "n_layer",
            "max_window_layers",
            "first_k_dense_replace",
            "decoder_sparse_step",
            "moe_layer_freq",
            "sliding_window_pattern",
            "_sliding_window_pattern",
            "depth",
        ),
        MAX_LAYERS,
    ),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "embed_dim", "projection_dim", "vision_output_dim"), _WIDTH),
    **dict.fromkeys(
        (
            "intermediate_size",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "n_inner",
            "ffn_dim",
            "mlp_dim",
        ),
        _FFN,
    ),
    **dict.fromkeys(
        ("num_attention_heads", "num_key_value_heads", "n_head", "num_heads", "n_heads", "multi_query_group_num"),
        _HEADS,
    ),
    **dict.fromkeys(("head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rotary_dim"), _HEAD_DIM),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank"), 1 << 16),
    **dict.fromkeys(
        (
            "num_experts",
            "num_local_experts",
            "n_routed_experts",
            "n_shared_experts",
            "num_experts_per_tok",
            "experts_per_token",
            "moe_topk",
        ),
        _EXPERTS,
    ),
    "vocab_size": 1 << 22,  # 4,194,304
    **dict.fromkeys(
        (
            "max_position_embeddings",
            "original_max_position_embeddings",
            "sliding_window",
            "max_sequence_length",
            "seq_length",
            "n_positions",
            "attention_chunk_size",
        ),
        MAX_POSITIONS,
    ),
    **dict.fromkeys(("image_size", "mm_tokens_per_image", "max_image_size"), 1 << 16),
    **dict.fromkeys(("patch_size", "spatial_merge_size", "num_channels"), 1 << 10),
    "factor": 1 << 12,  # rope_scaling's factor
}
MAX_DEPTH = 16  # nested objects and lists
MAX_ITEMS = 100_000  # numbers, strings and containers in all


def _refuse(path: str, value: Any, why: str) -> ConfigError:
    shown = (
        f"{value:g}"
        if isinstance(value, float)
        else (f"{value:,}" if len(str(value)) <= 40 else f"a {len(str(value))}-digit number")
    )
    return ConfigError(f"config.json field {path!r} is {shown}; {why}")


def _number(path: str, key: str, value: float | int) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _refuse(path, value, "a config holds finite numbers: fix the value")
    if abs(value) > MAX_NUMBER:
        raise _refuse(path, value, f"the planner takes numbers up to {MAX_NUMBER:g}: fix the value")
    bound = FIELDS.get(key)
    if bound is not None and value > bound:
        raise _refuse(path, value, f"the planner takes at most {bound:,} (no published model has more): fix the value")


def check_config(config: Any) -> None:
    """ConfigError naming the first number in ``config`` (nested objects and lists included) that is not finite,
    is too large, or passes its shape field's bound; a config nested past ``MAX_DEPTH`` or holding more than
    ``MAX_ITEMS`` values is refused too."""
    stack: list[tuple[str, str, Any, int]] = [("", "", config, 0)]
    seen = 0
    while stack:
        path, key, value, depth = stack.pop()
        seen += 1
        if seen > MAX_ITEMS or depth > MAX_DEPTH:
            raise ConfigError(
                f"config.json is nested {MAX_DEPTH}+ deep or holds {MAX_ITEMS:,}+ values; paste the "
                f"model's config.json itself"
            )
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, (int, float)):
            _number(path or "(top level)", key, value)
        elif isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), str(k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", key, v, depth + 1) for i, v in enumerate(value))
