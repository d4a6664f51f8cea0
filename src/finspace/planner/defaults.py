"""Transformers' class defaults for the config.json fields the planner reads: the ONE table.

A config.json only holds what differs from its configuration class; the rest
comes from the class's ``__init__`` defaults (gemma-3-4b-it leaves out
``num_attention_heads``: Gemma3TextConfig's 8). ``with_defaults`` fills the
absent keys (never a key present as null: ``"sliding_window": null`` means no
window) from this table.

Source: ``transformers/models/<type>/configuration_<type>.py``, transformers
5.19.0 as installed in the project's venv (read through ``AutoConfig.for_model``
and checked against the files). Only the fields the planner sizes a model from
are listed; ``None`` in the class stays out of the table. ``hidden_size``,
``num_hidden_layers`` and ``intermediate_size`` (listed for the text models a
vision-language config wraps) are defaulted only inside a ``text_config``
(llava-1.5's leaves them to LlamaConfig); a top-level config without them is
refused, since defaulting them would plan another model.
"""

from __future__ import annotations

from typing import Any

#: model_type -> {field: default}. The class each row comes from is named beside it.
TRANSFORMERS_DEFAULTS: dict[str, dict[str, object]] = {
    # LlamaConfig
    "llama": dict(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        vocab_size=32000,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    ),
    # MistralConfig (sliding_window 4096 in the class; Mistral v0.2+ configs write null)
    "mistral": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        sliding_window=4096,
    ),
    # Qwen2Config
    "qwen2": dict(
        hidden_size=4096,
        intermediate_size=22016,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        use_sliding_window=False,
        max_window_layers=28,
    ),
    # Qwen3Config
    "qwen3": dict(
        num_attention_heads=32,
        num_key_value_heads=32,
        head_dim=128,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        use_sliding_window=False,
        max_window_layers=28,
    ),
    # Gemma2Config
    "gemma2": dict(
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        vocab_size=256000,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        sliding_window=4096,
    ),
    # Gemma3TextConfig (also the text_config of gemma3)
    "gemma3_text": dict(
        hidden_size=2304,
        intermediate_size=9216,
        num_hidden_layers=26,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        vocab_size=262208,
        max_position_embeddings=131072,
        tie_word_embeddings=True,
        sliding_window=4096,
    ),
    # GPTNeoXConfig
    "gpt_neox": dict(num_attention_heads=64, vocab_size=50432, max_position_embeddings=2048, tie_word_embeddings=False),
    # Phi3Config
    "phi3": dict(num_attention_heads=32, vocab_size=32064, max_position_embeddings=4096, tie_word_embeddings=False),
    # Qwen2MoeConfig
    "qwen2_moe": dict(
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        moe_intermediate_size=1408,
        num_experts=60,
        num_experts_per_tok=4,
        shared_expert_intermediate_size=5632,
        decoder_sparse_step=1,
        use_sliding_window=False,
        max_window_layers=28,
    ),
    # Qwen3MoeConfig
    "qwen3_moe": dict(
        num_attention_heads=32,
        num_key_value_heads=4,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        moe_intermediate_size=768,
        num_experts=128,
        num_experts_per_tok=8,
        decoder_sparse_step=1,
        use_sliding_window=False,
    ),
    # MixtralConfig
    "mixtral": dict(
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        num_local_experts=8,
        num_experts_per_tok=2,
    ),
    # GptOssConfig
    "gpt_oss": dict(
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=201088,
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        sliding_window=128,
        num_local_experts=128,
        num_experts_per_tok=4,
        attention_bias=True,
    ),
    # DeepseekV2Config
    "deepseek_v2": dict(
        num_attention_heads=32,
        vocab_size=102400,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        moe_intermediate_size=1407,
        n_routed_experts=64,
        n_shared_experts=2,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        first_k_dense_replace=0,
    ),
    # DeepseekV3Config
    "deepseek_v3": dict(
        num_attention_heads=128,
        vocab_size=129280,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        moe_intermediate_size=2048,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        first_k_dense_replace=3,
    ),
    # PixtralVisionConfig (vision_config of mistral3 / pixtral)
    "pixtral": dict(
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=16,
        patch_size=16,
        image_size=1024,
        num_channels=3,
    ),
    # CLIPVisionConfig (vision_config of llava)
    "clip_vision_model": dict(
        hidden_size=768,
        intermediate_size=3072,
        num_hidden_layers=12,
        num_attention_heads=12,
        patch_size=32,
        image_size=224,
        num_channels=3,
    ),
    # Qwen2_5_VLVisionConfig
    "qwen2_5_vl_vision": dict(
        hidden_size=3584,
        intermediate_size=3420,
        depth=32,
        num_heads=16,
        patch_size=14,
        out_hidden_size=3584,
        spatial_merge_size=2,
        temporal_patch_size=2,
        in_channels=3,
    ),
}
#: config.json model_types that name the same class as a row above
_ALIASES = {"gemma3": "gemma3_text", "qwen2_5_vl_text": "qwen2", "ministral": "mistral", "ministral3": "mistral"}


#: defaulted only in a nested text_config / vision_config (see the module docstring)
NESTED_ONLY = ("hidden_size", "intermediate_size", "num_hidden_layers")


def with_defaults(model_type: str, cfg: dict[str, Any], *, nested: bool = True) -> dict[str, Any]:
    """``cfg`` with transformers' defaults for ``model_type`` under the keys it leaves out
    (``nested=False``, a top-level config: not the NESTED_ONLY sizes)."""
    row = TRANSFORMERS_DEFAULTS.get(_ALIASES.get(model_type, model_type), {})
    return {**{k: v for k, v in row.items() if k not in cfg and (nested or k not in NESTED_ONLY)}, **cfg}
