"""Tool calling's bad inputs against a real `python app.py` (issue 34): each is a 4xx whose message names the
field and the fix, never a 5xx or a traceback, nothing hangs, and the engine stays up and serves after them.

The server's model "t" is the tiny llama with ``tool_parser: hermes`` (its own server: the shared surface
server's models must not change). The calculator's own bad expressions (9**9**9, 1/0, 10,000 parentheses,
1e309) are tests/test_calculator.py; a model that keeps calling the chat's calculator is
tests/test_chat_calculator.py; here a conversation with 50 tool rounds in a row is refused on /v1.
"""

from __future__ import annotations

import json
import random

import httpx
import pytest

from rel_utils import TALLY, assert_clean, health, start_server, tiny

pytestmark = [pytest.mark.engine, pytest.mark.timeout(2400)]

ADMIN = "adm-TOOLS-reliability-7f3a2c"
FN = {
    "type": "function",
    "function": {
        "name": "get_filing",
        "description": "A filing.",
        "parameters": {"type": "object", "properties": {"year": {"type": "integer"}}, "required": ["year"]},
    },
}
ASK = [{"role": "user", "content": "Get the 2024 report."}]
CALL = {"id": "c1", "type": "function", "function": {"name": "get_filing", "arguments": '{"year": 2024}'}}
DEEP: dict = {"type": "string"}
for _ in range(40):
    DEEP = {"type": "array", "items": DEEP}


def fn(name: str = "f", parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {"name": name, **({"parameters": parameters} if parameters else {})}}


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("rel-tools")
    models = {
        "t": {
            **tiny(model_dir, "tiny-llama", label="Tiny tools", max_model_len=2048, max_tokens=16),
            "tool_parser": "hermes",
        }
    }
    srv = start_server(
        root, models, default="t", admin_token=ADMIN, timeout=1500, env={"FINSPACE_CPU_KV_CACHE_MIB": "16"}
    )  # 2,048 tokens of the tiny llama: 4 MiB
    try:
        yield srv
    finally:
        srv.stop()


def post(server, body: dict | bytes) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = httpx.post(
        server.url + "/v1/chat/completions", content=content, timeout=300, headers={"Content-Type": "application/json"}
    )
    TALLY.add(inputs=1)
    TALLY.response(r.status_code, r.text)
    assert_clean(r.text, ADMIN)
    return r


CASES = [
    ({"tools": [fn(f"f{i}") for i in range(10_000)]}, 400, "tools", "10,000 functions"),
    ({"tools": [fn("f", DEEP)]}, 400, "tools", "tools[0].function.parameters"),
    (
        {"tools": [fn("f", {"type": "object", "properties": {"e": {"enum": list(range(5000))}}})]},
        400,
        "tools",
        "tools[0].function.parameters",
    ),
    (
        {
            "tools": [
                fn("f", {"type": "object", "properties": {"p": {"type": "string", "pattern": "((a{60}){60}){60}"}}})
            ]
        },
        400,
        "tools",
        "tools[0].function.parameters",
    ),
    ({"tools": [fn("f", {"$ref": "http://169.254.169.254/latest"})]}, 400, "tools", "tools[0].function.parameters"),
    ({"tools": "get_filing"}, 400, "tools", "must be a list"),
    ({"tools": [FN], "tool_choice": 5}, 400, "tool_choice", "tool_choice must be"),
    (
        {"tools": [FN], "tool_choice": {"type": "function", "function": {"name": "rm_rf"}}},
        400,
        "tool_choice",
        "not one of the tools sent",
    ),
    ({"tools": [FN], "parallel_tool_calls": "many"}, 400, "parallel_tool_calls", "true or false"),
    (
        {"tools": [FN], "tool_choice": "required", "response_format": {"type": "json_object"}},
        400,
        "response_format",
        "send one of them",
    ),
    (
        {
            "messages": [
                *ASK,
                {"role": "assistant", "content": None, "tool_calls": "x"},
                {"role": "tool", "content": "1"},
            ]
        },
        400,
        "messages",
        "1 to 16 calls",
    ),
    (
        {
            "messages": [
                *ASK,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{**CALL, "function": {"name": "get_filing", "arguments": "{not json"}}],
                },
                {"role": "tool", "content": "1"},
            ]
        },
        400,
        "messages",
        "not valid JSON",
    ),
    (
        {
            "messages": [
                *ASK,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {**CALL, "function": {"name": "get_filing", "arguments": json.dumps({"x": "y" * 20_000})}}
                    ],
                },
                {"role": "tool", "content": "1"},
            ]
        },
        400,
        "messages",
        "16,000",
    ),
    (
        {
            "messages": [
                *ASK,
                *[
                    {"role": "assistant", "content": None, "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                ]
                * 50,
            ]
        },
        400,
        "messages",
        "50 tool-call rounds in a row",
    ),
]


@pytest.mark.parametrize("extra, status, param, names", CASES, ids=[c[3][:30] for c in CASES])
def test_bad_tool_inputs_are_4xx_naming_the_field(server, extra, status, param, names):
    r = post(server, {"model": "t", "messages": ASK, **extra})
    assert r.status_code == status, r.text[:500]
    err = r.json()["error"]
    assert err["param"] == param and names in err["message"], err


def test_10_mb_arguments_are_refused_by_the_body_bound(server):
    huge = {**CALL, "function": {"name": "get_filing", "arguments": json.dumps({"x": "y" * 10_000_000})}}
    r = post(
        server,
        {
            "model": "t",
            "messages": [
                *ASK,
                {"role": "assistant", "content": None, "tool_calls": [huge]},
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
            ],
        },
    )
    assert r.status_code == 413 and "limit" in r.text.lower(), r.text[:300]


def test_fuzzed_tool_fields_are_never_a_server_error(server):
    rng = random.Random(34)
    values = [
        None,
        0,
        -1,
        1e308,
        "",
        "auto",
        "none",
        "required",
        [],
        {},
        [None],
        [{}],
        {"type": "function"},
        [fn("a b")],
        [fn("f", {"type": "object"})] * 3,
        {"function": {"name": 5}},
        "x" * 5000,
        True,
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": "yes"}}],
    ]
    statuses = []
    for _ in range(60):
        body = {"model": "t", "messages": ASK, "max_tokens": 2}
        for name in rng.sample(["tools", "tool_choice", "parallel_tool_calls"], rng.randint(1, 3)):
            body[name] = rng.choice(values)
        r = post(server, body)
        statuses.append(r.status_code)
        assert r.status_code in (200, 400), (body, r.status_code, r.text[:300])
    assert 400 in statuses


def test_the_engine_stays_up_and_serves_calls_after_the_bad_inputs(server):
    status, h = health(server)
    assert status == 200 and h["model"] == "t", h
    r = post(server, {"model": "t", "messages": ASK, "tools": [FN], "tool_choice": "required", "max_tokens": 64})
    assert r.status_code == 200, r.text[:300]
    calls = r.json()["choices"][0]["message"]["tool_calls"]
    assert calls and calls[0]["function"]["name"] == "get_filing"
    assert isinstance(json.loads(calls[0]["function"]["arguments"])["year"], int)
    TALLY.add(faults=0, survived=1)
