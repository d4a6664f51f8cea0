"""Live GPU readings with NVML's stand-in (issue 18): the engine's share by process, or inside a container by the
memory its load added, labelled as such; and what the load ledger records."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from finspace.engine.records import LoadRecord, note_engine
from finspace.host.gpu import MemoryMonitor
from finspace.ledger_line import normalize

GIB = 1 << 30
ENGINE_PID = 4242


def record() -> LoadRecord:
    return LoadRecord(model_key="m", at=1000.0, repo="org/m", revision=None, hardware={}, settings={}, plan=None)


class Nvml:
    """One L40S. ``pids``: the process ids NVML lists, each with 6 GiB (host ids inside a container)."""

    def __init__(self, used_gib: float, pids: list[int]):
        self.used, self.pids = int(used_gib * GIB), pids

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return "NVIDIA L40S"

    def nvmlDeviceGetMemoryInfo(self, h):
        total = int(44.39 * GIB)
        return SimpleNamespace(total=total, used=self.used, free=total - self.used)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=6 * GIB) for p in self.pids]


@pytest.mark.parametrize(
    "listed, before_gib, after_gib, share_gib, source",
    [
        ([ENGINE_PID, 999], 0.5, 12.5, 6, "processes"),  # NVML names the engine's process: its 6 GiB
        ([os.getpid()], 0.5, 12.5, 6, "processes"),  # the app's own process counts too
        ([1234567, 7654321], 0.5, 12.5, 12, "load delta"),  # a container: host ids only; 12.5 - 0.5 GiB added
        ([], 2.0, 30.0, 28, "load delta"),  # no processes listed at all: 30 - 2 GiB
    ],
)
def test_the_engines_share_by_process_or_by_what_its_load_added(listed, before_gib, after_gib, share_gib, source):
    nvml = Nvml(before_gib, listed)
    monitor = MemoryMonitor(nvml=nvml)
    monitor.note_baseline()  # the engine calls this just before vLLM starts
    nvml.used = int(after_gib * GIB)
    (r,) = monitor.read([ENGINE_PID])
    assert (r.engine_bytes, r.engine_source) == (share_gib * GIB, source)
    assert r.as_mib()["engine_source"] == source
    rec = record()
    note_engine(rec, SimpleNamespace(num_gpu_blocks=10, block_size=16), 2048, [r])
    assert (rec.memory_used_bytes, rec.memory_source) == (share_gib * GIB, source)
    line = normalize(rec)  # the ledger keeps how the figure was found
    assert (line["memory_used_bytes"], line["memory_source"]) == (share_gib * GIB, source)


def test_without_a_baseline_or_an_engine_the_share_is_unknown_and_the_record_says_device():
    monitor = MemoryMonitor(nvml=Nvml(8.0, [1234567]))
    (r,) = monitor.read([ENGINE_PID])  # no load started in this process: nothing to subtract
    assert (r.engine_bytes, r.engine_source) == (None, None)
    monitor.note_baseline()  # no engine running: no share, even with a baseline
    assert monitor.read([])[0].engine_bytes is None
    rec = record()
    note_engine(rec, SimpleNamespace(num_gpu_blocks=1, block_size=16), 16, [r])
    assert (rec.memory_used_bytes, rec.memory_source) == (8 * GIB, "device")


def test_the_memory_panel_labels_a_share_found_by_its_load(monkeypatch):
    from finspace.ui import views

    nvml = Nvml(0.5, [1234567])
    monitor = MemoryMonitor(nvml=nvml)
    monitor.note_baseline()
    nvml.used = int(12.5 * GIB)
    svc = SimpleNamespace(on_gpu=True)
    text = views.memory_markdown(svc, monitor.read([ENGINE_PID]))
    assert "12,288 MiB (27%) †" in text and "memory added since its load began" in text


# ---------------------------------------------------------------- ranks (tensor parallel)
@pytest.mark.parametrize(
    "title, name",
    [
        ("VLLM::Worker_TP0", "rank 0"),
        ("VLLM::Worker_TP1", "rank 1"),
        ("VLLM::Worker", "rank 0"),
        ("VLLM::Worker_PP1_TP0", "PP1 TP0"),
        ("VLLM::EngineCore", None),
        ("python app.py", None),
        ("VLLM::WorkerPool", None),
    ],
)
def test_a_worker_is_named_by_its_title(title, name):
    from finspace.host.gpu import rank_name

    assert rank_name(title) == name


@pytest.fixture
def rank_workers():
    """Two processes titled as vLLM titles its tensor-parallel workers (setproctitle, as vLLM does), each holding
    a different amount of memory, and an engine core."""
    import subprocess
    import sys

    code = (
        "import setproctitle, sys, time; setproctitle.setproctitle(sys.argv[1]); "
        "block = bytearray(int(sys.argv[2]) << 20); print('up', flush=True); time.sleep(120)"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, title, str(mib)], stdout=subprocess.PIPE)
        for title, mib in (("VLLM::Worker_TP1", 96), ("VLLM::EngineCore", 1), ("VLLM::Worker_TP0", 32))
    ]
    try:
        for p in procs:
            assert p.stdout.readline() == b"up\n"
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_on_cpu_the_host_reading_has_each_ranks_memory_and_the_record_keeps_it(rank_workers):
    from finspace.engine.records import rank_figures
    from finspace.ui import views

    tp1, core, tp0 = rank_workers
    (host,) = MemoryMonitor(nvml=None).read([p.pid for p in rank_workers])
    assert [(k.name, k.pid) for k in host.ranks] == [("rank 0", tp0.pid), ("rank 1", tp1.pid)]
    rank0, rank1 = host.ranks
    assert rank1.rss_bytes - rank0.rss_bytes > 48 << 20  # each its own: 96 MiB against 32 MiB held
    assert host.engine_bytes >= rank0.rss_bytes + rank1.rss_bytes  # the engine's total counts them all
    assert host.as_mib()["ranks"] == [
        {"name": "rank 0", "pid": tp0.pid, "rss_mib": rank0.rss_bytes >> 20},
        {"name": "rank 1", "pid": tp1.pid, "rss_mib": rank1.rss_bytes >> 20},
    ]
    text = views.memory_markdown(SimpleNamespace(on_gpu=False), [host])
    assert f"| ↳ rank 0 (pid {tp0.pid}) |" in text and f"| ↳ rank 1 (pid {tp1.pid}) |" in text
    assert "each engine worker (tensor-parallel rank)" in text

    rec = record()
    rec.settings = {"tensor_parallel_size": 2}
    note_engine(rec, SimpleNamespace(num_gpu_blocks=256, block_size=128), 256, [host])
    assert rec.tensor_parallel_size == 2
    assert [(k["rank"], k["device"], k["pid"]) for k in rec.ranks] == [
        ("rank 0", "host", tp0.pid),
        ("rank 1", "host", tp1.pid),
    ]
    line = normalize(rec)
    assert line["tensor_parallel_size"] == 2 and [k["memory_bytes"] for k in line["ranks"]] == [
        rank0.rss_bytes,
        rank1.rss_bytes,
    ]
    assert rank_figures([host], 2) == rec.ranks


def test_on_gpus_rank_n_is_gpu_n():
    from finspace.engine.records import rank_figures

    class TwoGpus(Nvml):
        def nvmlDeviceGetCount(self):
            return 2

    monitor = MemoryMonitor(nvml=TwoGpus(20.0, [ENGINE_PID]))
    readings = monitor.read([ENGINE_PID])
    assert [r.ranks for r in readings] == [(), ()]
    assert rank_figures(readings, 2) == [
        {"rank": "rank 0", "device": "GPU 0", "memory_bytes": 6 * GIB},
        {"rank": "rank 1", "device": "GPU 1", "memory_bytes": 6 * GIB},
    ]
    assert [f["device"] for f in rank_figures(readings, 1)] == ["GPU 0"]
