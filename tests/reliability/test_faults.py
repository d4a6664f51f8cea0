"""Faults injected into a real server: dropped clients, broken loads, a full disk, a killed engine.

One server (`python app.py`, vLLM on CPU) for the module; tests run in file order
and each leaves model "a" serving. Model "a" is the tiny llama with its position
limit raised to 8,192, so a long greedy stream (8,000 tokens; the tiny models'
end token never wins a greedy pick) runs for many seconds even on a quiet machine.

- Client disconnects mid-stream (an httpx SSE reader closing, a raw socket reset,
  gradio_client's ``job.cancel()``) free their requests in the engine: /health's
  ``running_requests`` drops while an identical control stream, started first,
  is still running, so the request was aborted, not finished.
- Loads that fail halfway (truncated safetensors, no tokenizer files, a config
  that does not match its weights, a full disk while the weights are written):
  each gives a clear error and the previous model serves again (health 200, old key).
- The engine process killed during 8 concurrent gradio_client streams: every
  stream ends with a clear error within a bound, /health goes 503 within 5 s and
  back to 200 after the automatic restart, and later requests all succeed.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest
from gradio_client.exceptions import AppError

from helpers import corrupt_copy, demo_entry, mismatched_copy
from rel_utils import (
    TALLY,
    HttpxStream,
    RawSocketStream,
    assert_clean,
    engine_pids,
    gclient,
    health,
    running_requests,
    start_server,
    wait_until,
)

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

ADMIN = "faults-admin-token-93b2"
LONG = 8000  # tokens: a greedy stream that runs for many seconds on the CPU (context 8,192)
PROMPT = "Walk me through a discounted cash flow valuation."
STREAM_BOUND_S = 60.0  # a killed stream must end within this


@pytest.fixture(scope="module")
def tiny_disk(tmp_path_factory):
    """A 256 KiB tmpfs: the folder a `generate:` entry writes its model into (about 2.5 MB)."""
    folder = tmp_path_factory.mktemp("rel-tiny-disk")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True, text=True
    )
    reason = None if r.returncode == 0 else f"cannot mount a tmpfs here ({(r.stderr or r.stdout).strip()})"
    try:
        yield folder, reason
    finally:
        if reason is None:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir, tiny_disk):
    root = tmp_path_factory.mktemp("rel-faults")
    no_tok = root / "no-tokenizer"
    shutil.copytree(model_dir / "tiny-llama", no_tok)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (no_tok / name).unlink(missing_ok=True)
    long_ctx = root / "tiny-llama-8k"
    shutil.copytree(model_dir / "tiny-llama", long_ctx)
    cfg = json.loads((long_ctx / "config.json").read_text())
    cfg["max_position_embeddings"] = 8192
    (long_ctx / "config.json").write_text(json.dumps(cfg))
    models = {
        "a": demo_entry(long_ctx, None, label="Tiny Llama 8k", max_model_len=8192, max_tokens=16),
        "corrupt": demo_entry(
            corrupt_copy(model_dir / "tiny-llama", root / "corrupt"), None, label="Truncated weights"
        ),
        "notok": demo_entry(no_tok, None, label="No tokenizer"),
        "mismatch": demo_entry(
            mismatched_copy(model_dir / "tiny-llama", root / "mismatch"), None, label="Config does not match weights"
        ),
        "full": demo_entry(tiny_disk[0] / "generated", "tiny-llama", label="Generated on a full disk"),
    }
    srv = start_server(root, models, admin_token=ADMIN, env={"FINSPACE_CPU_KV_CACHE_MIB": "160"})
    try:
        yield srv
    finally:
        srv.stop()


def chat_ok(server, n: int = 1, max_tokens: int = 8) -> int:
    """n chats in parallel (a fresh gradio_client each); returns how many failed."""

    def one(i):
        try:
            reply = gclient(server).predict(f"{PROMPT} ({i})", [], None, 0.0, max_tokens, api_name="/chat")
            return isinstance(reply, str) and bool(reply)
        except Exception:  # noqa: BLE001 - counted, and asserted by the caller
            return False

    with cf.ThreadPoolExecutor(n) as pool:
        failed = sum(not ok for ok in pool.map(one, range(n)))
    TALLY.add(errors=failed)
    return failed


def serving_a(server) -> dict:
    status, h = health(server)
    assert status == 200 and h["model"] == "a" and h["engine"]["alive"], (status, h)
    return h


def load_rest(server, key: str, timeout: float = 540.0) -> dict:
    """POST /load-model (202), then wait until no load runs; returns the final /health body."""
    r = httpx.post(
        server.url + "/load-model", json={"model": key}, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30
    )
    assert r.status_code == 202, r.text
    assert r.json()["loading"] == key

    def settled():
        status, h = health(server)
        return h if h["engine"]["loading"] is None and h["status"] not in ("loading", "switching") else None

    return wait_until(settled, timeout, 0.3, f"the end of the load of {key}")


def load_gradio(server, key: str) -> str:
    """/load_model through gradio_client (waits for the load); returns its error message."""
    with pytest.raises(AppError) as info:
        gclient(server).predict(key, ADMIN, api_name="/load_model")
    msg = str(info.value)
    assert_clean(msg, ADMIN)
    return msg


def ledger(server) -> list[dict]:
    return httpx.get(server.url + "/loads", params={"limit": 50}, timeout=15).json()


# ------------------------------------------------------------------ disconnects
class JobStream:
    """A gradio_client /chat job; dropping it is ``job.cancel()``."""

    def __init__(self, server):
        self.job = gclient(server).submit(PROMPT, [], None, 0.0, LONG, api_name="/chat")

    def wait_generating(self, timeout: float = 90.0) -> None:
        wait_until(lambda: self.job.outputs() or self.job.done(), timeout, 0.05, "the job's first piece")
        assert self.job.outputs(), f"the job ended before any text: {self.job.status()}"

    def running(self) -> bool:
        return not self.job.done()

    def drop(self) -> None:
        self.job.cancel()


def _running(stream) -> bool:
    if isinstance(stream, JobStream):
        return stream.running()
    if isinstance(stream, HttpxStream):
        return not stream.done.is_set()
    return True


def _start(kind: str, server):
    chat = server.fns["chat"]
    data = [PROMPT, [], None, 0.0, LONG]
    if kind == "job.cancel":
        return JobStream(server)
    if kind == "httpx close":
        return HttpxStream(server.url, chat, data)
    return RawSocketStream(server.url, chat, data)


@pytest.mark.parametrize("victim_kind", ["httpx close", "raw socket reset", "job.cancel"])
def test_client_disconnect_mid_stream_frees_its_request(server, victim_kind):
    """The dropped stream's request leaves the engine while an identical stream started before it still runs."""
    serving_a(server)
    assert running_requests(server) == 0
    TALLY.add(faults=1)
    t0 = time.monotonic()
    steps = {}

    def step(name: str) -> None:
        steps[name] = round(time.monotonic() - t0, 2)

    control = _start("httpx close" if victim_kind == "job.cancel" else "job.cancel", server)
    control.wait_generating()
    step("control streaming")
    victim = _start(victim_kind, server)
    victim.wait_generating()
    step("victim streaming")
    wait_until(lambda: running_requests(server) == 2, 30, 0.05, f"both streams in the engine {steps}")
    step("both in the engine")
    victim.drop()
    step("victim dropped")
    wait_until(lambda: running_requests(server) <= 1, 15, 0.05, f"the {victim_kind} stream's request freed {steps}")
    step("victim freed")
    freed_s = steps["victim freed"] - steps["victim dropped"]
    assert _running(control), f"the control stream ended first: the victim may have finished, not been aborted {steps}"
    assert running_requests(server) == 1

    control.drop()
    wait_until(lambda: running_requests(server) == 0, 15, 0.05, "the control stream's request to be freed")
    assert chat_ok(server, 1) == 0
    TALLY.add(survived=1)
    print(f"{victim_kind}: request freed {freed_s:.2f} s after the client dropped it ({steps})")


# ------------------------------------------------------------------ loads that fail halfway
def test_truncated_safetensors_keeps_the_previous_model(server):
    before, pids = serving_a(server), engine_pids(server.proc.pid)
    TALLY.add(faults=1)
    msg = load_gradio(server, "corrupt")
    assert "corrupt or truncated" in msg and "still loaded" in msg, msg
    h = serving_a(server)
    assert h["loaded_since"] == before["loaded_since"] and engine_pids(server.proc.pid) == pids  # never stopped
    assert "corrupt or truncated" in (h["last_error"] or "")
    assert chat_ok(server, 2) == 0
    TALLY.add(survived=1)


def test_missing_tokenizer_keeps_the_previous_model(server):
    before, pids = serving_a(server), engine_pids(server.proc.pid)
    TALLY.add(faults=1)
    h = load_rest(server, "notok")
    assert h["status"] == "ready" and h["model"] == "a", h
    assert "no tokenizer files" in (h["last_error"] or ""), h["last_error"]
    assert h["loaded_since"] == before["loaded_since"] and engine_pids(server.proc.pid) == pids
    assert ledger(server)[-1]["model_key"] == "notok" and ledger(server)[-1]["outcome"] == "failed"
    assert chat_ok(server, 2) == 0
    TALLY.add(survived=1)


def test_config_weights_mismatch_fails_in_vllm_and_the_previous_model_comes_back(server):
    """Passes every file check, fails in vLLM's start after the old engine stopped: "a" is restored."""
    before = serving_a(server)
    TALLY.add(faults=1)
    h = load_rest(server, "mismatch")
    assert h["status"] == "ready" and h["model"] == "a" and h["engine"]["alive"], h
    assert "stage 'start'" in (h["last_error"] or ""), h["last_error"]
    assert h["loaded_since"] != before["loaded_since"]  # a new engine: the old one was stopped, then restored
    records = ledger(server)[-2:]
    assert [(r["model_key"], r["outcome"]) for r in records] == [("mismatch", "failed"), ("a", "ok")], records
    assert chat_ok(server, 2) == 0
    TALLY.add(survived=1)


def test_full_disk_while_writing_weights_leaves_no_usable_model(server, tiny_disk):
    folder, reason = tiny_disk
    if reason:
        pytest.skip(reason)
    before, pids = serving_a(server), engine_pids(server.proc.pid)
    TALLY.add(faults=1)
    h = load_rest(server, "full")
    err = h["last_error"] or ""
    assert h["status"] == "ready" and h["model"] == "a", h
    assert "No space left on device" in err or "disk is full" in err, err
    assert "stage 'fetch'" in err, err
    assert engine_pids(server.proc.pid) == pids and h["loaded_since"] == before["loaded_since"]
    # Nothing usable is left behind: no model folder with a config, no half-written temp folder.
    assert not (folder / "generated" / "config.json").exists()
    assert sorted(p.name for p in folder.iterdir()) == [], list(folder.iterdir())
    # A later load fails the same way (it is not picked up as a complete model).
    msg = load_gradio(server, "full")
    assert "No space left on device" in msg or "disk is full" in msg, msg
    assert not (folder / "generated" / "config.json").exists()
    assert chat_ok(server, 2) == 0
    TALLY.add(survived=1)


# ------------------------------------------------------------------ the engine killed mid-stream
def test_engine_killed_during_8_streams(server):
    h0 = serving_a(server)
    old_pids = engine_pids(server.proc.pid)
    assert old_pids
    TALLY.add(faults=1)
    clients = [gclient(server) for _ in range(8)]  # before any stream runs: a busy server answers /config slowly
    jobs = [c.submit(f"{PROMPT} ({i})", [], None, 0.0, LONG, api_name="/chat") for i, c in enumerate(clients)]
    wait_until(lambda: all(j.outputs() for j in jobs) or any(j.done() for j in jobs), 120, 0.1, "text on all 8 streams")
    assert not any(j.done() for j in jobs), [j.status() for j in jobs]
    assert running_requests(server) == 8

    for pid in old_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    t_kill = time.monotonic()
    wait_until(lambda: health(server)[0] == 503, 5, 0.05, "/health 503 after the kill")
    to_503 = time.monotonic() - t_kill

    ended, lost, messages = 0, 0, []
    for j in jobs:
        left = max(0.1, STREAM_BOUND_S - (time.monotonic() - t_kill))
        try:
            j.result(timeout=left)
            messages.append("completed without an error")
        except AppError as exc:
            ended += 1
            messages.append(str(exc))
        except (TimeoutError, cf.TimeoutError):
            lost += 1
            messages.append("no answer")
            j.cancel()
    TALLY.add(lost=lost)
    streams_s = time.monotonic() - t_kill
    assert lost == 0, f"{lost} streams hung after the engine was killed"
    assert ended == 8, messages
    for m in messages:
        assert_clean(m, ADMIN)
        assert "engine" in m and ("restarting" in m or "stopped" in m), m

    status, h = wait_until(
        lambda: (lambda s, b: (s, b) if s == 200 else None)(*health(server)),
        300,
        0.5,
        "/health 200 after the automatic restart",
    )
    back_s = time.monotonic() - t_kill
    assert h["model"] == "a" and h["engine"]["restarts"] == h0["engine"]["restarts"] + 1, h
    assert h["engine"]["last_restart"] and "restarted" in (h["last_error"] or ""), h
    new_pids = engine_pids(server.proc.pid)
    assert new_pids and not (new_pids & old_pids)

    failed = chat_ok(server, 8)
    assert failed == 0, f"{failed} of 8 requests after the restart failed"
    assert running_requests(server) == 0
    TALLY.add(survived=1)
    print(
        f"engine killed: /health 503 after {to_503:.2f} s, all 8 streams ended with an error within "
        f"{streams_s:.1f} s, 200 again after {back_s:.1f} s"
    )
