"""config.json to model shape: the fields the planner sizes a model from.

Parameters are counted from the config (llama, mistral, qwen2, qwen3, gemma2,
gemma3 + SigLIP tower + projector, gemma3_text, gpt_neox), per tensor-parallel
rank (``inventory``): linear layers and the vocab-parallel embedding/lm_head
are split, norms and biases of row-parallel layers are replicated, KV heads
are replicated when tp > kv_heads. ``quantization_config`` becomes a
``QuantScheme``: AWQ/GPTQ/compressed-tensors int4 add group scales (+ zero
points when asymmetric); bitsandbytes nf4 adds an fp32 absmax per 64 weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from finspace.errors import ConfigError

VOCAB_PADDING = 64  # DEFAULT_VOCAB_PADDING_SIZE in vocab_parallel_embedding.py
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: dtype names as configs and engine arguments spell them, to the planner's
DTYPE_ALIASES = {
    "auto": "auto", "float32": "float32", "float": "float32", "fp32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16", "fp16": "float16",
}

SUPPORTED_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "gemma3_text", "gpt_neox")
_MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
    "model_max_length", "max_sequence_length", "max_seq_length", "seq_len",
)
# rope types whose max_position_embeddings is already the scaled length
_ROPE_NO_LEN_SCALING = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# rope types whose cos/sin cache covers max_position x factor
_ROPE_CACHE_SCALED = ("linear", "dynamic", "yarn")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class VisionShape:
    """A SigLIP-style vision tower (Gemma 3) and its projector."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    patch_size: int
    image_size: int
    num_channels: int
    use_head: bool
    tokens_per_image: int
    projector_params: int


@dataclass(frozen=True)
class QuantScheme:
    """How linear-layer weights are stored on the GPU."""

    method: str  # fp8 | awq | gptq | compressed-tensors | bitsandbytes
    bits: int
    group_size: int = 0  # 0: per-channel or per-tensor scales (negligible)
    zero_points: bool = False
    scale_bytes: int = 2
    online: bool = False  # quantized at load time from a bf16/fp16 checkpoint
    quantize_vision: bool = True

    @property
    def bytes_per_param(self) -> float:
        b = self.bits / 8
        if self.group_size > 0:
            b += self.scale_bytes / self.group_size
            if self.zero_points:
                b += (self.bits / 8) / self.group_size
        return b

    @property
    def label(self) -> str:
        if self.method == "fp8":
            return "fp8 (online)" if self.online else "fp8 (checkpoint)"
        g = f", group {self.group_size}" if self.group_size > 0 else ""
        return f"{self.method} {self.bits}-bit{g}" + (" (online)" if self.online else "")


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

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == "sliding")

    @property
    def num_full_layers(self) -> int:
        return self.num_layers - self.num_sliding_layers


def _need(cfg: dict, key: str, where: str) -> int:
    v = cfg.get(key)
    if v is None:
        raise ConfigError(f"config.json{where} has no {key!r}; the planner needs it to size the model")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 or int(v) != v:
        raise ConfigError(f"config.json{where} field {key!r} must be a positive integer, got {v!r}")
    return int(v)


def _opt_int(cfg: dict, key: str, default: int | None, where: str) -> int | None:
    if cfg.get(key) is None:
        return default
    return _need(cfg, key, where)


def _rope_scaling(cfg: dict) -> dict | None:
    rs = cfg.get("rope_scaling")
    if rs is None and isinstance(cfg.get("rope_parameters"), dict):
        rp = cfg["rope_parameters"]
        # transformers >= 4.57 nests per layer type or writes rope_type "default"
        if "rope_type" in rp:
            rs = rp
        elif isinstance(rp.get("full_attention"), dict):
            rs = rp["full_attention"]
    if not isinstance(rs, dict):
        return None
    rope_type = rs.get("rope_type", rs.get("type", "default"))
    if rope_type == "default":
        return None
    return {**rs, "rope_type": rope_type}


def _derived_max_len(cfg: dict, model_type: str, text: dict) -> int:
    lens = [int(text[k]) for k in _MAX_LEN_KEYS if isinstance(text.get(k), (int, float)) and text.get(k)]
    derived = min(lens) if lens else 2048  # vLLM warns and assumes 2048
    rs = _rope_scaling(text)
    if rs and "gemma3" not in model_type and rs["rope_type"] not in _ROPE_NO_LEN_SCALING:
        derived = int(derived * float(rs.get("factor") or 1.0))
    return derived


def _parse_quant(qc: object) -> QuantScheme | None:
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise ConfigError("config.json field 'quantization_config' must be an object")
    method = str(qc.get("quant_method", "")).lower()
    if method == "awq":
        bits = int(qc.get("bits", qc.get("w_bit", 4)))
        g = int(qc.get("group_size", qc.get("q_group_size", 128)))
        return QuantScheme("awq", bits, max(g, 0), bool(qc.get("zero_point", True)), 2, quantize_vision=False)
    if method == "gptq":
        bits = int(qc.get("bits", 4))
        g = int(qc.get("group_size", 128))
        return QuantScheme("gptq", bits, max(g, 0), not bool(qc.get("sym", True)), 2, quantize_vision=False)
    if method in ("fp8", "fbgemm_fp8"):
        return QuantScheme("fp8", 8)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return QuantScheme("bitsandbytes", 8)
        double = bool(qc.get("bnb_4bit_use_double_quant", False))
        return QuantScheme("bitsandbytes", 4, 64, False, 1 if double else 4)
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        weights = None
        for grp in groups.values() if isinstance(groups, dict) else []:
            if isinstance(grp, dict) and isinstance(grp.get("weights"), dict):
                weights = grp["weights"]
                break
        if weights is None:
            raise ConfigError("quantization_config (compressed-tensors) has no config_groups.*.weights; cannot size the weights")
        bits = int(weights.get("num_bits", 8))
        g = weights.get("group_size") or 0
        strategy = str(weights.get("strategy", "")).lower()
        if strategy != "group":
            g = 0
        wtype = str(weights.get("type", "int")).lower()
        scale_bytes = 1 if (wtype == "float" and bits == 4) else 2  # nvfp4: fp8 scales
        return QuantScheme("compressed-tensors", bits, int(g), not bool(weights.get("symmetric", True)), scale_bytes)
    raise ConfigError(
        f"quantization_config quant_method {method or '(missing)'!r} is not supported by the planner; "
        "supported: awq, gptq, fp8, compressed-tensors, bitsandbytes"
    )


def _gemma3_layer_types(text: dict, n: int, where: str) -> tuple[str, ...]:
    lt = text.get("layer_types")
    if isinstance(lt, list) and len(lt) == n:
        return tuple("sliding" if "sliding" in str(t) else "full" for t in lt)
    pattern = text.get("sliding_window_pattern", text.get("_sliding_window_pattern", 6))
    pattern = int(pattern) if pattern else 6
    return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n))


def model_shape(config: dict) -> ModelShape:
    """Read the fields the planner needs from a Hugging Face config.json.

    Raises ConfigError naming the missing field or the unsupported architecture.
    Fields that transformers fills with a default (Gemma 3's head_dim 256, vocab
    262208, ...) get the same default here.
    """
    if not isinstance(config, dict):
        raise ConfigError("config.json must be a JSON object")
    model_type = config.get("model_type")
    arch = (config.get("architectures") or [""])[0] if isinstance(config.get("architectures"), list) else ""
    if model_type not in SUPPORTED_ARCHITECTURES:
        raise ConfigError(
            f"unknown architecture model_type={model_type!r} ({arch or 'no architectures'}); "
            f"the planner supports: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    text, where = _text_config(config, model_type)
    gemma = model_type in ("gemma2", "gemma3", "gemma3_text")
    gemma3 = model_type in ("gemma3", "gemma3_text")

    hidden = _need(text, "hidden_size", where)
    layers = _need(text, "num_hidden_layers", where)
    heads = _need(text, "num_attention_heads", where)
    inter = _need(text, "intermediate_size", where)
    vocab = _opt_int(text, "vocab_size", 262208 if gemma3 else (256000 if gemma else None), where)
    if vocab is None:
        _need(text, "vocab_size", where)
    kv = _opt_int(text, "num_key_value_heads", heads, where)  # absent (gpt_neox): multi-head attention
    head_dim = _opt_int(text, "head_dim", 256 if gemma else hidden // heads, where)
    if heads % kv:
        raise ConfigError(f"config.json{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    if gemma3:
        text = {"max_position_embeddings": 131072, **text}
    elif model_type == "gemma2":
        text = {"max_position_embeddings": 8192, **text}
    max_pos = _opt_int(text, "max_position_embeddings", None, where) or 2048
    derived = _derived_max_len(config, model_type, text)

    tie_default = gemma
    tie = config.get("tie_word_embeddings", text.get("tie_word_embeddings", tie_default))
    tie = bool(tie_default if tie is None else tie)
    torch_dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    if torch_dtype is not None:
        torch_dtype = DTYPE_ALIASES.get(str(torch_dtype).replace("torch.", ""), None)
    layer_types, window = _layer_types(model_type, text, layers, derived, where)

    shape = ModelShape(
        model_type=model_type, architecture=arch or model_type,
        hidden_size=hidden, intermediate_size=inter, num_layers=layers, num_heads=heads,
        num_kv_heads=kv, head_dim=head_dim, vocab_size=vocab, tie_word_embeddings=tie,
        max_position_embeddings=max_pos, derived_max_model_len=derived, torch_dtype=torch_dtype,
        layer_types=layer_types, sliding_window=window,
        rope_caches=_rope_caches(model_type, text, head_dim, max_pos, layer_types),
        **_layer_details(model_type, text, hidden),
        vision=_vision(config, hidden) if model_type == "gemma3" else None,
        quantization=_parse_quant(config.get("quantization_config")),
    )
    total = sum(inventory(shape, 1, pad_vocab=False).values())
    return replace(shape, num_params=total)


def _text_config(config: dict, model_type: str) -> tuple[dict, str]:
    """The text model's fields and where they are (Gemma 3 nests them in text_config)."""
    if model_type != "gemma3":
        return config, ""
    text = config.get("text_config")
    if not isinstance(text, dict):
        raise ConfigError("config.json (gemma3) has no 'text_config'; use a Gemma 3 config or model_type gemma3_text")
    return text, ".text_config"


def _layer_types(model_type: str, text: dict, layers: int, derived: int,
                 where: str) -> tuple[tuple[str, ...], int | None]:
    """("full" | "sliding" per decoder layer, the sliding window or None)."""
    window = text.get("sliding_window")
    if model_type in ("qwen2", "qwen3"):
        if not text.get("use_sliding_window", False):
            window = None
    if model_type in ("gemma3", "gemma3_text"):
        window = int(window or 4096)
        layer_types = _gemma3_layer_types(text, layers, where)
    elif model_type == "gemma2":
        window = int(window or 4096)
        lt = text.get("layer_types")
        if isinstance(lt, list) and len(lt) == layers:
            layer_types = tuple("sliding" if "sliding" in str(t) else "full" for t in lt)
        else:
            layer_types = tuple("sliding" if i % 2 == 0 else "full" for i in range(layers))
    elif window:
        window = int(window)
        if model_type == "qwen2":
            mwl = int(text.get("max_window_layers", layers))
            layer_types = tuple("sliding" if i >= mwl else "full" for i in range(layers))
        else:
            layer_types = ("sliding",) * layers
    else:
        window = None
        layer_types = ("full",) * layers
    if window is not None and window >= derived:
        # a window as long as the context is full attention
        layer_types = ("full",) * layers
        window = None
    if "sliding" not in layer_types:
        window = None
    return layer_types, window


def _rope_caches(model_type: str, text: dict, head_dim: int, max_pos: int,
                 layer_types: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """(positions, rotary_dim) of each cos/sin cache vLLM registers."""
    gemma3 = model_type in ("gemma3", "gemma3_text")
    rotary_dim = head_dim
    if model_type == "gpt_neox":
        rotary_dim = int(head_dim * float(text.get("rotary_pct", 1.0)))

    def cache(scaling: dict | None) -> tuple[int, int]:
        pos = max_pos
        if scaling and scaling["rope_type"] in _ROPE_CACHE_SCALED:
            pos = int(max_pos * float(scaling.get("factor") or 1.0))
        return (pos, rotary_dim)

    caches = [cache(_rope_scaling(text))]
    if gemma3 and "sliding" in layer_types:
        caches.append(cache(None))  # local layers: rope_local_base_freq, unscaled
    return tuple(dict.fromkeys(caches)) if not gemma3 else tuple(caches)


def _layer_details(model_type: str, text: dict, hidden: int) -> dict:
    """Biases, MLP gating and norms: the ModelShape fields that differ by architecture."""
    gemma = model_type in ("gemma2", "gemma3", "gemma3_text")
    if model_type == "gpt_neox":
        return dict(qkv_bias=True, o_bias=True, mlp_gated=False, mlp_bias=True,
                    norm_params_per_layer=4 * hidden, final_norm_params=2 * hidden,  # two LayerNorms (weight + bias)
                    qk_norm=False)
    return dict(
        qkv_bias=bool(text.get("attention_bias", model_type == "qwen2")),
        o_bias=bool(text.get("attention_bias", False)) and model_type != "qwen2",
        mlp_gated=True, mlp_bias=bool(text.get("mlp_bias", False)),
        norm_params_per_layer=(4 if gemma else 2) * hidden, final_norm_params=hidden,
        qk_norm=model_type in ("qwen3", "gemma3", "gemma3_text"),
    )


def _vision(config: dict, hidden: int) -> VisionShape | None:
    """Gemma 3's SigLIP tower and projector, when the config has a vision_config."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    vh = _opt_int(vc, "hidden_size", 1152, ".vision_config")
    return VisionShape(
        hidden_size=vh,
        intermediate_size=_opt_int(vc, "intermediate_size", 4304, ".vision_config"),
        num_layers=_opt_int(vc, "num_hidden_layers", 27, ".vision_config"),
        num_heads=_opt_int(vc, "num_attention_heads", 16, ".vision_config"),
        patch_size=_opt_int(vc, "patch_size", 14, ".vision_config"),
        image_size=_opt_int(vc, "image_size", 896, ".vision_config"),
        num_channels=_opt_int(vc, "num_channels", 3, ".vision_config"),
        use_head=bool(vc.get("vision_use_head", False)),
        tokens_per_image=int(config.get("mm_tokens_per_image", 256)),
        # Gemma3MultiModalProjector: mm_input_projection_weight + mm_soft_emb_norm
        projector_params=vh * hidden + vh,
    )


def inventory(shape: ModelShape, tp: int, *, pad_vocab: bool = True) -> dict[str, int]:
    """Parameters held by one tensor-parallel rank, by kind.

    linear: quantizable text linears; vision_linear: vision-tower linears;
    embedding: embed_tokens (+ lm_head when untied); other: norms, biases,
    position embeddings, projector (kept in the model dtype).
    """
    h, inter, hd = shape.hidden_size, shape.intermediate_size, shape.head_dim
    q_out = shape.num_heads * hd
    kv_rank = max(1, shape.num_kv_heads // tp)
    q_rank = q_out // tp
    inter_rank = inter // tp
    lin = h * q_rank + 2 * h * kv_rank * hd + q_rank * h
    lin += (3 if shape.mlp_gated else 2) * h * inter_rank
    other = shape.norm_params_per_layer
    if shape.qkv_bias:
        other += q_rank + 2 * kv_rank * hd
    if shape.o_bias:
        other += h
    if shape.mlp_bias:
        other += (2 if shape.mlp_gated else 1) * inter_rank + h
    if shape.qk_norm:
        other += 2 * hd
    inv = {"linear": lin * shape.num_layers, "vision_linear": 0, "embedding": 0, "other": other * shape.num_layers}
    inv["other"] += shape.final_norm_params
    vocab = cdiv(shape.vocab_size, VOCAB_PADDING) * VOCAB_PADDING if pad_vocab else shape.vocab_size
    emb = cdiv(vocab, tp) * h
    inv["embedding"] = emb * (1 if shape.tie_word_embeddings else 2)
    v = shape.vision
    if v is not None:
        vh, vi = v.hidden_size, v.intermediate_size
        patches = (v.image_size // v.patch_size) ** 2
        inv["other"] += v.num_channels * v.patch_size**2 * vh + vh  # patch conv
        inv["other"] += patches * vh  # position embedding
        per = 4 * vh * (vh // tp) + 2 * vh * (vi // tp)  # q,k,v,o + fc1,fc2
        per_other = 3 * (vh // tp) + vh + (vi // tp) + vh + 4 * vh  # biases + 2 LayerNorms
        inv["vision_linear"] += per * v.num_layers
        inv["other"] += per_other * v.num_layers + 2 * vh  # post_layernorm
        if v.use_head:
            inv["vision_linear"] += 4 * vh * vh + 2 * vh * vi
            inv["other"] += vh + 4 * vh + vi + vh + 2 * vh
        inv["other"] += v.projector_params
    return inv


def tp_splits(shape: ModelShape, n: int) -> bool:
    """vLLM's check: attention heads (and the vision tower's) split evenly over n ranks, KV heads split
    or are replicated evenly."""
    if shape.num_heads % n or (shape.vision and shape.vision.num_heads % n):
        return False
    kv = shape.num_kv_heads
    return not (kv % n if kv >= n else n % kv)


def tp_on_machine(shape: ModelShape, gpus: int) -> int:
    """The largest power of two <= gpus that splits the model's heads (1 always does)."""
    best, n = 1, 2
    while n <= gpus:
        if tp_splits(shape, n):
            best = n
        n *= 2
    return best

