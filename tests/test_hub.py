"""`fit --model OWNER/NAME` and finspace.fit.check: config.json and total_size through huggingface_hub.

The Hub is unreachable here: the success path reads a hub cache this test fills in the hub's
own layout (models--OWNER--NAME/refs/main + snapshots/<commit>/...) with HF_HUB_OFFLINE=1, and
the offline error path is the real one (an empty cache, offline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finspace.fit import check as fitcheck

from finspace.fit import hub
from finspace.errors import BadInput, ConfigError
from finspace.fit.hub import HubError, read_repo

ROOT = Path(__file__).resolve().parents[1]
QWEN3_MOE = ROOT / "tests" / "data" / "configs" / "Qwen__Qwen3-30B-A3B.json"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOTAL = 61_064_245_248  # Qwen3-30B-A3B's published total_size


def fill_cache(cache: Path, repo_id: str, files: dict[str, str]) -> None:
    """A hub cache holding ``files`` at revision main, as hf_hub_download leaves it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for name, text in files.items():
        (snap / name).write_text(text)


def index(total: int) -> str:
    return json.dumps(
        {"metadata": {"total_size": total}, "weight_map": {"lm_head.weight": "model-00016-of-00016.safetensors"}}
    )


def fit(cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(cache.parent / "hf-home"),
    }
    env.pop("HF_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "finspace", "fit", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


@pytest.fixture()
def offline_cache(tmp_path, monkeypatch):
    """In-process: huggingface_hub reads ``tmp_path/hub`` and never the network."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def test_fit_model_reads_the_hub_cache(tmp_path):
    cache = tmp_path / "hub"
    fill_cache(
        cache,
        "Qwen/Qwen3-30B-A3B",
        {"config.json": QWEN3_MOE.read_text(), "model.safetensors.index.json": index(TOTAL)},
    )
    r = fit(cache, "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "l40s", "--quantization", "fp8")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Qwen/Qwen3-30B-A3B on 1 x NVIDIA L40S")
    assert "30.53B params" in r.stdout and "verdict: STARTS" in r.stdout
    # bf16 checkpoint: the weights are scaled to the index's total_size
    r = fit(cache, "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "h100", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["num_params"] == 30_532_122_624 and j["kv_bytes_per_token"] == 98_304


def test_fit_model_offline_without_cache_points_to_config(tmp_path):
    r = fit(tmp_path / "empty-hub", "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "l40s")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "unreachable" in r.stderr and "offline" in r.stderr
    assert "fit --config config.json" in r.stderr and "huggingface.co/Qwen/Qwen3-30B-A3B" in r.stderr


def test_fit_model_with_config_is_refused(tmp_path):
    r = fit(tmp_path, "--model", "Qwen/Qwen3-30B-A3B", "--config", str(QWEN3_MOE))
    assert r.returncode == 2 and "give one of MODEL, --config PATH or --model OWNER/NAME" in r.stderr


def test_read_repo_total_size(offline_cache):
    fill_cache(
        offline_cache,
        "Qwen/Qwen3-30B-A3B",
        {"config.json": QWEN3_MOE.read_text(), "model.safetensors.index.json": index(TOTAL)},
    )
    repo = read_repo("Qwen/Qwen3-30B-A3B")
    assert repo.total_size_bytes == TOTAL and repo.config["model_type"] == "qwen3_moe"


def test_read_repo_without_index_counts_from_config(offline_cache):
    fill_cache(offline_cache, "someone/single-file", {"config.json": QWEN3_MOE.read_text()})
    assert read_repo("someone/single-file").total_size_bytes is None


@pytest.mark.parametrize(
    "files,repo_id,match",
    [
        ({}, "Qwen/not-cached", r"unreachable and Qwen/not-cached's config\.json is not in the hub cache"),
        ({"config.json": "{not json"}, "someone/broken", r"someone/broken's config\.json is not JSON"),
        ({}, "no-slash", r"'no-slash' is not a Hub repo id; give OWNER/NAME"),
        ({}, "a/../b", r"is not a Hub repo id"),
    ],
)
def test_read_repo_errors(offline_cache, files, repo_id, match):
    if files:
        fill_cache(offline_cache, repo_id, files)
    with pytest.raises(HubError, match=match):
        read_repo(repo_id)


def test_gated_repo_asks_for_hf_token(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError

    def gated(*args, **kwargs):
        raise GatedRepoError.__new__(GatedRepoError)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", gated)
    with pytest.raises(HubError, match=r"meta-llama/Llama-3\.1-8B-Instruct is gated: .* set HF_TOKEN"):
        read_repo("meta-llama/Llama-3.1-8B-Instruct")


# ----------------------------------------------------------------- the library call for the UI


def test_plan_for_config():
    config = json.loads(QWEN3_MOE.read_text())
    p, text = fitcheck.plan_for_config(config, "l40s", quantization="fp8", max_model_len=32768)
    assert p.fits and p.settings.quantization == "fp8"
    assert text.startswith("qwen3_moe on 1 x NVIDIA L40S") and "verdict: STARTS" in text
    p, text = fitcheck.plan_for_config(config, "l40s", pipeline_parallel_size=2, max_model_len=32768)
    assert p.gpus == 2 and len(p.stages) == 2 and "stage 1: layers 24-47" in text


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda c: fitcheck.plan_for_config(c, "tpu"), BadInput, r"unknown GPU 'tpu'"),
        (lambda c: fitcheck.plan_for_config(c, "l40s", tp=2), BadInput, r"unknown setting\(s\) tp"),
        (lambda c: fitcheck.plan_for_config({"model_type": "mllama"}, "l40s"), ConfigError, r"mllama"),
    ],
)
def test_plan_for_config_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(json.loads(QWEN3_MOE.read_text()))


def test_plan_for_repo(offline_cache):
    fill_cache(
        offline_cache,
        "Qwen/Qwen3-30B-A3B",
        {"config.json": QWEN3_MOE.read_text(), "model.safetensors.index.json": index(TOTAL)},
    )
    p, text = fitcheck.plan_for_repo("Qwen/Qwen3-30B-A3B", "h100")
    assert p.detail.weights_source == "total_size" and text.startswith("Qwen/Qwen3-30B-A3B on")
    with pytest.raises(HubError, match="unreachable"):
        fitcheck.plan_for_repo("Qwen/absent", "h100")


def test_hub_stays_out_of_the_planner():
    import finspace.planner as planner_pkg

    for f in Path(planner_pkg.__file__).parent.glob("*.py"):
        assert "huggingface_hub" not in f.read_text(), f.name
    assert hub.INDEX_FILE == "model.safetensors.index.json"
