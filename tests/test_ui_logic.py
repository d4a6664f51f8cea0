"""The UI's logic without a browser or an engine load: coalesced streaming, the conversation and its switch
markers, the page's text and plot data on a GPU and on CPU, the named API, and the REST codes that need no load.

The GPU case uses a small stand-in for pynvml (the only edge MemoryMonitor reaches NVML through) with an
engine that never loads: the planner plans for the reported L40S, nothing else is faked.
"""

from __future__ import annotations

import asyncio
import os
import time
from types import SimpleNamespace

import pytest

from finspace.models.catalog import load_catalog
from finspace.engine import Engine
from finspace.errors import DoesNotFit, SwitchInProgress, Unauthorized, UnknownModel
from finspace.host.gpu import MemoryMonitor
from finspace.ui import chat as convo
from finspace.ui import views
from finspace.service import Service

GIB = 1 << 30


class FakeNvml:
    """pynvml's calls MemoryMonitor makes, answering for one L40S with 10 GiB used, 6 of them by this process
    (which the monitor counts as the engine's) and the rest by others."""

    def __init__(self, used_gib: float = 10.0):
        self.pid, self.used = os.getpid(), int(used_gib * GIB)

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA L40S"

    def nvmlDeviceGetMemoryInfo(self, h):
        total = int(44.39 * GIB)
        return SimpleNamespace(total=total, used=self.used, free=total - self.used)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=self.pid, usedGpuMemory=6 * GIB)]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()  # the real models.yaml


@pytest.fixture
def gpu_service(catalog):
    monitor = MemoryMonitor(nvml=FakeNvml())
    return Service(Engine(catalog, monitor), catalog, monitor, admin_token="s3cret-token")


@pytest.fixture
def cpu_service(catalog):
    monitor = MemoryMonitor(nvml=None)
    return Service(Engine(catalog, monitor), catalog, monitor)


# ----------------------------------------------------------------- streaming
async def _deltas(n: int, every: float):
    for i in range(n):
        await asyncio.sleep(every)
        yield f"t{i} "


async def test_coalesce_sends_at_most_one_update_per_interval():
    t0 = time.monotonic()
    pieces = [p async for p in convo.coalesce(_deltas(60, 0.005), 0.05)]
    elapsed = time.monotonic() - t0
    assert pieces[-1] == "".join(f"t{i} " for i in range(60))  # nothing lost
    assert all(b.startswith(a) for a, b in zip(pieces, pieces[1:]))  # each is the text so far
    assert 2 <= len(pieces) <= elapsed / 0.05 + 2, (len(pieces), elapsed)
    assert len(pieces) < 60 / 3  # far fewer updates than tokens


async def test_coalesce_sends_the_first_piece_at_once_and_the_last_always():
    pieces = [p async for p in convo.coalesce(_deltas(3, 0.0), 10.0)]
    assert pieces == ["t0 ", "t0 t1 t2 "]


def test_intervals_stretch_with_many_streams():
    assert convo.interval_for(1, 0.05) == 0.05
    assert convo.interval_for(8, 0.05) == 0.05
    assert convo.interval_for(16, 0.05) == pytest.approx(0.1)  # 16 streams / 8 per step x 50 ms
    assert convo.interval_for(64, 0.05) == pytest.approx(0.4)  # 64 / 8 x 50 ms


# -------------------------------------------------------------- conversation
def test_switch_markers_are_shown_but_never_sent_to_the_model():
    conv = [convo.turn("user", "hi"), convo.turn("assistant", "hello", model="a")]
    assert not convo.needs_switch_marker(conv, "a")
    assert convo.needs_switch_marker(conv, "b")
    conv.append(convo.switch_marker("b", "Model B"))
    assert not convo.needs_switch_marker(conv, "b")
    conv += [convo.turn("user", "again"), convo.turn("assistant", "sure", model="b")]
    shown = convo.display(conv)
    assert [m["role"] for m in shown] == ["user", "assistant", "assistant", "user", "assistant"]
    assert "switched to Model B" in shown[2]["content"]
    sent = convo.engine_messages(conv)
    assert [m["content"] for m in sent] == ["hi", "hello", "again", "sure"]


def test_unanswered_turns_merge_so_roles_alternate():
    conv = [
        convo.turn("user", "one"),
        convo.note("error"),
        convo.turn("user", "two"),
        convo.turn("assistant", "", model="a"),
    ]
    assert convo.engine_messages(conv) == [{"role": "user", "content": "one\n\ntwo"}]
    assert [m["content"] for m in convo.display(conv)] == ["one", "*error*", "two"]


def test_regenerate_keeps_up_to_the_last_user_turn():
    conv = [
        convo.turn("user", "q1"),
        convo.turn("assistant", "r1", model="a"),
        convo.turn("user", "q2"),
        convo.turn("assistant", "r2", model="a"),
        convo.note("stopped"),
    ]
    kept, last = convo.strip_last_reply(conv)
    assert last == "q2" and kept == conv[:3]
    assert convo.strip_last_reply([]) == ([], None)


# --------------------------------------------------------------- GPU views
def test_gpu_picker_labels_models_with_their_max_context(gpu_service):
    svc = gpu_service
    choices = dict((key, label) for label, key in views.picker_choices(svc))
    assert choices["llama-3.1-8b-fin"] == "Llama 3.1 8B Financial — 32,768 tokens"
    assert "demo" in choices and "fin-pythia-1.4b" in choices
    assert "llama-3.1-70b-fin" not in choices and "llama-3.1-70b-fin-fp8" not in choices
    unfit = views.unfit_markdown(svc).replace("\\", "")  # as rendered (markdown escapes removed)
    assert "Llama 3.1 70B Financial (bf16, 4 GPUs)" in unfit and "tensor_parallel_size 4 needs 4 GPUs" in unfit
    assert "AWQ" in unfit  # the planner's fix


def test_gpu_memory_panel_and_health(gpu_service):
    svc = gpu_service
    readings = svc.read_memory()
    md = views.memory_markdown(svc, readings)
    assert "GPU 0: NVIDIA L40S" in md and "10,240 / 45,455 MiB" in md and "No NVIDIA GPU" not in md
    assert "6,144 MiB (14%)" in md  # the engine's share
    banner = views.banner(svc)
    assert "1 × NVIDIA L40S" in banner and "No NVIDIA GPU" not in banner
    body, status = svc.health()
    assert status == 503 and body["status"] == "none" and body["device"] == "gpu"
    assert body["gpus"][0]["name"] == "NVIDIA L40S" and body["gpus"][0]["used_mib"] == 10240
    assert body["admin_token_required"] and "s3cret-token" not in str(body)
    frame = views.memory_frame(svc)
    assert set(frame["series"]) == {"GPU 0 used", "GPU 0 engine"} and frame["GiB"].max() == pytest.approx(10.0)
    bars = views.breakdown_frame(svc, readings)
    assert len(bars) == 8 and set(bars["part"]) == set(views.PART_COLORS)  # every part, always (stable colours)
    assert bars[bars["bar"] == "planned"]["GiB"].sum() == 0  # nothing loaded: an empty planned bar
    used = bars[(bars["bar"] == "in use now") & (bars["part"] == "engine")]["GiB"].item()
    assert used == pytest.approx(6.0)


def test_models_view_has_plans_and_verdicts(gpu_service):
    models = {m["key"]: m for m in gpu_service.models()}
    llama = models["llama-3.1-8b-fin"]
    assert llama["fits"] and llama["max_model_len"] == 32768 and llama["plan"]["gpu"] == "l40s"
    assert llama["plan"]["weights_gib"] > 14 and llama["ledger"] is None
    big = models["llama-3.1-70b-fin"]
    assert not big["fits"] and "4 GPUs" in big["reason"] and big["suggestions"]


# --------------------------------------------------------------- CPU views
def test_cpu_says_so_plainly_and_offers_the_small_models(cpu_service):
    svc = cpu_service
    assert "No NVIDIA GPU: running a small model on CPU" in views.banner(svc)
    md = views.memory_markdown(svc, svc.read_memory())
    assert "No NVIDIA GPU detected" in md and "host RAM" in md
    keys = [k for _, k in views.picker_choices(svc)]
    assert "demo" in keys and "demo-qwen3" in keys and "smollm2-135m" in keys
    assert "llama-3.1-70b-fin-fp8" not in keys  # tensor parallel needs GPUs
    assert (
        dict((k, label) for label, k in views.picker_choices(svc))["smollm2-135m"]
        == "SmolLM2 135M Instruct (CPU) — 2,048 tokens"
    )
    body, status = svc.health()
    assert status == 503 and body["device"] == "cpu" and body["gpus"] == [] and body["host_ram"]["total_mib"] > 0


# ------------------------------------------------------------ access, loads
def test_token_checks(gpu_service, cpu_service):
    cpu_service.authorize(None)  # no token configured: open
    gpu_service.authorize("s3cret-token")
    for bad in (None, "", "s3cret-token ", "S3CRET-TOKEN", 123, "s3cret-tokenx"):
        with pytest.raises(Unauthorized):
            gpu_service.authorize(bad)


async def test_start_load_validates_before_any_work(gpu_service):
    svc = gpu_service
    for key in ("../x", "/etc/passwd", "org/repo", "DragonLLM/Llama-Open-Finance-8B"):
        with pytest.raises(UnknownModel):
            svc.start_load(key)
    with pytest.raises(DoesNotFit) as err:
        svc.start_load("llama-3.1-70b-fin")
    assert "GPU" in str(err.value)
    assert not svc.load_running


async def test_a_second_load_while_one_runs_is_refused(cpu_service, monkeypatch):
    svc = cpu_service
    gate = asyncio.Event()

    async def slow_load(key, progress=None):
        progress("fetch", 0.05, "fetching")
        await gate.wait()
        return svc.engine.health()

    monkeypatch.setattr(svc.engine, "load", slow_load)  # the engine's own load is tested in test_engine.py
    task = svc.start_load("demo")
    await asyncio.sleep(0)
    assert svc.load_running and svc.load_progress[0] == "fetch"
    with pytest.raises(SwitchInProgress):
        svc.start_load("demo-qwen3")
    gate.set()
    await task
    assert not svc.load_running


# ---------------------------------------------------------------- the API
def test_named_api_endpoints_and_private_ui_events(cpu_service):
    import gradio as gr

    from finspace.ui import build_ui

    svc = cpu_service
    demo = build_ui(svc)
    assert isinstance(demo, gr.Blocks)
    named = demo.get_api_info()["named_endpoints"]
    assert set(named) == {
        "/chat",
        "/chat_with_thinking",
        "/load_model",
        "/models",
        "/health",
        "/loads",
        "/fit",
        "/matrix",
        "/scores",
        "/run_eval",
        "/cancel_eval",
        "/company_filings",
        "/company_facts",
        "/ask_filing",
        "/filing_matrix",
    }
    assert [p["parameter_name"] for p in named["/run_eval"]["parameters"]] == ["set_name", "limit", "admin_token"]
    assert [p["parameter_name"] for p in named["/matrix"]["parameters"]] == ["documents", "fields"]
    chat_params = [p["parameter_name"] for p in named["/chat"]["parameters"]]
    # the five parameters in their order, then the optional document (issue #21): five-argument callers keep working
    assert chat_params == ["message", "history", "system_prompt", "temperature", "max_tokens", "document"]
    assert [p["parameter_has_default"] for p in named["/chat"]["parameters"]][1:] == [True] * 5
    public = {fn.api_name for fn in demo.fns.values() if fn.api_visibility == "public"}
    assert public == {
        "chat",
        "chat_with_thinking",
        "load_model",
        "models",
        "health",
        "loads",
        "fit",
        "matrix",
        "scores",
        "run_eval",
        "cancel_eval",
        "company_filings",
        "company_facts",
        "ask_filing",
        "filing_matrix",
    }
    chat_fns = [fn for fn in demo.fns.values() if fn.concurrency_id == "chat"]
    assert len(chat_fns) >= 3 and all((fn.concurrency_limit or 0) >= 16 for fn in chat_fns)


def test_the_queue_does_not_rebuild_gradios_analytics_after_every_event(cpu_service, monkeypatch):
    # Gradio 6 rebuilds a pandas summary of every recorded event (up to 10,000) after each event it finishes:
    # 5.5 ms of CPU per event at 10,000, and each open page's memory tick is an event. 2,000 events finished
    # (chats, ticks) must rebuild it at most twice (every 1,000), over at most 1,000 records.
    from gradio.queueing import Queue

    from finspace.ui import build_ui

    svc = cpu_service
    queue = build_ui(svc)._queue
    built, get_df = [], Queue._get_df
    monkeypatch.setattr(Queue, "_get_df", staticmethod(lambda records: built.append(len(records)) or get_df(records)))
    record = {"time": 0.0, "status": "success", "process_time": 0.05, "function": "chat", "session_hash": "s"}
    for i in range(2000):
        queue.events_recorded += 1
        queue.compute_analytics_summary([record] * min(i + 1, queue.ANALYTICS_MAX_EVENTS))
    assert len(built) <= 2 and max(built) <= 1000, built


def test_history_rows_show_planned_vs_actual():
    records = [
        {
            "at": 1_700_000_000,
            "model_key": "a",
            "outcome": "ok",
            "reason": "load",
            "planned_kv_cache_tokens": 1600,
            "kv_cache_tokens": 1536,
            "kv_tokens_error_pct": 4.17,
            "max_model_len": 512,
            "load_seconds": 21.5,
        },
        {
            "at": 1_700_000_100,
            "model_key": "bad",
            "outcome": "failed",
            "reason": "load",
            "plan": {"kv_cache_tokens": 800, "max_model_len": 512},
            "error_stage": "start",
            "error_message": "SafetensorError: incomplete metadata",
        },
    ]
    rows = views.history_rows(records)
    assert len(rows[0]) == len(views.HISTORY_COLUMNS)
    assert rows[0][1] == "bad" and rows[0][4] == 800 and rows[0][-1].startswith("[start] SafetensorError")
    assert rows[1][1] == "a" and rows[1][4:7] == [1600, 1536, 4.17] and rows[1][8] == 21.5


# ---------------------------------------------------------- REST, no load
def test_rest_codes_that_need_no_engine_load(catalog):
    from fastapi.testclient import TestClient

    from finspace.web.server import build_app

    monitor = MemoryMonitor(nvml=FakeNvml())
    app = build_app(Engine(catalog, monitor), catalog, monitor, admin_token="s3cret-token", default_model=None)
    auth = {"Authorization": "Bearer s3cret-token"}
    with TestClient(app) as c:
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "none"
        assert c.post("/load-model", json={"model": "demo"}).status_code == 401
        assert (
            c.post("/load-model", json={"model": "demo"}, headers={"Authorization": "Bearer nope"}).status_code == 401
        )
        r = c.post("/load-model", json={"model": "org/repo"}, headers=auth)
        assert r.status_code == 422 and "catalogue" in r.json()["error"]
        r = c.post("/load-model", json={"model": "llama-3.1-70b-fin"}, headers=auth)
        assert r.status_code == 400 and "4 GPUs" in r.json()["error"]
        assert c.post("/load-model", json={"model": "demo", "x": 1}, headers=auth).status_code == 422
        models = c.get("/models").json()
        assert {m["key"] for m in models} == set(catalog.keys())
        assert c.get("/loads").status_code == 404  # no ledger in this app
        assert c.get("/").status_code == 200  # the Gradio page
