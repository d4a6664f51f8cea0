"""config.json to model shape: the fields the planner sizes a model from.

Parameters are counted from the config, per tensor-parallel rank
(``inventory``): linear layers and the vocab-parallel embedding/lm_head are
split, norms and biases of row-parallel layers are replicated, KV heads are
replicated when tp > kv_heads. Dense text models (llama, mistral, qwen2,
qwen3, gemma2, gemma3_text, gpt_neox, phi3), mixture-of-experts and MLA
(qwen2_moe, qwen3_moe, mixtral, gpt_oss, deepseek_v2/v3: ``experts``),
vision-language models (gemma3, mistral3, pixtral, llava, qwen2_5_vl:
``towers``) and any config whose ``text_config`` is one of the text models.
Fields a config leaves out take transformers' class defaults (``defaults``);
``quantization_config`` becomes a ``QuantScheme`` (``quant``). A pipeline
stage (``stage``) holds its slice of the layers, the embedding on the first
stage and lm_head + final norm on the last.
"""

from __future__ import annotations

from typing import Any, overload

from dataclasses import dataclass, replace

from finspace.errors import ConfigError
from finspace.planner.attention import derived_max_len, layer_types_of, rotary_caches
from finspace.planner.bounds import check_config
from finspace.planner.defaults import with_defaults
from finspace.planner.experts import (
    MlaShape,
    MoeShape,
    mla_attention_params,
    moe_layer_params,
    parse_mla,
    parse_moe,
)
from finspace.planner.quant import QuantScheme, parse_quant
from finspace.planner.towers import VisionShape, VisionTower, siglip, siglip_params, tower

VOCAB_PADDING = 64  # DEFAULT_VOCAB_PADDING_SIZE in vocab_parallel_embedding.py
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: dtype names as configs and engine arguments spell them, to the planner's
DTYPE_ALIASES = {
    "auto": "auto",
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
}

#: text architectures the planner sizes, as config.json (or its text_config) names them
TEXT_ARCHITECTURES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gemma3_text",
    "gpt_neox",
    "phi3",
    "qwen2_moe",
    "qwen3_moe",
    "mixtral",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
)
#: vision-language model_types -> the text architecture when their text_config names none
VISION_LANGUAGE = {
    "gemma3": "gemma3_text",
    "mistral3": "mistral",
    "pixtral": "mistral",
    "llava": "llama",
    "qwen2_5_vl": "qwen2",
}
SUPPORTED_ARCHITECTURES = TEXT_ARCHITECTURES + tuple(VISION_LANGUAGE)
#: architectures vLLM 0.32 does not serve, with why
UNSERVED = {
    "mllama": "Llama 3.2 Vision (mllama) is not served by vLLM 0.32: its model file was removed in vLLM 0.11 "
    "(vllm/model_executor/models has no mllama.py), so no vLLM memory plan exists for it",
}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ModelShape:
    model_type: str
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    derived_max_model_len: int  # what vLLM uses when max_model_len is not given
    torch_dtype: str | None
    layer_types: tuple[str, ...]  # "full" | "sliding" per decoder layer
    sliding_window: int | None
    rope_caches: tuple[tuple[int, int], ...]  # (positions, rotary_dim) per distinct cache
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_gated: bool = True
    mlp_bias: bool = False
    norm_params_per_layer: int = 0
    final_norm_params: int = 0
    qk_norm: bool = False
    vision: VisionShape | None = None
    quantization: QuantScheme | None = None  # from config.json's quantization_config
    num_params: int = 0  # total, all ranks
    text_type: str = ""  # the text architecture (model_type, or its text_config's)
    moe: MoeShape | None = None
    mla: MlaShape | None = None
    tower: VisionTower | None = None  # vision tower + projector other than Gemma 3's SigLIP
    attn_sinks: bool = False  # gpt_oss: one learned sink per attention head
    has_embedding: bool = True  # pipeline stage: the first one holds embed_tokens (and the vision tower)
    has_lm_head: bool = True  # pipeline stage: the last one holds lm_head and the final norm
    notes: tuple[str, ...] = ()

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == "sliding")

    @property
    def num_full_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers

    def kv_entry(self, tp: int) -> int:
        """Elements one token stores per layer on one rank: K and V per KV head, or MLA's one latent."""
        if self.mla:
            return self.mla.latent_dim
        return 2 * max(1, self.num_kv_heads // tp) * self.head_dim


def _need(cfg: dict[str, Any], key: str, where: str) -> int:
    v = cfg.get(key)
    if v is None:
        raise ConfigError(f"config.json{where} has no {key!r}; the planner needs it to size the model")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 or int(v) != v:
        raise ConfigError(f"config.json{where} field {key!r} must be a positive integer, got {v!r}")
    return int(v)


@overload
def _opt_int(cfg: dict[str, Any], key: str, default: int, where: str) -> int: ...
@overload
def _opt_int(cfg: dict[str, Any], key: str, default: None, where: str) -> int | None: ...
def _opt_int(cfg: dict[str, Any], key: str, default: int | None, where: str) -> int | None:
    if cfg.get(key) is None:
        return default
    return _need(cfg, key, where)


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Read the fields the planner needs from a Hugging Face config.json.

    Raises ConfigError naming the missing field or the unsupported architecture.
    Fields a config leaves out take transformers' class defaults for its
    model_type (``defaults.TRANSFORMERS_DEFAULTS``: Gemma 3's head_dim 256, ...).
    """
    if not isinstance(config, dict):
        raise ConfigError("config.json must be a JSON object")
    check_config(config)  # finite numbers, every shape field within a plausible bound (bounds.py)
    model_type = config.get("model_type")
    arch = (config.get("architectures") or [""])[0] if isinstance(config.get("architectures"), list) else ""
    text, where, fam, notes = _text_config(config, model_type, arch)
    model_type = model_type if isinstance(model_type, str) else fam  # a wrapper may leave its own out
    text = with_defaults(fam, text, nested=bool(where))
    gemma = fam in ("gemma2", "gemma3_text")

    hidden = _need(text, "hidden_size", where)
    layers = _need(text, "num_hidden_layers", where)
    heads = _need(text, "num_attention_heads", where)
    inter = _need(text, "intermediate_size", where)
    vocab = _need(text, "vocab_size", where)
    kv = _opt_int(text, "num_key_value_heads", heads, where)  # absent (gpt_neox): multi-head attention
    head_dim = _opt_int(text, "head_dim", hidden // heads, where)
    if heads % kv:
        raise ConfigError(
            f"config.json{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
        )
    max_pos = _opt_int(text, "max_position_embeddings", None, where) or 2048
    derived = derived_max_len(config, fam, text)

    tie = config.get("tie_word_embeddings", text.get("tie_word_embeddings", gemma))
    tie = bool(gemma if tie is None else tie)
    torch_dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    if torch_dtype is not None:
        torch_dtype = DTYPE_ALIASES.get(str(torch_dtype).replace("torch.", ""), None)
    layer_types, window = layer_types_of(fam, text, layers, derived, where)
    moe, mla = parse_moe(fam, text, layers), parse_mla(fam, text)
    if moe is not None and (moe.num_experts <= 0 or moe.expert_intermediate <= 0):
        raise ConfigError(f"config.json{where} ({fam}) has no expert count or expert intermediate size")
    rotary = mla.qk_rope_head_dim if mla else head_dim

    shape = ModelShape(
        model_type=model_type,
        architecture=arch or model_type,
        hidden_size=hidden,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        max_position_embeddings=max_pos,
        derived_max_model_len=derived,
        torch_dtype=torch_dtype,
        layer_types=layer_types,
        sliding_window=window,
        rope_caches=rotary_caches(fam, text, rotary, max_pos, layer_types),
        **_layer_details(fam, text, hidden),
        vision=siglip(config, hidden) if model_type == "gemma3" else None,
        quantization=parse_quant(config.get("quantization_config")),
        text_type=fam,
        moe=moe,
        mla=mla,
        tower=tower(model_type, config, hidden),
        attn_sinks=fam == "gpt_oss",
        notes=notes,
    )
    total = sum(inventory(shape, 1, pad_vocab=False).values())
    return replace(shape, num_params=total)


def _text_config(
    config: dict[str, Any], model_type: object, arch: str
) -> tuple[dict[str, Any], str, str, tuple[str, ...]]:
    """(the text model's fields, where they are, its architecture, notes): vision-language models and
    wrappers nest them in text_config."""
    if model_type in UNSERVED:
        raise ConfigError(UNSERVED[model_type])
    if model_type in TEXT_ARCHITECTURES:
        return config, "", model_type, ()
    tc = config.get("text_config")
    if model_type in VISION_LANGUAGE:
        if not isinstance(tc, dict):
            if model_type == "qwen2_5_vl":  # transformers < 5 writes the text fields at the top level
                return config, "", "qwen2", ()
            if model_type == "gemma3":
                raise ConfigError(
                    "config.json (gemma3) has no 'text_config'; use a Gemma 3 config or model_type gemma3_text"
                )
            raise ConfigError(
                f"config.json ({model_type}) has no 'text_config'; the planner sizes the text model from it"
            )
        inner = tc.get("model_type")
        return tc, ".text_config", inner if inner in TEXT_ARCHITECTURES else VISION_LANGUAGE[model_type], ()
    if isinstance(tc, dict) and tc.get("model_type") in TEXT_ARCHITECTURES:
        return (
            tc,
            ".text_config",
            tc["model_type"],
            (
                f"{model_type} wraps a {tc['model_type']} text model: planned from text_config; "
                "any vision or audio tower is not counted",
            ),
        )
    raise ConfigError(
        f"unknown architecture model_type={model_type!r} ({arch or 'no architectures'}); "
        f"the planner supports: {', '.join(SUPPORTED_ARCHITECTURES)} (and configs whose text_config is one of them)"
    )


def _layer_details(model_type: str, text: dict[str, Any], hidden: int) -> dict[str, Any]:
    """Biases, MLP gating and norms: the ModelShape fields that differ by architecture."""
    gemma = model_type in ("gemma2", "gemma3", "gemma3_text")
    if model_type == "gpt_neox":
        return dict(
            qkv_bias=True,
            o_bias=True,
            mlp_gated=False,
            mlp_bias=True,
            norm_params_per_layer=4 * hidden,
            final_norm_params=2 * hidden,  # two LayerNorms (weight + bias)
            qk_norm=False,
        )
    qwen2 = model_type in ("qwen2", "qwen2_moe")
    return dict(
        qkv_bias=bool(text.get("attention_bias", qwen2)) and model_type not in ("deepseek_v2", "deepseek_v3"),
        o_bias=bool(text.get("attention_bias", False)) and not qwen2,
        mlp_gated=True,
        mlp_bias=bool(text.get("mlp_bias", False)),
        norm_params_per_layer=(4 if gemma else 2) * hidden,
        final_norm_params=hidden,
        qk_norm=model_type in ("qwen3", "gemma3", "gemma3_text", "qwen3_moe"),
    )


def inventory(shape: ModelShape, tp: int, *, pad_vocab: bool = True) -> dict[str, int]:
    """Parameters held by one tensor-parallel rank (of one pipeline stage), by kind.

    linear: quantizable text linears; expert: routed experts; vision_linear:
    vision-tower linears; embedding: embed_tokens (first stage) + lm_head (last
    stage; one tensor when tied on one stage); other: norms, biases, routers,
    position embeddings, projector norms (kept in the model dtype).
    """
    h, inter, hd = shape.hidden_size, shape.intermediate_size, shape.head_dim
    q_out = shape.num_heads * hd
    kv_rank = max(1, shape.num_kv_heads // tp)
    q_rank = q_out // tp
    inter_rank = inter // tp
    other = shape.norm_params_per_layer
    if shape.mla is not None:
        attn, attn_other = mla_attention_params(shape.mla, h, shape.num_heads, tp)
        other += attn_other
    else:
        attn = h * q_rank + 2 * h * kv_rank * hd + q_rank * h
    mlp = (3 if shape.mlp_gated else 2) * h * inter_rank
    if shape.qkv_bias:
        other += q_rank + 2 * kv_rank * hd
    if shape.o_bias:
        other += h
    if shape.mlp_bias:
        other += (2 if shape.mlp_gated else 1) * inter_rank + h
    if shape.qk_norm:
        other += 2 * hd
    if shape.attn_sinks:
        other += shape.num_heads // tp
    n_moe = sum(shape.moe.is_moe) if shape.moe else 0
    inv = {
        "linear": attn * shape.num_layers + mlp * (shape.num_layers - n_moe),
        "expert": 0,
        "vision_linear": 0,
        "embedding": 0,
        "other": other * shape.num_layers,
    }
    if shape.moe is not None:
        experts, lin, oth = moe_layer_params(shape.moe, h, tp)
        inv["expert"], inv["linear"], inv["other"] = (
            experts * n_moe,
            inv["linear"] + lin * n_moe,
            inv["other"] + oth * n_moe,
        )
    if shape.has_lm_head:
        inv["other"] += shape.final_norm_params
    vocab = cdiv(shape.vocab_size, VOCAB_PADDING) * VOCAB_PADDING if pad_vocab else shape.vocab_size
    emb = cdiv(vocab, tp) * h
    copies = int(shape.has_embedding) + int(shape.has_lm_head)
    inv["embedding"] = emb * (min(copies, 1) if shape.tie_word_embeddings else copies)
    if shape.has_embedding and shape.vision is not None:
        lin, oth = siglip_params(shape.vision, tp)
        inv["vision_linear"] += lin
        inv["other"] += oth
    if shape.has_embedding and shape.tower is not None:
        inv["vision_linear"] += shape.tower.linear_params // tp
        inv["other"] += shape.tower.other_params
    return inv


def stage(shape: ModelShape, start: int, end: int, first: bool, last: bool) -> ModelShape:
    """The part of the model one pipeline stage holds: layers [start, end), the embedding (and vision tower)
    when ``first``, lm_head and the final norm when ``last`` (``vllm/distributed/utils.py::get_pp_indices``)."""
    moe = replace(shape.moe, is_moe=shape.moe.is_moe[start:end]) if shape.moe else None
    return replace(
        shape,
        num_layers=end - start,
        layer_types=shape.layer_types[start:end],
        moe=moe,
        has_embedding=first,
        has_lm_head=last,
    )


def pp_partition(num_layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """get_pp_indices: even split; the remainder goes one each to the stages before the last."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    bounds, start = [], 0
    for n in parts:
        bounds.append((start, start + n))
        start += n
    return tuple(bounds)


def tp_splits(shape: ModelShape, n: int) -> bool:
    """vLLM's check: attention heads (and the vision tower's) split evenly over n ranks, KV heads split
    or are replicated evenly."""
    if (
        shape.num_heads % n
        or (shape.vision and shape.vision.num_heads % n)
        or (shape.tower and shape.tower.num_heads % n)
    ):
        return False
    kv = shape.num_kv_heads
    if shape.mla:
        return True
    return not (kv % n if kv >= n else n % kv)


def tp_on_machine(shape: ModelShape, gpus: int) -> int:
    """The largest power of two <= gpus that splits the model's heads (1 always does)."""
    best, n = 1, 2
    while n <= gpus:
        if tp_splits(shape, n):
            best = n
        n *= 2
    return best
