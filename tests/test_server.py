"""The app end to end over HTTP: `python app.py` on 127.0.0.1 with tiny generated models, real vLLM (CPU).

One server (conftest's ``shared_tiny_server``, shared with test_api_bad_input: each engine start costs ~20 s
here, more on a busy machine). Tests run in file order and each leaves model "a" ready for the next.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time

import httpx
import psutil
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from finspace.host.priority import nice_of
from helpers import REPO
from server_utils import ADMIN_TOKEN, Server

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

QUESTION = "What is free cash flow?"


@pytest.fixture(scope="module")
def server(shared_tiny_server):
    """conftest's shared server (make_catalog, max_tokens 32; shared with test_api_bad_input), model "a" ready."""
    shared_tiny_server.ensure_model("a")
    return shared_tiny_server


def gclient(server: Server) -> Client:
    """A fresh gradio_client per call sequence: gradio_client 2.7.2 can cancel a job submitted on a Client
    whose previous event stream is just closing (its sse_v3 reader race), so tests never reuse one."""
    return Client(server.url + "/", verbose=False)


@pytest.fixture
def client(server):
    return gclient(server)


def ensure_a(server: Server) -> None:
    server.ensure_model("a")


# ------------------------------------------------------------------ start-up
def test_page_and_health_answer_during_first_load(server):
    h = server.early_health
    assert h.status_code == 503, h.text
    assert h.json()["status"] in ("loading", "none"), h.json()
    assert server.early_page.status_code == 200
    assert "<html" in server.early_page.text.lower()


def test_health_when_ready(server):
    r = httpx.get(server.url + "/health", timeout=10)
    assert r.status_code == 200
    h = r.json()
    assert (h["status"], h["ready"], h["model"], h["model_label"]) == ("ready", True, "a", "Tiny Llama")
    assert h["engine"]["state"] == "ready" and h["engine"]["stage"] == "ready" and h["engine"]["alive"]
    assert h["device"] == "cpu" and h["gpus"] == []
    assert h["host_ram"]["total_mib"] > 0 and h["host_ram"]["free_mib"] > 0
    assert h["loaded_since"].endswith("Z") and h["uptime_s"] > 0
    assert h["version"]["finspace"] and h["version"]["vllm"] and h["version"]["gradio"] == "6.31.0"
    assert h["last_error"] is None
    assert ADMIN_TOKEN not in r.text


# --------------------------------------------------------------------- chat
def test_gradio_client_streams_a_chat_in_pieces(server, client):
    job = client.submit(QUESTION, [], None, 0.0, 200, api_name="/chat")
    final = job.result(timeout=120)
    outputs = job.outputs()
    assert final and isinstance(final, str)
    assert len(outputs) >= 3, f"the reply arrived in {len(outputs)} piece(s): {outputs!r}"
    for before, after in zip(outputs, outputs[1:]):
        assert after.startswith(before), (before, after)  # each piece is the reply so far
    assert outputs[-1] == final


def test_chat_with_history_and_settings(client):
    history = [{"role": "user", "content": "Define EBITDA."}, {"role": "assistant", "content": "Earnings before..."}]
    reply = client.predict("And free cash flow?", history, "Be brief.", 0.5, 8, api_name="/chat")
    assert isinstance(reply, str) and reply


# ------------------------------------------------------------------- models
def test_models_lists_each_plan_for_this_hardware(server):
    r = httpx.get(server.url + "/models", timeout=30)
    assert r.status_code == 200
    models = {m["key"]: m for m in r.json()}
    assert set(models) == {"a", "b", "big"}
    a, big = models["a"], models["big"]
    assert a["fits"] and a["loaded"] and a["max_model_len"] == 512 and a["plan"]["weights_gib"] >= 0
    assert "kv_bytes_per_token" in a["plan"] and a["plan"]["fits"] in (True, False)
    assert not big["fits"] and not big["loaded"]
    assert "max_model_len 2048" in big["reason"] and "Lower max_model_len to" in big["reason"]
    assert a["ledger"] and a["ledger"]["verified"], a["ledger"]  # the start-up load is in the ledger
    via_gradio = {m["key"]: m for m in gclient(server).predict(api_name="/models")}
    assert via_gradio["big"]["reason"] == big["reason"] and via_gradio["a"]["fits"]


# --------------------------------------------------------------- load-model
def test_will_it_fit_over_the_gradio_api(server, client):
    """/fit plans any model before it is loaded (issue 22): a pasted config.json on a chosen GPU, and its errors."""
    config = (REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text()
    r = client.predict(None, config, "l40s", 1, api_name="/fit")
    assert r["fits"] and r["gpu"] == "NVIDIA L40S" and r["plan"]["weights_gib"] > 14 and r["breakdown"]
    r = client.predict(None, config, "l4", 1, 131072, None, None, 0.5, api_name="/fit")
    assert not r["fits"] and r["suggestions"]
    # issue 29: more than one GPU is sized as a cluster (70B bf16 on 8 x H100 at 8k: TP 4 x PP 1 x DP 2)
    big = (REPO / "configs" / "meta-llama__Llama-3.1-70B-Instruct.json").read_text()
    r = client.predict(None, big, "h100", 8, 8192, api_name="/fit")
    c = r["cluster"]
    assert (c["tensor_parallel_size"], c["pipeline_parallel_size"], c["data_parallel_size"]) == (4, 1, 2), c
    assert c["kv_cache_tokens_total"] == 2 * c["kv_cache_tokens_per_replica"] > 0 and r["sampler_warmup"]["fits"]
    with pytest.raises(AppError, match="needs 16 GPUs and the cluster has 8"):
        client.predict(None, big, "h100", 8, 8192, None, None, None, 8, 2, api_name="/fit")
    with pytest.raises(AppError, match="unknown GPU"):
        client.predict(None, config, "abacus", api_name="/fit")
    with pytest.raises(AppError, match="not a Hub repo id"):
        client.predict("../../etc/passwd", None, api_name="/fit")
    assert server.health()["ready"]


def test_load_model_refuses_without_a_valid_token(server):
    before = server.health()
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": ADMIN_TOKEN},
        {"Authorization": "Basic " + ADMIN_TOKEN},
    ):
        r = httpx.post(server.url + "/load-model", json={"model": "b"}, headers=headers, timeout=10)
        assert r.status_code == 401, (headers, r.text)
        assert "error" in r.json() and ADMIN_TOKEN not in r.text
        assert r.headers.get("www-authenticate") == "Bearer"
    time.sleep(0.5)
    after = server.health()
    assert (after["model"], after["status"], after["loaded_since"]) == (
        before["model"],
        "ready",
        before["loaded_since"],
    )


def test_load_model_rejects_keys_outside_the_catalogue(server):
    for key in ("nope", "../x", "/etc/passwd", "org/repo", "DragonLLM/Llama-Open-Finance-8B"):
        r = httpx.post(server.url + "/load-model", json={"model": key}, headers=server.auth(), timeout=10)
        assert r.status_code == 422, (key, r.text)
        assert "catalogue" in r.json()["error"]
    assert server.health()["model"] == "a"


def test_load_model_refuses_a_model_that_does_not_fit(server):
    r = httpx.post(server.url + "/load-model", json={"model": "big"}, headers=server.auth(), timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert "2048" in err and "KV cache" in err and "FINSPACE_CPU_KV_CACHE_MIB" in err
    assert server.health()["model"] == "a"


def test_switch_202_then_409_and_health_503_until_ready(server):
    r = httpx.post(server.url + "/load-model", json={"model": "b"}, headers=server.auth(), timeout=10)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["accepted"] and body["loading"] == "b"
    assert body["status"] in ("switching", "loading") and body["engine"]["loading"] == "b"
    again = httpx.post(server.url + "/load-model", json={"model": "a"}, headers=server.auth(), timeout=10)
    assert again.status_code == 409, again.text
    assert "in progress" in again.json()["error"]
    codes = set()
    progress, offset = time.monotonic(), 0
    while time.monotonic() - progress < 400:  # 400 s without a line in the server's log: stuck, however busy
        h = httpx.get(server.url + "/health", timeout=10)
        codes.add((h.status_code, h.json()["status"]))
        if h.status_code == 200:
            break
        offset, news = server.log_news(offset)
        if news:
            progress = time.monotonic()
        time.sleep(0.2)
    assert (503, "switching") in codes, codes
    assert h.status_code == 200 and h.json()["model"] == "b", h.text  # the next test switches back


def test_gradio_client_loads_another_model_then_chats_with_it(server, client):
    server.wait_model("b")
    with pytest.raises(Exception) as err:
        client.predict("a", "wrong-token", api_name="/load_model")
    assert "admin token is wrong" in str(err.value)
    assert server.health()["model"] == "b"  # a wrong token changes nothing

    health = gclient(server).predict("a", ADMIN_TOKEN, api_name="/load_model")
    assert health["model"] == "a" and health["status"] == "ready"
    reply = gclient(server).predict(QUESTION, [], None, 0.0, 16, api_name="/chat")
    assert isinstance(reply, str) and reply
    assert gclient(server).predict(api_name="/health")["model"] == "a"
    ensure_a(server)


def _thread_nices(pid: int) -> dict[int, int]:
    nices = {t.id: nice_of(t.id) for t in psutil.Process(pid).threads()}
    return {tid: n for tid, n in nices.items() if n is not None}  # None: a thread that ended meanwhile


def test_serving_threads_run_below_the_engine_also_after_a_switch(server):
    # The app lowers its own threads 10 nice steps (FINSPACE_FRONT_NICE, default 10) below its engine's processes,
    # which are started from one launcher thread kept at the app's starting priority (the tests' own: base).
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if base >= 19:
        pytest.skip("the tests run at nice 19: there is no lower priority to check")
    lowered = min(19, base + 10)

    def check(model: str) -> None:
        front = _thread_nices(server.proc.pid)
        assert sorted(front.values()).count(base) == 1, f"{model}: not only the launcher at {base}: {front}"
        assert set(front.values()) == {base, lowered}, front
        engine = psutil.Process(server.proc.pid).children(recursive=True)
        assert len(engine) >= 2  # the engine core and its worker (and multiprocessing's resource tracker)
        for proc in engine:
            nices = set(_thread_nices(proc.pid).values())
            assert nices == {base}, f"{model}: engine process {proc.pid} ({proc.name()}) runs at {nices}"

    ensure_a(server)
    check("a")
    r = httpx.post(server.url + "/load-model", json={"model": "b"}, headers=server.auth(), timeout=10)
    assert r.status_code == 202, r.text
    server.wait_model("b")
    check("b")  # the new engine's processes, started after the lowering, are at the starting priority too
    assert "serving threads lowered 10 nice steps" in server.log_path.read_text()
    ensure_a(server)


def test_load_history_records_the_loads(server):
    r = httpx.get(server.url + "/loads", params={"limit": 20}, timeout=10)
    assert r.status_code == 200
    records = r.json()
    ok = [x for x in records if x["outcome"] == "ok"]
    assert {x["model_key"] for x in ok} >= {"a", "b"}
    assert all(x["kv_cache_tokens"] and x["planned_kv_cache_tokens"] for x in ok)
    assert gclient(server).predict(5, api_name="/loads")[-1]["model_key"] == records[-1]["model_key"]
    assert httpx.get(server.url + "/loads", params={"limit": 0}, timeout=10).status_code == 422


# ------------------------------------------------------------------ concurrency
def test_sixteen_parallel_chats_all_complete(server):
    """16 users at once, each with its own gradio_client (as 16 browsers would be)."""

    def one_user(i: int) -> str:
        return gclient(server).predict(f"{QUESTION} ({i})", [], None, 0.7, 24, api_name="/chat")

    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one_user, range(16), timeout=300))
    elapsed = time.monotonic() - t0
    assert len(results) == 16 and all(isinstance(x, str) and x for x in results), results
    h = server.health()
    assert h["status"] == "ready" and h["engine"]["running_requests"] == 0
    print(f"16 parallel chats in {elapsed:.1f} s")


def test_the_access_log_keeps_rest_calls_and_leaves_out_gradios_own_requests(server):
    # By now this server has streamed dozens of chats: each is two Gradio requests (join, event stream), as is
    # every open page's memory tick. Those stay out of the log; REST calls (/health here) stay in.
    lines = server.log_path.read_text(errors="replace").splitlines()
    assert any('"GET /health HTTP/1.1" 200' in line for line in lines)
    gradio = [line for line in lines if '"POST /gradio_api/' in line or '"GET /gradio_api/' in line]
    assert not gradio, gradio[:3]
