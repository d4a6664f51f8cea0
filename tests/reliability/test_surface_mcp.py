"""MCP (POST /gradio_api/mcp/, issue 34) on the shared "surface" server: bad input and fuzzed tool arguments.

The server is conftest's ``surface_server``: `python app.py`, tiny models, vLLM on CPU, the admin token and a
fake HF_TOKEN set, loopback URLs NOT allowed (the test-only FINSPACE_TEST_MCP_FETCH_LOOPBACK is off). Every input
gets an MCP tool error (``isError``) or a 4xx naming the reason: never a 5xx, never a traceback, never a secret;
nothing hangs (each request has a deadline), and after each the engine is the same (model, load, processes).
Refused URLs (this machine, the metadata address, file:) are refused before any connection: no test here sends
traffic anywhere but the server on 127.0.0.1.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rel_utils import SURFACE_ADMIN, SURFACE_HF_TOKEN, TALLY, assert_clean, baseline, env_flag, still_serving

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

MCP = "/gradio_api/mcp/"
TOOLS = [
    "will_it_fit",
    "extract_matrix",
    "ask_document",
    "models",
    "health",
    "scores",
    "company_filings",
    "company_facts",
]
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SCALE = env_flag("FINSPACE_FUZZ_SCALE", 1.0)
ALLOWED = {200, 202, 400, 401, 404, 405, 406, 413, 415, 422, 429, 431}


@pytest.fixture(scope="module")
def server(surface_server):
    surface_server.baseline = baseline(surface_server)
    assert surface_server.baseline[2], "no engine process found"
    return surface_server


def post(server, body: bytes, headers: dict | None = None, timeout: float = 120) -> httpx.Response:
    r = httpx.post(server.url + MCP, content=body, headers={**ACCEPT, **(headers or {})}, timeout=timeout)
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    assert r.status_code < 500, f"{r.status_code} from MCP: {r.text[:300]}"
    assert r.status_code in ALLOWED, (r.status_code, r.text[:300])
    assert_clean(r.text, SURFACE_ADMIN, SURFACE_HF_TOKEN)
    return r


def call(server, name, arguments, headers=None, raw: bytes | None = None) -> dict:
    """One tools/call as JSON-RPC (the stateless transport needs no session): the response object."""
    body = (
        raw
        if raw is not None
        else json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        ).encode()
    )
    r = post(server, body, headers)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    return r.json()


def tool_error(server, name, arguments, headers=None) -> str:
    out = call(server, name, arguments, headers)
    result = out.get("result") or {}
    assert result.get("isError") is True, out
    text = "".join(c.get("text", "") for c in result.get("content", []))
    assert text and "Traceback" not in text and str(server.workdir) not in text, text
    return text


# ------------------------------------------------------------------ the bad inputs the issue names
@pytest.mark.parametrize(
    "name, arguments, phrase",
    [
        ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
        ("", {}, "unknown tool ''"),
        ("will_it_fit", {"repo": 5}, "arguments.repo must be text"),
        ("will_it_fit", {"gpus": [1]}, "arguments.gpus must be a whole number"),
        ("will_it_fit", {"gpu_memory_utilization": "all"}, "must be a number"),
        ("extract_matrix", {"documents": {"url": "https://x"}}, "arguments.documents must be a list"),
        ("extract_matrix", {"documents": [{"url": "https://x/a.pdf"}], "fields": 7}, "preset name (text) or a list"),
        (
            "ask_document",
            {"question": ["q"], "document": {"url": "https://x/a.pdf"}},
            "arguments.question must be text",
        ),
        # a URL to this machine, the metadata address, file: (refused before any connection)
        ("ask_document", {"question": "q", "document": {"url": "http://127.0.0.1:7860/health"}}, "this machine"),
        ("ask_document", {"question": "q", "document": {"url": "http://localhost/x.pdf"}}, "this machine"),
        ("ask_document", {"question": "q", "document": {"url": "http://[::1]/x.pdf"}}, "this machine"),
        ("ask_document", {"question": "q", "document": {"url": "http://0.0.0.0/x.pdf"}}, "this machine"),
        (
            "ask_document",
            {"question": "q", "document": {"url": "http://169.254.169.254/latest/meta-data/"}},
            "link-local",
        ),
        ("extract_matrix", {"documents": [{"url": "http://10.0.0.8/10-k.pdf"}]}, "private network"),
        ("extract_matrix", {"documents": [{"url": "file:///proc/self/environ"}]}, "only public http(s)"),
        ("extract_matrix", {"documents": [{"upload": "/proc/self/environ", "filename": "e.txt"}]}, "upload route"),
        ("extract_matrix", {"documents": [{"upload": "../../models.yaml"}]}, "upload route"),
        # switching is not a tool without the admin token
        ("load_model", {"model": "b"}, "needs the admin token"),
    ],
)
def test_bad_tool_calls_are_tool_errors_naming_the_fix(server, name, arguments, phrase):
    text = tool_error(server, name, arguments)
    assert phrase in text, text
    still_serving(server)


def test_ten_megabyte_arguments_are_tool_errors_and_a_huge_body_is_413(server):
    ten = "x" * (10 << 20)
    assert "arguments.question is too long" in tool_error(
        server, "ask_document", {"question": ten, "document": {"url": "https://x/a.pdf"}}
    )
    assert "arguments.documents[0].filename is too long" in tool_error(
        server, "extract_matrix", {"documents": [{"data": "aGk=", "filename": ten}]}
    )
    assert "arguments.repo is too long" in tool_error(server, "will_it_fit", {"repo": ten})
    r = post(server, b"{" + b" " * (100 << 20) + b"}")
    assert r.status_code == 413 and "send documents by url" in r.json()["error"], r.text[:300]
    still_serving(server)


def test_a_wrong_token_gets_no_switch_and_the_right_one_lists_it(server):
    listed = call(server, "", {}, raw=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode())
    assert {t["name"] for t in listed["result"]["tools"]} == set(TOOLS)
    wrong = {"Authorization": "Bearer not-the-token-0123456789"}
    assert "needs the admin token" in tool_error(server, "load_model", {"model": "b"}, wrong)
    right = {"Authorization": f"Bearer {SURFACE_ADMIN}"}
    listed = call(server, "", {}, right, raw=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode())
    assert {t["name"] for t in listed["result"]["tools"]} == set(TOOLS) | {"load_model"}
    tool_error(server, "load_model", {"model": "big"}, right)  # the planner refuses it: nothing changes
    still_serving(server)


def test_arguments_that_are_not_an_object_are_a_json_rpc_error(server):
    for arguments in ([1, 2], "x", 5):
        out = call(server, "models", arguments)
        assert out.get("error", {}).get("code") == -32602, out  # the SDK's own check of the params: invalid params
    still_serving(server)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b'"tools/call"',
        b'{"jsonrpc": "2.0"}',
        b'{"jsonrpc": "2.0", "id": 1}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "health", "arguments": "x"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "file:///etc/passwd"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}',
        b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "id": 2}',
    ],
)
def test_malformed_json_rpc_is_a_4xx_or_a_json_rpc_error(server, body):
    r = post(server, body)
    if r.status_code == 200:
        out = r.json()
        assert "error" in out or "result" in out, out
    still_serving(server)


# ------------------------------------------------------------------ fuzzing tool arguments
HOSTILE_URLS = [
    "http://127.0.0.1:7860/health",
    "http://localhost:7860/",
    "http://[::1]/",
    "http://0.0.0.0/",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://[fe80::1%25eth0]/",
    "file:///etc/passwd",
    "file:/proc/self/environ",
    "gopher://127.0.0.1:6379/_INFO",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://10.0.0.1/a.pdf",
    "http://192.168.1.1/",
    "//127.0.0.1/a.pdf",
    "ftp://x/a.pdf",
    "",
    " ",
    "http://user:pass@127.0.0.1/",
    "javascript:alert(1)",
    "data:text/plain,hi",
]
PATHS = [
    "/etc/passwd",
    "../x",
    "../../models.yaml",
    "/proc/self/environ",
    "~/.ssh/id_rsa",
    "a\x00b",
    "/dev/zero",
    "C:\\Windows\\win.ini",
    "%2e%2e%2fx",
    "models.yaml",
    "a",
    "/tmp",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4), max_leaves=16
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "url": st.one_of(st.sampled_from(HOSTILE_URLS), json_values),
        "upload": st.one_of(st.sampled_from(PATHS), json_values),
        "data": st.one_of(st.text(max_size=40), json_values),
        "filename": st.one_of(st.sampled_from(PATHS), json_values),
        "path": st.sampled_from(PATHS),
    },
)
arguments = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"documents": st.one_of(st.lists(documents, max_size=4), json_values)}, optional={"fields": json_values}
    ),
    st.fixed_dictionaries(
        {"question": st.one_of(st.text(max_size=50), json_values), "document": documents},
        optional={"max_tokens": json_values},
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "config_json": st.one_of(st.text(max_size=60), json_values),
            "repo": st.sampled_from(PATHS + ["org/repo", "a/b"]),
            "gpu": json_values,
            "gpus": json_values,
            "max_model_len": json_values,
        },
    ),
)
names = st.one_of(
    st.sampled_from(TOOLS + ["load_model", "load_model ", "LOAD_MODEL", "../health", "health\x00"]),
    st.text(max_size=30),
)
auth = st.sampled_from(
    [
        {},
        {"Authorization": "Bearer nope-nope-nope-nope"},
        {"Authorization": "Basic x"},
        {"Authorization": "Bearer " + "x" * 70_000},
        {"Authorization": f"Bearer {SURFACE_ADMIN}"},
    ]
)


@given(name=names, args=arguments, headers=auth)
@settings(
    max_examples=max(1, int(120 * SCALE)),
    deadline=None,
    database=None,
    print_blob=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
def test_fuzz_tool_arguments(server, name, args, headers):
    if name.strip().lower() == "load_model" and headers.get("Authorization", "").endswith(SURFACE_ADMIN):
        headers = {}  # a real switch is not what this module tests (the model must never change)
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": args}}
    ).encode()
    r = post(server, body, headers)
    if r.status_code == 200:
        out = r.json()
        result = out.get("result")
        assert result is not None or "error" in out, out
        if result is not None and name in TOOLS[:3]:  # the tools that take documents: all these inputs are refused
            assert result.get("isError") is True, (name, str(args)[:200], str(result)[:300])
    still_serving(server)
