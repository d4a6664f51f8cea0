"""What a config.json says of attention over positions: the context vLLM derives from it (its max-position keys
and rope scaling), which decoder layers slide and over what window, and the rotary cos/sin caches vLLM registers
(``finspace.planner.shape`` reads the rest).
"""

from __future__ import annotations

from typing import Any

_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# rope types whose max_position_embeddings is already the scaled length
_ROPE_NO_LEN_SCALING = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# rope types whose cos/sin cache covers max_position x factor
_ROPE_CACHE_SCALED = ("linear", "dynamic", "yarn", "deepseek_yarn")


def rope_scaling(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The config's rope scaling with its ``rope_type``, or None for the default rope."""
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


def derived_max_len(cfg: dict[str, Any], model_type: str, text: dict[str, Any]) -> int:
    """The context vLLM derives: the smallest max-position key (2048 without one), scaled by the rope's factor
    where the rope type does not already count it."""
    lens = [int(text[k]) for k in _MAX_LEN_KEYS if isinstance(text.get(k), (int, float)) and text.get(k)]
    derived = min(lens) if lens else 2048  # vLLM warns and assumes 2048
    rs = rope_scaling(text)
    if rs and "gemma3" not in model_type and rs["rope_type"] not in _ROPE_NO_LEN_SCALING:
        derived = int(derived * float(rs.get("factor") or 1.0))
    return derived


def _gemma3_layer_types(text: dict[str, Any], n: int, where: str) -> tuple[str, ...]:
    lt = text.get("layer_types")
    if isinstance(lt, list) and len(lt) == n:
        return tuple("sliding" if "sliding" in str(t) else "full" for t in lt)
    pattern = text.get("sliding_window_pattern", text.get("_sliding_window_pattern", 6))
    pattern = int(pattern) if pattern else 6
    return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n))


def layer_types_of(
    model_type: str, text: dict[str, Any], layers: int, derived: int, where: str
) -> tuple[tuple[str, ...], int | None]:
    """("full" | "sliding" per decoder layer, the sliding window or None)."""
    window = text.get("sliding_window")
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not text.get("use_sliding_window", False):
            window = None
    # Without layer_types, vLLM's CacheConfig.sliding_window is the config's, for every layer
    # (``EngineArgs.create_engine_config``): phi3's 2047, mistral v0.1's 4096 slide all layers.
    if model_type in ("gemma3", "gemma3_text"):
        window = int(window or 4096)
        layer_types = _gemma3_layer_types(text, layers, where)
    elif model_type in ("gpt_oss", "gemma2"):  # gpt_oss.py, gemma2.py: even layers slide
        window = int(window or (128 if model_type == "gpt_oss" else 4096))
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


def rotary_caches(
    model_type: str, text: dict[str, Any], rotary_dim: int, max_pos: int, layer_types: tuple[str, ...]
) -> tuple[tuple[int, int], ...]:
    """(positions, rotary_dim) of each cos/sin cache vLLM registers."""
    gemma3 = model_type in ("gemma3", "gemma3_text")
    if model_type == "gpt_neox":
        rotary_dim = int(rotary_dim * float(text.get("rotary_pct", 1.0)))

    def cache(scaling: dict[str, Any] | None) -> tuple[int, int]:
        pos = max_pos
        if scaling and scaling["rope_type"] in _ROPE_CACHE_SCALED:
            base = max_pos
            if scaling["rope_type"] in ("yarn", "deepseek_yarn") and scaling.get("original_max_position_embeddings"):
                base = int(scaling["original_max_position_embeddings"])  # YaRN: original length x factor
            pos = int(base * float(scaling.get("factor") or 1.0))
        return (pos, rotary_dim)

    caches = [cache(rope_scaling(text))]
    if gemma3 and "sliding" in layer_types:
        caches.append(cache(None))  # local layers: rope_local_base_freq, unscaled
    return tuple(dict.fromkeys(caches)) if not gemma3 else tuple(caches)
