"""The wall in front, second pass (issue 25, findings 4, 5, 6 and 8): each replayed against a real server.

The server is conftest's ``surface_server`` (`python app.py`, tiny models on vLLM, admin
token and a fake HF_TOKEN set, FINSPACE_BODY_TIMEOUT_S=4), except for the /v1 key
throttle, which needs FINSPACE_API_KEYS: a small server of its own whose default model
the planner refuses (no engine starts; a few seconds).

4. Gradio routes the page and the API do not use (``POST /gradio_api/stream/<event_id>``
   replaced a queued event's data behind the guard) are refused, 404/405 naming the fix,
   with no server path in any answer.
5. Upload names and counts as python-multipart parses them: ``filename ="evil.exe"``, a
   repeated ``filename``, three ``filename =`` parts, ``filename*=``, many parts.
6. A body that drips in is closed at the deadline (408); while 150 such connections are
   held, /health and a chat stay responsive.
8a. 20 simultaneous joins from one address: exactly the bound (16) admitted.
8b. From loopback, a new X-Forwarded-For on each request is still one client: the event
   bound and the wrong-token throttle (/load-model, /v1) hold.
8e. A result stream opened after its event was swept ends as a complete reply (404 naming
   FINSPACE_STREAM_OPEN_S), not a truncated chunked one.
Fuzzing: multipart edge cases on the upload route and JSON on the stream route (hypothesis).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import uuid

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from helpers import REPO, demo_entry, write_catalog
from rel_utils import (
    SURFACE_ADMIN,
    SURFACE_BODY_S,
    SURFACE_EVENTS_PER_CLIENT,
    SURFACE_HF_TOKEN,
    SURFACE_STREAM_OPEN_S,
    TALLY,
    GradioRaw,
    assert_clean,
    baseline,
    env_flag,
    listing,
    unchanged,
)
from server_utils import Server

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

ADMIN, HF_TOKEN = SURFACE_ADMIN, SURFACE_HF_TOKEN
SCALE = env_flag("FINSPACE_FUZZ_SCALE", 1.0)


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    return surface_server


def server_paths(server) -> list[str]:
    """Folders of this server that no answer may name (Gradio's blocked_paths held them all)."""
    return [str(p) for p in (server.workdir, REPO, server.hf_home, server.gradio_cache)] + ["/proc/", "/etc/"]


def clean(server, r: httpx.Response) -> str:
    """No secret or traceback in an answer, and no server path in an error (an upload's 200 names the stored file:
    Gradio's protocol, the page sends it back as the document's FileData); counted."""
    TALLY.response(r.status_code, r.text)
    TALLY.add(inputs=1)
    assert_clean(r.text, ADMIN, HF_TOKEN)
    if r.status_code < 400:
        return r.text
    named = [p for p in server_paths(server) if p in r.text] + (["blocked_paths"] if "blocked_paths" in r.text else [])
    if named:
        TALLY.add(leaks=1)
    assert not named, (r.request.url.path, r.status_code, r.text[:400])
    return r.text


def refused(server, r: httpx.Response, statuses: tuple[int, ...], phrase: str) -> str:
    clean(server, r)
    assert r.status_code in statuses, (r.request.method, r.request.url.path, r.status_code, r.text[:300])
    error = r.json().get("error", "")
    assert phrase in error, (phrase, error)
    return error


def joined_event(http: httpx.Client, server) -> tuple[str, str]:
    """(event_id, session_hash) of a /health event joined and not read (it is swept STREAM_OPEN_S later)."""
    session = uuid.uuid4().hex
    r = http.post(
        server.url + "/gradio_api/queue/join",
        json={"data": [], "fn_index": server.fns["health"], "session_hash": session, "trigger_id": None},
    )
    assert r.status_code == 200, r.text
    return r.json()["event_id"], session


def log_lines(server) -> list[str]:
    return server.log_path.read_text(errors="replace").splitlines()


# ------------------------------------------------------------------ 4: the allow-list
UNUSED = [
    ("POST", "/gradio_api/stream/{eid}/close", {}),
    ("GET", "/gradio_api/stream/{sid}/0/1/playlist.m3u8", None),
    (
        "POST",
        "/gradio_api/component_server",
        {"session_hash": "{sid}", "component_id": 1, "fn_name": "x", "data": None},
    ),
    ("POST", "/gradio_api/process_recording", {}),
    ("POST", "/gradio_api/vibe-edit", {"prompt": "x"}),
    ("GET", "/gradio_api/vibe-code", None),
    ("GET", "/gradio_api/queue/status", None),
    ("GET", "/gradio_api/proxy=http://127.0.0.1:1/", None),
    ("POST", "/login", {"username": "a"}),
    ("GET", "/gradio_api/run-history/buckets", None),
    ("GET", "/gradio_api/runs", None),
    ("GET", "/gradio_api/deep_link", None),
    ("GET", "/gradio_api/dev/reload", None),
    ("GET", "/gradio_api/custom_component/1/client/x/y.js", None),
    ("PUT", "/gradio_api/queue/join", {}),
    ("DELETE", "/health", None),
    ("PATCH", "/load-model", {}),
    # issue 34: MCP is POST /gradio_api/mcp/ only (stateless); Gradio's own MCP routes are not offered
    ("GET", "/gradio_api/mcp/sse", None),
    ("POST", "/gradio_api/mcp/messages/", {}),
    ("GET", "/gradio_api/mcp/schema", None),
    ("DELETE", "/gradio_api/mcp/", None),
    ("PUT", "/gradio_api/mcp/", {}),
]


def test_the_stream_route_and_every_unused_gradio_route_are_refused(server):
    """Finding 4: POST /gradio_api/stream/<event_id> swapped a queued event's data for a FileData the join had
    refused; only the routes the page and the API use are let through now, and no answer names a server path."""
    swap = {
        "data": [{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}],
        "fn_index": server.fns["fit"],
        "session_hash": "x",
        "event_data": None,
    }
    with httpx.Client(timeout=30) as http:
        eid, sid = joined_event(http, server)
        for data in (swap, {**swap, "data": ["http://127.0.0.1:7860/gradio_api/info"]}, {"data": ["ok"]}):
            r = http.post(server.url + f"/gradio_api/stream/{eid}", json=data)
            refused(server, r, (404,), "is not a route this app offers")
        for method, path, body in UNUSED:
            r = http.request(
                method,
                server.url + path.format(eid=eid, sid=sid),
                json=json.loads(json.dumps(body).replace("{sid}", sid)) if body is not None else None,
            )
            refused(
                server,
                r,
                (404, 405),
                "not a route this app offers" if method in ("GET", "POST") else f"{method} is not accepted on",
            )
        # what the page and gradio_client use still answers
        for path in ("/", "/config", "/gradio_api/info", "/theme.css"):
            r = http.get(server.url + path, timeout=30)
            assert r.status_code == 200, (path, r.status_code, r.text[:200])
        r = http.post(
            server.url + "/gradio_api/mcp/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert r.status_code == 200 and r.json()["result"]["tools"], r.text[:200]
    unchanged(server)


# ------------------------------------------------------------------ 5: uploads as the parser reads them
def multipart(*dispositions: bytes, boundary: bytes = b"b0undary") -> tuple[bytes, dict]:
    parts = b"".join(
        b"--" + boundary + b"\r\nContent-Disposition: " + d + b"\r\nContent-Type: text/plain\r\n\r\nEBITDA rose 4%.\r\n"
        for d in dispositions
    )
    return parts + b"--" + boundary + b"--\r\n", {"Content-Type": "multipart/form-data; boundary=" + boundary.decode()}


PARSER_TRICKS = [
    ([b'form-data; name="files"; filename ="evil.exe"'], "'evil.exe' is not a document"),
    ([b'form-data; name="files"; filename= "evil.exe"'], "'evil.exe' is not a document"),
    ([b'form-data; name="files"; filename="a.pdf"; filename="evil.svg"'], "'evil.svg' is not a document"),
    ([b'form-data; name="files"; filename ="a.txt"'] * 3, "3 files in one upload; send at most 2 documents"),
    (
        [
            b'form-data; name="files"; filename="a.txt"',
            b'form-data; name="files"; filename="b.txt"',
            b'form-data; name="files"; filename="c.txt"',
        ],
        "3 files in one upload",
    ),
    ([b"form-data; name=\"files\"; filename*=UTF-8''evil.exe"], "holds no file"),
    ([b'form-data; name="x"'] * 30 + [b'form-data; name="files"; filename="a.txt"'], "more than 9 parts"),
]


@pytest.mark.parametrize("dispositions, phrase", PARSER_TRICKS)
def test_upload_names_and_counts_are_what_the_parser_reads(server, dispositions, phrase):
    """Finding 5: `filename ="evil.exe"` was stored, `filename="a.pdf"; filename="evil.svg"` stored evil.svg, and
    three `filename =` parts stored three files: the check was a pattern over the raw bytes. (An upload takes at
    most FINSPACE_MATRIX_MAX_DOCUMENTS documents, 2 on this server: the Matrix tab sends its filings together.)"""
    before = listing(server.gradio_cache)
    body, headers = multipart(*dispositions)
    with httpx.Client(timeout=30) as http:
        refused(server, http.post(server.url + "/gradio_api/upload", content=body, headers=headers), (400,), phrase)
    assert listing(server.gradio_cache) == before, "a file was stored"


# ------------------------------------------------------------------ 6: bodies that drip in
def test_a_slow_body_is_closed_at_its_deadline_and_others_are_served(server):
    """Finding 6: a join declaring 1,000 bytes and sending one every 5 s was still open at 47 s (headers had a
    deadline, bodies none). 150 such connections are held while /health and a chat are served; each gets a 408
    naming FINSPACE_BODY_TIMEOUT_S and is closed at the deadline."""
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    socks = []
    head = (
        b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    stop = threading.Event()

    def drip():
        while not stop.wait(1.0):
            for s in list(socks):
                try:
                    s.sendall(b" ")
                except OSError:
                    pass

    dripper = threading.Thread(target=drip, daemon=True)
    try:
        for _ in range(150):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(head)
            socks.append(s)
        t_open = time.monotonic()
        dripper.start()
        TALLY.add(inputs=len(socks), faults=1)
        slowest = 0.0
        for _ in range(3):
            t0 = time.monotonic()
            assert httpx.get(server.url + "/health", timeout=10).status_code == 200
            slowest = max(slowest, time.monotonic() - t0)
        with GradioRaw(server.url, timeout=60) as g:
            out = g.call(server.fns["chat"], ["What is a bond?", [], None, 0.0, 4])
        assert out.success, out.text
        assert slowest < 2, f"/health took {slowest:.1f} s while slow bodies were held"
        time.sleep(max(0.0, SURFACE_BODY_S + 3 - (time.monotonic() - t_open)))
        answers, still_open = [], 0
        for s in socks:
            s.settimeout(3)
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except TimeoutError:
                still_open += 1
            except ConnectionResetError:
                pass
            answers.append(got)
        assert still_open == 0, f"{still_open} of {len(socks)} slow bodies are still open after the deadline"
        timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408") and b"FINSPACE_BODY_TIMEOUT_S" in a]
        assert len(timed_out) == len(socks), answers[:3]
        TALLY.add(survived=1)
        print(
            f"150 dripping bodies: /health at most {slowest:.2f} s, a chat in {out.seconds:.1f} s; all closed "
            f"with 408 by {SURFACE_BODY_S + 3} s"
        )
    finally:
        stop.set()
        for s in socks:
            s.close()
    assert not any("Traceback" in line for line in log_lines(server)[-400:])
    unchanged(server)


# ------------------------------------------------------------------ 8a: simultaneous joins
def test_simultaneous_joins_from_one_address_hold_the_bound(server):
    """Finding 8a: 20 simultaneous joins from one address were 19 accepted against a bound of 16: the check ran
    before the event was recorded. All 20 requests are on the wire before any answer is read."""
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    socks = []
    for _ in range(20):
        s = socket.create_connection((host, port), timeout=30, source_address=("127.0.0.4", 0))
        socks.append(s)
    requests = []
    for _ in range(20):
        body = json.dumps({"data": [], "fn_index": server.fns["health"], "session_hash": uuid.uuid4().hex}).encode()
        requests.append(
            b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
    for s, req in zip(socks, requests):
        s.sendall(req)
    statuses = []
    for s in socks:
        got = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        s.close()
        statuses.append(int(got.split(b" ", 2)[1]))
    TALLY.add(inputs=20)
    assert sorted(statuses) == [200] * SURFACE_EVENTS_PER_CLIENT + [429] * (20 - SURFACE_EVENTS_PER_CLIENT), statuses
    unchanged(server)


# ------------------------------------------------------------------ 8b: X-Forwarded-For from loopback
KEY = "key-WALL-test-0123456789"
WALL_ADMIN = "adm-WALL-token-0123456789"


SMALL_MAX_CONNECTIONS, SMALL_BODY_S = 32, 3


@pytest.fixture(scope="module")
def small_server(tmp_path_factory, model_dir):
    """A server of its own whose default model the planner refuses (no engine: a few seconds): FINSPACE_API_KEYS,
    an admin token and the wrong-token throttle at its default (5), FINSPACE_TRUSTED_PROXIES=127.0.0.9 while
    uvicorn's own FORWARDED_ALLOW_IPS would trust all of loopback, and 32 connections at most."""
    root = tmp_path_factory.mktemp("wall-small")
    models = {"big": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Too big", max_model_len=65536)}
    catalog = write_catalog(root / "catalog", models, default="big")
    srv = Server(
        root,
        catalog,
        admin_token=WALL_ADMIN,
        env={
            "FINSPACE_CPU_KV_CACHE_MIB": "72",
            "FINSPACE_API_KEYS": KEY,
            "FINSPACE_STREAM_OPEN_S": "60",
            "FINSPACE_TOKEN_FAILURES": "5",
            "FINSPACE_MAX_CONNECTIONS": str(SMALL_MAX_CONNECTIONS),
            "FINSPACE_BODY_TIMEOUT_S": str(SMALL_BODY_S),
            "FINSPACE_TRUSTED_PROXIES": "127.0.0.9",
            "FORWARDED_ALLOW_IPS": "127.0.0.0/8",
        },
    )
    try:
        srv.wait(ready=False, timeout=120)
        yield srv
    finally:
        srv.stop()


def test_a_full_house_of_slow_bodies_lasts_only_until_the_body_deadline(small_server):
    """Finding 6, at FINSPACE_MAX_CONNECTIONS: with every connection held by a dripping body, uvicorn answers
    everyone else 503 ("Exceeded concurrency limit"); the body deadline ends that within FINSPACE_BODY_TIMEOUT_S
    (before: for as long as the drip lasted)."""
    srv = small_server
    host, port = "127.0.0.1", int(srv.url.rsplit(":", 1)[1])
    socks = []
    try:
        for _ in range(SMALL_MAX_CONNECTIONS + 4):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(
                b"POST /load-model HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            socks.append(s)
        TALLY.add(inputs=len(socks), faults=1)
        t0 = time.monotonic()
        full = httpx.get(srv.url + "/models", timeout=10).status_code  # (its /health is 503: no model ready)
        deadline = t0 + SMALL_BODY_S + 10
        while time.monotonic() < deadline:
            for s in socks:
                try:
                    s.sendall(b" ")
                except OSError:
                    pass
            if httpx.get(srv.url + "/models", timeout=10).status_code != 503:
                break
            time.sleep(0.5)
        freed_s = time.monotonic() - t0
        status = httpx.get(srv.url + "/models", timeout=10).status_code
        assert (full, status) == (503, 200), (full, status)
        assert freed_s < SMALL_BODY_S + 5, f"the house was full for {freed_s:.1f} s"
        TALLY.add(survived=1)
        print(
            f"{len(socks)} dripping bodies at FINSPACE_MAX_CONNECTIONS={SMALL_MAX_CONNECTIONS}: others got 503 "
            f"for {freed_s:.1f} s (FINSPACE_BODY_TIMEOUT_S={SMALL_BODY_S})"
        )
    finally:
        for s in socks:
            s.close()


def test_a_new_forwarded_for_each_time_is_still_one_client(small_server):
    """Finding 8b: uvicorn's proxy-header handling trusted loopback (FORWARDED_ALLOW_IPS, default 127.0.0.1): a new
    X-Forwarded-For each time gave 20 of 20 joins and 7 wrong tokens without a 429, on /load-model and /v1. Here
    the proxies trusted are FINSPACE_TRUSTED_PROXIES=127.0.0.9 only, whatever uvicorn's FORWARDED_ALLOW_IPS says."""
    srv = small_server

    def post(local: str, path: str, xff: str, token: str, body: dict) -> httpx.Response:
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=local)) as http:
            r = http.post(
                srv.url + path, json=body, headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": xff}
            )
        TALLY.response(r.status_code, r.text)
        TALLY.add(inputs=1)
        assert_clean(r.text, KEY, WALL_ADMIN)
        return r

    joins = [
        post("127.0.0.1", "/gradio_api/call/health", f"203.0.113.{i + 1}", "x", {"data": []}).status_code
        for i in range(20)
    ]
    assert joins == [200] * SURFACE_EVENTS_PER_CLIENT + [429] * (20 - SURFACE_EVENTS_PER_CLIENT), joins
    chat = {"model": "big", "messages": [{"role": "user", "content": "hi"}]}
    for local, path, body in (
        ("127.0.0.6", "/load-model", {"model": "big"}),
        ("127.0.0.7", "/v1/chat/completions", chat),
    ):
        codes = [
            post(local, path, f"198.51.100.{i + 1}", f"wrong-token-{i:04d}-abcdefgh", body).status_code
            for i in range(7)
        ]
        assert codes == [401] * 5 + [429, 429], (path, codes)
    # behind the proxy it trusts, each forwarded client is its own: two wrong keys each, no 429
    codes = [
        post(
            "127.0.0.9", "/v1/chat/completions", f"6.6.6.6, 192.0.2.{i // 2 + 1}", "wrong-key-abcdefgh", chat
        ).status_code
        for i in range(8)
    ]
    assert codes == [401] * 8, codes
    r = post("127.0.0.9", "/v1/chat/completions", "192.0.2.1", KEY, chat)
    assert r.status_code not in (401, 429) and (r.status_code < 500 or r.status_code == 503), r.text


# ------------------------------------------------------------------ 8e: a stream opened after the sweep
def test_a_result_stream_opened_after_the_sweep_is_a_complete_reply(server):
    """Finding 8e: a result stream opened after its event was swept ended as a truncated chunked response
    ("ASGI callable returned without completing response" in the log)."""
    lines_before = len(log_lines(server))
    with httpx.Client(timeout=30) as http:
        eid, sid = joined_event(http, server)
        r = http.post(server.url + "/gradio_api/call/health", json={"data": []})
        assert r.status_code == 200, r.text
        call_eid = r.json()["event_id"]
        time.sleep(SURFACE_STREAM_OPEN_S + 3)  # swept: the sweep runs each second
        for url, params in (
            (server.url + "/gradio_api/queue/data", {"session_hash": sid}),
            (server.url + f"/gradio_api/call/health/{call_eid}", None),
        ):
            r = http.get(url, params=params)  # a truncated reply raises httpx.RemoteProtocolError here
            refused(server, r, (404,), "FINSPACE_STREAM_OPEN_S")
    new = "\n".join(log_lines(server)[lines_before:])
    assert "without completing response" not in new, new[-2000:]
    unchanged(server)


# ------------------------------------------------------------------ fuzzing: multipart and the stream route
def fuzz_settings(n: int):
    return settings(
        max_examples=max(1, int(n * SCALE)),
        deadline=None,
        database=None,
        print_blob=True,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=list(HealthCheck),
    )


NAMES = st.sampled_from(
    [
        "a.pdf",
        "a.txt",
        "evil.exe",
        "x.svg",
        "../../etc/passwd",
        "a.pdf.exe",
        "a.exe.pdf",
        "",
        "a\\b.pdf",
        "é.csv",
        "a.PDF",
        ".md",
        "a.pdf\x00.exe",
        "a;b.txt",
        'a".txt',
    ]
)
SPACE = st.sampled_from(["", " ", "  ", "\t"])


@st.composite
def dispositions(draw) -> bytes:
    params = [b"form-data", b'name="files"']
    for _ in range(draw(st.integers(0, 3))):
        name = draw(NAMES).encode("utf-8", "surrogatepass")
        kind = draw(st.sampled_from(["plain", "quoted", "star", "star0", "bare"]))
        sp1, sp2 = draw(SPACE).encode(), draw(SPACE).encode()
        if kind == "quoted":
            params.append(b"filename" + sp1 + b"=" + sp2 + b'"' + name + b'"')
        elif kind == "plain":
            params.append(b"filename" + sp1 + b"=" + sp2 + name)
        elif kind == "star":
            params.append(b"filename*" + sp1 + b"=" + sp2 + b"UTF-8''" + name)
        elif kind == "star0":
            params.append(b"filename*0*=UTF-8''" + name)
        else:
            params.append(b"filename")
    return b"; ".join(params)


@given(
    parts=st.lists(dispositions(), min_size=0, max_size=12), boundary=st.sampled_from([b"b0undary", b"x", b"-" * 70])
)
@fuzz_settings(60)
def test_fuzz_multipart_uploads(server, parts, boundary):
    """Whatever the parameters' spacing, repetition, RFC 2231/5987 names or number of parts: never a 5xx or a
    leak, and a 200 stores one file per file part at most (the Matrix sends its filings together), each named
    with a document's extension."""
    body, headers = multipart(*parts, boundary=boundary)
    with httpx.Client(timeout=30) as http:
        r = http.post(server.url + "/gradio_api/upload", content=body, headers=headers)
    clean(server, r)
    assert r.status_code in (200, 400, 413), (r.status_code, r.text[:300])
    if r.status_code == 200:
        stored = r.json()
        assert 1 <= len(stored) <= len(parts), stored
        assert all(
            s.lower().endswith((".pdf", ".html", ".htm", ".docx", ".xlsx", ".csv", ".txt", ".md")) for s in stored
        ), stored
    else:
        assert r.json().get("error"), r.text


stream_bodies = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.text(max_size=30),
        st.just({"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}),
    ),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=12,
)


_FUZZ_CLIENTS = itertools.count()


@given(body=stream_bodies, suffix=st.sampled_from(["", "/close", "/", "/x/y"]), real=st.booleans())
@fuzz_settings(40)
def test_fuzz_data_on_the_stream_route(server, body, suffix, real):
    """Any data posted to /gradio_api/stream/<event_id>, for a live event or not: refused, never a 5xx or a leak."""
    n = next(_FUZZ_CLIENTS)  # each live event from its own address: the per-client bound is not what is tested
    local = f"127.0.{2 + n // 250 % 200}.{n % 250 + 1}"
    with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=local)) as http:
        eid = joined_event(http, server)[0] if real else uuid.uuid4().hex
        r = http.post(server.url + f"/gradio_api/stream/{eid}{suffix}", json=body)
    refused(server, r, (404,), "is not a route this app offers")
