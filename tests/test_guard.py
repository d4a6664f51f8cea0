"""finspace.wall.guard on a stand-in app (no Gradio, no engine): what reaches the app, and how refusals read.

The real app and every route are tested in tests/reliability/test_surface_attacks.py; these are the
guard's own rules, fast: body bounds before reading, strict JSON, file references, fn_index and arity,
closed routes, and Gradio's errors rewritten as {"error": ...}.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from finspace.wall.bodies import find_file_reference
from finspace.wall.guard import EventTracker, Guard, client_address
from finspace.settings import Limits

EVENTS = {0: ("respond", 5), 1: ("chat", 5), 2: (None, 0)}


def make(
    app=None,
    *,
    events=None,
    upload_dir=None,
    upload_bytes=0,
    upload_files=1,
    upload_file_bytes=None,
    document_events=frozenset,
    **limits,
):
    seen: list[bytes] = []

    async def echo(scope, receive, send):
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        seen.append(body)
        path = scope["path"]
        if path == "/gradio_api/app_id":
            out, status = json.dumps({"detail": [{"loc": ["body", "data"], "msg": "Field required"}]}).encode(), 422
        elif path == "/gradio_api/startup-events":
            await send({"type": "http.response.start", "status": 500, "headers": []})
            await send({"type": "http.response.body", "body": b"Internal Server Error"})
            raise RuntimeError("gradio choked")
        elif path == "/gradio_api/queue/join":
            out, status = json.dumps({"event_id": "e1"}).encode(), 200
        else:
            out, status = b"ok", 200
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": out})

    lim = Limits(**limits)
    guard = Guard(
        app or echo,
        limits=lim,
        public_api=("chat",),
        events=lambda: events or EVENTS,
        tracker=EventTracker(lim),
        upload_dir=upload_dir,
        upload_bytes=upload_bytes,
        upload_files=upload_files,
        upload_file_bytes=upload_file_bytes,
        document_events=document_events,
    )
    return guard, seen


def call(guard, method, path, content=b"", headers=None):
    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://t") as c:
            return await c.request(method, path, content=content, headers=headers or {})

    return asyncio.run(go())


def join(fn_index=1, data=None, **extra):
    return json.dumps(
        {
            "data": ["hi", [], None, 0.1, 8] if data is None else data,
            "fn_index": fn_index,
            "session_hash": "s1",
            **extra,
        }
    ).encode()


@pytest.mark.parametrize(
    "method, path, content, status, phrase",
    [
        ("POST", "/load-model", b"x" * (16 * 1024 + 1), 413, "larger than /load-model takes (16,384 bytes)"),
        ("POST", "/gradio_api/queue/join", b"{" + b" " * (6 << 20), 413, "a chat message's limit is 64,000"),
        ("POST", "/gradio_api/queue/join", b"\xff\xfe", 400, "not valid JSON"),
        ("POST", "/gradio_api/queue/join", b'{"data": [NaN], "fn_index": 1}', 400, "finite numbers only"),
        (
            "POST",
            "/gradio_api/queue/join",
            join(data=[{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}] * 5),
            400,
            "file references are not accepted (got a gradio.FileData for '/etc/passwd')",
        ),
        ("POST", "/gradio_api/queue/join", join(fn_index=7), 400, "fn_index must be one of the app's events (0 to 2)"),
        ("POST", "/gradio_api/queue/join", join(fn_index=True), 400, "got True"),
        ("POST", "/gradio_api/queue/join", join(data=["hi"]), 400, "/chat takes 5 input value(s)"),
        ("POST", "/gradio_api/queue/join", join(session_hash=5), 400, "session_hash must be text"),
        ("POST", "/gradio_api/call/respond", b'{"data": []}', 404, "no public endpoint named 'respond'"),
        ("POST", "/gradio_api/call/chat", b'{"data": ["hi"]}', 400, "/chat takes 5 input value(s)"),
        ("POST", "/gradio_api/run/predict", b"{}", 404, "direct calls are off"),
        ("POST", "/api/predict", b"{}", 404, "direct calls are off"),
        ("POST", "/gradio_api/upload", b"--x--", 403, "takes no file uploads"),
        ("GET", "/docs", b"", 404, "FINSPACE_API_DOCS=1"),
        ("GET", "/monitoring", b"", 404, "monitoring dashboard is off"),
        ("GET", "/gradio_api/app_id", b"", 422, "data: Field required"),
        ("GET", "/gradio_api/startup-events", b"", 400, "the request could not be processed"),
    ],
)
def test_refusals_name_the_fix_and_nothing_reaches_the_app(method, path, content, status, phrase):
    guard, seen = make()
    r = call(guard, method, path, content)
    assert r.status_code == status, r.text
    assert phrase in r.json()["error"], r.json()
    if path not in ("/gradio_api/app_id", "/gradio_api/startup-events"):
        assert seen == [], "a refused request reached the app"


def test_a_good_join_passes_with_its_body_and_is_counted_for_its_client():
    guard, seen = make()
    r = call(guard, "POST", "/gradio_api/queue/join", join())
    assert r.status_code == 200 and r.json() == {"event_id": "e1"} and seen == [join()]


def test_a_chunked_body_is_counted_as_it_arrives():
    guard, seen = make(rest_body_bytes=1000)

    async def chunks():
        for _ in range(10):
            yield b"x" * 200

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://t") as c:
            return await c.post("/load-model", content=chunks())

    r = asyncio.run(go())
    assert r.status_code == 413 and seen == []


@pytest.mark.parametrize(
    "value, found",
    [
        ({"a": [{"b": {"path": "/x", "meta": {"_type": "gradio.FileData"}}}]}, "/x"),
        ([{"url": "http://h/f", "_type": "gradio.FileData"}], "http://h/f"),
        ({"path": "/x", "meta": {"_type": "something else"}}, None),
        ({"text": "gradio.FileData is only a word here"}, None),
    ],
)
def test_file_references_are_found_at_any_depth(value, found):
    assert find_file_reference(value) == found


@pytest.mark.parametrize(
    "headers, peer, trust, who",
    [
        ({}, "10.0.0.5", False, "10.0.0.5"),
        ({"x-forwarded-for": "1.2.3.4"}, "10.0.0.5", False, "10.0.0.5"),  # off a Space the header is not trusted
        ({"x-forwarded-for": "6.6.6.6, 1.2.3.4"}, "10.0.0.5", True, "1.2.3.4"),  # the last hop: what the proxy saw
        ({}, None, True, "unknown"),
    ],
)
def test_client_address(headers, peer, trust, who):
    assert client_address(headers, peer, trust) == who


def test_a_closed_stream_frees_its_sessions_events_for_the_client():
    """A page reloaded: its old session's events were delivered (or cleaned by Gradio) and must stop counting,
    else a client reloading a few times would reach its bound and be refused (429)."""
    from types import SimpleNamespace

    queue = SimpleNamespace(pending_event_ids_session={"s1": {"e1", "e2"}}, event_ids_to_events={})
    tracker = EventTracker(Limits(events_per_client=2))
    tracker.attach(queue)
    tracker.stream_opened("s1")
    tracker.joined("1.2.3.4", "e1", "s1")
    tracker.joined("1.2.3.4", "e2", "s1")
    assert tracker.in_flight("1.2.3.4") == 2 and tracker.refusal("1.2.3.4")
    tracker.stream_closed("s1")  # Gradio keeps the ids in pending_event_ids_session; they no longer count
    assert tracker.in_flight("1.2.3.4") == 0 and tracker.refusal("1.2.3.4") is None


def test_an_event_joined_while_gradio_closes_the_stream_waits_for_the_next_one():
    """Gradio sends "close_stream" when the session has nothing pending, and a join can land between that and
    the stream's end: it counted as read by the closing stream and was cancelled, its session's messages dropped,
    so the page's next stream was a 404 and every later chat on the page hung (seen in the browser chat test
    with the machine busy). Such an event now waits for the client's next stream like a new join."""
    import asyncio
    from types import SimpleNamespace

    now = [100.0]
    queue = SimpleNamespace(
        pending_event_ids_session={"s1": {"e2"}}, event_ids_to_events={}, pending_messages_per_session={"s1": object()}
    )

    async def clean_events(**_):
        pass

    queue.clean_events = clean_events
    tracker = EventTracker(Limits(stream_open_s=5), clock=lambda: now[0])
    tracker.attach(queue)
    tracker.stream_opened("s1")
    tracker.joined("1.2.3.4", "e2", "s1")  # joined while the stream was still open
    tracker.stream_closed("s1", finished=True)
    assert tracker.in_flight("1.2.3.4") == 1 and tracker.has_session("s1")  # kept, and still counted
    now[0] += 4.9
    assert asyncio.run(tracker.sweep()) == 0
    tracker.stream_opened("s1")  # the client's next stream: read in time
    now[0] += 60
    assert asyncio.run(tracker.sweep()) == 0 and tracker.has_session("s1")
    tracker.stream_closed("s1", finished=True)
    now[0] += 5  # no stream opened for it this time: swept as any unread event
    assert asyncio.run(tracker.sweep()) == 1 and tracker.in_flight("1.2.3.4") == 0


@pytest.mark.parametrize(
    "chunk, finished",
    [
        (b'data: {"msg":"close_stream","event_id":null}\n\n', True),  # Gradio ended it: nothing left to deliver
        (b'data: {"msg":"process_completed","event_id":"e1","success":true}\n\n', False),  # cut: the reader left
        (
            b'data: {"msg":"process_generating","output":{"data":["say \\"close_stream\\""]}}\n\n',
            False,
        ),  # a reply's words
    ],
)
def test_the_guard_tells_gradios_own_close_from_a_reader_gone(chunk, finished):
    closed = []

    class Recording(EventTracker):
        def stream_closed(self, session, finished=False):
            closed.append((session, finished))

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": chunk})

    lim = Limits()
    guard = Guard(app, limits=lim, public_api=("chat",), events=lambda: EVENTS, tracker=Recording(lim))
    assert call(guard, "GET", "/gradio_api/queue/data?session_hash=s1").status_code == 200
    assert closed == [("s1", finished)]


# ------------------------------------------------------------------ documents: uploads and FileData on their events
DOC_EVENTS = {
    0: ("respond", 5),
    1: ("chat", 6, 5),
    2: (None, 0),
    3: (None, 2),
}  # 3: an event of the page that takes a document


def make_with_uploads(folder, upload_bytes=4096, upload_files=1, upload_file_bytes=None):
    return make(
        events=DOC_EVENTS,
        upload_dir=str(folder),
        upload_bytes=upload_bytes,
        upload_files=upload_files,
        upload_file_bytes=upload_file_bytes,
        document_events=lambda: {1, 3},
    )


def file_data(path, url=None):
    return {"path": str(path), "url": url, "orig_name": "a.pdf", "meta": {"_type": "gradio.FileData"}}


def multipart(*names, size=10):
    parts = b"".join(
        b'--b\r\nContent-Disposition: form-data; name="files"; filename="' + n.encode() + b'"\r\n'
        b"Content-Type: application/pdf\r\n\r\n" + b"x" * size + b"\r\n"
        for n in names
    )
    return parts + b"--b--\r\n", {"content-type": "multipart/form-data; boundary=b"}


def disposition(*params: bytes):
    """One part per ``params``, each a file field's Content-Disposition parameters after name="files"."""
    parts = b"".join(b'--b\r\nContent-Disposition: form-data; name="files"; ' + p + b"\r\n\r\nx\r\n" for p in params)
    return parts + b"--b--\r\n", {"content-type": "multipart/form-data; boundary=b"}


@pytest.fixture
def uploads(tmp_path):
    folder = tmp_path / "gradio"
    (folder / "abc").mkdir(parents=True)
    (folder / "abc" / "a.pdf").write_bytes(b"%PDF-1.4")
    (folder / "abc" / "out.pdf").symlink_to("/etc/passwd")
    return folder


def test_an_upload_of_one_document_within_the_limit_passes(uploads):
    guard, seen = make_with_uploads(uploads)
    body, headers = multipart("a.pdf")
    assert call(guard, "POST", "/gradio_api/upload", body, headers).status_code == 200 and seen == [body]


@pytest.mark.parametrize(
    "body, status, phrase",
    [
        (multipart("a.pdf", "b.pdf"), 400, "send one document per upload"),
        (multipart("a.pdf", size=5000), 413, "a document may be 0 MiB at most (FINSPACE_DOCUMENT_MAX_MIB)"),
        (multipart("passwd"), 400, "'passwd' is not a document this app takes; upload .pdf"),
        (multipart("x.exe"), 400, "'x.exe' is not a document this app takes"),
        (
            (multipart("a.pdf")[0].replace(b'filename="a.pdf"', b"filename*=utf-8''a.sh"), multipart()[1]),
            400,
            'named with filename="..."',
        ),
        # what python-multipart parses, not what a pattern over the bytes sees (issue 25, finding 5)
        (disposition(b'filename ="evil.exe"'), 400, "'evil.exe' is not a document"),
        (disposition(b'filename="a.pdf"; filename="evil.svg"'), 400, "'evil.svg' is not a document"),
        (disposition(b'filename ="a.pdf"', b'filename ="b.pdf"', b'filename ="c.pdf"'), 400, "one document per upload"),
        (disposition(*[b'x="1"'] * 20), 400, "more than 8 parts"),
        (disposition(b"filename*=UTF-8''evil.exe"), 400, "holds no file"),  # python-multipart ignores filename*=
        ((b"garbage\r\n", multipart()[1]), 400, "not valid multipart"),
        ((multipart("a.pdf")[0], {"content-type": "text/plain"}), 400, "multipart/form-data with a boundary"),
    ],
)
def test_uploads_past_one_file_or_the_size_limit_are_refused(uploads, body, status, phrase):
    guard, seen = make_with_uploads(uploads)
    r = call(guard, "POST", "/gradio_api/upload", *body)
    assert r.status_code == status and phrase in r.json()["error"] and seen == []


def test_the_matrix_tabs_filings_come_in_one_upload_up_to_its_bound(uploads):
    guard, seen = make_with_uploads(uploads, upload_files=3)
    body, headers = multipart("a.pdf", "b.html", "c.xlsx")
    assert call(guard, "POST", "/gradio_api/upload", body, headers).status_code == 200 and seen == [body]
    r = call(guard, "POST", "/gradio_api/upload", *multipart("a.pdf", "b.pdf", "c.pdf", "d.pdf"))
    assert r.status_code == 400 and "4 files in one upload; send at most 3 documents" in r.json()["error"]
    r = call(guard, "POST", "/gradio_api/upload", *multipart("a.pdf", "b.exe"))
    assert r.status_code == 400 and "'b.exe' is not a document" in r.json()["error"] and len(seen) == 1
    guard, seen = make_with_uploads(uploads, upload_bytes=8192, upload_files=3, upload_file_bytes=2048)
    r = call(guard, "POST", "/gradio_api/upload", *multipart("a.pdf", "b.pdf", size=3000))  # each file is bounded
    assert r.status_code == 413 and "'a.pdf' is 0.0 MiB: a document may be 0 MiB at most" in r.json()["error"]
    assert seen == []


def test_without_an_upload_folder_uploads_stay_refused():
    guard, seen = make()
    r = call(guard, "POST", "/gradio_api/upload", *multipart("a.pdf"))
    assert r.status_code == 403 and "takes no file uploads" in r.json()["error"] and seen == []


def test_an_uploaded_file_passes_on_the_document_events_only(uploads):
    guard, seen = make_with_uploads(uploads)
    ok = uploads / "abc" / "a.pdf"
    for fn_index, data in (
        (3, [{"text": "q", "files": [file_data(ok)]}, None]),
        (1, ["q", [], None, 0.1, 8, file_data(ok, f"http://h/gradio_api/file={ok}")]),
    ):
        r = call(guard, "POST", "/gradio_api/queue/join", join(fn_index=fn_index, data=data))
        assert r.status_code == 200, r.text
    r = call(
        guard, "POST", "/gradio_api/call/chat", json.dumps({"data": ["q", [], None, 0.1, 8, file_data(ok)]}).encode()
    )
    assert r.status_code == 200, r.text
    assert len(seen) == 3
    r = call(guard, "POST", "/gradio_api/queue/join", join(fn_index=0, data=[file_data(ok), [], None, 0.1, 8]))
    assert r.status_code == 400 and "file references are not accepted" in r.json()["error"]


@pytest.mark.parametrize(
    "path, url",
    [
        ("/proc/self/environ", None),
        ("/etc/passwd", None),
        ("/dev/zero", None),
        ("{u}/../../etc/passwd", None),
        ("{u}", None),
        ("{u}/abc/out.pdf", None),
        ("{u}x/abc/a.pdf", None),
        ("{u}/abc/a.pdf", "file:///etc/passwd"),
        ("{u}/abc/a.pdf", "http://h/gradio_api/file=/etc/passwd"),
        ("{u}/abc/a.pdf\x00", None),
    ],
)
def test_any_other_path_is_refused_even_on_the_document_events(uploads, path, url):
    guard, seen = make_with_uploads(uploads)
    ref = file_data(path.format(u=uploads), url)
    for body in (
        join(fn_index=3, data=[{"text": "q", "files": [ref]}, None]),
        join(fn_index=1, data=["q", [], None, 0.1, 8, ref]),
        json.dumps({"data": ["q", [], None, 0.1, 8, ref]}).encode(),
    ):
        route = "/gradio_api/call/chat" if b"fn_index" not in body else "/gradio_api/queue/join"
        r = call(guard, "POST", route, body)
        assert r.status_code == 400 and "file references are not accepted" in r.json()["error"], r.text
    assert seen == []


@pytest.mark.parametrize("fn_index", [[3, 3], {"a": 1}, True, 3.0, "3", None])
def test_a_stray_fn_index_with_a_file_is_refused_not_a_500(uploads, fn_index):
    guard, seen = make_with_uploads(uploads)
    body = join(fn_index=fn_index, data=[file_data("/proc/self/environ"), None])
    r = call(guard, "POST", "/gradio_api/queue/join", body)
    assert r.status_code == 400 and "file references are not accepted" in r.json()["error"] and seen == []


def test_five_input_chat_callers_keep_working_padded_with_no_document(uploads):
    guard, seen = make_with_uploads(uploads)
    r = call(guard, "POST", "/gradio_api/call/chat", json.dumps({"data": ["q", [], None, 0.1, 8]}).encode())
    assert r.status_code == 200 and json.loads(seen[0])["data"] == ["q", [], None, 0.1, 8, None]
    r = call(guard, "POST", "/gradio_api/call/chat", json.dumps({"data": ["q"]}).encode())
    assert r.status_code == 400 and "/chat takes 5 to 6 input value(s)" in r.json()["error"]


# ------------------------------------------------------------------ issue 25: the allow-list, paths in errors, proxies
@pytest.mark.parametrize(
    "method, path, status",
    [
        ("POST", "/gradio_api/stream/e1", 404),
        ("POST", "/gradio_api/stream/e1/close", 404),
        ("POST", "/gradio_api/component_server", 404),
        ("POST", "/gradio_api/process_recording", 404),
        ("POST", "/gradio_api/vibe-edit", 404),
        ("GET", "/gradio_api/queue/status", 404),
        ("POST", "/login", 404),
        ("GET", "/gradio_api/proxy=http://127.0.0.1/", 404),
        ("PUT", "/gradio_api/queue/join", 405),
        ("DELETE", "/health", 405),
        ("GET", "/gradio_api/queue/join", 405),
        ("POST", "/gradio_api/queue/data", 405),
    ],
)
def test_only_the_routes_the_page_and_the_api_use_reach_the_app(method, path, status):
    guard, seen = make()
    r = call(guard, method, path, b'{"data": [{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}]}')
    assert r.status_code == status and "/gradio_api/info" in r.json()["error"] and seen == [], r.text


def test_the_page_and_api_routes_pass():
    guard, seen = make()
    for method, path in (
        ("GET", "/"),
        ("GET", "/config"),
        ("GET", "/assets/index.js"),
        ("GET", "/gradio_api/info"),
        ("GET", "/gradio_api/heartbeat/s1"),
        ("GET", "/health"),
        ("HEAD", "/"),
        ("GET", "/gradio_api/file=/tmp/gradio/x/a.csv"),
        ("GET", "/v1/models"),
    ):
        assert call(guard, method, path).status_code == 200, (method, path)


def test_server_paths_are_scrubbed_from_gradio_error_texts():
    from finspace.wall.gradio_replies import PathScrubber

    scrub = PathScrubber(["etc", "proc", "work", "tmp"])
    leak = (
        'data: {"msg":"process_completed","success":false,"output":{"error":"Cannot move /etc/passwd to the gradio '
        'cache dir because it is located in one of the blocked_paths (/work/app/src, /etc, /proc)."}}\n\n'
    )
    out = scrub.event_chunk(leak.encode()).decode()
    assert "/etc" not in out and "/work" not in out and "blocked_paths" not in out and "finspace takes no files" in out
    assert scrub.text("bad /tmp/x/y.pdf; see /gradio_api/info and /v1") == "bad …; see /gradio_api/info and /v1"
    ok = b'data: {"msg":"process_completed","success":true,"output":{"data":["cd /etc/x"]}}\n\n'
    assert scrub.event_chunk(ok) == ok  # a reply is never rewritten


def test_admission_is_checked_and_taken_in_one_step():
    tracker = EventTracker(Limits(events_per_client=16))
    admitted = [tracker.admit("1.2.3.4") is None for _ in range(20)]  # 20 joins before Gradio answers any
    assert admitted.count(True) == 16
    for _ in range(16):
        tracker.settle("1.2.3.4")  # all refused downstream: the places are free again
    assert tracker.admit("1.2.3.4") is None


@pytest.mark.parametrize(
    "xff, peer, trusted, who",
    [
        ("9.9.9.9", "127.0.0.1", (), "127.0.0.1"),  # no proxy trusted: the peer, whatever the header says
        ("9.9.9.9", "127.0.0.1", ("10.0.0.0/8",), "127.0.0.1"),  # a peer not in the list
        ("1.1.1.1, 9.9.9.9", "10.0.0.5", ("10.0.0.0/8",), "9.9.9.9"),
        ("9.9.9.9, 10.0.0.7", "10.0.0.5", ("10.0.0.0/8",), "9.9.9.9"),  # a chain of trusted proxies
        ("1.1.1.1, 9.9.9.9", "172.17.0.1", ("*",), "9.9.9.9"),  # a Space: the last hop
    ],
)
def test_forwarded_for_counts_only_from_trusted_proxies(xff, peer, trusted, who):
    assert client_address({"x-forwarded-for": xff}, peer, trusted) == who


def test_the_routes_behind_read_the_address_the_guard_took():
    """One place: a Starlette request or the gr.Request wrapping it (whose __getattr__ JSON-encodes what it finds)
    gives the guard's address; without one, the peer."""
    import gradio as gr
    from starlette.requests import Request

    from finspace.wall.clients import request_client

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "query_string": b"",
        "client": ("9.9.9.9", 1),
        "headers": [(b"x-forwarded-for", b"1.1.1.1")],
        "state": {"finspace_client": "7.7.7.7"},
    }
    assert request_client(Request(scope)) == request_client(gr.Request(Request(scope))) == "7.7.7.7"
    assert request_client(Request({**scope, "state": {}})) == "9.9.9.9"
    assert request_client(None) is None


# ------------------------------------------------------------------ issue 34: MCP (POST /gradio_api/mcp/)
def make_mcp(**limits):
    """A guard in front of a stand-in MCP transport that holds each call until ``release`` is set."""
    state = {"running": 0, "peak": 0, "release": None}

    async def transport(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        state["running"] += 1
        state["peak"] = max(state["peak"], state["running"])
        try:
            await state["release"].wait()
        finally:
            state["running"] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"jsonrpc": "2.0", "id": 1, "result": {}}'})

    lim = Limits(**limits)
    tracker = EventTracker(lim)
    guard = Guard(
        transport, limits=lim, public_api=("chat",), events=lambda: EVENTS, tracker=tracker, mcp_bytes=1 << 20
    )
    return guard, state, tracker


MCP_CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "health", "arguments": {}}}
).encode()


def test_mcp_calls_hold_the_clients_places_while_they_run():
    guard, state, tracker = make_mcp(events_per_client=3)

    async def go():
        state["release"] = asyncio.Event()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://t") as c:
            calls = [asyncio.create_task(c.post("/gradio_api/mcp/", content=MCP_CALL)) for _ in range(5)]
            await asyncio.sleep(0.2)
            refused = [t for t in calls if t.done()]
            assert tracker.in_flight("127.0.0.1") == 3 and state["running"] == 3
            state["release"].set()
            answers = [await t for t in calls]
            return refused, answers

    refused, answers = asyncio.run(go())
    codes = sorted(r.status_code for r in answers)
    assert codes == [200, 200, 200, 429, 429] and len(refused) == 2, codes
    assert "FINSPACE_MAX_EVENTS_PER_CLIENT" in next(r for r in answers if r.status_code == 429).json()["error"]
    assert tracker.in_flight("127.0.0.1") == 0 and state["peak"] == 3  # every place given back


@pytest.mark.parametrize(
    "method, content, status, phrase",
    [
        ("POST", b"{" + b" " * (1 << 20), 413, "send documents by url, or fewer at a time"),
        ("POST", b'{"jsonrpc": "2.0", "id": NaN}', 400, "finite numbers only"),
        ("POST", b"\xff\xfe", 400, "not valid JSON"),
        ("POST", b"[" * 100_000 + b"]" * 100_000, 400, "not valid JSON"),
        ("GET", b"", 405, "GET is not accepted on the MCP endpoint"),
        ("DELETE", b"", 405, "is not accepted"),
    ],
)
def test_mcp_bodies_are_bounded_and_strict_before_the_sdk_reads_them(method, content, status, phrase):
    guard, state, tracker = make_mcp()
    state["release"] = None  # nothing may reach the transport
    r = call(guard, method, "/gradio_api/mcp/", content)
    assert r.status_code == status and phrase in r.json()["error"], r.text
    assert r.headers.get("allow") == ("OPTIONS, POST" if status == 405 else None), r.headers  # HTTP's rule
    assert state["peak"] == 0 and tracker.in_flight("127.0.0.1") == 0


def test_mcp_bodies_in_flight_are_bounded_per_client_as_uploads_are():
    """Issue 41, finding 7: a client's MCP calls together carry at most its upload bound (a base64 body costs the
    app ~3.7x its size while the call runs); another client is not affected; a finished call gives its bytes back."""
    from finspace.wall.uploads import Carried

    carried = Carried(128 << 20)
    body = 54 << 20  # the largest MCP body here: the Matrix's two filings as base64
    assert carried.admit("a", body) is None and carried.admit("a", body) is None
    refusal = carried.admit("a", body)
    assert refusal and "FINSPACE_UPLOAD_CLIENT_MIB" in refusal and "108.0 MiB" in refusal
    assert carried.admit("b", body) is None  # per client
    carried.release("a", body)
    assert carried.admit("a", body) is None


def test_the_same_bytes_twice_in_one_upload_become_two_files_of_their_own(tmp_path):
    """Gradio answers one content-hash path twice for two identical files in one upload: each gets its own copy
    (the second used to keep the path the first had moved away: a file that no longer existed, refused as "not
    yours" when used)."""
    from pathlib import Path

    from finspace.wall import uploads as up

    stored = tmp_path / "abc123" / "note.md"
    stored.parent.mkdir()
    stored.write_text("hello")
    out = json.loads(up.owned_copies(json.dumps([str(stored), str(stored)]).encode(), str(tmp_path)))
    assert len(set(out)) == 2 and all(up.OWN in p and Path(p).read_text() == "hello" for p in out), out
    assert not stored.exists()
