"""Tool calls read by vLLM's own parsers from recorded replies of the catalogue's model families, whole and in
multi-token deltas, through the engine's reasoning split (engine/stream.py) and the /v1 deltas
(openai_api/toolcalls.py): what a real Qwen 3, Llama 3.1 and Gemma 3 write, without a GPU."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.engine.stream import split
from finspace.errors import BadInput
from finspace.openai_api.toolcalls import joined, tool_deltas
from finspace.tools import registry
from finspace.tools.calls import CallReader, forced_schema
from finspace.tools.spec import ToolRequest, check_rounds, parse_tools, tool_calls

REPLIES = Path(__file__).parent / "data" / "tool_replies"
GET_FILING = {
    "type": "function",
    "function": {
        "name": "get_filing",
        "description": "A company's filing.",
        "parameters": {
            "type": "object",
            "properties": {
                "ticker": {"type": "string", "enum": ["AAPL", "MSFT", "NVDA"]},
                "form": {"type": "string", "enum": ["10-K", "10-Q"]},
                "year": {"type": "integer"},
            },
            "required": ["ticker", "form", "year"],
        },
    },
}
TOOLS = [registry.CALCULATE_SPEC, GET_FILING]


def _deltas(tok, text: str, per_delta: int | None):
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    step = per_delta or len(ids)
    return [(tok.decode(ids[i : i + step]), ids[i : i + step]) for i in range(0, len(ids), step)]


async def _reply(tok, case: dict, req: ToolRequest, per_delta: int | None) -> tuple[list[dict], dict]:
    async def raw():
        for d in _deltas(tok, case["text"], per_delta):
            yield d

    settings = ChatSettings(chat_template_kwargs={"enable_thinking": case["enable_thinking"]})
    parts = split(raw(), tok, case["reasoning"], settings, ChatInfo())
    out = [d async for d in tool_deltas(parts, CallReader(case["parser"], tok, req))]
    return out, joined(out)


@pytest.mark.parametrize("per_delta", [None, 1, 3, 7], ids=["whole", "1-token", "3-token", "7-token"])
@pytest.mark.parametrize("name", sorted(p.stem for p in REPLIES.glob("*.json")))
def test_auto_reads_each_familys_recorded_calls_whole_and_streamed(tok, name, per_delta):
    case = json.loads((REPLIES / f"{name}.json").read_text())
    req = parse_tools(TOOLS, "auto")
    deltas, message = asyncio.run(_reply(tok, case, req, per_delta))
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
    assert calls == [tuple(c) for c in case["calls"]]
    assert (message["content"] or "").strip() == case[
        "content"
    ].strip()  # the template's blank line after </think> is kept
    if case["thinking_has"]:
        assert case["thinking_has"] in message["reasoning_content"]
        assert "<tool_call>" not in (message["content"] or "")  # the tag written while thinking is no call
    else:
        assert message["reasoning_content"] is None  # enable_thinking off: no answer taken for thinking
    for d in deltas:  # no delta shows a call's text as content, however the deltas were cut
        assert not any(m in d.get("content", "") for m in ("<tool_call>", '{"name"', "[calculate(", "<|python_tag|>"))
    if calls:
        assert all(d["tool_calls"][0]["index"] == i for i, d in enumerate(x for x in deltas if "tool_calls" in x))
        assert all(c["id"].startswith("call_") for c in message["tool_calls"])


def test_text_streams_before_the_call_and_is_held_once_a_tag_may_begin(tok):
    reader = CallReader("hermes", tok, parse_tools(TOOLS))
    assert reader.feed("The margin is ") == "The margin is "
    assert reader.feed("computed: <tool") == "computed: "  # '<tool' may open <tool_call>: held
    assert reader.feed("_call>\n{\"name\": \"calculate\", ") == ""
    assert reader.feed("\"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>") == ""
    rest, calls = reader.finish()
    assert rest == "" and calls[0]["function"]["name"] == "calculate"
    plain = CallReader("hermes", tok, parse_tools(TOOLS))
    assert plain.feed("a <tool") == "a "
    assert plain.feed("s are fine>") == "<tools are fine>" and plain.finish() == ("", [])


def test_parallel_tool_calls_false_keeps_the_first_call(tok):
    case = json.loads((REPLIES / "qwen3-think-two-calls.json").read_text())
    _, message = asyncio.run(_reply(tok, case, parse_tools(TOOLS, "auto", False), 3))
    assert len(message["tool_calls"]) == 1


def test_forced_replies_follow_vllms_schema_and_parse():
    named = parse_tools(TOOLS, {"type": "function", "function": {"name": "get_filing"}})
    assert forced_schema(named) == GET_FILING["function"]["parameters"]
    reader = CallReader("llama3_json", None, named)
    assert reader.feed('{"ticker": "NVDA", ') == "" and reader.feed('"form": "10-Q", "year": 2025}') == ""
    rest, calls = reader.finish()
    assert rest == "" and calls[0]["function"]["name"] == "get_filing"
    assert json.loads(calls[0]["function"]["arguments"]) == {"ticker": "NVDA", "form": "10-Q", "year": 2025}
    required = parse_tools(TOOLS, "required", False)
    schema = forced_schema(required)
    assert schema["type"] == "array" and schema["maxItems"] == 1 and len(schema["items"]["anyOf"]) == 2
    reader = CallReader("hermes", None, required)
    reader.feed('[{"name": "calculate", "parameters": {"expression": "2*3"}}]')
    assert reader.finish()[1][0]["function"] == {"name": "calculate", "arguments": '{"expression": "2*3"}'}
    cut = CallReader("hermes", None, named)  # cut by max_tokens: the call as written, as vLLM's server returns it
    cut.feed('{"ticker": "NV')
    rest, calls = cut.finish()
    assert rest == "" and calls[0]["function"] == {"name": "get_filing", "arguments": '{"ticker": "NV'}
    many = CallReader("hermes", None, parse_tools(TOOLS, "required"))  # cut: the calls that completed
    many.feed(
        '[{"name": "calculate", "parameters": {"expression": "1+1"}},\n {"name": "calculate", "parameters": '
        '{"expression": "2"}} , {"name": "get_fil'
    )
    rest, calls = many.finish()
    assert rest == "" and [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"expression": "1+1"},
        {"expression": "2"},
    ]
    none = CallReader("hermes", None, parse_tools(TOOLS, "required"))
    none.feed('[{"name": "calcu')
    assert none.finish() == ('[{"name": "calcu', [])


@pytest.mark.parametrize(
    "tools, choice, names",
    [
        ([GET_FILING] * 2, None, "given twice"),
        ([{"type": "function", "function": {"name": f"f{i}"}} for i in range(10_000)], None, "10,000 functions"),
        ([{"type": "retrieval"}], None, "function tools only"),
        ([{"type": "function", "function": {"name": "a b"}}], None, "letters, digits"),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {
                            "type": "object",
                            "properties": {"q": {"type": "string", "pattern": "(a+)+" * 60}},
                        },
                    },
                }
            ],
            None,
            "tools[0].function.parameters",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {
                            "type": "object",
                            "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(400)},
                        },
                    },
                }
            ],
            None,
            "the limit is 32,768",
        ),
        ([{"type": "function", "function": {"name": "f", "code": "x"}}], None, "'code'"),
        ([GET_FILING], {"type": "function", "function": {"name": "calculate"}}, "not one of the tools sent"),
        ([GET_FILING], "sometimes", "tool_choice must be"),
        (None, "required", "tool_choice needs tools"),
        (
            [{"type": "function", "function": {"name": f"f{i}", "description": "d" * 3000}} for i in range(20)],
            None,
            "the limit is 32,000",
        ),
    ],
)
def test_bad_tools_name_the_field_and_the_fix(tools, choice, names):
    with pytest.raises(BadInput) as err:
        parse_tools(tools, choice)
    assert names in str(err.value)


def test_history_calls_are_checked_and_rounds_are_bounded():
    good = tool_calls(
        1, [{"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1"}'}}]
    )
    assert good[0]["function"]["arguments"] == {"expression": "1"}
    for bad, names in [
        ([], "1 to 16"),
        ([{"function": {"name": "f", "arguments": "{"}}], "not valid JSON"),
        ([{"function": {"name": "f", "arguments": "x" * 20_000}}], "16,000"),
        ([{"function": {"name": "f", "arguments": "[1]"}}], "JSON object"),
    ]:
        with pytest.raises(BadInput, match=names):
            tool_calls(1, bad)
    turn = [{"role": "assistant", "content": "", "tool_calls": good}, {"role": "tool", "content": "1"}]
    check_rounds([{"role": "user", "content": "q"}] + turn * 16)
    with pytest.raises(BadInput, match="17 tool-call rounds in a row"):
        check_rounds([{"role": "user", "content": "q"}] + turn * 17)


def test_a_model_without_a_tool_parser_answers_tools_with_a_400_naming_the_ones_that_have_one():
    from types import SimpleNamespace

    from finspace.openai_api.request import ApiError, parse_chat
    from finspace.openai_api.routes import with_tools

    entries = [
        SimpleNamespace(key="fin-pythia-1.4b", tool_parser=None),
        SimpleNamespace(key="qwen-3-8b-fin", tool_parser="hermes"),
    ]
    from finspace.engine.view import ServingView

    engine = SimpleNamespace(entry=entries[0])
    svc = SimpleNamespace(serving=ServingView(engine), catalog=SimpleNamespace(entries=entries))
    req = parse_chat({"model": "fin-pythia-1.4b", "messages": [{"role": "user", "content": "q"}], "tools": TOOLS})
    with pytest.raises(ApiError) as err:
        with_tools(svc, req)
    assert err.value.status == 400 and err.value.param == "tools"
    assert "tool_parser" in err.value.message and "qwen-3-8b-fin" in err.value.message
    engine.entry = entries[1]
    assert with_tools(svc, req).settings.tools == req.tools.specs
    forced = parse_chat(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "q"}],
            "tools": TOOLS,
            "tool_choice": "required",
            "response_format": {"type": "json_object"},
        }
    )
    with pytest.raises(ApiError, match="send one of them"):
        with_tools(svc, forced)
    none = parse_chat(
        {"model": "m", "messages": [{"role": "user", "content": "q"}], "tools": TOOLS, "tool_choice": "none"}
    )
    assert with_tools(svc, none).settings.tools is None


def test_remote_mode_passes_tools_through_and_reads_the_endpoints_calls_back(tok):
    """The endpoint's request carries the tools and past calls (arguments as JSON text, as the API takes them);
    its streamed delta.tool_calls come back as hermes text that the same reader turns into the same calls."""
    from types import SimpleNamespace

    from finspace.engine.records import ChatInfo
    from finspace.remote import chat as remote_chat

    entry = SimpleNamespace(
        key="m", system_prompt="", reasoning=None, sampling=SimpleNamespace(temperature=0.0, top_p=1.0, max_tokens=32)
    )
    history = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ]
    req = remote_chat.request_for("m", entry, 4096, history, ChatSettings(tools=tuple(TOOLS)))
    assert req["tools"] == TOOLS
    assert req["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"expression": "1+1"}'
    assert req["messages"][2] == {"role": "tool", "content": "2", "tool_call_id": "c1"}
    calls: dict = {}
    for piece in (
        {"index": 0, "id": "x", "function": {"name": "get_filing", "arguments": ""}},
        {"index": 0, "function": {"arguments": '{"ticker": "AAPL", '}},
        {"index": 0, "function": {"arguments": '"form": "10-K", "year": 2024}'}},
    ):
        remote_chat._read({"choices": [{"delta": {"tool_calls": [piece]}}]}, ChatInfo(), calls)
    text = remote_chat.tool_prompt.written_calls("hermes", [calls[0]])
    reader = CallReader("hermes", None, parse_tools(TOOLS))
    reader.feed(text)
    _, found = reader.finish()
    assert found[0]["function"]["name"] == "get_filing"
    assert json.loads(found[0]["function"]["arguments"]) == {"ticker": "AAPL", "form": "10-K", "year": 2024}


def test_templates_without_tools_get_them_written_in_the_parsers_format():
    from types import SimpleNamespace

    from finspace.tools.rendering import for_template

    msgs = [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "calculate", "arguments": {"expression": "1+1"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "2"},
        {"role": "tool", "content": "3"},
    ]
    native = SimpleNamespace(chat_template="{% for t in tools %}{{ t }}{% endfor %}")
    assert for_template(native, msgs, TOOLS, "hermes") == (msgs, TOOLS)
    plain = SimpleNamespace(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
    out, tools = for_template(plain, msgs, TOOLS, "pythonic")
    assert tools is None and [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("Be exact.") and '"get_filing"' in out[0]["content"]
    assert out[2]["content"] == '[calculate(expression="1+1")]'
    assert out[3]["content"] == "Tool result: 2\nTool result: 3"  # consecutive results: one turn
    out, _ = for_template(plain, msgs, TOOLS, "llama3_json")
    assert json.loads(out[2]["content"]) == {"name": "calculate", "parameters": {"expression": "1+1"}}
    assert for_template(plain, msgs[:2], None, "hermes") == (msgs[:2], None)  # nothing about tools: unchanged


def test_required_calls_stream_as_each_is_written_whole():
    """#41: a "required" reply's calls came all at once when the reply ended (a silent stream until then)."""
    from finspace.openai_api.toolcalls import joined, tool_deltas

    text = (
        '[{"name": "calculate", "parameters": {"expression": "1+1"}}, {"name": "calculate", "parameters": '
        '{"expression": "2"}}, {"name": "calcu'
    )

    async def parts():
        for i in range(0, len(text), 5):
            yield "", text[i : i + 5]

    async def run():
        reader = CallReader("hermes", None, parse_tools(TOOLS, "required"))
        deltas, seen = [], []
        async for d in tool_deltas(parts(), reader):
            deltas.append(d)
            seen.append(len(reader.text))  # how much of the reply had come when each delta went out
        return reader, deltas, seen

    reader, deltas, seen = asyncio.run(run())
    at = [seen[i] for i, d in enumerate(deltas) if "tool_calls" in d]
    first_end = text.index("}}") + 2
    assert len(at) == 2 and at[0] < len(text) and first_end <= at[0] < first_end + 5, (at, len(text))
    assert joined(deltas)["tool_calls"] == [{k: v for k, v in c.items()} for c in reader.calls]
    assert [json.loads(c["function"]["arguments"]) for c in reader.calls] == [
        {"expression": "1+1"},
        {"expression": "2"},
    ]
