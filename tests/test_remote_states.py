"""Remote mode when the endpoint misbehaves: a real HTTP server in this process stands in for a router that
answers 503, 429 or too slowly, and finspace (a real `python app.py` with FINSPACE_ENGINE_URL) must turn each into
a clear state on /health and a quick, clear answer to a chat, never a hang, and recover when the endpoint is well
again. (A real vLLM server down, killed mid-stream and back is tests/test_remote_engine.py.)"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from helpers import demo_entry, write_catalog
from server_utils import Server
from support.process import free_port

pytestmark = [pytest.mark.timeout(300)]

KEY = "stand-in-key-0123456789"


class StandIn:
    """/v1/models, /metrics and /v1/chat/completions answering per ``mode``: ok, 503, slow, busy (429 on chat)."""

    def __init__(self):
        self.mode, self.port = "ok", free_port()

    async def models(self, request):
        if self.mode == "503":
            return JSONResponse({"error": "upstream down"}, status_code=503)
        if self.mode == "slow":
            await asyncio.sleep(8)
        return JSONResponse({"object": "list", "data": [{"id": "a", "root": "a", "max_model_len": 1024}]})

    async def metrics(self, request):
        return PlainTextResponse(
            'vllm:kv_cache_usage_perc{engine="0"} 0.5\nvllm:num_requests_running 1\nvllm:num_requests_waiting 2\n'
        )

    async def chat(self, request):
        return JSONResponse({"error": {"message": "rate limited"}}, status_code=429 if self.mode == "busy" else 503)

    def serve(self):
        app = Starlette(
            routes=[
                Route("/v1/models", self.models),
                Route("/metrics", self.metrics),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        threading.Thread(target=self.server.run, daemon=True).start()
        while not self.server.started:
            time.sleep(0.05)


@pytest.fixture(scope="module")
def stand_in():
    s = StandIn()
    s.serve()
    yield s
    s.server.should_exit = True


@pytest.fixture(scope="module")
def app(tmp_path_factory, model_dir, stand_in):
    root = tmp_path_factory.mktemp("remote-states")
    catalog = write_catalog(root / "catalog", {"a": demo_entry(model_dir / "tiny-llama", "tiny-llama")}, default="a")
    srv = Server(
        root,
        catalog,
        env={
            "FINSPACE_ENGINE_URL": f"http://127.0.0.1:{stand_in.port}/v1",
            "FINSPACE_ENGINE_API_KEY": KEY,
            "FINSPACE_ENGINE_PROBE_S": "1",
            "FINSPACE_ENGINE_TIMEOUT_S": "2",
        },
    )
    try:
        srv.wait(ready=True, timeout=120)
        yield srv
    finally:
        srv.stop()


def until(app, state: str, timeout: float = 20.0, metrics: bool = False) -> dict:
    t0, body = time.monotonic(), {}
    while time.monotonic() - t0 < timeout:
        body = httpx.get(app.url + "/health", timeout=10).json()
        if body["status"] == state and (not metrics or body["remote"]["error"] is None):
            return body
        time.sleep(0.3)
    raise AssertionError(f"never {state}: {body}")


def chat(app) -> httpx.Response:
    return httpx.post(
        app.url + "/v1/chat/completions",
        timeout=30,
        json={"model": "a", "messages": [{"role": "user", "content": "hi"}]},
    )


@pytest.mark.parametrize("mode, reason", [("503", "answered 503 (a server error)"), ("slow", "did not answer in time")])
def test_a_failing_endpoint_is_a_clear_state_and_it_recovers(app, stand_in, mode, reason):
    stand_in.mode = mode
    body = until(app, "remote-unreachable")
    assert reason in body["last_error"] and f"127.0.0.1:{stand_in.port}" in body["last_error"], body
    assert KEY not in str(body) and httpx.get(app.url + "/health", timeout=10).status_code == 503
    t0 = time.monotonic()
    r = chat(app)
    assert r.status_code == 503 and "unreachable" in r.text and time.monotonic() - t0 < 5, r.text
    page = httpx.get(app.url + "/models", timeout=10)
    assert page.status_code == 200  # the app itself stays up
    stand_in.mode = "ok"
    body = until(app, "ready", metrics=True)  # the panel's reading catches up within its sampling interval
    assert body["remote"]["kv_cache_usage"] == 0.5 and body["remote"]["waiting"] == 2


def test_a_429_on_chat_is_busy_with_retry_after(app, stand_in):
    stand_in.mode = "busy"
    until(app, "ready")
    r = chat(app)
    assert r.status_code == 429 and r.headers.get("retry-after") == "5" and "busy" in r.text, r.text
    assert httpx.get(app.url + "/health", timeout=10).json()["status"] == "ready"  # busy is not down
    stand_in.mode = "ok"
