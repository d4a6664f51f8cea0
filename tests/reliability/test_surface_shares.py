"""Issue 41's remainders, each through a real `python app.py` (a tiny llama on vLLM CPU) with the figure it
bounds measured against a baseline taken in the same run; each test failed on the code before its fix.

1. Conversion slots shared fairly: one client holds at most total - 1 slots, but two clients took one each and a
   third client's small document waited a whole conversion (finding 4: "the slot kept for chats is kept against
   matrices only"). Now a newcomer's document has a quick lane (documents.gate): it answers in a fraction of one
   slow PDF's conversion while two other clients convert one each.
2. Sessions that never open a heartbeat: their attached documents stayed in Gradio's state until 10,000 newer
   sessions came (finding 3). The states a few such attaches hold are all dropped once idle
   FINSPACE_SESSION_IDLE_S (3 s here), against the app's log's count before them.
3. Finding 7: MCP bodies are bounded per client as uploads are (429, and the app's memory for three bodies at once
   about one call's); the Hub is read for an anonymous caller without the Space's token (the Hub, faked at its
   edge, sees no Authorization) and gated reads the same as absent; 6to4 and site-local literals are refused
   before any connection.
4. Worst cases built for the Matrix's fields and MCP's arguments (many items, many keys, deep nesting, long
   strings): each refused with a 4xx or a clear error within a bound of a small bad payload's time and of a flat
   payload of the same size; /health from another address stays fast meanwhile. jsonschema took 22 s for 1.3 MB
   of bad fields before ``mcp_server.arguments._too_big``.
5. A gated repo the Space read with its token, in its hub cache: an anonymous caller was answered from that cache
   (huggingface_hub reads the cache whenever the Hub refuses or is unreachable); now it is refused as an absent
   repo is, while the admin token reads it, the Hub up or down.

Clients are told apart by X-Forwarded-For (FINSPACE_TRUSTED_PROXIES=127.0.0.1). One server for the module.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import statistics
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil
import pytest
from helpers import REPO
from rel_utils import (
    TALLY,
    assert_clean,
    conversions_server,
    converting,
    drop,
    from_ip,
    peak_rss_during,
    raw_post,
    v1_chat_with,
    v1_file_body,
    wait_for,
)
from support.slow_pdf import slow_pdf

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]
MIB = 1 << 20
ADMIN = "adm-SHARES-tok-7e2a9c41"
SPACE_TOKEN = "hf_SHARESspaceToken0123456789abcd"
IDLE_S = 3  # FINSPACE_SESSION_IDLE_S here
NOTE = b"EBITDA rose 4% in fiscal 2024."
MCP = "/gradio_api/mcp/"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONFIG = (REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_bytes()


# ------------------------------------------------------------------ the Hub, faked at its edge
class FakeHub:
    """huggingface.co's resolve route for three repos: owner/public for anyone, owner/gated and owner/cached for
    the Space's token only (401 GatedRepo otherwise, as the Hub answers); any other repo 404 RepoNotFound. Keeps
    each request's path and Authorization header."""

    def __init__(self):
        self.seen: list[tuple[str, str | None]] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body: bool):
                auth = self.headers.get("Authorization")
                hub.seen.append((self.path, auth))
                parts = self.path.split("?")[0].strip("/").split("/")
                repo = "/".join(parts[:2])
                status, headers, data = 404, {"X-Error-Code": "RepoNotFound"}, b"{}"
                if repo in ("owner/public", "owner/gated", "owner/cached") and parts[2:3] == ["resolve"]:
                    if repo != "owner/public" and auth != f"Bearer {SPACE_TOKEN}":
                        status, headers = 401, {"X-Error-Code": "GatedRepo"}
                    elif parts[-1] == "config.json":
                        status, headers, data = 200, {"X-Repo-Commit": COMMIT, "ETag": '"cfg-etag"'}, CONFIG
                    else:
                        status, headers = 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT}
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(data)), "Content-Type": "application/json"}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.up = True

    def down(self) -> None:
        """Unreachable from now on: connections are refused."""
        if self.up:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.up = False


def cache_repo(hf_home: Path, repo: str) -> None:
    """``repo``'s config.json in the hub cache as huggingface_hub lays it out (blobs, a snapshot link, refs/main):
    what the Space's own read with its token left there."""
    folder = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    (folder / "blobs").mkdir(parents=True)
    (folder / "blobs" / "cfg-etag").write_bytes(CONFIG)
    (folder / "snapshots" / COMMIT).mkdir(parents=True)
    (folder / "snapshots" / COMMIT / "config.json").symlink_to(Path("..") / ".." / "blobs" / "cfg-etag")
    (folder / "blobs" / "index-etag").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496}}))
    (folder / "snapshots" / COMMIT / "model.safetensors.index.json").symlink_to(
        Path("..") / ".." / "blobs" / "index-etag"
    )
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)


@pytest.fixture(scope="module")
def hub():
    fake = FakeHub()
    try:
        yield fake
    finally:
        fake.down()


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir, hub):
    root = tmp_path_factory.mktemp("rel-shares")
    hf_home = root / "hf-home"
    cache_repo(hf_home, "owner/cached")
    env = {
        "FINSPACE_SESSION_IDLE_S": str(IDLE_S),
        "FINSPACE_UPLOAD_CLIENT_MIB": "4",
        "HF_HOME": str(hf_home),
        "HF_TOKEN": SPACE_TOKEN,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_ETAG_TIMEOUT": "5",
    }
    srv = conversions_server(root, model_dir, 4, env, admin_token=ADMIN)
    srv.hf_home = hf_home
    # slow to read: PDFium takes about 5 s of CPU for each on CI (1,600 operators: 2.8 s), here 5-15 s
    srv.slow = [slow_pdf(root / f"slow-{i}.pdf", operators=3200) for i in range(2)]
    try:
        yield srv
    finally:
        srv.stop()


def rss(server) -> int:
    return psutil.Process(server.proc.pid).memory_info().rss


def health_s(url: str) -> float:
    t0 = time.monotonic()
    httpx.get(url + "/health", headers=from_ip("198.51.100.99"), timeout=300).raise_for_status()
    return time.monotonic() - t0


def mcp_post(server, name: str, arguments: dict | str, ip: str, token: str | None = None) -> httpx.Response:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "'
        + name
        + '", "arguments": '
        + args
        + "}}"
    ).encode()
    headers = {**from_ip(ip), "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    r = httpx.post(server.url + MCP, content=body, headers=headers, timeout=600)
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    return r


def mcp_error(r: httpx.Response) -> str | None:
    """The call's refusal as the caller reads it (a 4xx's body, or the tool's isError text), None when it ran."""
    if r.status_code != 200:
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
        return r.text
    out = r.json()
    if "error" in out:
        return json.dumps(out["error"])
    result = out["result"]
    return result["content"][0]["text"] if result.get("isError") else None


# ------------------------------------------------------------------ 1: conversion slots shared fairly
def _slow_enough(server, seconds: float) -> None:
    """The slow PDFs made as slow as this machine needs: one converts (in this process) in over ``seconds``; the
    operators double until it does (PDFium reads 3,200 x 220 pages in 2-15 s, by machine and load)."""
    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits

    operators = 3200
    while True:
        t0 = time.monotonic()
        convert(server.slow[0], "slow.pdf", DocumentLimits(convert_timeout_s=600))
        if time.monotonic() - t0 > seconds or operators >= 25_600:
            return
        operators *= 2
        server.slow = [slow_pdf(p, operators=operators) for p in server.slow]


def test_two_clients_converting_leave_a_third_clients_small_document_its_turn(server):
    """The baseline is in the test: the time the two slow conversions had run when the first of them ended, from
    the moment both ran. The third client's note must be answered in under half of it, both still converting;
    before the fix it waited until one of them ended."""
    _, r = v1_chat_with(server, "10.1.0.9", "note.txt", NOTE)  # warm-up: the model and the converter loaded
    assert r.status_code == 200, r.text
    t_alone, _ = v1_chat_with(server, "10.1.0.9", "note.txt", NOTE)
    _slow_enough(server, 6 * t_alone)
    socks = [
        raw_post(
            server.url,
            "/v1/chat/completions",
            json.dumps(v1_file_body("slow.pdf", pdf.read_bytes())).encode(),
            headers=from_ip(ip),
        )
        for ip, pdf in (("10.1.0.1", server.slow[0]), ("10.1.0.2", server.slow[1]))
    ]
    try:
        wait_for(lambda: converting(server) >= 2, 120, "both clients' slow PDFs converting", 0.02)
        t0 = time.monotonic()
        t_third, r = v1_chat_with(server, "10.1.0.3", "note.txt", NOTE)
        held = converting(server)
        wait_for(lambda: converting(server) < 2, 600, "the first slow conversion ended", 0.02)
        t_slow = time.monotonic() - t0
    finally:
        for s in socks:
            drop(s)
    assert r.status_code == 200, r.text[:300]
    print(
        f"fair slots: a third client's note answered in {t_third:.1f} s beside two slow conversions "
        f"({held} still running then; the first of them ended {t_slow:.1f} s after both ran; the note alone "
        f"{t_alone:.1f} s)"
    )
    assert held >= 2, f"a slow conversion had ended when the third client's note was answered ({t_third:.1f} s)"
    assert t_third < t_slow / 2, (t_third, t_slow, t_alone)
    wait_for(lambda: converting(server) == 0, 120, "the dropped clients' conversions ended")
    TALLY.add(inputs=5)  # the three chats with a file and the two slow PDFs


# ------------------------------------------------------------------ 2: sessions that never heartbeat
def page_chat(server) -> tuple[int, list]:
    """The page's chat box (Enter in #chat-input): its fn_index and its inputs' default values."""
    config = httpx.get(server.url + "/config", timeout=30).json()
    box = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "chat-input")
    dep = next(d for d in config["dependencies"] if [box, "submit"] in d["targets"])
    values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
    return dep["id"], [values.get(i) for i in dep["inputs"]]


def attach_in_a_fresh_session(server, ip: str, data: bytes) -> None:
    """Upload ``data`` and send it from the chat box in a new session that never opens a heartbeat."""
    r = httpx.post(
        server.url + "/gradio_api/upload", files=[("files", ("report.txt", data))], headers=from_ip(ip), timeout=120
    )
    assert r.status_code == 200, r.text
    fn, inputs = server.page_chat
    ref = {"path": r.json()[0], "url": None, "orig_name": "report.txt", "meta": {"_type": "gradio.FileData"}}
    session = uuid.uuid4().hex[:11]
    body = {
        "data": [{"text": "What rose?", "files": [ref]}, *inputs[1:]],
        "fn_index": fn,
        "session_hash": session,
        "trigger_id": None,
        "event_data": None,
    }
    r = httpx.post(server.url + "/gradio_api/queue/join", json=body, headers=from_ip(ip), timeout=60)
    assert r.status_code == 200, r.text
    with httpx.stream(
        "GET", server.url + "/gradio_api/queue/data", params={"session_hash": session}, headers=from_ip(ip), timeout=300
    ) as s:
        for line in s.iter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                msg = json.loads(line[5:])
                assert msg.get("success"), msg
                break
    TALLY.add(inputs=1)


def dropped_states(server) -> int:
    """Sessions whose state the app has dropped so far, as its log says (wall/sessions.py)."""
    text = server.log_path.read_text(errors="replace")
    return sum(int(n) for n in re.findall(r"dropped the state of (\d+) session", text))


def test_sessions_that_never_heartbeat_give_their_documents_back(server):
    """Four attaches at once from fresh sessions that never open a heartbeat: the states they hold (the app's
    log counts those it drops) are all dropped once idle FINSPACE_SESSION_IDLE_S (3 s here), counted from the last
    attach's end. (The app's RSS tells nothing here: glibc keeps freed memory.)"""
    server.page_chat = page_chat(server)
    words = b"Revenue rose in fiscal 2024 while operating costs fell and the auditor signed the report. "
    data = (words * (200_000 // len(words)))[:200_000]
    before = dropped_states(server)
    attaches = [
        threading.Thread(target=attach_in_a_fresh_session, args=(server, f"10.2.0.{i + 1}", data)) for i in range(4)
    ]
    for t in attaches:
        t.start()
    for t in attaches:
        t.join(300)
    held = 4 - (dropped_states(server) - before)
    took = wait_for(lambda: dropped_states(server) - before >= 4, 20 * IDLE_S, "the idle sessions' state dropped", 0.1)
    print(
        f"sessions without a heartbeat: {held} of 4 states held after the attaches, 0 left {took:.1f} s later "
        f"(the idle bound {IDLE_S} s)"
    )
    assert took <= 2 * IDLE_S, took


# ------------------------------------------------------------------ 3: finding 7 through the app
def test_mcp_bodies_are_bounded_per_client(server):
    """FINSPACE_UPLOAD_CLIENT_MIB is 4 here: one ask_document of a 2 MiB text (2.7 MB of base64) runs, a second and
    third sent meanwhile by the same client are 429; the app's peak memory is about one call's."""
    words = b"Net sales grew in every segment and the board raised the dividend twice during the year. "
    doc = (words * (2 * MIB // len(words)))[: 2 * MIB]
    args = {
        "question": "What grew?",
        "max_tokens": 1,
        "document": {"data": base64.b64encode(doc).decode(), "filename": "report.txt"},
    }

    def three_at_once() -> list[httpx.Response]:
        out: list = [None] * 3
        threads = [
            threading.Thread(target=lambda i=i: out.__setitem__(i, mcp_post(server, "ask_document", args, "10.3.0.1")))
            for i in range(3)
        ]
        threads[0].start()
        time.sleep(0.3)  # the first is running
        for t in threads[1:]:
            t.start()
        for t in threads:
            t.join(300)
        return out

    one, r = peak_rss_during(server.proc.pid, lambda: mcp_post(server, "ask_document", args, "10.3.0.2"))
    assert mcp_error(r) is None, r.text[:300]
    many, answers = peak_rss_during(server.proc.pid, three_at_once)
    statuses = sorted(a.status_code for a in answers)
    print(
        f"MCP bodies per client: three 2.7 MB calls at once: {statuses}, peak +{many / MIB:.0f} MiB "
        f"(one call alone +{one / MIB:.0f} MiB)"
    )
    assert statuses.count(429) >= 2, statuses
    assert all("FINSPACE_UPLOAD_CLIENT_MIB" in a.text for a in answers if a.status_code == 429)
    assert many <= 2 * one + 16 * MIB, (many, one)


def test_the_hub_is_read_without_the_spaces_token_for_an_anonymous_caller(server, hub):
    hub.seen.clear()
    public = mcp_post(server, "will_it_fit", {"repo": "owner/public", "gpu": "l40s"}, "10.3.1.1")
    assert mcp_error(public) is None, public.text[:300]
    assert hub.seen and all(auth is None for _, auth in hub.seen), hub.seen
    gated = mcp_error(mcp_post(server, "will_it_fit", {"repo": "owner/gated", "gpu": "l40s"}, "10.3.1.1"))
    absent = mcp_error(mcp_post(server, "will_it_fit", {"repo": "owner/absent", "gpu": "l40s"}, "10.3.1.1"))
    assert gated and absent and gated.replace("owner/gated", "X") == absent.replace("owner/absent", "X"), (
        gated,
        absent,
    )
    assert "gated" in gated and "no public Hub repo" in gated
    hub.seen.clear()
    admin = mcp_post(server, "will_it_fit", {"repo": "owner/gated", "gpu": "l40s"}, "10.3.1.2", token=ADMIN)
    assert mcp_error(admin) is None, admin.text[:300]
    assert {auth for _, auth in hub.seen} == {f"Bearer {SPACE_TOKEN}"}, hub.seen
    for r in (public, admin):
        assert_clean(r.text, SPACE_TOKEN, ADMIN)


@pytest.mark.parametrize(
    "host, why", [("[2002:7f00:1::1]", "this machine"), ("[2002:a00:1::1]", "private"), ("[fec0::1]", "site-local")]
)
def test_6to4_and_site_local_literals_are_refused_before_any_connection(server, host, why):
    t0 = time.monotonic()
    r = mcp_post(
        server,
        "ask_document",
        {"question": "What rose?", "document": {"url": f"http://{host}:{server.port}/note.txt"}},
        "10.3.2.1",
    )
    took = time.monotonic() - t0
    err = mcp_error(r)
    print(f"{host}: refused in {took * 1e3:.0f} ms")
    assert err and why in err and "refused" in err, err


# ------------------------------------------------------------------ 4: worst cases, Matrix fields and MCP arguments
def matrix_event(server, ip: str, fields_text: str) -> tuple[float, dict]:
    """The /matrix event with one uploaded note and ``fields_text``: (seconds, {"success", "error"})."""
    r = httpx.post(
        server.url + "/gradio_api/upload", files=[("files", ("note.txt", NOTE))], headers=from_ip(ip), timeout=120
    )
    assert r.status_code == 200, r.text
    ref = {"path": r.json()[0], "url": None, "orig_name": "note.txt", "meta": {"_type": "gradio.FileData"}}
    session = uuid.uuid4().hex[:11]
    body = json.dumps(
        {
            "data": [[ref], fields_text],
            "fn_index": server.fns["matrix"],
            "session_hash": session,
            "trigger_id": None,
            "event_data": None,
        }
    ).encode()
    t0 = time.monotonic()
    r = httpx.post(
        server.url + "/gradio_api/queue/join",
        content=body,
        headers={**from_ip(ip), "Content-Type": "application/json"},
        timeout=120,
    )
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    if r.status_code != 200:
        return time.monotonic() - t0, {"success": False, "error": r.text, "status": r.status_code}
    with httpx.stream(
        "GET", server.url + "/gradio_api/queue/data", params={"session_hash": session}, headers=from_ip(ip), timeout=300
    ) as s:
        for line in s.iter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                msg = json.loads(line[5:])
                return time.monotonic() - t0, {
                    "success": bool(msg.get("success")),
                    "error": str((msg.get("output") or {}).get("error")),
                }
    return time.monotonic() - t0, {"success": None, "error": "no process_completed"}


def worst_fields() -> dict[str, str]:
    """Matrix fields built to make the checks work: many, wide, deep, long (each under the event's body bound)."""
    bad = {"name": 1, "type": 2, "instruction": 3, "extra": 4}
    return {
        "80,000 fields": json.dumps([bad] * 80_000),
        "100,000 keys in one field": json.dumps([{f"k{i}": i for i in range(100_000)}]),
        "nested 200,000 deep": "[" * 200_000 + "]" * 200_000,
        "a 4 MB instruction": json.dumps([{"name": "a", "type": "text", "instruction": "x" * 4_000_000}]),
    }


def worst_arguments() -> dict[str, tuple[str, str]]:
    """MCP arguments built the same way: (tool, arguments as JSON text)."""
    doc = '{"url": "https://example.com/10-k.pdf"}'
    return {
        "50,000 bad fields": (
            "extract_matrix",
            '{"documents": [' + doc + '], "fields": ' + json.dumps([{"a": 1, "b": 2}] * 50_000) + "}",
        ),
        "50,000 documents": ("extract_matrix", json.dumps({"documents": [{"a": 1}] * 50_000})),
        "200,000 unknown arguments": ("will_it_fit", json.dumps({f"k{i}": i for i in range(200_000)})),
        "100,000 keys in a document": (
            "ask_document",
            json.dumps({"question": "q", "document": {"url": "u", **{f"k{i}": i for i in range(100_000)}}}),
        ),
        "nested 200,000 deep": ("ask_document", '{"question": "q", "document": ' + "[" * 200_000 + "]" * 200_000 + "}"),
        "a 4 MB question": ("ask_document", json.dumps({"question": "q" * 4_000_000, "document": {"url": "u"}})),
    }


def test_worst_case_fields_and_arguments_are_refused_within_bounds(server):
    url = server.url
    small_m = statistics.median(matrix_event(server, "10.4.0.1", '[{"name": 1}]')[0] for _ in range(3))
    small_a = statistics.median(_timed_mcp(server, "extract_matrix", '{"documents": [{"a": 1}]}')[0] for _ in range(3))
    flat = {}  # a flat body of each size: one long string, refused at its first check
    health_base = statistics.median(health_s(url) for _ in range(5))
    results: dict[str, tuple[float, str]] = {}

    def run_all():
        for what, text in worst_fields().items():
            took, out = matrix_event(server, "10.4.0.2", text)
            assert out["success"] is False, (what, out)
            results[f"fields: {what}"] = (took, out["error"])
            flat[f"fields: {what}"] = matrix_event(server, "10.4.0.2", json.dumps("x" * len(text)))[0]
        for what, (tool, text) in worst_arguments().items():
            took, err = _timed_mcp(server, tool, text)
            results[f"{tool}: {what}"] = (took, err)
            flat[f"{tool}: {what}"] = _timed_mcp(
                server, "ask_document", json.dumps({"question": "q" * len(text), "document": {"url": "u"}})
            )[0]

    runner = threading.Thread(target=run_all)
    runner.start()
    during = []
    while runner.is_alive():
        during.append(health_s(url))
        time.sleep(0.2)
    runner.join()
    assert len(results) == len(worst_fields()) + len(worst_arguments()), results.keys()
    for what, (took, err) in results.items():
        print(
            f"{what}: refused in {took * 1e3:.0f} ms (a flat body of that size {flat[what] * 1e3:.0f} ms); "
            f"{err[:100]!r}"
        )
        assert err and "Traceback" not in err and "RecursionError" not in err, (what, err[:300])
        small = small_m if what.startswith("fields") else small_a
        assert took <= 4 * flat[what] + 10 * small, (what, took, flat[what], small)
    print(
        f"/health under them: median {statistics.median(during) * 1e3:.0f} ms, max {max(during) * 1e3:.0f} ms "
        f"(baseline {health_base * 1e3:.0f} ms); small bad payloads {small_m * 1e3:.0f} / {small_a * 1e3:.0f} ms"
    )
    assert statistics.median(during) <= 10 * health_base + 4 * small_a, (during, health_base)


def _timed_mcp(server, tool: str, text: str) -> tuple[float, str | None]:
    t0 = time.monotonic()
    r = mcp_post(server, tool, text, "10.4.0.3")
    return time.monotonic() - t0, mcp_error(r)


# ------------------------------------------------------------------ 5: the Space's Hub cache
def test_an_anonymous_caller_is_not_answered_from_the_spaces_hub_cache(server, hub):
    """owner/cached lies in the Space's hub cache (read with its token): refused to an anonymous caller exactly as
    an absent repo is, the Hub up (it answers 401 gated) or unreachable; the admin token reads it both ways.
    Unreachable, huggingface_hub retries an uncached file for about 23 s: the two anonymous calls go together."""
    for state in ("up", "down"):
        if state == "down":
            hub.down()
        out: dict[str, str | None] = {}
        calls = [
            threading.Thread(
                target=lambda repo=repo, ip=ip, out=out: out.__setitem__(
                    repo, mcp_error(mcp_post(server, "will_it_fit", {"repo": repo, "gpu": "l40s"}, ip))
                )
            )
            for repo, ip in (("owner/cached", "10.5.0.1"), ("owner/nothing", "10.5.0.3"))
        ]
        for t in calls:
            t.start()
        for t in calls:
            t.join(300)
        cached, absent = out["owner/cached"], out["owner/nothing"]
        print(f"the Hub {state}: an anonymous caller asking for a cached gated repo: {cached!r:.160}")
        assert cached is not None, f"the Hub {state}: an anonymous caller read the Space's cached gated repo"
        assert absent and cached.replace("owner/cached", "X") == absent.replace("owner/nothing", "X"), (
            state,
            cached,
            absent,
        )
        t0 = time.monotonic()
        admin = mcp_post(server, "will_it_fit", {"repo": "owner/cached", "gpu": "l40s"}, "10.5.0.2", token=ADMIN)
        assert mcp_error(admin) is None, (state, admin.text[:300])
        assert_clean(admin.text, SPACE_TOKEN, ADMIN)
        print(f"the Hub {state}: the admin read it in {time.monotonic() - t0:.1f} s")
