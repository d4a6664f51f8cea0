"""`python -m finspace fit`, run as a user would (subprocess)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LLAMA8 = ROOT / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json"


def fit(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("FINSPACE_CATALOG", None)
    return subprocess.run(
        [sys.executable, "-m", "finspace", "fit", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


@pytest.fixture(scope="module")
def l40s_table() -> subprocess.CompletedProcess:
    return fit("--gpu", "l40s")


def test_table_lists_all_five_models(l40s_table):
    r = l40s_table
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for family in (r"pythia-1\.4b", r"llama-3\.1-8b", r"qwen-3-8b", r"gemma-3-12b", r"llama-3\.1-70b"):
        assert re.search(rf"^\S*{family}\S*\s", out, re.M | re.I), family
    assert "NVIDIA L40S" in out
    for col in ("weights", "KV/token", "KV budget", "max context", "verdict", "fix"):
        assert col in out
    # Gemma 3 12B gets a working plan on one L40S
    assert re.search(r"^gemma-3-12b\S*\s.*\bstarts\b", out, re.M)


def test_gemma_half_utilization_cannot_start():
    r = fit("gemma-3-12b-fin", "--gpu", "l40s", "--gpu-memory-utilization", "0.5", "--max-model-len", "256")
    assert r.returncode == 0, r.stderr
    assert "WON'T START" in r.stdout
    assert re.search(
        r"weights 23\.3 GiB exceed the 22\.2 GiB that gpu_memory_utilization 0\.50 gives on L40S", r.stdout
    )
    assert "fixes, each re-checked by the planner" in r.stdout


def test_one_model_shows_the_arithmetic():
    r = fit("--config", str(LLAMA8), "--gpu", "l40s", "--max-model-len", "8192")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "44.39 GiB x 0.92 = 40.84 GiB" in out  # vLLM 0.32's default utilization
    assert "32 layers x 2 x 8 KV heads x 128 head_dim x 2 B = 131,072 B (128 KiB)" in out
    assert "verdict: STARTS" in out


def test_json_single():
    r = fit("--config", str(LLAMA8), "--gpu-memory-gib", "22", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    for key in (
        "weights_gib",
        "kv_bytes_per_token",
        "activation_gib",
        "overhead_gib",
        "kv_cache_gib",
        "kv_cache_tokens",
        "max_model_len",
        "max_model_len_that_fits",
        "fits",
        "reason",
        "suggestions",
    ):
        assert key in j
    assert j["kv_bytes_per_token"] == 131072
    assert j["fits"] is False and j["max_model_len"] == 131072 and j["suggestions"]


def test_json_table():
    r = fit("--gpu", "h100", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["gpu"]["key"] == "h100"
    assert len(j["models"]) >= 5
    assert all("fits" in m or "error" in m for m in j["models"].values())


def test_no_gpu_defaults_to_l40s_with_a_note():
    r = fit("--config", str(LLAMA8), "--max-model-len", "4096")
    assert r.returncode == 0, r.stderr
    if "no NVIDIA GPU detected" not in r.stderr:
        pytest.skip("an NVIDIA GPU was detected")
    assert "planning for NVIDIA L40S" in r.stderr and "NVIDIA L40S" in r.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--gpu-memory-utilization", "1.5"], r"1\.5 is not in \(0, 1\]"),
        (["--gpu-memory-utilization", "-0.2"], r"not in \(0, 1\]"),
        (["--max-model-len", "-5"], r"-5 must be a positive token count"),
        (["--max-model-len", "lots"], r"'lots' is not a token count"),
        (["--quantization", "int3"], r"unknown quantization 'int3'; use one of fp8, awq"),
        (["--gpu", "rtx9090"], r"unknown GPU 'rtx9090'; use one of l4, "),
        (["--gpus", "0"], r"0 must be positive"),
        (["--gpu-memory-gib", "-44"], r"must be positive"),
        (["--tensor-parallel-size", "two"], r"'two' is not a whole number"),
        (["--kv-cache-dtype", "int4"], r"invalid choice: 'int4'"),
        (["--config", "no/such/config.json"], r"no such file"),
        (["no-such-model", "--gpu", "l40s"], r"unknown model 'no-such-model'; choose one of"),
        (["--gpu", "l40s", "--total-size-bytes", "5"], r"--total-size-bytes goes with --config"),
    ],
)
def test_bad_flags_exit_2_with_a_message(args, message):
    r = fit(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert re.search(message, r.stderr), r.stderr


@pytest.mark.parametrize(
    "model,expected",
    [
        # bf16 over 4 GPUs on 1 x L40S: AWQ 4-bit at TP 1 first (runs here), then fp8 over 2 and bf16 over 4
        ("llama-3.1-70b-fin", [("awq", 1, 1), ("fp8", 2, 2), (None, 4, 4)]),
        # fp8 over 2 GPUs on 1 x L40S: AWQ 4-bit at TP 1 first, then the entry's own fp8 checkpoint over 2 (no
        # quantization setting: the checkpoint is pre-quantized, vLLM reads its scheme); no TP 4
        ("llama-3.1-70b-fin-fp8", [("awq", 1, 1), (None, 2, 2)]),
    ],
)
def test_one_gpu_fixes_for_multi_gpu_entries(model, expected):
    r = fit(model, "--gpu", "l40s", "--gpus", "1", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["fits"] is False and j["gpus"] == 1
    got = [
        (sg["settings"]["quantization"], sg["settings"]["tensor_parallel_size"], sg["gpus"]) for sg in j["suggestions"]
    ]
    assert got == expected
    first = j["suggestions"][0]
    assert first["checkpoint"] and first["max_model_len"] >= 1024


def test_table_on_one_gpu_shows_a_fix_that_runs_on_it():
    r = fit("--gpu", "l40s", "--gpus", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 x NVIDIA L40S")
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"llama-3\.1-70b[\w.-]*\s{2}", ln)]  # table rows, not notes
    assert len(rows) == 2
    for row in rows:
        assert "WON'T START" in row
        assert "4-bit AWQ checkpoint (quantization awq) at tensor_parallel_size 1" in row, row
        assert "needs" not in row.split("WON'T START", 1)[1], row


def test_table_without_gpus_plans_each_model_on_its_tp(l40s_table):
    out = l40s_table.stdout
    assert "a model with tensor_parallel_size N is planned on N of them" in out.splitlines()[0]
    assert re.search(r"^llama-3\.1-70b-fin\s.*\btp4\b.*\bstarts\b", out, re.M)
    assert re.search(r"^llama-3\.1-70b-fin-fp8\s.*\btp2\b.*\bstarts\b", out, re.M)


def test_a_cluster_gets_its_layout_kv_capacity_and_concurrency():
    config = str(ROOT / "configs" / "meta-llama__Llama-3.1-70B-Instruct.json")
    r = fit("--config", config, "--gpu", "h100", "--gpus", "16", "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)["cluster"]
    assert (c["tensor_parallel_size"], c["pipeline_parallel_size"], c["data_parallel_size"]) == (4, 1, 4)
    assert c["kv_cache_tokens_total"] == 4 * c["kv_cache_tokens_per_replica"] == 4 * 474_208
    r = fit("--config", config, "--gpu", "l40s", "--gpus", "8", "--gpus-per-node", "2", "--max-model-len", "8192")
    assert r.returncode == 0, r.stderr
    assert "8 GPUs (2 per node) = TP 2 x PP 3 x DP 1, 2 idle" in r.stdout, r.stdout
    r = fit("--config", config, "--gpu", "h100", "--gpus", "8", "--tensor-parallel-size", "16")
    assert r.returncode != 0 and "needs 16 GPUs and the cluster has 8" in r.stderr, r.stderr


def test_a_sampler_warm_up_that_does_not_fit_is_refused_with_vllms_two_fixes():
    # gpt-oss-20b (MoE, 201,088 vocab) on 2 x H100 at 0.95, vLLM 0.19: the warm-up needs 1024 x 201,088 x 16 B =
    # 3.07 GiB, 1.78 GiB is free (tests/test_planner_cluster.py has the arithmetic); vLLM failed it there too
    config = str(ROOT / "tests" / "data" / "configs" / "openai__gpt-oss-20b.json")
    r = fit(
        "--config",
        config,
        "--gpu",
        "h100",
        "--gpus",
        "2",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.95",
        "--usage-context",
        "serve",
        "--vllm-version",
        "0.19",
        "--quantization",
        "mxfp4",
    )
    assert r.returncode == 0, r.stderr
    assert "CUDA out of memory occurred when warming up sampler" in r.stdout
    assert "Lower max_num_seqs to 593 or lower gpu_memory_utilization to 0.93." in r.stdout
    assert "sampler warm-up DOES NOT FIT: 1,024 requests x full vocab need 3.07 GiB, 1.78 GiB free" in r.stdout


def test_one_gpu_whose_sampler_warm_up_cannot_fit_fails_at_start_up():
    # issue 35's command: gpt-oss-20b on one H100 at 0.95 under vLLM 0.19 rules failed in vLLM ("CUDA OOM warming
    # up the sampler with 1024 dummy requests"); the plan said STARTS and `fits: true`. Now: 3.07 GiB needed,
    # 2.70 GiB free (4,251,480,752 slack - 547,608,330 context - 805,306,355 graphs = 2,898,566,067 B)
    args = (
        "--config",
        str(ROOT / "tests" / "data" / "configs" / "openai__gpt-oss-20b.json"),
        "--gpu",
        "h100",
        "--gpu-memory-gib",
        "79.19",
        "--gpu-memory-utilization",
        "0.95",
        "--max-model-len",
        "8192",
        "--usage-context",
        "serve",
        "--vllm-version",
        "0.19",
        "--quantization",
        "mxfp4",
    )
    r = fit(*args)
    assert r.returncode == 0, r.stderr
    assert "verdict: WON'T START: the sampler warm-up after the KV cache is allocated needs 3.07 GiB" in r.stdout
    assert "2.70 GiB is free" in r.stdout
    assert "1. lower max_num_seqs to 900" in r.stdout and "2. lower gpu_memory_utilization to 0.94" in r.stdout
    j = json.loads(fit(*args, "--json").stdout)
    assert j["fits"] is False and "warming up sampler" in j["reason"]
    ok = json.loads(fit(*[a if a != "0.95" else "0.90" for a in args], "--json").stdout)
    assert ok["fits"] is True  # at 0.90 it started at TP 2 in the same study, and fits here on one GPU
