"""The load ledger without an engine: the file format, corrupt lines, racing writers, feedback, the CLI."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from finspace import ledger as ledger_mod
from finspace.engine import LoadRecord
from finspace.ledger import Ledger, LedgerStatus, default_data_dir
from finspace.ledger_line import normalize

REPO = Path(__file__).resolve().parents[1]
CPU = {"device": "cpu", "gpu": None, "gpu_key": "cpu", "count": 0, "total_bytes": 8 << 30}
L40S = {"device": "gpu", "gpu": "NVIDIA L40S", "gpu_key": "l40s", "count": 1, "total_bytes": 48 * 2**30}
PLAN = {
    "gpu": "l40s",
    "gpu_name": "NVIDIA L40S",
    "gpus": 1,
    "weights_gib": 14.96,
    "kv_cache_gib": 22.5,
    "kv_cache_tokens": 1000,
    "kv_cache_blocks": 62,
    "max_model_len": 512,
    "max_model_len_that_fits": 1000,
    "model_max_len": 2048,
    "fits": True,
    "reason": "starts: ...",
    "suggestions": [{"title": "x"}],
    "settings": {"dtype": "auto"},
}
SETTINGS = {
    "model": "/models/a",
    "tokenizer": "/models/a",
    "served_model_name": "a",
    "dtype": "float32",
    "max_model_len": 512,
    "kv_cache_memory_bytes": 256 << 20,
    "enforce_eager": True,
}


def ok_record(key="a", hardware=CPU, at=None, blocks=60, **kw) -> LoadRecord:
    return LoadRecord(
        at=at if at is not None else time.time(),
        model_key=key,
        repo=f"/models/{key}",
        revision=None,
        hardware=dict(hardware),
        settings=dict(SETTINGS),
        plan=dict(PLAN),
        outcome="ok",
        stage_seconds={"plan": 0.01, "fetch": 0.1, "stop": 0.0, "release": 0.0, "start": 12.5, "warmup": 0.4},
        num_gpu_blocks=blocks,
        block_size=16,
        kv_cache_tokens=blocks * 16,
        memory_used_bytes=3 << 30,
        **kw,
    )


def failed_record(key="a", hardware=CPU, at=None, stage="start", settings=SETTINGS, **kw) -> LoadRecord:
    return LoadRecord(
        at=at if at is not None else time.time(),
        model_key=key,
        repo=f"/models/{key}",
        revision="main",
        hardware=dict(hardware),
        settings=dict(settings),
        plan=dict(PLAN),
        outcome="failed",
        stage_seconds={"plan": 0.01, "start": 3.0},
        error_stage=stage,
        error_type="SafetensorError",
        error_message="SafetensorError: Error while deserializing header: incomplete metadata",
        **kw,
    )


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "data" / "loads.jsonl")


# ---------------------------------------------------------------- round trip
def test_a_record_round_trips_with_the_plan_beside_what_vllm_did(ledger):
    written = ledger.append(ok_record())
    assert ledger.path.read_bytes().count(b"\n") == 1
    (read,) = ledger.records()
    assert read == written
    assert read["model_key"] == "a" and read["outcome"] == "ok" and read["reason"] == "load"
    assert read["hardware"] == CPU
    # the engine's paths are not settings; the rest are kept as vLLM got them
    assert "model" not in read["settings"] and read["settings"]["max_model_len"] == 512
    # the prediction: weights, KV budget, KV tokens, max context, verdict (not the suggestions)
    assert {
        k: read["plan"][k]
        for k in (
            "weights_gib",
            "kv_cache_gib",
            "kv_cache_tokens",
            "max_model_len",
            "max_model_len_that_fits",
            "fits",
            "reason",
        )
    } == {
        k: PLAN[k]
        for k in (
            "weights_gib",
            "kv_cache_gib",
            "kv_cache_tokens",
            "max_model_len",
            "max_model_len_that_fits",
            "fits",
            "reason",
        )
    }
    assert "suggestions" not in read["plan"]
    # what vLLM did
    assert (read["num_gpu_blocks"], read["block_size"], read["kv_cache_tokens"]) == (60, 16, 960)
    assert read["memory_used_bytes"] == 3 << 30 and read["max_model_len"] == 512
    assert read["load_seconds"] == pytest.approx(13.01)
    assert read["kv_tokens_error_pct"] == pytest.approx((1000 - 960) / 960 * 100, abs=0.01)
    assert read["error_stage"] is None and read["when"].endswith("Z")


def test_the_error_compares_the_whole_kv_pool_for_hybrid_models(ledger):
    # gemma3-style: 2 KV groups share 100 blocks; the planner's kv_cache_tokens is per group (800),
    # the engine's is the whole pool (100 x 16): blocks x block size is the same quantity on both sides
    rec = ok_record(blocks=100)
    rec.plan = {**PLAN, "kv_cache_blocks": 100, "kv_cache_tokens": 800, "settings": {"block_size": 16}}
    written = ledger.append(rec)
    assert written["plan"]["block_size"] == 16 and written["planned_kv_cache_tokens"] == 1600
    assert written["kv_cache_tokens"] == 1600 and written["kv_tokens_error_pct"] == 0.0
    rec.num_gpu_blocks, rec.kv_cache_tokens = 80, 80 * 16
    assert ledger.append(rec)["kv_tokens_error_pct"] == 25.0


def test_a_failure_keeps_stage_type_and_message(ledger):
    ledger.append(failed_record())
    (r,) = ledger.records()
    assert (r["outcome"], r["error_stage"], r["error_type"]) == ("failed", "start", "SafetensorError")
    assert "incomplete metadata" in r["error_message"]
    assert r["kv_cache_tokens"] is None and r["kv_tokens_error_pct"] is None and r["max_model_len"] is None


def test_dicts_are_accepted_and_limit_keeps_the_newest(ledger):
    from dataclasses import asdict

    for i in range(5):
        ledger.append(asdict(ok_record(key=f"m{i}", at=1000.0 + i)))
    assert [r["model_key"] for r in ledger.records()] == ["m0", "m1", "m2", "m3", "m4"]
    assert [r["model_key"] for r in ledger.records(limit=2)] == ["m3", "m4"]
    assert ledger.records(limit=0) == []
    # a written record appended again is unchanged (normalising is idempotent)
    again = ledger.append(ledger.records()[-1])
    assert again == ledger.records()[-2]


def test_no_file_means_no_records(tmp_path):
    assert Ledger(tmp_path / "nothing" / "loads.jsonl").records() == []


def test_odd_values_in_settings_are_kept_as_json(ledger):
    rec = ok_record()
    rec.settings = {**SETTINGS, "path": Path("/x"), "shape": (1, 2), "nan": float("nan")}
    ledger.append(rec)
    (r,) = ledger.records()
    assert r["settings"]["path"] == "/x" and r["settings"]["shape"] == [1, 2] and r["settings"]["nan"] is None


# ---------------------------------------------------------------- corrupt lines
def test_truncated_last_line_and_garbage_are_skipped_with_a_warning(ledger, caplog):
    ledger.append(ok_record(key="first"))
    with open(ledger.path, "ab") as f:
        f.write(b"this is not json\n")
        f.write(b"[1, 2]\n")
        f.write(b"\xff\xfe\n")
    ledger.append(ok_record(key="second"))
    line = json.dumps(normalize(ok_record(key="cut"))).encode()
    with open(ledger.path, "ab") as f:
        f.write(line[: len(line) // 2])  # a write cut short by a crash
    with caplog.at_level(logging.WARNING, logger="finspace.ledger"):
        recs = ledger.records()
    assert [r["model_key"] for r in recs] == ["first", "second"]
    warnings = [m for m in caplog.messages if "skipping" in m]
    assert len(warnings) == 4 and any("truncated last line" in m for m in warnings)
    # the next append starts on a fresh line: the cut line does not swallow it
    ledger.append(ok_record(key="third"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="finspace.ledger"):
        assert [r["model_key"] for r in ledger.records()] == ["first", "second", "third"]
    assert len([m for m in caplog.messages if "corrupt line" in m]) == 4


def test_append_never_raises_into_the_engine(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the data folder should be")
    ledger = Ledger(blocker / "loads.jsonl")
    with caplog.at_level(logging.ERROR, logger="finspace.ledger"):
        written = ledger.append(ok_record())
    assert written["model_key"] == "a"
    assert any("cannot append to the load ledger" in m for m in caplog.messages)
    with caplog.at_level(logging.ERROR, logger="finspace.ledger"):
        assert Ledger(tmp_path / "ok.jsonl").append("not a record") == {}
    assert any("could not be read" in m for m in caplog.messages)


def test_an_unreadable_ledger_says_what_to_check(tmp_path):
    (tmp_path / "loads.jsonl").mkdir()
    with pytest.raises(ledger_mod.LedgerError, match="cannot read the load ledger .* FINSPACE_DATA_DIR"):
        Ledger(tmp_path / "loads.jsonl").records()


def test_the_last_load_id_is_the_newest_success_of_that_model_with_the_id_normalize_gives(ledger, tmp_path):
    # a reply's export (engine.view.Provenance) and a Scoreboard run (scoreboard.result) both cite it
    assert ledger.last_load_id("a") is None  # no file
    ledger.append(ok_record(key="a", at=1000.0))
    newest = ledger.append(ok_record(key="a", at=2000.0))
    ledger.append(failed_record(key="a"))  # a failure after it is not what serves
    ledger.append(ok_record(key="b", at=3000.0))
    assert ledger.last_load_id("a") == newest["id"]
    # an older line written without an id: the id its normalized record shows (the ledger's own rule)
    with open(ledger.path, "a") as f:
        f.write(json.dumps({"model_key": "c", "outcome": "ok", "at": 4000.5}) + "\n")
    assert ledger.last_load_id("c") == normalize(ledger.records()[-1])["id"] == "4000.500-c"
    assert ledger.last_load_id("nobody") is None
    (tmp_path / "dir.jsonl").mkdir()
    assert Ledger(tmp_path / "dir.jsonl").last_load_id("a") is None  # unreadable: logged, no id


# ---------------------------------------------------------------- racing writers
BIG = 12_000  # bytes of payload per record: each line is well over PIPE_BUF (4 KiB)


def _big_record(writer: str, i: int) -> dict:
    rec = normalize(ok_record(key=writer, at=1000.0 + i))
    rec["error_message"] = f"{writer}-{i}:" + writer[0] * BIG
    return rec


def _write_many(path: str, writer: str, n: int) -> None:
    led = Ledger(Path(path), max_bytes=1 << 30)  # no rotation here: this is about whole lines
    for i in range(n):
        led.append(_big_record(writer, i))


def _check_lines(path: Path, writers: list[str], n: int) -> None:
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    seen: dict[str, list[int]] = {w: [] for w in writers}
    for line in lines[:-1]:
        rec = json.loads(line)  # every line parses: no two writes interleaved
        w = rec["model_key"]
        prefix, _, body = rec["error_message"].partition(":")
        assert prefix.startswith(f"{w}-") and body == w[0] * BIG
        seen[w].append(int(prefix.split("-")[1]))
    for w in writers:
        assert sorted(seen[w]) == list(range(n)), f"writer {w} lost or duplicated lines"


def test_threads_racing_never_interleave_a_line(tmp_path):
    path = tmp_path / "loads.jsonl"
    writers = ["alpha", "bravo", "charlie", "delta"]
    threads = [threading.Thread(target=_write_many, args=(str(path), w, 300)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_lines(path, writers, 300)
    assert len(Ledger(path).records()) == 1200


def test_processes_racing_never_interleave_a_line(tmp_path, caplog):
    path = tmp_path / "loads.jsonl"
    writers = ["xray", "yankee", "zulu"]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(path), w, 400)) for w in writers]
    for p in procs:
        p.start()
    reads = 0
    with caplog.at_level(logging.WARNING, logger="finspace.ledger"):
        while any(p.is_alive() for p in procs):  # a reader meanwhile never sees half a line
            Ledger(path).records()
            reads += 1
    for p in procs:
        p.join(timeout=120)
    assert not caplog.messages, caplog.messages[:3]
    assert reads > 0
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    _check_lines(path, writers, 400)


# ---------------------------------------------------------------- feedback
def test_status_none_without_a_record(ledger):
    assert ledger.status_for("a", "cpu") is None
    ledger.append(ok_record(key="b"))
    ledger.append(ok_record(key="a", hardware=L40S))
    assert ledger.status_for("a", "cpu") is None  # another model, another GPU: the planner stays the default


def test_status_verified_with_the_measured_figures(ledger):
    ledger.append(ok_record(key="a", hardware=L40S, at=100.0, blocks=60))
    st = ledger.status_for("a", "l40s")
    assert st == LedgerStatus(verified=True, kv_cache_tokens=960, max_model_len=512, reason=None, at=100.0)
    # a success verifies whatever settings are asked about
    assert ledger.status_for("a", "l40s", {"max_model_len": 4096}).verified


def test_status_failed_with_the_same_settings_gives_the_reason(ledger):
    ledger.append(failed_record(at=200.0))
    st = ledger.status_for("a", "cpu", SETTINGS)
    assert st is not None and not st.verified and st.at == 200.0 and st.max_model_len == 512
    assert st.reason == (
        "failed at stage 'start': SafetensorError: Error while deserializing header: incomplete metadata"
    )
    # model and tokenizer paths are not compared; other settings are
    assert ledger.status_for("a", "cpu", {k: v for k, v in SETTINGS.items() if k != "model"}) == st
    assert ledger.status_for("a", "cpu", {**SETTINGS, "max_model_len": 256}) is None
    assert ledger.status_for("a", "cpu") == st  # no settings: any failure counts


def test_status_takes_the_latest_relevant_record(ledger):
    ledger.append(failed_record(at=100.0))
    ledger.append(ok_record(at=200.0))
    assert ledger.status_for("a", "cpu", SETTINGS).verified  # it worked later
    ledger.append(failed_record(at=300.0))
    assert not ledger.status_for("a", "cpu", SETTINGS).verified  # and failed after that
    # a failure with other settings does not hide the older success
    ledger.append(failed_record(at=400.0, settings={**SETTINGS, "max_model_len": 100_000}))
    assert ledger.status_for("a", "cpu", SETTINGS).at == 300.0
    assert ledger.status_for("a", "cpu", {**SETTINGS, "max_model_len": 100_000}).at == 400.0


def test_failures_before_vllm_are_not_hardware_evidence(ledger):
    ledger.append(ok_record(at=100.0))
    ledger.append(failed_record(at=200.0, stage="plan", settings={}))
    ledger.append(failed_record(at=300.0, stage="fetch", settings={}))
    assert ledger.status_for("a", "cpu").verified
    assert ledger.statuses("cpu") == {"a": ledger.status_for("a", "cpu")}


# ---------------------------------------------------------------- data folder
def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("FINSPACE_DATA_DIR", str(tmp_path / "mine"))
    assert default_data_dir() == tmp_path / "mine"
    assert Ledger().path == tmp_path / "mine" / "loads.jsonl"

    monkeypatch.delenv("FINSPACE_DATA_DIR")
    space = tmp_path / "space-data"
    space.mkdir()
    monkeypatch.setattr(ledger_mod, "SPACE_DATA_DIR", space)
    assert default_data_dir() == space  # a Space with persistent storage

    monkeypatch.setattr(ledger_mod, "SPACE_DATA_DIR", tmp_path / "no-such-dir")
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == tmp_path / "data"

    monkeypatch.setenv("FINSPACE_DATA_DIR", "  ")
    assert default_data_dir() == tmp_path / "data"  # blank means unset


def test_a_read_only_space_folder_is_not_used(monkeypatch, tmp_path):
    monkeypatch.delenv("FINSPACE_DATA_DIR", raising=False)
    space = tmp_path / "ro"
    space.mkdir()
    monkeypatch.setattr(ledger_mod, "SPACE_DATA_DIR", space)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: not (mode & os.W_OK))  # as a read-only mount
    assert default_data_dir() == tmp_path / "data"


# ---------------------------------------------------------------- CLI
def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "finspace", "loads", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def test_cli_prints_the_table_with_the_planner_error(ledger):
    ledger.append(ok_record(key="fin-7b", hardware=L40S, at=1_700_000_000.0))
    ledger.append(failed_record(key="corrupt", at=1_700_000_060.0))
    ledger.append(ok_record(key="fin-7b", hardware=L40S, at=1_700_000_100.0, reason="restore"))
    res = cli("--data-dir", str(ledger.path.parent))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "3 load(s)" in out
    head = next(line for line in out.splitlines() if line.startswith("when"))
    for col in ("model", "hardware", "outcome", "planned KV", "actual KV", "planner error", "load s", "error"):
        assert col in head
    ok_row = next(line for line in out.splitlines() if line.startswith("2023-11-14 22:13:20"))
    assert "fin-7b" in ok_row and "1 x L40S (48.0 GiB)" in ok_row and "1,000" in ok_row and "960" in ok_row
    assert "+4.2%" in ok_row and "13.0" in ok_row
    bad_row = next(line for line in out.splitlines() if "corrupt" in line and "FAILED" in line)
    assert "CPU (8.0 GiB)" in bad_row and "'start': SafetensorError" in bad_row
    assert "ok (restore)" in out
    assert "corrupt: failed at stage 'start': SafetensorError: Error while deserializing header" in out

    res = cli("--data-dir", str(ledger.path.parent), "--limit", "1")
    assert "the last 1 of 3 loads" in res.stdout and "corrupt" not in res.stdout


def test_cli_json_prints_the_records(ledger):
    ledger.append(ok_record(at=1.0))
    ledger.append(failed_record(at=2.0))
    res = cli("--json", env={"FINSPACE_DATA_DIR": str(ledger.path.parent)})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == ledger.records()
    res = cli("--json", "--limit", "1", "--data-dir", str(ledger.path.parent))
    assert [r["outcome"] for r in json.loads(res.stdout)] == ["failed"]


def test_cli_empty_ledger_is_a_friendly_line(tmp_path):
    res = cli("--data-dir", str(tmp_path))
    assert res.returncode == 0 and res.stdout.startswith("no loads recorded yet in")
    res = cli("--data-dir", str(tmp_path / "missing"))
    assert res.returncode == 0 and "does not exist" in res.stdout
    assert json.loads(cli("--json", "--data-dir", str(tmp_path)).stdout) == []


@pytest.mark.parametrize(
    "args, match",
    [
        (("--limit", "0"), "must be positive"),
        (("--limit", "many"), "not a whole number"),
        (("--bogus",), "unrecognized arguments"),
    ],
)
def test_cli_bad_flags_exit_2(tmp_path, args, match):
    res = cli("--data-dir", str(tmp_path), *args)
    assert res.returncode == 2 and match in res.stderr


def test_cli_data_dir_that_is_a_file_exits_2(tmp_path):
    (tmp_path / "f").write_text("x")
    res = cli("--data-dir", str(tmp_path / "f"))
    assert res.returncode == 2 and "is a file, not a folder" in res.stderr


# ---------------------------------------------------------------- the cap (issue 16, finding 9)
def test_the_ledger_rotates_at_its_cap_and_keeps_the_newest_records(tmp_path):
    led = Ledger(tmp_path / "loads.jsonl", max_bytes=8192)
    line = len(json.dumps(normalize(ok_record(key="m0")), separators=(",", ":")).encode()) + 1
    for i in range(200):
        led.append(ok_record(key=f"m{i}", at=1000.0 + i))
    # each file stays under the cap: the current one and one rotated file, never more
    assert (tmp_path / "loads.jsonl").stat().st_size <= 8192
    assert (tmp_path / "loads.jsonl.1").stat().st_size <= 8192
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loads.jsonl", "loads.jsonl.1"]
    keys = [r["model_key"] for r in led.records()]
    assert keys == [f"m{i}" for i in range(200 - len(keys), 200)] and len(keys) >= 8192 // line
    # the last N come across the two files, newest last
    assert [r["model_key"] for r in led.records(3)] == ["m197", "m198", "m199"]
    n_current = len(led._parse(led.path, led.path.read_bytes()))
    assert [r["model_key"] for r in led.records(n_current + 2)][:2] == keys[-n_current - 2 : -n_current]


def test_reading_the_last_records_reads_only_the_end_of_the_file(tmp_path, caplog):
    path = tmp_path / "loads.jsonl"
    led = Ledger(path, max_bytes=1 << 30)
    path.write_bytes(b"{corrupt line at the start\n" + b"x" * (512 << 10) + b"\n")  # 512 KiB of junk first
    for i in range(5):
        led.append(ok_record(key=f"m{i}", at=1000.0 + i))
    with caplog.at_level("WARNING", logger="finspace.ledger"):
        assert [r["model_key"] for r in led.records(2)] == ["m3", "m4"]
    assert "corrupt" not in caplog.text  # the junk at the start was never read
    with caplog.at_level("WARNING", logger="finspace.ledger"):
        assert len(led.records()) == 5  # a full read skips it, with a warning
    assert "corrupt line 1" in caplog.text


# ---------------------------------------------------------------- tensor parallel
def test_a_tensor_parallel_load_keeps_its_ranks(ledger):
    ranks = [
        {"rank": "rank 0", "device": "host", "pid": 11, "memory_bytes": 700 << 20},
        {"rank": "rank 1", "device": "host", "pid": 12, "memory_bytes": 690 << 20},
    ]
    rec = ok_record(tensor_parallel_size=2, ranks=ranks)
    rec.settings["tensor_parallel_size"] = 2
    ledger.append(rec)
    (read,) = ledger.records()
    assert read["tensor_parallel_size"] == 2 and read["ranks"] == ranks


@pytest.mark.parametrize(
    "raw, tp, ranks",
    [
        ({}, 1, []),  # a record from before ranks were kept: one rank, none listed
        ({"settings": {"tensor_parallel_size": 4}}, 4, []),  # the engine's settings say how many
        ({"tensor_parallel_size": "two", "ranks": "rank 0"}, 1, []),  # odd values are dropped, never raised
        (
            {"ranks": [{"rank": "rank 0", "memory_bytes": float("nan")}, 7]},
            1,
            [{"rank": "rank 0", "memory_bytes": None}],
        ),
    ],
)
def test_ranks_are_normalised(raw, tp, ranks):
    line = normalize({"model_key": "m", "at": 1.0, **raw})
    assert (line["tensor_parallel_size"], line["ranks"]) == (tp, ranks)
