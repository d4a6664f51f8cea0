"""Tiny random-weight checkpoints that work offline, for the demo entry, tests and benchmarks.

``preset_config(name)`` is pure (the planner can read it before anything is
written); ``write_demo_model(path, name)`` needs transformers and tokenizers and
writes a complete checkpoint: config, safetensors weights, a byte-level BPE
tokenizer trained on a few sentences, and a chat template.

The output rows of the special tokens (end-of-turn included) and of byte
tokens that are not whole characters are zeroed, so greedy decoding never stops
early on random weights (every token the benchmark asks for is generated) and
the demo streams readable nonsense.
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 1024
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    # as Qwen 3's template: thinking off means an empty think block already written for the model
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)

# Qwen 3's generation prompt: with enable_thinking false the template writes an empty thinking block, so the
# model answers at once (the real template does the same).
QWEN3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}"
)
THINK_TOKENS = ["<think>", "</think>"]  # single tokens, as in Qwen 3's vocabulary

CORPUS = [
    "Revenue grew twelve percent year over year while operating margin narrowed.",
    "The bond's yield to maturity rose as the central bank raised its policy rate.",
    "Free cash flow covers the dividend twice; net debt to EBITDA is 1.8 times.",
    "Analysts expect earnings per share of 3.42 dollars next quarter.",
    "A discounted cash flow model values the firm at 41 billion euros.",
    "Credit spreads widened and equities fell on weaker manufacturing data.",
    "The portfolio's duration is 6.5 years and its convexity is positive.",
    "Hello! How can I help you analyse this balance sheet today?",
]

_COMMON = dict(
    vocab_size=VOCAB_SIZE,
    bos_token_id=BOS_ID,
    eos_token_id=EOS_ID,
    pad_token_id=PAD_ID,
    max_position_embeddings=2048,
    torch_dtype="float32",
    tie_word_embeddings=False,
)

PRESETS: dict[str, dict] = {
    # head_dim must be 64 or 128 for vLLM's CPU attention.
    "tiny-llama": dict(
        _COMMON,
        architectures=["LlamaForCausalLM"],
        model_type="llama",
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
    ),
    "tiny-qwen3": dict(
        _COMMON,
        architectures=["Qwen3ForCausalLM"],
        model_type="qwen3",
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        hidden_act="silu",
        use_sliding_window=False,
        sliding_window=None,
    ),
    "tiny-gemma3": dict(
        _COMMON,
        architectures=["Gemma3ForCausalLM"],
        model_type="gemma3_text",
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_local_base_freq=10000.0,
        sliding_window=64,
        sliding_window_pattern=2,
        query_pre_attn_scalar=64,
        hidden_activation="gelu_pytorch_tanh",
        layer_types=["sliding_attention", "full_attention"],
    ),
    "tiny-gpt-neox": dict(
        _COMMON,
        architectures=["GPTNeoXForCausalLM"],
        model_type="gpt_neox",
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=2,
        rotary_pct=0.25,
        rotary_emb_base=10000,
        layer_norm_eps=1e-5,
        hidden_act="gelu",
        use_parallel_residual=True,
    ),
    # The benchmark/demo size: a decode step costs real time on a CPU.
    "bench-llama": dict(
        _COMMON,
        architectures=["LlamaForCausalLM"],
        model_type="llama",
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        hidden_act="silu",
    ),
}


def preset_config(name: str) -> dict:
    try:
        return json.loads(json.dumps(PRESETS[name]))
    except KeyError:
        raise ValueError(f"unknown demo preset {name!r}; use one of: {', '.join(PRESETS)}") from None


def _train_tokenizer(preset: str = "tiny-llama"):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    qwen3 = PRESETS.get(preset, {}).get("model_type") == "qwen3"
    specials = SPECIAL_TOKENS + (THINK_TOKENS if qwen3 else [])
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    # Pad the vocabulary to the model's size with plain words, so every id a
    # random model samples decodes to visible text.
    syllables = ["ba", "ce", "di", "fo", "gu", "ka", "le", "mi", "no", "pu", "ra", "se", "ti", "vo", "xu", "ze"]
    words, i = [], 0
    while tok.get_vocab_size() + len(words) < VOCAB_SIZE:
        a, b, c = syllables[i % 16], syllables[(i // 16) % 16], syllables[(i // 256) % 16]
        words.append(f" {a}{b}{c}")
        i += 1
    tok.add_tokens(words)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|bos|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
    )
    if qwen3:
        fast.add_special_tokens({"additional_special_tokens": THINK_TOKENS})
    fast.chat_template = QWEN3_CHAT_TEMPLATE if qwen3 else CHAT_TEMPLATE
    assert fast.convert_tokens_to_ids("<|end|>") == EOS_ID
    return fast


def write_demo_model(path: str | Path, preset: str = "tiny-llama", seed: int = 0) -> Path:
    """Write a complete random-weight checkpoint to ``path`` (created; atomic by rename)."""
    import os
    import shutil
    import tempfile

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    cfg_dict = preset_config(preset)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        torch.manual_seed(seed)
        model_type = cfg_dict.pop("model_type")
        config = AutoConfig.for_model(model_type, **cfg_dict)
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        tokenizer = _train_tokenizer(preset)
        n_special = len(SPECIAL_TOKENS) + (len(THINK_TOKENS) if model_type == "qwen3" else 0)
        with torch.no_grad():
            out = model.get_output_embeddings().weight
            out[EOS_ID].zero_()
            # Byte tokens that are not whole characters would stream as "\ufffd": never pick them greedily.
            for i in range(VOCAB_SIZE):
                if "\ufffd" in tokenizer.decode([i]) or i < n_special:
                    out[i].zero_()
        model.save_pretrained(tmp, safe_serialization=True)
        GenerationConfig(
            bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, temperature=0.7, top_p=0.95, do_sample=True
        ).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def ensure_demo_model(path: str | Path, preset: str) -> Path:
    """Generate the checkpoint unless a complete one is already there."""
    path = Path(path)
    if (path / "config.json").is_file() and (path / "tokenizer.json").is_file() and any(path.glob("*.safetensors")):
        return path
    return write_demo_model(path, preset)
