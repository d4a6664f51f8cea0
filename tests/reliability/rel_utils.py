"""Shared pieces of the reliability suite: the session tally, a raw Gradio queue client, process readings.

The tally feeds the summary line that tests/reliability/conftest.py prints at the
end of the run::

    reliability: inputs=N faults=F survived=S load_requests=R errors=E lost=L server_errors=N leaks=N

``GradioRaw`` speaks Gradio's own queue protocol (sse_v3: POST /gradio_api/queue/join,
then GET /gradio_api/queue/data as server-sent events), the one the browser and
gradio_client use. The suite needs it where gradio_client cannot go: private UI
events by fn_index, NaN/inf in JSON, a client that drops its socket mid-stream,
and 64 light-weight sessions in one event loop.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psutil

from helpers import demo_entry, write_catalog
from server_utils import Server
from support import tally
from support.sse import SseLines, asse_lines, sse_lines  # noqa: F401 - the suite's SSE readers

if TYPE_CHECKING:
    from gradio_client import Client

TRACE_MARKERS = ("Traceback", 'File "')
MIB = 1 << 20

# The shared "surface" server's secrets (recognisable, so a grep finds any leak) and queue bound.
SURFACE_ADMIN = "adm-RELIABILITY-tok-4c1d9e"
SURFACE_HF_TOKEN = "hf_RELIABILITYfakeToken0123456789abcd"
SURFACE_MAX_IN_FLIGHT = 2
SURFACE_EVENTS_PER_CLIENT = 16  # FINSPACE_MAX_EVENTS_PER_CLIENT: the default
SURFACE_STREAM_OPEN_S = 3  # FINSPACE_STREAM_OPEN_S (default 5)
SURFACE_HEADER_S = 3  # FINSPACE_HEADER_TIMEOUT_S (default 10)
SURFACE_BODY_S = 4  # FINSPACE_BODY_TIMEOUT_S (default 60)
SURFACE_CONTEXT = 16384  # model "a"'s max_model_len there: streams long enough to hold the overload test's slots


# ------------------------------------------------------------------ the tally
@dataclass
class Tally:
    inputs: int = 0  # hostile/careless inputs sent (fuzzing, access, size bounds)
    faults: int = 0  # faults injected (engine killed, broken loads, disconnects, full disk, overload)
    survived: int = 0  # faults after which the app served again as it must
    load_requests: int = 0  # chats served under load
    errors: int = 0  # requests that should have succeeded and did not (or a 500 / traceback)
    lost: int = 0  # accepted requests that never got an answer (hangs)
    server_errors: int = 0  # answers with a 5xx other than 503 (not ready, busy): a 500 is a bug or a crash
    leaks: int = 0  # answers holding a secret, a traceback, or a server file's content
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    def line(self) -> str:
        return tally.line(self.counts())

    def response(self, status: int, text: str = "") -> None:
        """Count what a client received: a 5xx (but 503) is a server error; a secret or file content a leak."""
        if status >= 500 and status != 503:
            self.add(server_errors=1)
        if leaked(text):
            self.add(leaks=1)


TALLY = Tally()


# ------------------------------------------------------------------ text checks
def has_traceback(text: str) -> bool:
    return any(m in text for m in TRACE_MARKERS)


# What must never reach a client: the surface server's secrets, and the content of the files an attacker names
# (/proc/self/environ holds both secrets; /etc/passwd starts with root's line).
LEAK_MARKERS = (SURFACE_ADMIN, SURFACE_HF_TOKEN, "root:x:0:0", "FINSPACE_ADMIN_TOKEN=", "HF_TOKEN=")


def leaked(text: str) -> bool:
    return has_traceback(text) or any(m in text for m in LEAK_MARKERS)


def assert_clean(text: str, *secrets: str) -> None:
    """No traceback, no secret, no server file's content, in something a client received."""
    if leaked(text) or any(s and s in text for s in secrets):
        TALLY.add(leaks=1)
    shown = text if len(text) < 600 else text[:600] + "…"
    assert not any(m in text for m in LEAK_MARKERS[2:]), f"a server file reached the client: {shown}"
    assert not has_traceback(text), f"a traceback reached the client: {shown}"
    for s in secrets:
        if s:
            assert s not in text, f"a secret reached the client: {shown}"


# ------------------------------------------------------------------ processes
def engine_procs(server_pid: int) -> list[psutil.Process]:
    """vLLM's engine processes under the server (VLLM::EngineCore, VLLM::Worker)."""
    out = []
    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except psutil.Error:
        return out
    for c in children:
        try:
            if c.name().startswith("VLLM::") and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.Error:
            continue
    return out


def engine_pids(server_pid: int) -> set[int]:
    return {p.pid for p in engine_procs(server_pid)}


def tree_rss(pid: int) -> int:
    """Resident memory of the server process and all its children (the engine), in bytes."""
    total = 0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every path under ``folder`` with its size (-1 for folders): to show nothing was written there."""
    return sorted((str(p.relative_to(folder)), p.stat().st_size if p.is_file() else -1) for p in folder.rglob("*"))


def baseline(server) -> tuple:
    """(model, loaded_since, engine pids): what must not change while a module only probes the server."""
    status, h = health(server)
    assert status == 200, h
    return h["model"], h["loaded_since"], engine_pids(server.proc.pid)


def unchanged(server) -> dict:
    """The module's probing changed nothing: /health 200 with the baseline's model and load, same engine processes."""
    status, h = health(server)
    model, since, pids = server.baseline
    assert status == 200 and (h["model"], h["loaded_since"]) == (model, since), h
    assert engine_pids(server.proc.pid) == pids
    return h


def still_serving(server) -> None:
    """Engine alive, same model, same load, same engine processes (``server.baseline``)."""
    status, h = health(server)
    model, since, pids = server.baseline
    assert status == 200, h
    assert (h["model"], h["loaded_since"], h["engine"]["alive"]) == (model, since, True), h
    assert engine_pids(server.proc.pid) == pids, "the engine processes changed"


def wait_until(pred, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout:.0f} s")
        time.sleep(interval)


# ------------------------------------------------------------------ servers
def start_server(
    root: Path,
    models: dict,
    *,
    default: str = "a",
    admin_token: str | None = None,
    env: dict | None = None,
    timeout: float = 300.0,
) -> Server:
    """One real app (`python app.py`) on 127.0.0.1 with the given catalogue; waits until ready."""
    catalog = write_catalog(root / "catalog", models, default=default)
    srv = Server(root, catalog, admin_token=admin_token, env=env)
    try:
        srv.startup_s = srv.wait(ready=True, timeout=timeout)
    except BaseException:
        srv.stop()
        raise
    srv.fns = api_fn_indexes(srv.url)
    return srv


def conversions_server(root: Path, model_dir: Path, max_tokens: int, env: dict, **kw: Any) -> Server:
    """The app the conversion tests share the shape of (test_surface_matrix, test_surface_shares): the tiny
    Llama with a 2k context, 64 MiB of KV cache, uploads in ``root/gradio``, 127.0.0.1 a trusted proxy (so
    ``from_ip`` names the client), and slow PDFs never refused for their time (on a busy machine one may take
    minutes: a 600 s bound, 5 s a page); ``env`` adds to that, ``kw`` goes to ``start_server``."""
    from support.catalog import long_context_copy

    model = long_context_copy(model_dir / "tiny-llama", root / "tiny-llama-2k", 2048)
    uploads = root / "gradio"
    uploads.mkdir()
    base = {
        "GRADIO_TEMP_DIR": str(uploads),
        "FINSPACE_TRUSTED_PROXIES": "127.0.0.1",
        "FINSPACE_CPU_KV_CACHE_MIB": "64",
        "FINSPACE_DOCUMENT_TIMEOUT_S": "600",
        "FINSPACE_DOCUMENT_PAGE_S": "5",
    }
    entry = demo_entry(model, None, label="Tiny Llama 2k", max_model_len=2048, max_tokens=max_tokens)
    srv = start_server(root, {"a": entry}, env={**base, **env}, timeout=900, **kw)  # a shared machine: slow starts
    srv.uploads = uploads
    return srv


def tiny(model_dir: Path, preset: str = "tiny-llama", **kw) -> dict:
    folder = {"tiny-llama": "tiny-llama", "tiny-qwen3": "tiny-qwen3"}[preset]
    return demo_entry(model_dir / folder, preset, **kw)


def health(server: Server) -> tuple[int, dict]:
    r = httpx.get(server.url + "/health", timeout=30)
    return r.status_code, r.json()


def api_fn_indexes(url: str) -> dict[str, int]:
    """api_name -> fn_index for the named Gradio endpoints (from the page's config)."""
    config = httpx.get(url + "/config", timeout=30).json()
    return {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}


def gclient(server_or_url) -> "Client":
    """A fresh gradio_client per call sequence (gradio_client 2.7's SSE reader can cancel a job submitted on a
    client whose previous stream is closing), with a generous timeout: a slow answer is not a failure here."""
    from gradio_client import Client

    url = getattr(server_or_url, "url", server_or_url)
    return Client(url + "/", verbose=False, httpx_kwargs={"timeout": 120})


def gradio_config(url: str) -> dict:
    return httpx.get(url + "/config", timeout=30).json()


# ------------------------------------------------------------------ raw Gradio protocol
@dataclass
class Outcome:
    """How one Gradio event ended, as the SSE stream told it."""

    joined: bool = False
    join_status: int = 0
    join_text: str = ""
    success: bool | None = None  # None: no process_completed (hang/timeout/disconnect)
    output: Any = None
    error: str | None = None  # the error message shown to the client
    pieces: int = 0  # process_generating messages
    ttft: float | None = None  # seconds from join to the first non-empty piece
    seconds: float = 0.0
    raw: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return json.dumps({"error": self.error, "output": self.output, "join": self.join_text})


def _dumps(body: Any) -> bytes:
    return json.dumps(body, allow_nan=True).encode()  # NaN/inf on purpose: JSON as Python writes it


def _nonempty(output: Any) -> bool:
    data = (output or {}).get("data") if isinstance(output, dict) else None
    if not data:
        return False
    first = data[0]
    if isinstance(first, str):
        return bool(first)
    if isinstance(first, list):  # sse_v3 diffs: [["append"|"replace", path, value], ...]
        return any(isinstance(op, list) and len(op) == 3 and op[2] for op in first)
    return first is not None


class GradioRaw:
    """Gradio's queue protocol over httpx (sync). One instance per thread."""

    def __init__(self, url: str, timeout: float = 120.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.http = httpx.Client(timeout=httpx.Timeout(timeout, connect=15))

    def close(self) -> None:
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def session() -> str:
        return uuid.uuid4().hex[:11]

    def join(self, fn_index: int, data: list, session_hash: str | None = None) -> tuple[int, str, str]:
        sh = session_hash or self.session()
        body = {"data": data, "fn_index": fn_index, "session_hash": sh, "trigger_id": None, "event_data": None}
        r = self.http.post(
            self.url + "/gradio_api/queue/join", content=_dumps(body), headers={"Content-Type": "application/json"}
        )
        TALLY.response(r.status_code, r.text)
        return r.status_code, r.text, sh

    def call(self, fn_index: int, data: list, session_hash: str | None = None, timeout: float | None = None) -> Outcome:
        """Join the queue and read the event's messages until it completes (or the timeout)."""
        out = Outcome()
        t0 = time.monotonic()
        status, text, sh = self.join(fn_index, data, session_hash)
        out.join_status, out.join_text = status, text
        if status != 200:
            out.seconds = time.monotonic() - t0
            return out
        out.joined = True
        event_id = json.loads(text)["event_id"]
        deadline = t0 + (timeout or self.timeout)
        try:
            with self.http.stream(
                "GET",
                self.url + "/gradio_api/queue/data",
                params={"session_hash": sh},
                timeout=httpx.Timeout(max(1.0, deadline - time.monotonic()), connect=15),
            ) as s:
                for line in sse_lines(s.iter_bytes()):
                    if time.monotonic() > deadline:
                        break
                    if not line.startswith("data:"):
                        continue
                    msg = json.loads(line[5:])
                    if msg.get("event_id") not in (None, event_id):
                        continue
                    kind = msg.get("msg")
                    out.raw.append(kind)
                    if kind == "process_generating":
                        out.pieces += 1
                        if out.ttft is None and _nonempty(msg.get("output")):
                            out.ttft = time.monotonic() - t0
                    elif kind == "process_completed":
                        out.success = bool(msg.get("success"))
                        out.output = msg.get("output")
                        if not out.success:
                            o = msg.get("output") or {}
                            out.error = str(o.get("error") if isinstance(o, dict) else o)
                        break
                    elif kind == "unexpected_error":
                        out.success, out.error = False, str(msg.get("message"))
                        break
                    elif kind == "close_stream":
                        break
        except httpx.HTTPError as exc:
            out.error = out.error or f"client: {type(exc).__name__}"
        out.seconds = time.monotonic() - t0
        return out

    def run_direct(self, fn_index: int, data: list, session_hash: str | None = None) -> httpx.Response:
        """An event without the queue (queue=False events use this route)."""
        body = {"data": data, "fn_index": fn_index, "session_hash": session_hash or self.session()}
        return self.http.post(
            self.url + "/gradio_api/run/predict", content=_dumps(body), headers={"Content-Type": "application/json"}
        )


def final_text(output: Any) -> str | None:
    """The reply text of a completed /chat event (sse_v3 sends the full value at completion)."""
    data = (output or {}).get("data") if isinstance(output, dict) else None
    if data and isinstance(data[0], str):
        return data[0]
    return None


# ------------------------------------------------------------------ streams that can be dropped
class RawSocketStream:
    """A /chat stream read over a plain socket, dropped with an RST (SO_LINGER 0) mid-stream."""

    def __init__(self, url: str, fn_index: int, data: list):
        self.url = url
        host, port = url.split("//", 1)[1].split(":")
        self.addr = (host, int(port))
        with GradioRaw(url) as g:
            status, text, self.session_hash = g.join(fn_index, data)
        assert status == 200, text
        self.sock = socket.create_connection(self.addr, timeout=30)
        req = (
            f"GET /gradio_api/queue/data?session_hash={self.session_hash} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\nAccept: text/event-stream\r\nConnection: keep-alive\r\n\r\n"
        )
        self.sock.sendall(req.encode())
        self.buf = b""

    def wait_generating(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while b"process_generating" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("the raw-socket stream produced no text")
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"the server closed the stream early: {self.buf[-400:]!r}")
            self.buf += chunk

    def drop(self) -> None:
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class HttpxStream:
    """A /chat stream read by httpx in a thread; ``drop`` closes the response (and its connection)."""

    def __init__(self, url: str, fn_index: int, data: list):
        self.http = httpx.Client(timeout=httpx.Timeout(300, connect=15))
        with GradioRaw(url) as g:
            status, text, self.session_hash = g.join(fn_index, data)
        assert status == 200, text
        self.pieces = 0
        self.done = threading.Event()
        self.completed = False
        self.dropped = False
        self._resp = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self.thread.start()

    def _read(self, url: str) -> None:
        try:
            with self.http.stream(
                "GET", url + "/gradio_api/queue/data", params={"session_hash": self.session_hash}
            ) as resp:
                self._resp = resp
                self._ready.set()
                for line in sse_lines(resp.iter_bytes()):
                    if "process_generating" in line:
                        self.pieces += 1
                    if "process_completed" in line:
                        self.completed = True
                        break
        except Exception:
            pass
        finally:
            self._ready.set()
            self.done.set()

    def wait_generating(self, timeout: float = 90.0) -> None:
        wait_until(lambda: self.pieces > 0 or self.done.is_set(), timeout, 0.05, "the httpx stream's first piece")
        assert self.pieces > 0, "the httpx stream ended before any text"

    def drop(self) -> None:
        self.dropped = True
        self._ready.wait(10)
        if self._resp is not None:
            self._resp.close()
        self.http.close()
        self.done.wait(10)


def running_requests(server: Server) -> int:
    return health(server)[1]["engine"]["running_requests"]


def env_flag(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def peak_rss_during(pid: int, work) -> tuple[int, object]:
    """The app process's peak RSS growth (sampled every 20 ms) while ``work()`` runs, and its result."""
    proc = psutil.Process(pid)
    start, peak, done = proc.memory_info().rss, [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = work()
    finally:
        done.set()
        sampler.join()
    return max(0, peak[0] - start), result


# ------------------------------------------------------------------ clients told apart, conversions, dropped calls
def from_ip(ip: str) -> dict[str, str]:
    """Headers of a client at ``ip`` (the server trusts 127.0.0.1 as its proxy: FINSPACE_TRUSTED_PROXIES)."""
    return {"X-Forwarded-For": ip}


def wait_for(pred, timeout: float, what: str, every: float = 0.1) -> float:
    """Seconds until ``pred()`` holds; fails naming ``what`` past ``timeout``."""
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, f"{what} within {timeout:.0f} s"
        time.sleep(every)
    return time.monotonic() - t0


def converting(server) -> int:
    """Document conversions running now: the server's converter children (finspace.documents.upload)."""
    n = 0
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            n += "finspace.documents.upload" in " ".join(child.cmdline())
    return n


def v1_file_body(name: str, data: bytes, max_tokens: int = 2) -> dict:
    """A /v1 chat whose one question comes with ``data`` as a file part named ``name``."""
    part = {
        "type": "file",
        "file": {
            "file_data": "data:application/octet-stream;base64," + base64.b64encode(data).decode(),
            "filename": name,
        },
    }
    return {
        "model": "a",
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What rose?"}, part]}],
    }


def v1_chat_with(server, ip: str, name: str, data: bytes, max_tokens: int = 2) -> tuple[float, httpx.Response]:
    """(seconds, response) of a /v1 chat from ``ip`` with a file part."""
    t0 = time.monotonic()
    r = httpx.post(
        server.url + "/v1/chat/completions", json=v1_file_body(name, data, max_tokens), headers=from_ip(ip), timeout=300
    )
    TALLY.response(r.status_code, r.text)
    return time.monotonic() - t0, r


def raw_post(
    url: str, path: str, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
) -> socket.socket:
    """A POST whose answer is never read: the caller goes away when ``drop`` closes the socket."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    sock = socket.create_connection((host, port), timeout=30)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n{extra}"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def drop(sock: socket.socket) -> float:
    """Close ``sock`` with a reset, as a killed client; the moment it was dropped."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    return time.monotonic()
