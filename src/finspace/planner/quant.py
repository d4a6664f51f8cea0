"""``quantization_config`` to ``QuantScheme``: how linear-layer weights are stored on the GPU.

AWQ/GPTQ/compressed-tensors int4 add group scales (+ zero points when
asymmetric); bitsandbytes nf4 adds an fp32 absmax per 64 weights; mxfp4
(gpt-oss) packs the routed experts in 4 bits with one 1-byte scale per 32
values and leaves the rest (attention, router, embeddings) in the model dtype
(its ``modules_to_not_convert``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from finspace.errors import ConfigError


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
    experts_only: bool = False  # mxfp4: only the routed experts are quantized

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


def _whole(fields: dict[str, Any], key: str, default: int) -> int:
    """A quantization field as a whole number (absent or null: ``default``); ConfigError naming it otherwise."""
    v = fields.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise ConfigError(f"config.json quantization_config field {key!r} must be a whole number, got {v!r}")
    return int(v)


def parse_quant(qc: object) -> QuantScheme | None:
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise ConfigError("config.json field 'quantization_config' must be an object")
    method = str(qc.get("quant_method", "")).lower()
    if method == "awq":
        bits = _whole(qc, "bits", _whole(qc, "w_bit", 4))
        g = _whole(qc, "group_size", _whole(qc, "q_group_size", 128))
        return QuantScheme("awq", bits, max(g, 0), bool(qc.get("zero_point", True)), 2, quantize_vision=False)
    if method == "gptq":
        bits = _whole(qc, "bits", 4)
        g = _whole(qc, "group_size", 128)
        return QuantScheme("gptq", bits, max(g, 0), not bool(qc.get("sym", True)), 2, quantize_vision=False)
    if method == "mxfp4":
        return QuantScheme("mxfp4", 4, 32, False, 1, quantize_vision=False, experts_only=True)
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
            raise ConfigError(
                "quantization_config (compressed-tensors) has no config_groups.*.weights; cannot size the weights"
            )
        bits = _whole(weights, "num_bits", 8)
        g = _whole(weights, "group_size", 0)
        strategy = str(weights.get("strategy", "")).lower()
        if strategy != "group":
            g = 0
        wtype = str(weights.get("type", "int")).lower()
        scale_bytes = 1 if (wtype == "float" and bits == 4) else 2  # nvfp4: fp8 scales
        return QuantScheme("compressed-tensors", bits, g, not bool(weights.get("symmetric", True)), scale_bytes)
    raise ConfigError(
        f"quantization_config quant_method {method or '(missing)'!r} is not supported by the planner; "
        "supported: awq, gptq, fp8, compressed-tensors, bitsandbytes, mxfp4"
    )
