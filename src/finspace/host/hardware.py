"""Known GPUs and how to recognise them.

``total_bytes`` is the memory CUDA reports (``torch.cuda.mem_get_info()[1]``),
the figure vLLM multiplies by ``gpu_memory_utilization``; it is a little less
than the marketing size. Sources: vLLM start-up logs ("total_memory=79.19GiB"
on H100 80GB, 79.25 on A100 80GB, 44.39-44.42 on L40S) collected in
shared/vllm-figures.yaml and shared/vllm-memory-mechanism.md, and NVML's
``nvmlDeviceGetMemoryInfo().total`` for the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from finspace.errors import FinspaceError
from finspace.units import GIB, gib_to_bytes


@dataclass(frozen=True)
class GPUSpec:
    key: str  # short key for --gpu, e.g. "l40s"
    name: str  # display name
    total_bytes: int  # memory CUDA sees
    compute_capability: tuple[int, int]
    nvml_pattern: str = ""  # regex matched (case-insensitive) against NVML's device name

    @property
    def supports_fp8(self) -> bool:
        """fp8 weights and KV cache need Ada (8.9) or Hopper (9.0)+."""
        return self.compute_capability >= (8, 9)

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


KNOWN_GPUS: dict[str, GPUSpec] = {
    g.key: g
    for g in (
        GPUSpec("l4", "NVIDIA L4", gib_to_bytes(22.03), (8, 9), r"\bL4\b"),
        GPUSpec("a10g", "NVIDIA A10G", gib_to_bytes(22.06), (8, 6), r"\bA10G\b"),
        GPUSpec("l40", "NVIDIA L40", gib_to_bytes(44.39), (8, 9), r"\bL40\b(?!S)"),
        GPUSpec("l40s", "NVIDIA L40S", gib_to_bytes(44.39), (8, 9), r"\bL40S\b"),
        GPUSpec("a100-40gb", "NVIDIA A100 40GB", gib_to_bytes(39.39), (8, 0), r"A100.*(40\s*GB|PCIE-40|SXM4-40)"),
        GPUSpec("a100-80gb", "NVIDIA A100 80GB", gib_to_bytes(79.25), (8, 0), r"A100.*80\s*GB"),
        GPUSpec("h100", "NVIDIA H100 80GB", gib_to_bytes(79.19), (9, 0), r"\bH100\b"),
        GPUSpec("h200", "NVIDIA H200", gib_to_bytes(139.81), (9, 0), r"\bH200\b"),
    )
}


def gpu_by_key(key: str) -> GPUSpec:
    try:
        return KNOWN_GPUS[key.lower()]
    except KeyError:
        known = ", ".join(KNOWN_GPUS)
        raise FinspaceError(f"unknown GPU {key!r}; use one of: {known} (or give --gpu-memory-gib)") from None


def match_nvml_name(name: str, total_bytes: int | None = None) -> GPUSpec:
    """Map NVML's device name to a known GPU; an unknown one keeps its measured memory.

    A100s are told apart by their memory when the name is ambiguous ("NVIDIA A100-SXM4").
    """
    for spec in KNOWN_GPUS.values():
        if spec.nvml_pattern and re.search(spec.nvml_pattern, name, re.IGNORECASE):
            return spec
    if re.search(r"A100", name, re.IGNORECASE) and total_bytes:
        return KNOWN_GPUS["a100-80gb" if total_bytes > 50 * GIB else "a100-40gb"]
    if not total_bytes:
        raise FinspaceError(f"GPU {name!r} is not known and its memory was not measured; give --gpu-memory-gib")
    return custom_gpu(total_bytes, name=name)


def custom_gpu(total_bytes: int, name: str = "custom GPU", compute_capability: tuple[int, int] = (8, 0)) -> GPUSpec:
    """A GPU known only by its memory. fp8 is assumed unsupported unless told otherwise."""
    if total_bytes <= 0:
        raise FinspaceError("GPU memory must be positive; give e.g. --gpu-memory-gib 44.4")
    return GPUSpec("custom", name, int(total_bytes), compute_capability)
