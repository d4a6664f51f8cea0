"""Vision towers and projectors of vision-language models: their parameters and image budget.

What vLLM loads, and where (``vllm/model_executor/models/``):

* Gemma 3 (``gemma3_mm.py``, ``siglip.py``): SigLIP (biases, LayerNorms, a
  position embedding per patch) and ``Gemma3MultiModalProjector``
  (``VisionShape``, kept as it was calibrated).
* mistral3 / pixtral (``mistral3.py``, ``pixtral.py::PixtralHFVisionModel``):
  patch conv without bias, RMSNorms, gated SiLU MLP, no biases; projector =
  RMSNorm + patch merger (merge^2 x hidden -> hidden) + linear_1 + linear_2.
* llava (``llava.py``, ``clip.py``): CLIP ViT with biases and LayerNorms,
  truncated at ``vision_feature_layer`` (-2 loads all but the last layer and no
  post-layernorm); projector = two linears with biases.
* qwen2_5_vl (``qwen2_5_vl.py``): Conv3d patch embed without bias, RMSNorms,
  fused qkv and proj with biases, gated MLP with biases; merger = RMSNorm +
  two linears with biases over 4 merged patches.

Linear layers are split over tensor parallel (heads must divide it); norms,
biases and embeddings are counted as replicated, a slight over-count at tp > 1.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

from finspace.errors import ConfigError
from finspace.planner.defaults import with_defaults


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
class VisionTower:
    """Any other vision tower + projector, as parameter totals (linear ones split over tp)."""

    kind: str
    linear_params: int
    other_params: int
    num_heads: int
    tokens_per_image: int  # the largest image's tokens: the profiling run's encoder budget per item


def _pos(vc: dict[str, Any], key: str, where: str) -> int:
    v = vc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 or int(v) != v:
        raise ConfigError(f"config.json{where} field {key!r} must be a positive integer, got {v!r}")
    return int(v)


def siglip(config: dict[str, Any], hidden: int) -> VisionShape | None:
    """Gemma 3's SigLIP tower and projector, when the config has a vision_config."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    d = {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "patch_size": 14,
        "image_size": 896,
        "num_channels": 3,
    }  # Gemma 3's SigLIP (google's checkpoints)
    vc = {**d, **{k: v for k, v in vc.items() if v is not None}}
    g = {k: _pos(vc, k, ".vision_config") for k in d}
    vh = g["hidden_size"]
    return VisionShape(
        hidden_size=vh,
        intermediate_size=g["intermediate_size"],
        num_layers=g["num_hidden_layers"],
        num_heads=g["num_attention_heads"],
        patch_size=g["patch_size"],
        image_size=g["image_size"],
        num_channels=g["num_channels"],
        use_head=bool(vc.get("vision_use_head", False)),
        tokens_per_image=int(config.get("mm_tokens_per_image", 256)),
        # Gemma3MultiModalProjector: mm_input_projection_weight + mm_soft_emb_norm
        projector_params=vh * hidden + vh,
    )


def siglip_params(v: VisionShape, tp: int) -> tuple[int, int]:
    """(linear, other) parameters of the SigLIP tower + projector on one rank."""
    vh, vi = v.hidden_size, v.intermediate_size
    patches = (v.image_size // v.patch_size) ** 2
    other = v.num_channels * v.patch_size**2 * vh + vh  # patch conv
    other += patches * vh  # position embedding
    per = 4 * vh * (vh // tp) + 2 * vh * (vi // tp)  # q,k,v,o + fc1,fc2
    per_other = 3 * (vh // tp) + vh + (vi // tp) + vh + 4 * vh  # biases + 2 LayerNorms
    linear = per * v.num_layers
    other += per_other * v.num_layers + 2 * vh  # post_layernorm
    if v.use_head:
        linear += 4 * vh * vh + 2 * vh * vi
        other += vh + 4 * vh + vi + vh + 2 * vh
    return linear, other + v.projector_params


def tower(model_type: str, config: dict[str, Any], text_hidden: int) -> VisionTower | None:
    """The vision tower of a mistral3 / pixtral, llava or qwen2_5_vl config (None without vision_config)."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    w = ".vision_config"
    if model_type in ("mistral3", "pixtral") or vc.get("model_type") == "pixtral":  # llava + pixtral: Pixtral 12B
        model_type = "mistral3" if model_type == "mistral3" else "pixtral"  # pixtral: no patch merger, biases
        vc = with_defaults("pixtral", vc)
        vh, vi, n = _pos(vc, "hidden_size", w), _pos(vc, "intermediate_size", w), _pos(vc, "num_hidden_layers", w)
        patch, ch = _pos(vc, "patch_size", w), _pos(vc, "num_channels", w)
        merge = int(config.get("spatial_merge_size", 1 if model_type == "pixtral" else 2))
        lin = n * (4 * vh * vh + 3 * vh * vi)
        other = ch * patch * patch * vh + vh + n * 2 * vh  # patch conv, ln_pre, 2 RMSNorms per layer
        bias = bool(config.get("multimodal_projector_bias", model_type == "pixtral"))
        proj_lin = (merge * merge * vh * vh if merge > 1 else 0) + vh * text_hidden + text_hidden * text_hidden
        other += (vh if merge > 1 else 0) + (2 * text_hidden if bias else 0)
        tokens = (_pos(vc, "image_size", w) // patch) ** 2 // (merge * merge)
        return VisionTower(model_type, lin + proj_lin, other, _pos(vc, "num_attention_heads", w), tokens)
    if model_type == "llava":
        vc = with_defaults("clip_vision_model", vc)
        vh, vi, n = _pos(vc, "hidden_size", w), _pos(vc, "intermediate_size", w), _pos(vc, "num_hidden_layers", w)
        patch, image, ch = _pos(vc, "patch_size", w), _pos(vc, "image_size", w), _pos(vc, "num_channels", w)
        feature_layer = config.get("vision_feature_layer", -2)
        if isinstance(feature_layer, int):
            n = n + feature_layer + 1 if feature_layer < 0 else feature_layer
        patches = (image // patch) ** 2
        lin = n * (4 * vh * vh + 2 * vh * vi) + vh * text_hidden + text_hidden * text_hidden
        other = vh + ch * patch * patch * vh + (patches + 1) * vh + 2 * vh  # class, patch conv, positions, pre-LN
        other += n * (4 * vh + vi + vh + 4 * vh) + 2 * text_hidden  # biases, 2 LayerNorms; projector biases
        return VisionTower("llava", lin, other, _pos(vc, "num_attention_heads", w), patches)
    if model_type == "qwen2_5_vl":
        vc = with_defaults("qwen2_5_vl_vision", vc)
        vh, vi, n = _pos(vc, "hidden_size", w), _pos(vc, "intermediate_size", w), _pos(vc, "depth", w)
        patch, tp_, ch = _pos(vc, "patch_size", w), _pos(vc, "temporal_patch_size", w), _pos(vc, "in_channels", w)
        merge, out = _pos(vc, "spatial_merge_size", w), _pos(vc, "out_hidden_size", w)
        m = vh * merge * merge
        lin = n * (4 * vh * vh + 3 * vh * vi) + m * m + m * out
        other = ch * tp_ * patch * patch * vh + n * (2 * vh + 3 * vh + vh + 2 * vi + vh) + vh + m + out
        # Qwen2.5-VL's image processor default max_pixels 12845056 = 16384 merged tokens
        tokens = 12845056 // (patch * patch * merge * merge)
        return VisionTower("qwen2_5_vl", lin, other, _pos(vc, "num_heads", w), tokens)
    return None
