"""Access and limits on a real server: the admin token guards every path, secrets never leak, bounds hold.

The server is conftest's ``surface_server`` (shared with test_surface_fuzz.py):
`python app.py` with tiny models on vLLM (CPU), FINSPACE_ADMIN_TOKEN set, a
recognisable fake HF_TOKEN, a fresh empty HF_HOME, HF_HUB_OFFLINE=1, its stdout
and stderr captured to a file, and a queue bound of two chats in flight
(FINSPACE_MAX_IN_FLIGHT=2).

- No path switches or unloads the model without the token: REST (no header, wrong
  token, wrong scheme, token elsewhere, other methods and routes), the Gradio API
  (/load_model, Gradio's direct-call routes) and the UI's own events called by
  fn_index over Gradio's queue protocol (private events are still callable there).
- Tokens are compared with hmac.compare_digest (source and a spy).
- Only catalogue keys load: repo ids and paths are refused before huggingface_hub,
  and HF_HOME stays as it was; vLLM never gets trust_remote_code=True.
- Request-size bounds (message length, turns, total size, max_tokens, context) give
  clear errors at once, and the engine keeps serving.
- Past the queue bound a chat gets an immediate "busy, retry in N s".
- Last: the admin token and HF_TOKEN appear in no response the module received,
  not in /health, /models, /loads, and not in the server's log.
"""

from __future__ import annotations

import ast
import inspect
import threading
import time

import httpx
import pytest
from gradio_client.exceptions import AppError

from helpers import REPO
from rel_utils import (
    SURFACE_ADMIN,
    SURFACE_CONTEXT,
    SURFACE_HF_TOKEN,
    SURFACE_MAX_IN_FLIGHT,
    TALLY,
    GradioRaw,
    assert_clean,
    baseline,
    gclient,
    gradio_config,
    has_traceback,
    listing,
    running_requests,
    wait_until,
)
from rel_utils import unchanged as rel_unchanged

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

ADMIN = SURFACE_ADMIN
HF_TOKEN = SURFACE_HF_TOKEN
MAX_IN_FLIGHT = SURFACE_MAX_IN_FLIGHT
SEEN: list[str] = []  # every response body / error message the module received, grepped at the end


def seen(text: str) -> str:
    SEEN.append(text)
    if has_traceback(text) or ADMIN in text or HF_TOKEN in text:
        TALLY.add(errors=1)
    assert_clean(text, ADMIN, HF_TOKEN)
    return text


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    return surface_server


def unchanged(server) -> None:
    seen(str(rel_unchanged(server)))


def ledger_len(server) -> int:
    return len(httpx.get(server.url + "/loads", params={"limit": 1000}, timeout=15).json())


# ------------------------------------------------------------------ constant time
SECRETISH = ("token", "secret", "password")


def _secret_operand(node: ast.AST) -> bool:
    text = ast.unparse(node)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return any(s in name.lower() for s in SECRETISH)
    return "ADMIN_TOKEN" in text or "HF_TOKEN" in text


def test_tokens_are_compared_in_constant_time(monkeypatch):
    """No ==/!= on a token anywhere in the app; authorize uses hmac.compare_digest (source and a spy)."""
    from finspace.web import auth as auth_mod
    from finspace.web import server as server_mod
    from finspace.errors import Unauthorized
    from finspace import service as service_mod
    from finspace.wall import secrets as secrets_mod

    offenders = []
    for path in [REPO / "app.py", *sorted((REPO / "src" / "finspace").rglob("*.py"))]:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
                operands = [node.left, *node.comparators]
                if any(_secret_operand(o) for o in operands) and not any(
                    isinstance(o, ast.Constant) and o.value in (None, "") for o in operands
                ):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, "tokens compared with ==/!=:\n" + "\n".join(offenders)
    # the service checks through wall.secrets, which compares with hmac.compare_digest
    assert "self._is_admin_token" in inspect.getsource(service_mod.Service.authorize)
    assert "is_admin(token)" in inspect.getsource(secrets_mod.authorize)
    assert "secrets.is_admin_token(" in inspect.getsource(service_mod.Service._is_admin_token)
    assert "secrets.is_api_key(" in inspect.getsource(service_mod.Service.is_api_key)
    assert "hmac.compare_digest(" in inspect.getsource(secrets_mod.is_admin_token)
    assert "hmac.compare_digest(" in inspect.getsource(secrets_mod.is_api_key)  # /v1's keys, every one
    assert "svc.authorize(" in inspect.getsource(auth_mod.admin)  # REST goes through it too
    assert "auth.admin(svc)" in inspect.getsource(server_mod.build_app)

    calls = []
    real = secrets_mod.hmac.compare_digest

    def spy(a, b):
        calls.append((type(a), type(b)))
        return real(a, b)

    monkeypatch.setattr(secrets_mod.hmac, "compare_digest", spy)
    svc = service_mod.Service(None, None, None, admin_token=ADMIN)
    for wrong in ("wrong", ADMIN[:-1], ADMIN + "x", ADMIN.upper(), "é" * 10, "\udcff" * 4):
        with pytest.raises(Unauthorized):
            svc.authorize(wrong)
    svc.authorize(ADMIN)
    assert len(calls) == 7, calls
    for bad in (None, "", 5, b"bytes", [ADMIN]):
        with pytest.raises(Unauthorized):
            svc.authorize(bad)
    TALLY.add(inputs=12)


# ------------------------------------------------------------------ REST
def test_rest_no_path_switches_without_the_token(server):
    n = ledger_len(server)
    url = server.url + "/load-model"
    attempts = [
        ("POST", url, {}, {"model": "b"}),
        ("POST", url, {"Authorization": "Bearer wrong"}, {"model": "b"}),
        ("POST", url, {"Authorization": f"Bearer {ADMIN[:-1]}"}, {"model": "b"}),
        ("POST", url, {"Authorization": f"Bearer {ADMIN}x"}, {"model": "b"}),
        ("POST", url, {"Authorization": f"Bearer {ADMIN.upper()}"}, {"model": "b"}),
        ("POST", url, {"Authorization": f"Basic {ADMIN}"}, {"model": "b"}),
        ("POST", url, {"Authorization": f"Token {ADMIN}"}, {"model": "b"}),
        ("POST", url, {"Authorization": ADMIN}, {"model": "b"}),
        ("POST", url, {"Authorization": "Bearer"}, {"model": "b"}),
        ("POST", url, {"X-Admin-Token": ADMIN}, {"model": "b"}),
        ("POST", url, {"Cookie": f"token={ADMIN}"}, {"model": "b"}),
        ("POST", url, {}, {"model": "b", "token": ADMIN}),
        ("POST", url, {}, {"model": "b", "admin_token": ADMIN}),
    ]
    for method, u, headers, body in attempts:
        r = httpx.request(method, u, headers=headers, json=body, timeout=15)
        seen(r.text)
        assert r.status_code == 401, (headers, body, r.status_code, r.text[:200])
        assert r.headers.get("www-authenticate") == "Bearer"
    # Other methods and routes: nothing else switches or unloads.
    others = [
        ("GET", "/load-model?model=b"),
        ("PUT", "/load-model"),
        ("PATCH", "/load-model"),
        ("DELETE", "/load-model"),
        ("POST", "/unload"),
        ("POST", "/unload-model"),
        ("DELETE", "/models/a"),
        ("POST", "/models"),
        ("POST", "/health"),
        ("POST", "/load_model"),
        ("POST", "/api/load-model"),
        ("POST", "/load-model/"),
        ("POST", "//load-model"),
        ("POST", "/LOAD-MODEL"),
    ]
    for method, path in others:
        r = httpx.request(method, server.url + path, json={"model": "b"}, timeout=15, follow_redirects=False)
        seen(r.text)
        assert r.status_code in (401, 404, 405, 307), (method, path, r.status_code, r.text[:200])
        if r.status_code == 307:  # a redirect to /load-model keeps needing the token
            r = httpx.request(method, server.url + r.headers["location"], json={"model": "b"}, timeout=15)
            assert r.status_code in (401, 404, 405), (method, path, r.status_code)
    TALLY.add(inputs=len(attempts) + len(others))
    time.sleep(0.5)
    unchanged(server)
    assert ledger_len(server) == n, "a load was attempted"


# ------------------------------------------------------------------ Gradio API
def test_gradio_api_load_model_needs_the_token(server):
    n = ledger_len(server)
    tokens = [
        None,
        "",
        "wrong",
        ADMIN[:-1],
        ADMIN + "x",
        ADMIN.upper(),
        " " + ADMIN,
        ADMIN + " ",
        12345,
        [ADMIN],
        {"token": ADMIN},
        "Bearer " + ADMIN,
    ]
    for token in tokens:
        with pytest.raises(AppError) as info:
            gclient(server).predict("b", token, api_name="/load_model")
        assert "admin token" in seen(str(info.value)), info.value
    # Gradio's direct-call routes reach the same function, and the same check.
    for route in ("/gradio_api/run/load_model", "/gradio_api/api/load_model"):
        for data in (["b"], ["b", None], ["b", "wrong"]):
            r = httpx.post(server.url + route, json={"data": data}, timeout=60)
            seen(r.text)
            assert r.status_code >= 400, (route, data, r.status_code, r.text[:200])
            # 404: the direct routes are closed (queue(api_open=False), Gradio's default on a Space); one
            # argument: Gradio's own arity error, before our function.
            if r.status_code != 404 and len(data) == 2:
                assert "admin token" in r.text, (route, data, r.status_code, r.text[:200])
    r = httpx.post(server.url + "/gradio_api/call/load_model", json={"data": ["b", "wrong"]}, timeout=30)
    if r.status_code == 200:  # Gradio's two-step "call" API: POST, then GET the result stream
        event = r.json()["event_id"]
        text = httpx.get(server.url + f"/gradio_api/call/load_model/{event}", timeout=60).text
        assert "admin token" in seen(text), text[:300]
    TALLY.add(inputs=len(tokens) + 7)
    unchanged(server)
    assert ledger_len(server) == n


def test_ui_events_called_directly_cannot_switch(server):
    """Every UI event (all private) called by fn_index over the queue protocol, as a scripted browser would."""
    n = ledger_len(server)
    config = gradio_config(server.url)
    comps = {c["id"]: c for c in config["components"]}
    deps = [d for d in config["dependencies"] if d.get("backend_fn")]
    assert all(
        d["api_visibility"] == "private"
        for d in deps
        if d.get("api_name")
        not in (
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
        )
    )
    public = {
        name
        for name, info in gclient(server).view_api(print_info=False, return_format="dict")["named_endpoints"].items()
    }
    assert public == {
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
    }, public
    # gradio_client refuses private events by fn_index; that is a client nicety, not a protection:
    begin = next(d for d in deps if any(comps[i].get("props", {}).get("elem_id") == "admin-token" for i in d["inputs"]))
    with pytest.raises(ValueError):
        gclient(server).predict("b", "wrong", fn_index=begin["id"])

    def value_for(cid: int, token):
        c = comps[cid]
        props = c.get("props", {})
        if props.get("elem_id") == "admin-token":
            return token
        if c["type"] == "dropdown":
            return "b"
        if c["type"] == "textbox":
            return "What is a bond?"
        if c["type"] == "state":
            return None
        return props.get("value")

    calls = 0
    with GradioRaw(server.url, timeout=90) as g:
        sh = g.session()
        page = next(d for d in deps if any(t[1] == "load" for t in d["targets"]))
        out = g.call(page["id"], [None] * len(page["inputs"]), session_hash=sh)  # fills the picker, as the page does
        assert out.success, out.text
        for token in (None, "", "wrong", ADMIN + "x", ADMIN[:-1]):
            out = g.call(begin["id"], [value_for(i, token) for i in begin["inputs"]], session_hash=sh)
            calls += 1
            seen(out.text)
            assert out.success is False and "admin token" in (out.error or ""), out.text
        for d in deps:
            if d["id"] == begin["id"]:
                continue
            data = [value_for(i, "wrong") for i in d["inputs"]]
            if d.get("queue") is False:
                r = g.run_direct(d["id"], data, session_hash=sh)
                seen(r.text)
                assert r.status_code != 500 or "error" in r.text, (d["id"], r.status_code, r.text[:200])
            else:
                out = g.call(d["id"], data, session_hash=sh, timeout=90)
                seen(out.text)
                assert out.success is not None, (d["id"], d.get("api_name"), out.raw)
            calls += 1
    TALLY.add(inputs=calls)
    time.sleep(0.5)
    unchanged(server)
    assert ledger_len(server) == n, "a UI event started a load without the token"


# ------------------------------------------------------------------ only catalogue keys
def test_only_catalogue_keys_load_and_the_hub_is_never_reached(server):
    n = ledger_len(server)
    keys = [
        "org/repo",
        "DragonLLM/Llama-Open-Finance-8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "../x",
        "/etc/passwd",
        str(REPO),
        "hf://org/repo",
        "https://huggingface.co/org/repo",
        "a/../b",
        "~/models/x",
        "gpt2",
    ]
    for key in keys:
        r = httpx.post(
            server.url + "/load-model", json={"model": key}, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=15
        )
        seen(r.text)
        assert r.status_code == 422 and "catalogue" in r.json()["error"], (key, r.status_code, r.text[:200])
        with pytest.raises(AppError) as info:
            gclient(server).predict(key, ADMIN, api_name="/load_model")
        assert "catalogue" in seen(str(info.value))
    for body in (
        {"model": "a", "trust_remote_code": True},
        {"model": "a", "revision": "main"},
        {"model": "a", "path": "/tmp"},
        {"repo": "org/repo"},
    ):
        r = httpx.post(server.url + "/load-model", json=body, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=15)
        seen(r.text)
        assert r.status_code == 422, (body, r.status_code, r.text[:200])
    TALLY.add(inputs=2 * len(keys) + 4)
    assert listing(server.hf_home) == server.hf_home_at_start, "something was written under HF_HOME"
    assert not list(server.hf_home.rglob("models--*"))
    log = server.log_path.read_text(errors="replace")
    assert "trust_remote_code=False" in log and "trust_remote_code=True" not in log
    unchanged(server)
    assert ledger_len(server) == n


# ------------------------------------------------------------------ request-size bounds
def test_request_size_bounds_give_clear_errors(server):
    emoji = "\U0001f4b8" * 60_000  # 60,000 chars: under the char limit; ~240,000 byte-level tokens: over the context
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(512)]
    big_turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "y" * 60_000} for i in range(5)]
    cases = [
        (("x" * 64_001, []), "limit is 64,000"),
        (("x" * 5_000_000, []), "limit is 64,000"),
        (("hi", turns), "limit is 512"),
        (("hi", big_turns), "limit is 256,000"),
        (("hi", [], "s" * 70_000), "limit is 64,000"),
        (("hi", [], None, None, 10**6), "out of range"),
        (("hi", [], None, None, SURFACE_CONTEXT), "out of range"),  # the cap is the context - 1
        (("hi", [], None, None, 0), "out of range"),
        ((emoji, []), "Shorten the message"),
    ]
    for args, phrase in cases:
        args = args + (None,) * (5 - len(args))
        t0 = time.monotonic()
        with pytest.raises(AppError) as info:
            gclient(server).predict(*args, api_name="/chat")
        took = time.monotonic() - t0
        msg = seen(str(info.value))
        assert phrase in msg, (phrase, msg[:300])
        assert took < 30, f"{phrase!r} took {took:.1f} s"
    TALLY.add(inputs=len(cases))
    reply = gclient(server).predict("What is a bond?", [], None, 0.0, 8, api_name="/chat")
    assert isinstance(reply, str) and reply
    unchanged(server)


def test_conversations_at_the_size_limits_do_not_stall_other_requests(server):
    """Eight conversations just under the limits (4 x 63,000 emoji: ~250,000 byte-level tokens each) sent at once
    while /health is probed: it must keep answering within 1.5 s. Each is refused (too long for the context, or busy:
    the queue bound is 2). Each costs 0.5-1.5 s of templating and tokenizing; the engine does that in a worker
    thread, so the serving loop (pages, /health, other streams) does not wait for it."""
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": "\U0001f4b8" * 63_000} for i in range(3)]
    data = ["\U0001f4b8" * 63_000, history, None, 0.0, 8]
    stop, latencies, outcomes = threading.Event(), [], []

    def probe():
        while not stop.is_set():
            t0 = time.monotonic()
            httpx.get(server.url + "/health", timeout=120)
            latencies.append(time.monotonic() - t0)
            time.sleep(0.05)

    def big():
        with GradioRaw(server.url, timeout=120) as g:
            outcomes.append(g.call(server.fns["chat"], data))

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    time.sleep(0.3)
    workers = [threading.Thread(target=big) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(150)
    stop.set()
    prober.join(130)
    TALLY.add(inputs=8)
    assert len(outcomes) == 8 and all(o.success is False for o in outcomes), [o.text[:200] for o in outcomes]
    assert all("Shorten" in o.error or "busy" in o.error for o in outcomes), [o.error for o in outcomes]
    unchanged(server)
    worst = max(latencies)
    print(f"/health during eight size-limit conversations: worst {worst:.2f} s over {len(latencies)} probes")
    # measured: worst 0.2-0.5 s; tokenized in the serving loop, each of the two admitted costs it 0.5-1.5 s
    assert worst < 1.5, f"/health stalled for {worst:.1f} s while eight size-limit conversations were tokenized"


# ------------------------------------------------------------------ overload
def test_past_the_queue_bound_a_chat_gets_busy_retry_at_once(server):
    """FINSPACE_MAX_IN_FLIGHT=2: with two long chats running, a third is refused at once with a retry hint."""
    assert running_requests(server) == 0
    TALLY.add(faults=1)
    long = 8000  # the engine's max_tokens cap is 8,192
    clients = [gclient(server) for _ in range(MAX_IN_FLIGHT + 1)]  # before the streams: a busy app answers slowly
    jobs = [c.submit("Explain duration and convexity.", [], None, 0.0, long, api_name="/chat") for c in clients[:-1]]
    try:
        wait_until(
            lambda: running_requests(server) == MAX_IN_FLIGHT or any(j.done() for j in jobs),
            90,
            0.05,
            f"{MAX_IN_FLIGHT} chats in the engine",
        )
        assert running_requests(server) == MAX_IN_FLIGHT, [j.status() for j in jobs]
        refusals = []
        for via in ("gradio_client", "queue protocol"):
            assert running_requests(server) == MAX_IN_FLIGHT and not any(j.done() for j in jobs), (
                "a long chat ended early: the test cannot hold the queue bound"
            )
            t0 = time.monotonic()
            if via == "gradio_client":
                try:
                    reply = clients[-1].predict("One more?", [], None, 0.0, 8, api_name="/chat")
                    pytest.fail(
                        f"FINSPACE_MAX_IN_FLIGHT={MAX_IN_FLIGHT} is not honoured: a third chat was "
                        f"served ({reply!r}) while {MAX_IN_FLIGHT} were running"
                    )
                except AppError as exc:
                    msg = str(exc)
            else:
                with GradioRaw(server.url, timeout=30) as g:
                    out = g.call(server.fns["chat"], ["One more?", [], None, 0.0, 8])
                assert out.success is False, out.text
                msg = out.error or ""
            took = time.monotonic() - t0
            seen(msg)
            refusals.append((via, took))
            assert "busy" in msg and "retry in" in msg, msg
            assert took < 5, f"the refusal took {took:.1f} s ({via})"
        assert all(not j.done() for j in jobs), "the running chats were disturbed"
    finally:
        for j in jobs:
            j.cancel()
    wait_until(lambda: running_requests(server) == 0, 30, 0.1, "the long chats to be freed")
    reply = gclient(server).predict("And now?", [], None, 0.0, 8, api_name="/chat")
    assert isinstance(reply, str) and reply
    TALLY.add(inputs=2, survived=1)
    print("busy refusals: " + ", ".join(f"{via} in {took * 1000:.0f} ms" for via, took in refusals))


# ------------------------------------------------------------------ secrets (last: greps all of the above)
def test_secrets_never_appear_in_responses_health_or_logs(server):
    auth = {"Authorization": f"Bearer {ADMIN}"}
    # Error paths that could echo a secret: the secrets as model keys, and a load that fails.
    for key in (ADMIN, HF_TOKEN, f"org/{HF_TOKEN}"):
        r = httpx.post(server.url + "/load-model", json={"model": key}, headers=auth, timeout=15)
        seen(r.text)
        assert r.status_code == 422
        with pytest.raises(AppError) as info:
            gclient(server).predict(key, ADMIN, api_name="/load_model")
        seen(str(info.value))
    with pytest.raises(AppError) as info:
        gclient(server).predict("broken", ADMIN, api_name="/load_model")
    assert "corrupt or truncated" in seen(str(info.value))
    with pytest.raises(AppError) as info:
        gclient(server).predict(HF_TOKEN, [{"role": HF_TOKEN, "content": ADMIN}], api_name="/chat")
    seen(str(info.value))
    TALLY.add(inputs=8)
    for path in ("/health", "/models", "/loads?limit=1000", "/config", "/gradio_api/info"):
        seen(httpx.get(server.url + path, timeout=30).text)
    for api in ("/health", "/models"):
        seen(str(gclient(server).predict(api_name=api)))
    seen(str(gclient(server).predict(1000, api_name="/loads")))
    joined = "\n".join(SEEN)
    assert ADMIN not in joined and HF_TOKEN not in joined
    log = server.log_path.read_text(errors="replace")
    assert len(log) > 1000 and "corrupt or truncated" in log  # the log did capture the failing load
    for name, secret in (("FINSPACE_ADMIN_TOKEN", ADMIN), ("HF_TOKEN", HF_TOKEN)):
        lines = [ln for ln in log.splitlines() if secret in ln]
        assert not lines, f"{name} in the server log:\n" + "\n".join(lines[:5])
    print(f"secrets: {len(SEEN)} responses and {len(log.splitlines())} log lines, no token in any")
