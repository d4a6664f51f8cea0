"""Gradio's event queue as finspace runs it (finspace.ui.queueing): no 1 ms poll, no analytics rebuilt after
every event, and every event still starts as soon as it can.

The app is built by build_app with an engine that never loads (no model: /chat answers "no model is loaded"
at once) and served by uvicorn in this process, so the queue is Gradio's real one, driven by gradio_client.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from gradio.queueing import Queue

from finspace.catalog import load_catalog
from finspace.engine import Engine
from finspace.gpu import MemoryMonitor
from finspace.ui import queueing
from finspace.ui.service import Service
from server_utils import free_port

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def serve_app():
    """build_app on a free port in a uvicorn thread; yields (url, its Gradio queue)."""
    import uvicorn

    from finspace.server import build_app

    catalog = load_catalog()
    monitor = MemoryMonitor(nvml=None)
    app = build_app(Engine(catalog, monitor), catalog, monitor, default_model=None)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    queue = next(r.app.get_blocks()._queue for r in app.routes if hasattr(getattr(r, "app", None), "get_blocks"))
    try:
        yield f"http://127.0.0.1:{port}/", queue
    finally:
        server.should_exit = True
        thread.join(30)


def test_an_idle_app_does_not_poll_its_queue_every_millisecond(monkeypatch):
    # Gradio 6's start loop checks its queue (len(queue)) and sleeps 1 ms when nothing can start: ~1,000 checks
    # a second, busy or idle. finspace's loop waits for a push or a finished event, or 50 ms: at most ~20 checks
    # a second while idle (count below 100 leaves room for a slow machine's timer).
    checks = []
    length = Queue.__len__
    monkeypatch.setattr(Queue, "__len__", lambda self: checks.append(1) or length(self))
    with serve_app():
        time.sleep(0.5)  # start-up settles
        before = len(checks)
        time.sleep(1.0)
        assert len(checks) - before < 100, f"{len(checks) - before} queue checks in 1 s of idling"


def test_events_start_at_once_without_the_fallback_timer(monkeypatch):
    # With the fallback at 60 s, only the wake-ups can start events: a push wakes the loop (sequential calls),
    # and a finished event wakes it for the one held back by the chat concurrency limit of 1 (four at once).
    # Without them the first call would wait a minute; the test's timeout is 120 s for the 5 + 4 calls.
    from gradio_client import Client

    monkeypatch.setattr(queueing, "FALLBACK_S", 60.0)
    monkeypatch.setenv("FINSPACE_CHAT_CONCURRENCY", "1")
    with serve_app() as (url, queue):
        client = Client(url, verbose=False)
        t0 = time.monotonic()
        for _ in range(5):
            assert client.predict(api_name="/health")["status"] == "none"

        users = [Client(url, verbose=False) for _ in range(4)]

        def chat(i):
            with pytest.raises(Exception, match="no model is loaded"):
                users[i].predict(f"question {i}", [], None, 0.0, 8, api_name="/chat")

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(chat, range(4)))
        elapsed = time.monotonic() - t0
        assert elapsed < 30, f"9 calls took {elapsed:.1f} s: the queue waited for its fallback timer"
        assert queue.idle_waits > 0


def test_another_gradio_version_keeps_gradios_own_loop(monkeypatch):
    import gradio

    monkeypatch.setattr(gradio, "__version__", "99.0.0")
    queue = Queue.__new__(Queue)
    assert queueing.wake_on_events(queue) is False and type(queue) is Queue


def test_the_queue_does_not_rebuild_gradios_analytics_after_every_event(monkeypatch):
    # Gradio 6 rebuilds a pandas summary of every recorded event (up to 10,000) after each event it finishes:
    # 5.5 ms of CPU per event at 10,000, and each open page's memory tick is an event. 2,000 events finished
    # (chats, ticks) must rebuild it at most twice (every 1,000), over at most 1,000 records.
    from finspace.ui import build_ui

    catalog = load_catalog()
    monitor = MemoryMonitor(nvml=None)
    svc = Service(Engine(catalog, monitor), catalog, monitor)
    queue = build_ui(svc.engine, svc.catalog, svc.monitor, service=svc)._queue
    built, get_df = [], Queue._get_df
    monkeypatch.setattr(Queue, "_get_df", staticmethod(lambda records: built.append(len(records)) or get_df(records)))
    record = {"time": 0.0, "status": "success", "process_time": 0.05, "function": "chat", "session_hash": "s"}
    for i in range(2000):
        queue.events_recorded += 1
        queue.compute_analytics_summary([record] * min(i + 1, queue.ANALYTICS_MAX_EVENTS))
    assert len(built) <= 2 and max(built) <= 1000, built
