"""Fuzzing the public surface of a real server: REST and the Gradio API, driven by hypothesis.

The server is conftest's ``surface_server`` (shared with test_surface_access.py):
`python app.py`, tiny models, vLLM on CPU, admin token set. Every generated input
must get a clear answer: never a 500, never a traceback ("Traceback", 'File "'),
never a secret in what the client sees.
After every input the engine must still be alive and serving the same model:
/health 200, model "a", the same loaded_since and the same vLLM engine
processes (pids of the server's VLLM::* children). Generated model keys never
include a real switch (a catalogue key with the right token), so any change of
model or engine is a failure. Every input counts towards ``inputs=`` in the
summary line; the example counts are fixed, so the module's time is bounded.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest
from gradio_client.exceptions import AppError
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from finspace.settings import Limits

from helpers import REPO
from rel_utils import (
    SURFACE_ADMIN,
    SURFACE_CONTEXT,
    SURFACE_HF_TOKEN,
    TALLY,
    GradioRaw,
    assert_clean,
    baseline,
    env_flag,
    gclient,
    gradio_config,
    has_traceback,
    still_serving,
)

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

ADMIN = SURFACE_ADMIN
SCALE = env_flag("FINSPACE_FUZZ_SCALE", 1.0)  # multiply every max_examples (CI: 1)


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def fuzz_settings(n: int):
    # No shrinking phase: it can rerun hundreds of examples against the server; bounded time wins in CI,
    # and the failing example is printed as generated (print_blob reproduces it).
    return settings(
        max_examples=examples(n),
        deadline=None,
        database=None,
        print_blob=True,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    assert surface_server.baseline[2], "no engine process found"
    config = gradio_config(surface_server.url)  # the Will-it-fit tab's button and events, for the /fit fuzzing
    surface_server.config_deps = config["dependencies"]
    surface_server.fit_button = next(
        c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "fit-check"
    )
    return surface_server


def count(n: int = 1) -> None:
    TALLY.add(inputs=n)


# ------------------------------------------------------------------ strategies
PATH_LIKE = [
    "../x",
    "/etc/passwd",
    "org/repo",
    "..",
    "a/../b",
    "~/.ssh/id_rsa",
    "file:///etc/passwd",
    "https://huggingface.co/org/repo",
    "C:\\Windows\\win.ini",
    "a\x00b",
    "%2e%2e%2fx",
    "\\\\server\\share",
    "DragonLLM/Llama-Open-Finance-8B",
    "big",
    "b",
    "a",
    "A",
    " a",
    "a ",
    "a\n",
    "models.yaml",
    "../../../../proc/self/environ",
    "$(id)",
    "; rm -rf /",
    "{{7*7}}",
    "<script>alert(1)</script>",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4), max_leaves=16
)
FILL = st.sampled_from(["x", "é", "💸", "\x00", "\u202e", " ", "a/"])
huge = st.builds(lambda ch, n: ch * n, FILL, st.sampled_from([10_000, 70_000, 300_000, 1_100_000]))
large = st.builds(lambda ch, n: ch * n, FILL, st.sampled_from([10_000, 70_000]))  # inside lists: bounded total
keys = st.one_of(st.sampled_from(PATH_LIKE), st.text(max_size=60), huge)
model_values = st.one_of(keys, json_values)


def would_switch(body) -> bool:
    """A body that is a real switch request (the model must never change in this module)."""
    return isinstance(body, dict) and set(body) == {"model"} and body["model"] in ("a", "b")


# ------------------------------------------------------------------ REST
AUTH = ["none", "valid", "wrong", "basic", "bare", "lower", "empty-bearer", "huge"]


def auth_header(kind: str) -> dict:
    return {
        "none": {},
        "valid": {"Authorization": f"Bearer {ADMIN}"},
        "wrong": {"Authorization": "Bearer nope"},
        "basic": {"Authorization": f"Basic {ADMIN}"},
        "bare": {"Authorization": ADMIN},
        "lower": {"Authorization": f"bearer {ADMIN[:-1]}"},
        "empty-bearer": {"Authorization": "Bearer"},
        "huge": {"Authorization": "Bearer " + "x" * 70_000},
    }[kind]


load_bodies = st.one_of(
    st.fixed_dictionaries({"model": model_values}),
    st.fixed_dictionaries(
        {"model": keys},
        optional={
            "extra": json_values,
            "trust_remote_code": st.just(True),
            "revision": st.text(max_size=20),
            "path": keys,
        },
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "model",
                "repo",
                "path",
                "trust_remote_code",
                "revision",
                "../x",
                "/etc/passwd",
                "org/repo",
                "token",
                "__proto__",
            ]
        ),
        model_values,
        max_size=3,
    ),
    json_values,
)


def check_rest(r: httpx.Response, allowed: set[int]) -> None:
    text = r.text
    TALLY.response(r.status_code, text)
    if r.status_code == 500 or has_traceback(text):
        TALLY.add(errors=1)
    assert r.status_code != 500, f"500 from {r.request.method} {r.request.url.path}: {text[:300]}"
    assert r.status_code in allowed, (r.status_code, text[:300])
    assert_clean(text, ADMIN, SURFACE_HF_TOKEN)
    if r.status_code in (400, 401, 409, 413, 422):  # finspace's own answers are {"error": message}
        body = r.json()
        assert isinstance(body, dict) and body.get("error"), text[:300]


@given(body=load_bodies, auth=st.sampled_from(AUTH))
@fuzz_settings(100)
def test_rest_load_model_with_hostile_json(server, body, auth):
    if would_switch(body) and auth == "valid":
        auth = "wrong"
    content = json.dumps(body).encode()
    r = httpx.post(
        server.url + "/load-model",
        content=content,
        timeout=60,
        headers={"Content-Type": "application/json", **auth_header(auth)},
    )
    count()
    check_rest(r, {400, 401, 413, 422, 431})
    if len(content) > Limits.rest_body_bytes:  # issue 16: refused before it is read, token or not
        assert r.status_code in (413, 431), (auth, r.status_code, r.text[:200])
    elif auth != "valid":
        assert r.status_code in (401, 431), (auth, r.status_code, r.text[:200])  # the token is checked first
    still_serving(server)


@given(
    raw=st.one_of(
        st.binary(max_size=300),
        st.sampled_from(
            [
                b"",
                b"{",
                b"[" * 5000,
                b"\xff\xfe",
                b"null",
                b'{"model": NaN}',
                b'{"model": Infinity}',
                b'{"model": "a", "model": "../x"}',
            ]
        ),
    ),
    ctype=st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
    ),
)
@fuzz_settings(40)
def test_rest_load_model_with_raw_bytes(server, raw, ctype):
    r = httpx.post(
        server.url + "/load-model", content=raw, timeout=60, headers={"Content-Type": ctype, **auth_header("valid")}
    )
    count()
    check_rest(r, {400, 422})
    still_serving(server)


query = st.dictionaries(
    st.sampled_from(["limit", "model", "path", "x", "../x", "token"]),
    st.one_of(st.text(max_size=30), st.integers().map(str), st.sampled_from(["1e9", "-1", "NaN"])),
    max_size=3,
)


@given(
    path=st.sampled_from(["/health", "/models", "/loads"]),
    params=query,
    method=st.sampled_from(["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]),
)
@fuzz_settings(50)
def test_rest_read_routes_with_hostile_queries(server, path, params, method):
    try:
        r = httpx.request(method, server.url + path, params=params, timeout=60)
    except httpx.InvalidURL:
        return  # the client refused to send it; nothing reached the server
    count()
    allowed = {200, 404, 405, 422} if path == "/loads" else {200, 404, 405}  # 404: the Gradio mount at "/"
    check_rest(r, allowed)
    if method == "GET" and path != "/loads":
        assert r.status_code == 200
        assert json.loads(r.text)  # JSON, not an error page
    still_serving(server)


# ------------------------------------------------------------------ Gradio API (gradio_client)
roles = st.sampled_from(["user", "assistant", "system", "tool", "", "USER", None, 5])
parts = st.one_of(
    st.text(max_size=50),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image", "file", 5]), "text": st.one_of(st.text(max_size=30), json_values)}
    ),
    json_values,
)
small_contents = st.one_of(
    st.text(max_size=80),
    st.lists(parts, max_size=4),
    json_values,
    st.fixed_dictionaries({"text": st.text(max_size=20)}),
    st.fixed_dictionaries({"path": keys}),
)
contents = st.one_of(small_contents, large)
messages = st.fixed_dictionaries({"role": roles, "content": contents}, optional={"metadata": json_values})
small_messages = st.fixed_dictionaries({"role": roles, "content": small_contents})
histories = st.one_of(
    st.none(),
    st.lists(messages, max_size=6),
    json_values,
    st.lists(st.lists(messages, max_size=2), max_size=2),  # nested lists
    st.builds(lambda m, n: [m] * n, small_messages, st.sampled_from([300, 600])),
)  # many turns
numbers = st.one_of(
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**40), 2**40),
    st.sampled_from([-1, -0.0, 0, 1e308, -1e308, 2**63, True]),
    st.text(max_size=8),
)
# Valid values stay small (1-8 tokens; the cap is the context - 1): the module's time stays bounded.
max_tokens = st.one_of(
    st.none(),
    st.integers(1, 8),
    st.integers(-(2**62), 0),
    st.integers(SURFACE_CONTEXT, 2**62),
    st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda x: not (x.is_integer() and 9 <= x < SURFACE_CONTEXT)
    ),
    st.sampled_from([True, "8", 2.5]),
)
chat_messages = st.one_of(
    st.text(max_size=120),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    huge,
    json_values,
    st.sampled_from(PATH_LIKE),
)


def gradio_call(server, *args, api_name: str):
    """(result, None) or (None, error message). Any failure must be a clean, actionable AppError."""
    client = gclient(server)
    try:
        return client.predict(*args, api_name=api_name), None
    except httpx.HTTPStatusError as exc:  # the guard refused the join itself (issue 16): a body over its bound
        r = exc.response
        TALLY.response(r.status_code, r.text)
        assert r.status_code == 413 and "larger than" in r.json()["error"], (r.status_code, r.text[:300])
        return None, r.json()["error"]
    except AppError as exc:
        msg = str(exc)
        if has_traceback(msg) or "unexpected server error" in msg:
            TALLY.add(errors=1)
        assert_clean(msg, ADMIN)
        assert "unexpected server error" not in msg, msg  # our boundary's 500
        assert msg.strip() and msg != "None", "an error without a message"
        return None, msg


@given(
    message=chat_messages,
    history=histories,
    system_prompt=st.one_of(st.none(), st.text(max_size=40), huge, json_values),
    temperature=numbers,
    max_tokens=max_tokens,
)
@fuzz_settings(30)
def test_gradio_chat_with_hostile_arguments(server, message, history, system_prompt, temperature, max_tokens):
    try:
        json.dumps([message, history, system_prompt, temperature, max_tokens], allow_nan=False)
    except (ValueError, TypeError):
        return  # gradio_client cannot send it (NaN/inf, ints > 2**64 are fine); the raw test covers NaN/inf
    reply, error = gradio_call(server, message, history, system_prompt, temperature, max_tokens, api_name="/chat")
    count()
    assert (reply is None) != (error is None)
    if reply is not None:
        assert isinstance(reply, str)
    still_serving(server)


@given(
    model=model_values,
    token=st.one_of(
        st.none(),
        st.just(ADMIN),
        st.just(""),
        st.text(max_size=30),
        st.just(ADMIN + "x"),
        st.just(ADMIN.upper()),
        json_values,
    ),
)
@example(model="\x00" * 1_100_000, token=None)  # 6.6 MB as JSON: the guard's body bound answers first
@fuzz_settings(20)
def test_gradio_load_model_with_hostile_keys(server, model, token):
    if model in ("a", "b") and token == ADMIN:
        token = "wrong"
    try:
        json.dumps([model, token], allow_nan=False)
    except (ValueError, TypeError):
        return
    result, error = gradio_call(server, model, token, api_name="/load_model")
    count()
    assert result is None, f"/load_model accepted {model!r}: {result}"
    if len(json.dumps([model, token], ensure_ascii=False).encode()) > Limits().event_body_bytes:  # "\x00": 6 bytes
        assert "the body is larger than" in error and "send less" in error, error
    elif token != ADMIN:
        assert "admin token" in error, error
    still_serving(server)


@given(limit=st.one_of(json_values, st.integers(-(2**40), 2**40)))
@fuzz_settings(10)
def test_gradio_loads_with_hostile_limits(server, limit):
    try:
        json.dumps(limit, allow_nan=False)
    except (ValueError, TypeError):
        return
    result, error = gradio_call(server, limit, api_name="/loads")
    count()
    assert (result is None) != (error is None)
    still_serving(server)


# ------------------------------------------------------------------ Gradio API, raw JSON (NaN, inf, arity)
special = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, -1.0, -1e308, 1e308, 5e-324])


@given(
    temperature=st.one_of(special, numbers),
    max_tokens=st.one_of(special, max_tokens),
    extra=st.lists(json_values, max_size=3),
    nan_history=st.booleans(),
)
@fuzz_settings(20)
def test_gradio_chat_with_nan_inf_and_wrong_arity(server, temperature, max_tokens, extra, nan_history):
    history = [{"role": "user", "content": math.nan}] if nan_history else []
    data = ["What is a bond?", history, None, temperature, max_tokens, *extra]
    with GradioRaw(server.url, timeout=60) as g:
        out = g.call(server.fns["chat"], data)
    count()
    assert out.join_status != 500, out.join_text[:300]
    assert_clean(out.text, ADMIN)
    if out.joined:
        assert out.success is not None, f"no answer within 60 s: {out.raw}"
        if not out.success:
            assert out.error and "unexpected server error" not in out.error, out.error
            finite = all(
                v is None or (isinstance(v, (int, float)) and math.isfinite(v)) for v in (temperature, max_tokens)
            )
            if not finite and not extra and not nan_history:  # (a NaN message is reported first)
                assert "finite" in out.error or "must be" in out.error or "range" in out.error, out.error
    else:
        assert out.join_status in (400, 422), (out.join_status, out.join_text[:300])
    still_serving(server)


# ------------------------------------------------------------------ the OpenAI-compatible API (/v1; no API keys here)
V1_FIELDS = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "chat_template_kwargs",
    "n",
    "tools",
    "logprobs",
    "response_format",
    "user",
    "frequency_penalty",
    "__proto__",
    "../x",
]
v1_content = st.one_of(
    st.text(max_size=40),
    large,
    json_values,
    st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "image_url", "input_audio"]), "text": st.text(max_size=20)}
        ),
        max_size=3,
    ),
)
v1_messages = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool", 5]), "content": v1_content},
            optional={"tool_calls": json_values},
        ),
        min_size=1,
        max_size=4,
    ),
    json_values,
)
v1_bodies = st.one_of(
    st.fixed_dictionaries(
        {"model": st.one_of(st.just("a"), keys), "messages": v1_messages},
        optional={
            "max_tokens": st.one_of(st.integers(-5, 8), special, json_values),
            "temperature": st.one_of(special, numbers, json_values),
            "stream": st.one_of(st.booleans(), json_values),
            "stream_options": st.one_of(st.just({"include_usage": True}), json_values),
            "stop": st.one_of(st.text(max_size=5), st.lists(st.text(max_size=5), max_size=6)),
            "chat_template_kwargs": json_values,
            "n": st.integers(-1, 3),
            "tools": json_values,
            "seed": json_values,
        },
    ),
    st.dictionaries(st.sampled_from(V1_FIELDS), json_values, max_size=5),
    json_values,
)


def check_v1(r: httpx.Response, text: str) -> None:
    TALLY.response(r.status_code, text)
    if r.status_code == 500 or has_traceback(text):
        TALLY.add(errors=1)
    assert r.status_code in (200, 400, 404, 405, 413), (r.status_code, text[:300])
    assert_clean(text, ADMIN, SURFACE_HF_TOKEN)
    if r.status_code != 200:  # OpenAI's error object, naming what to change
        err = json.loads(text)["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"], text[:300]
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert text.rstrip().endswith("data: [DONE]"), text[-300:]
    else:
        assert json.loads(text)["object"] == "chat.completion", text[:300]


@given(
    body=st.one_of(
        v1_bodies.map(lambda b: json.dumps(b).encode()),
        st.binary(max_size=200),
        st.sampled_from([b"", b"{", b"[" * 5000, b'{"model": NaN}']),
    ),
    path=st.sampled_from(["/v1/chat/completions", "/v1/chat/completions", "/v1/models", "/v1/completions"]),
)
@fuzz_settings(60)
def test_openai_api_with_hostile_bodies(server, body, path):
    with httpx.stream(
        "POST", server.url + path, content=body, timeout=120, headers={"Content-Type": "application/json"}
    ) as r:
        text = r.read().decode("utf-8", "replace")
    count()
    check_v1(r, text)
    still_serving(server)


# ------------------------------------------------------------------ Gradio's queue, raw (FileData, bytes, fn_index)
FILE_TARGETS = [
    "/proc/self/environ",
    "/etc/passwd",
    "/dev/zero",
    "models.yaml",
    "../../../../proc/self/environ",
    "file:///etc/passwd",
    "/proc/self/cmdline",
    "~/.cache/huggingface/token",
]
file_refs = st.builds(
    lambda path, shape: {
        "path": {"path": path, "meta": {"_type": "gradio.FileData"}},
        "url": {"url": path, "path": path, "meta": {"_type": "gradio.FileData"}},
        "bare": {"path": path, "_type": "gradio.FileData"},
        "message": {"role": "user", "content": {"path": path, "meta": {"_type": "gradio.FileData"}}},
    }[shape],
    st.sampled_from(FILE_TARGETS),
    st.sampled_from(["path", "url", "bare", "message"]),
)
fn_indexes = st.one_of(
    st.integers(-5, 40),
    st.integers(-(2**70), 2**70),
    st.none(),
    st.text(max_size=6),
    st.floats(allow_nan=False),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
)


def _with_file(data: list, ref: dict, where: int) -> list:
    if not data:
        return [ref]
    data = list(data)
    slot = where % len(data)
    data[slot] = [data[slot], ref] if where % 2 else ref
    return data


join_bodies = st.one_of(
    st.builds(
        lambda fi, data, ref, where: {"data": _with_file(data, ref, where), "fn_index": fi, "session_hash": "fuzz"},
        fn_indexes,
        st.lists(json_values, max_size=6),
        file_refs,
        st.integers(0, 12),
    ),
    st.fixed_dictionaries(
        {"data": st.lists(json_values, max_size=6), "fn_index": fn_indexes},
        optional={
            "session_hash": st.one_of(st.text(max_size=20), json_values),
            "trigger_id": json_values,
            "event_data": json_values,
        },
    ),
    json_values,
)


@given(
    body=st.one_of(
        join_bodies.map(lambda b: json.dumps(b).encode()),
        st.binary(max_size=200),
        st.sampled_from([b"", b"{", b"[" * 20_000, b"\xff\xfe\x00", b'{"data": [NaN], "fn_index": 15}']),
    ),
    route=st.sampled_from(
        [
            "/gradio_api/queue/join",
            "/gradio_api/call/chat",
            "/gradio_api/call/health",
            "/gradio_api/call/respond",
            "/gradio_api/run/predict",
        ]
    ),
)
@fuzz_settings(400)
def test_gradio_routes_with_file_references_bytes_and_stray_fn_indexes(server, body, route):
    r = httpx.post(server.url + route, content=body, timeout=60, headers={"Content-Type": "application/json"})
    count()
    check_rest(r, {200, 400, 404, 413, 422, 429})
    if b"gradio.FileData" in body:
        assert r.status_code in (400, 404, 413, 429), (route, body[:200], r.status_code, r.text[:200])
    if r.status_code != 200:
        assert r.json().get("error"), r.text[:200]
    still_serving(server)


# ------------------------------------------------------------------ Jinja in every string field of /v1 (issue 25)
# Each payload, if a template ever rendered it, would print MARK (or loop for ever): the answer must never hold MARK
# and must come quickly. Model "a" takes no template variables, so chat_template_kwargs is always a 400 here.
MARK = "QZJ" + "WKV"
JINJA = [
    "{{ 'QZJ' ~ 'WKV' }}",
    "{% for i in range(10**9) %}{% for j in range(10**9) %}x{% endfor %}{% endfor %}",
    "{{ 'lorem ipsum ' * 200000 }}",
    "{% set x = cycler.__init__.__globals__ %}{{ x }}",
    f"{{% raw %}}{{{{ 1 }}}}{{% endraw %}}{{{{ '{MARK[:3]}' + '{MARK[3:]}' }}}}",
    "{{ messages }}",
    "{{ raise_exception('x') }}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{#",
    "{{",
    "{% if %}",
]
jinja = st.one_of(
    st.sampled_from(JINJA),
    st.builds(lambda a, j, b: a + j + b, st.text(max_size=8), st.sampled_from(JINJA), st.text(max_size=8)),
)
JINJA_FIELDS = [
    "content",
    "name",
    "system",
    "stop",
    "user",
    "model",
    "kwarg_key",
    "kwarg_value",
    "chat_template",
    "part_text",
    "assistant",
]


def jinja_body(where: str, payload: str, stream: bool) -> dict:
    msgs = [{"role": "user", "content": "What is EBITDA?"}]
    body: dict = {"model": "a", "messages": msgs, "max_tokens": 2, "stream": stream}
    if where == "content":
        msgs[0]["content"] = payload
    elif where == "name":
        msgs[0]["name"] = payload
    elif where == "system":
        body["messages"] = [{"role": "system", "content": payload}, *msgs]
    elif where == "assistant":
        body["messages"] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": payload}, *msgs]
    elif where == "part_text":
        msgs[0]["content"] = [{"type": "text", "text": payload}]
    elif where in ("stop", "user", "model"):
        body[where] = payload[:200] if where == "stop" else payload
    elif where == "kwarg_key":
        body["chat_template_kwargs"] = {payload[:60]: True}
    elif where == "kwarg_value":
        body["chat_template_kwargs"] = {"enable_thinking": payload[:1000]}
    else:
        body["chat_template_kwargs"] = {"chat_template": payload}
    return body


@given(where=st.sampled_from(JINJA_FIELDS), payload=jinja, stream=st.booleans())
@fuzz_settings(40)
def test_openai_api_with_jinja_in_every_string_field(server, where, payload, stream):
    t0 = __import__("time").monotonic()
    with httpx.stream(
        "POST", server.url + "/v1/chat/completions", json=jinja_body(where, payload, stream), timeout=120
    ) as r:
        text = r.read().decode("utf-8", "replace")
    took = __import__("time").monotonic() - t0
    count()
    check_v1(r, text)
    assert MARK not in text, (where, payload, text[:300])
    assert took < 60, (where, payload, took)
    if where.startswith("kwarg") or where == "chat_template":
        assert r.status_code == 400 and "chat_template_kwargs" in text, (where, r.status_code, text[:300])
    still_serving(server)


# ------------------------------------------------------------------ huge and non-finite numbers in /fit (issue 25)
LLAMA_CONFIG = json.loads((REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
FIT_FIELDS = [
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "rope_theta",
    "num_local_experts",
    "sliding_window",
    "tie_word_embeddings",
    "rms_norm_eps",
    "bos_token_id",
    "rope_scaling",
    "x",
]
fit_numbers = st.one_of(
    st.sampled_from(
        [
            "1e309",
            "-1e309",
            "1e308",
            "-1e308",
            str(10**40),
            "-" + str(10**40),
            "NaN",
            "Infinity",
            "-Infinity",
            str(2**63),
            str(2**64 + 1),
            "1e-400",
            "0",
            "-1",
            "0.5",
            "1e15",
            "1e16",
            "[1e309]",
            '{"factor": 1e308, "rope_type": "linear"}',
            '{"factor": NaN}',
        ]
    ),
    st.integers(-(2**80), 2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: json.dumps(f, allow_nan=True)),
)


@given(field=st.sampled_from(FIT_FIELDS), value=fit_numbers, nested=st.booleans(), tab=st.booleans())
@fuzz_settings(40)
def test_fit_with_huge_and_non_finite_numbers(server, field, value, nested, tab):
    cfg = dict(LLAMA_CONFIG)
    if nested:
        cfg = {
            "model_type": "gemma3",
            "architectures": ["Gemma3ForConditionalGeneration"],
            "text_config": {**cfg, "model_type": "gemma3_text", field: "__V__"},
        }
    else:
        cfg[field] = "__V__"
    text = json.dumps(cfg).replace('"__V__"', value)
    with GradioRaw(server.url) as raw:
        if tab:
            fn = next(
                d["id"] for d in server.config_deps if d["targets"] and list(d["targets"][0])[0] == server.fit_button
            )
            out = raw.call(fn, ["", text, "l40s", 1, None, "auto", "none", 0.9], timeout=60)
        else:
            out = raw.call(server.fns["fit"], [None, text, "l40s", 1, None, None, None, None, None, None], timeout=60)
    count()
    TALLY.response(200 if out.success else 400, out.text)
    assert out.joined and out.success is not None, (field, value, out.join_status, out.raw)
    if not out.success:
        if "unexpected server error" in (out.error or "") or has_traceback(out.error or ""):
            TALLY.add(errors=1)
        assert "unexpected server error" not in out.error and "OverflowError" not in out.error, (
            field,
            value,
            out.error,
        )
        assert out.error.strip(), (field, value)
    assert out.seconds < 30, (field, value, out.seconds)
    assert_clean(out.text, ADMIN)
    still_serving(server)


def test_still_serving_after_the_fuzzing(server):
    """The same engine answers a normal chat, and the server logged no traceback for any of it."""
    reply, error = gradio_call(server, "What is a bond?", [], None, 0.0, 8, api_name="/chat")
    assert error is None and reply, error
    still_serving(server)
    log = server.log_path.read_text(errors="replace")
    assert ADMIN not in log and SURFACE_HF_TOKEN not in log
    surprises = [line for line in log.splitlines() if "unexpected" in line and "finspace" in line]
    assert not surprises, "the boundary caught unexpected exceptions:\n" + "\n".join(surprises[:10])
    print(f"fuzz: {TALLY.inputs} inputs so far")
