"""Tool calling on /v1 end to end: the official `openai` client against a real `python app.py` (vLLM on CPU).

One server: "demo" (the tiny random-weight llama, tool_parser hermes) and "smollm2-135m" (the real 135M model,
hermes). A named tool_choice and "required" go through structured outputs, so even the random model's call
parses; SmolLM2 is asked for a calculator call. A full round sends a role "tool" result back, and the prompt
the engine received (FINSPACE_TEST_PROMPT_LOG) shows the tools, the call and the result, in hermes' format
(both templates lack tools: finspace writes them). The recorded Qwen 3 / Llama 3.1 / Gemma 3 replies through
the parsers are tests/test_tool_calls.py.
"""

from __future__ import annotations

import json
import os

import httpx
import openai
import pytest

from server_utils import Server
from support.catalog import demo_entry, write_catalog
from support.smollm import KEY as SMOL, catalog_entry

pytestmark = [pytest.mark.engine, pytest.mark.timeout(2400)]

GET_FILING = {
    "type": "function",
    "function": {
        "name": "get_filing",
        "description": "Fetch a company's annual or quarterly report.",
        "parameters": {
            "type": "object",
            "properties": {
                "ticker": {"type": "string", "enum": ["AAPL", "MSFT", "NVDA"]},
                "form": {"type": "string", "enum": ["10-K", "10-Q"]},
                "year": {"type": "integer", "minimum": 2000, "maximum": 2030},
            },
            "required": ["ticker", "form", "year"],
            "additionalProperties": False,
        },
    },
}
CALCULATE = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression, such as 2400 * 15 / 100.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "maxLength": 60}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    },
}
NAMED = {"type": "function", "function": {"name": "get_filing"}}
ASK = [{"role": "user", "content": "Get Apple's 2024 annual report."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir, smollm_models):
    root = tmp_path_factory.mktemp("openai-tools")
    (root / "data").mkdir()
    os.symlink(smollm_models, root / "data" / "models")  # the converted SmolLM2, as support.smollm does
    models = {
        "demo": {
            **demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Demo", max_model_len=2048, max_tokens=64),
            "tool_parser": "hermes",
        },
        SMOL: catalog_entry(max_tokens=96),
    }
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="demo"),
        env={"FINSPACE_CPU_KV_CACHE_MIB": "256", "FINSPACE_TEST_PROMPT_LOG": str(root / "prompts.jsonl")},
    )
    try:
        srv.wait(ready=True, timeout=1500)  # the first load on a busy 2-core machine took over 400 s
        srv.prompts = root / "prompts.jsonl"
        yield srv
    finally:
        srv.stop()


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)


def on(server, key: str) -> None:
    if server.health().get("model") == key:
        return
    r = httpx.post(server.url + "/load-model", json={"model": key}, headers=server.auth(), timeout=60)
    assert r.status_code == 202, r.text
    server.wait_model(key, timeout=600)


def last_prompt(server) -> str:
    return json.loads(server.prompts.read_text().splitlines()[-1])["prompt"]


def test_a_named_tool_choice_returns_a_parseable_call_on_demo(server):
    on(server, "demo")
    r = client(server).chat.completions.create(
        model="demo", messages=ASK, tools=[CALCULATE, GET_FILING], tool_choice=NAMED
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls
    args = json.loads(call.function.arguments)
    assert call.function.name == "get_filing" and call.type == "function" and call.id
    assert args["ticker"] in ("AAPL", "MSFT", "NVDA") and args["form"] in ("10-K", "10-Q")
    assert isinstance(args["year"], int) and 2000 <= args["year"] <= 2030
    assert choice.message.content is None
    prompt = last_prompt(server)
    assert "<tools>" in prompt and '"get_filing"' in prompt  # the template has no tools: finspace wrote them


def test_streaming_sends_delta_tool_calls(server):
    on(server, "demo")
    stream = client(server).chat.completions.create(
        model="demo", messages=ASK, tools=[GET_FILING], tool_choice=NAMED, stream=True
    )
    calls, finish, content = [], None, ""
    for chunk in stream:
        delta = chunk.choices[0].delta
        content += delta.content or ""
        calls += delta.tool_calls or []
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and content == ""
    assert [c.index for c in calls] == [0] and calls[0].function.name == "get_filing"
    assert json.loads(calls[0].function.arguments)["form"] in ("10-K", "10-Q")


def test_required_with_parallel_calls_off_returns_one_call(server):
    on(server, "demo")
    r = client(server).chat.completions.create(
        model="demo",
        messages=ASK,
        tools=[GET_FILING],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=256,
    )
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1
    assert set(json.loads(calls[0].function.arguments)) == {"ticker", "form", "year"}


def test_a_full_round_with_a_tool_result(server):
    on(server, "demo")
    c = client(server)
    first = c.chat.completions.create(model="demo", messages=ASK, tools=[GET_FILING], tool_choice=NAMED)
    call = first.choices[0].message.tool_calls[0]
    messages = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "10-K filed 2024-11-01: revenue 391,035"},
    ]
    second = c.chat.completions.create(
        model="demo", messages=messages, tools=[GET_FILING], tool_choice="none", max_tokens=8
    )
    assert second.choices[0].message.tool_calls is None and second.choices[0].finish_reason in ("stop", "length")
    prompt = last_prompt(server)
    assert "<tool_response>\n10-K filed 2024-11-01: revenue 391,035\n</tool_response>" in prompt
    assert (
        f'"name": "get_filing", "arguments": {call.function.arguments}' in prompt.replace("\n", " ")
        or '"name": "get_filing"' in prompt
    )
    assert "<tools>" not in prompt  # tool_choice none: the functions are not offered
    auto = c.chat.completions.create(model="demo", messages=messages, tools=[GET_FILING], max_tokens=8)
    assert auto.choices[0].message.content is not None or auto.choices[0].message.tool_calls


def test_a_named_tool_choice_returns_a_parseable_call_on_smollm2(server):
    on(server, SMOL)
    r = client(server).chat.completions.create(
        model=SMOL,
        messages=[{"role": "user", "content": "What is 15% of 2,400? Use the calculator."}],
        tools=[CALCULATE],
        tool_choice={"type": "function", "function": {"name": "calculate"}},
        temperature=0,
        max_tokens=64,
    )
    (call,) = r.choices[0].message.tool_calls
    expression = json.loads(call.function.arguments)["expression"]
    assert call.function.name == "calculate" and isinstance(expression, str) and expression.strip(), r
    print(f"SmolLM2 asked the calculator for {expression!r}")


def test_required_cut_by_max_tokens_returns_the_calls_that_completed(server):
    """#41: "required" let a model add calls until max_tokens, and the cut array came back as content with no
    tool_calls. Now the calls written whole come back (finish_reason "length": it was cut), streaming too."""
    on(server, "demo")
    c = client(server)
    r = c.chat.completions.create(
        model="demo", messages=ASK, tools=[GET_FILING], tool_choice="required", max_tokens=90, temperature=0, seed=1
    )
    choice = r.choices[0]
    assert choice.finish_reason == "length" and choice.message.content is None, choice
    assert choice.message.tool_calls, choice
    for call in choice.message.tool_calls:
        assert call.function.name == "get_filing"
        assert set(json.loads(call.function.arguments)) == {"ticker", "form", "year"}
    stream = c.chat.completions.create(
        model="demo",
        messages=ASK,
        tools=[GET_FILING],
        tool_choice="required",
        max_tokens=90,
        temperature=0,
        seed=1,
        stream=True,
    )
    calls, finish = [], None
    for chunk in stream:
        calls += chunk.choices[0].delta.tool_calls or []
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "length" and len(calls) == len(choice.message.tool_calls)


def test_required_is_bounded_to_16_calls(server):
    on(server, "demo")
    r = client(server).chat.completions.create(
        model="demo", messages=ASK, tools=[GET_FILING], tool_choice="required", max_tokens=1370, temperature=0, seed=1
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and 1 <= len(choice.message.tool_calls) <= 16, (
        choice.finish_reason,
        len(choice.message.tool_calls or []),
        r.usage,
    )


def test_a_named_call_cut_by_max_tokens_comes_back_as_written(server):
    """#41: as vLLM's own server: the call with its arguments as written and finish_reason "length"."""
    on(server, "demo")
    r = client(server).chat.completions.create(
        model="demo", messages=ASK, tools=[GET_FILING], tool_choice=NAMED, max_tokens=4, temperature=0
    )
    choice = r.choices[0]
    assert choice.finish_reason == "length" and choice.message.content is None, choice
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_filing" and call.function.arguments.startswith("{"), call
    with pytest.raises(ValueError):
        json.loads(call.function.arguments)


def test_message_errors_say_what_is_accepted(server):
    """#41: a tool result without tool_call_id is a 400 (as OpenAI); the role and image messages name what
    finspace does take."""
    on(server, "demo")
    c = client(server)
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_filing", "arguments": "{}"}}],
    }
    cases = [
        ([*ASK, assistant, {"role": "tool", "content": "10-K"}], "tool_call_id"),
        ([{"role": "bot", "content": "hi"}], "assistant, tool"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}],
            '"file" part',
        ),
    ]
    for messages, says in cases:
        with pytest.raises(openai.BadRequestError) as err:
            c.chat.completions.create(model="demo", messages=messages, tools=[GET_FILING], max_tokens=4)
        assert err.value.status_code == 400 and says in err.value.message, err.value.message
        assert "not supported" not in err.value.message and "unsupported" not in err.value.message


def test_required_streams_each_call_as_it_is_written(server):
    """#41: a "required" stream was silent until the reply ended, then sent every call at once. Now each call
    comes as soon as it is whole: the first well before the end (measured against this stream's own length)."""
    import time

    on(server, "demo")
    stream = client(server).chat.completions.create(
        model="demo",
        messages=ASK,
        tools=[GET_FILING],
        tool_choice="required",
        max_tokens=300,
        temperature=0,
        seed=1,
        stream=True,
    )
    start, calls_at, end = None, [], None
    for chunk in stream:
        now = time.monotonic()
        start = start or now
        if chunk.choices and chunk.choices[0].delta.tool_calls:
            calls_at.append(now)
        if chunk.choices and chunk.choices[0].finish_reason:
            end = now
    assert len(calls_at) >= 2 and end is not None, calls_at
    assert end - calls_at[0] > 0.3 * (end - start), (calls_at[0] - start, end - start)
