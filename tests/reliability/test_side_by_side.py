"""Two real apps on one machine (issue 25, finding 9), and what one app holds across clients (findings 7, 3).

Apps A and B (`python app.py` each, tiny llama "a" and tiny qwen3 "b", vLLM on CPU) start at the same time,
then switch models at the same time, then A stops while B keeps serving and switches again. Meanwhile a
third program on the machine holds a POSIX shared-memory name it created and closed (not mapped by anyone,
like a multiprocessing.shared_memory block waiting for its reader), created while A's new engine starts.

- Nothing A's clean-up removes belongs to someone else: the third program's name and B's names survive A's
  switch and A's stop; B keeps chatting and switching (before: A removed every /dev/shm name that appeared
  while its engine started and no live process mapped at that moment, so a name created beside it went with
  A's next stop; a second app had model loads fail with `SemLock._rebuild FileNotFoundError`).
- A leaves nothing of its own: the names its engine processes held are gone once it stopped.

A also runs with FINSPACE_MAX_CONVERSIONS=1 and FINSPACE_MAX_CONVERSIONS_PER_CLIENT=3: three slow documents at
once from one client are converted one at a time, all answered (finding 7's global bound: queued, not
refused). And its exports' folder is gone once it stopped (finding 3).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path

import httpx
import psutil
import pytest

from helpers import write_catalog
from rel_utils import TALLY, GradioRaw, gradio_config, tiny, wait_until
from server_utils import Server
from test_surface_state import (
    PeakConverters,
    conversation,
    event_index,
    export_files_on_disk,
    slow_document,
    store_of,
    v1_with_file,
)

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1500)]

SHM = Path("/dev/shm")


def held(pid: int) -> set[str]:
    """/dev/shm names (psm_*, sem.mp-*) mapped or open by ``pid`` and its descendants."""
    names: set[str] = set()
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return names
    for p in procs:
        try:
            paths = [m.path for m in p.memory_maps(grouped=True)] + [f.path for f in p.open_files()]
        except psutil.Error:
            continue
        names.update(Path(x.removesuffix(" (deleted)")).name for x in paths if x.startswith("/dev/shm/"))
    return {n for n in names if n.startswith(("psm_", "sem.mp-"))}


def removed_by(server: Server) -> set[str]:
    """The /dev/shm names ``server``'s clean-up removed, from its log ("removed /dev/shm/NAME left by ...")."""
    text = server.log_path.read_text(errors="replace")
    return set(re.findall(r"removed /dev/shm/(\S+) left by the stopped engine", text))


def engine_children(server: Server) -> set[int]:
    try:
        return {c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)}
    except psutil.Error:
        return set()


def chat(server: Server) -> str:
    body = {
        "model": httpx.get(server.url + "/health", timeout=60).json()["model"],
        "max_tokens": 4,
        "messages": [{"role": "user", "content": "What is a bond?"}],
    }
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=180)
    assert r.status_code == 200, r.text[:300]
    return r.json()["choices"][0]["message"]["content"]


def switch(server: Server, key: str, out: dict) -> None:
    """POST /load-model, then wait (a slow /health on a busy machine is waited for, not a failure) until the load
    ended: ``out[name]`` is the POST's status, ``out[name + " model"]`` the model then served (None: none)."""
    r = httpx.post(server.url + "/load-model", json={"model": key}, headers=server.auth(), timeout=120)
    out[server.name_] = r.status_code
    out[server.name_ + " model"] = wait_until(lambda: settled(server), 900, 0.5, f"the end of {server.name_}'s load")[
        "model"
    ]


def settled(server: Server) -> dict | None:
    """/health once no load runs (None meanwhile, or when /health is slow to answer on a busy machine)."""
    try:
        h = httpx.get(server.url + "/health", timeout=60).json()
    except (httpx.HTTPError, ValueError):
        return None
    return h if h["engine"]["loading"] is None and h["status"] not in ("loading", "switching") else None


class Bystander:
    """A third program's shared-memory block: created, written, closed (unmapped), kept for a reader later."""

    def __init__(self):
        self.name = f"psm_bystander_{uuid.uuid4().hex[:8]}"
        block = shared_memory.SharedMemory(name=self.name, create=True, size=4096)
        block.buf[:5] = b"hello"
        block.close()
        resource_tracker.unregister("/" + self.name, "shared_memory")  # ours to remove, at the end

    def alive(self) -> bool:
        return (SHM / self.name).exists()

    def remove(self) -> None:
        (SHM / self.name).unlink(missing_ok=True)


def serving(srv: Server, key: str, tries: int = 3) -> None:
    """Wait until ``srv`` serves ``key``, switching to it when it serves another. A load that failed is tried
    again: on a machine shared with apps running the clean-up from before this fix, their stop can remove a name
    our engine's worker has yet to open (`SemLock._rebuild FileNotFoundError`), the very failure this module
    tests for our own clean-up (whose removals are checked by name, from A's log)."""
    srv.wait(ready=False, timeout=600)
    model = wait_until(lambda: settled(srv), 900, 0.5, f"the end of {srv.name_}'s load")["model"]
    for _ in range(tries):
        if model == key:
            return
        out: dict = {}
        switch(srv, key, out)
        model = out[srv.name_ + " model"]
    if model != key:
        raise AssertionError(f"{srv.name_} could not load {key}:\n{srv.log_tail()}")


@pytest.fixture(scope="module")
def pair(tmp_path_factory, model_dir):
    servers = []
    try:
        for name, extra in (
            ("A", {"FINSPACE_MAX_CONVERSIONS": "1", "FINSPACE_MAX_CONVERSIONS_PER_CLIENT": "3"}),
            ("B", {}),
        ):
            root = tmp_path_factory.mktemp(f"side-{name}")
            catalog = write_catalog(
                root / "catalog",
                {"a": tiny(model_dir, "tiny-llama", max_tokens=8), "b": tiny(model_dir, "tiny-qwen3", max_tokens=8)},
                default="a",
            )
            srv = Server(root, catalog, env={"GRADIO_TEMP_DIR": str(root / "gradio"), **extra})
            srv.name_, srv.gradio = name, root / "gradio"
            servers.append(srv)  # both start their engines at the same time
        for srv in servers:
            serving(srv, "a")
        yield servers
    finally:
        for srv in servers:
            srv.stop()


def test_documents_past_the_global_bound_wait_for_a_slot(pair, tmp_path):
    a = pair[0]
    docs = [slow_document(tmp_path / f"slow-{i}") for i in range(3)]
    results: list = []
    threads = [threading.Thread(target=v1_with_file, args=(a.url, d, results)) for d in docs]
    with PeakConverters(a.proc.pid) as peak:
        for t in threads:
            t.start()
        for t in threads:
            t.join(400)
    TALLY.add(inputs=len(docs))
    print(
        f"3 documents at once, FINSPACE_MAX_CONVERSIONS=1: statuses {[s for s, _ in results]}, at most "
        f"{peak.peak} converter(s) at once ({len(peak.seen)} in all)"
    )
    assert len(peak.seen) == 3 and peak.peak == 1, (peak.peak, peak.seen)
    assert [s for s, _ in results] == [200, 200, 200], results


def test_two_apps_switch_and_stop_side_by_side_without_breaking_each_other(pair):
    a, b = pair
    assert chat(a) and chat(b)
    # an export on A, to check its folder goes with A
    marker = f"SideBySide-{uuid.uuid4().hex[:8]}"
    with GradioRaw(a.url) as raw:
        config = gradio_config(a.url)
        restore, export = (
            event_index(config, trigger="load", input_type="browserstate"),
            event_index(config, elem_id="export"),
        )
        session = raw.session()
        assert raw.call(restore, [store_of(conversation(5000, title=marker))], session_hash=session).success
        assert raw.call(export, [None, marker], session_hash=session).success
    assert export_files_on_disk([a.gradio], marker), "the export is not in A's Gradio folder"

    bystander = None
    try:
        # both switch at once; the bystander's name appears while A's new engine starts
        b_before = held(b.proc.pid)
        old = engine_children(a)
        codes: dict = {}
        threads = [threading.Thread(target=switch, args=(srv, "b", codes)) for srv in (a, b)]
        for t in threads:
            t.start()
        wait_until(lambda: engine_children(a) - old, 300, 0.05, "A's new engine process")
        bystander = Bystander()
        for t in threads:
            t.join(1000)
        assert codes["A"] == codes["B"] == 202, codes
        for srv in (a, b):  # a load broken by another app's old clean-up is tried again (see serving)
            serving(srv, "b")
        assert chat(a) and chat(b)
        b_names = b_before | held(b.proc.pid)  # every name B's processes were seen holding
        a_names = held(a.proc.pid)
        print(f"A holds {len(a_names)} /dev/shm names, B {len(b_names)}")

        a.stop()  # A's engine stops: its clean-up runs
        time.sleep(1.0)
        assert bystander.alive(), "A's clean-up removed a /dev/shm name another program created"
        b_names |= held(b.proc.pid)
        wrong = removed_by(a) & (b_names | {bystander.name})
        assert not wrong, f"A's clean-up removed names it does not own: {sorted(wrong)}"
        left = {n for n in a_names if (SHM / n).exists()}
        assert not left, f"A left its own names behind: {sorted(left)}"
        assert not export_files_on_disk([a.gradio], marker), "A's export outlived A"

        # B still chats, and switches back and forth
        assert chat(b)
        for key in ("a", "b"):  # tried again when another app's old clean-up breaks the load (see serving)
            serving(b, key)
            assert chat(b)
        # B's clean-up (its switches) left the bystander's name alone too; past A's stop, its presence is not
        # checked: another app on this machine running the old clean-up may remove it, which is the bug itself
        assert bystander.name not in removed_by(b)
    finally:
        if bystander is not None:
            bystander.remove()
