"""The filing tools in the chat's tool loop (issue 39): recorded Qwen 3, Llama 3.1 and Gemma 3 replies calling
outline, search, read_page and filer_facts read by vLLM's own parsers (whole and in multi-token deltas), run on the
real 10-Ks in shared/filings, and the loop on a scripted engine: the result goes into the next round, bad input is
the tool's result and the conversation goes on, the round bound ends a model that calls forever. The loop on the
real engine with SmolLM2 (a forced first search): tests/test_smollm.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from finspace.documents.convert import convert
from finspace.documents.limits import DocumentLimits
from finspace.engine import tool_loop as loop
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.grounding.calls import runner
from finspace.tools import filing, registry
from finspace.tools.spec import parse_tools
from support.filings import filing as real_filing
from test_tool_calls import _reply

REPLIES = Path(__file__).parent / "data" / "filing_tool_replies"
APPLE, NVIDIA = "aapl-10-k-2024-11-01", "nvda-10-k-2025-02-26"
TOOLS = [registry.CALCULATE_SPEC, *filing.specs()]


@pytest.fixture(scope="module")
def library():
    return {d: convert(real_filing(f"{d}.html"), f"{d}.html", DocumentLimits()) for d in (APPLE, NVIDIA)}


# what each recorded call gives on the real filings (read from the filings: Apple's FY2024 income statement is
# page 31, printed 29, total net sales 391,035 million; NVIDIA's revenue tag us-gaap:Revenues)
EXPECT = {
    "search": "[aapl-10-k-2024-11-01 page 31 (printed 29), the income statement]",
    "read_page": "[aapl-10-k-2024-11-01 page 30",
    "filer_facts": "391,035 millions USD (page 31)",
    "outline": "statements: income statement p. ",
}


@pytest.mark.parametrize("per_delta", [None, 1, 3, 7], ids=["whole", "1-token", "3-token", "7-token"])
@pytest.mark.parametrize("name", sorted(p.stem for p in REPLIES.glob("*.json")))
def test_each_familys_recorded_filing_tool_calls_parse_and_run_on_the_real_filings(tok, library, name, per_delta):
    case = json.loads((REPLIES / f"{name}.json").read_text())
    _deltas, message = asyncio.run(_reply(tok, case, parse_tools(TOOLS, "auto"), per_delta))
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
    assert calls == [tuple(c) for c in case["calls"]]
    assert (message["content"] or "").strip() == case["content"].strip()
    run = runner(library, 400)
    for c in message["tool_calls"]:
        step = run(c["function"]["name"], c["function"]["arguments"])
        assert step.ok, step
        assert len(step.result) <= 400 * 4 + 4, len(step.result)  # the bound: 400 tokens of ~4 characters
        if c["function"]["name"] == "search" and "document" not in json.loads(c["function"]["arguments"]):
            assert "nvda-10-k-2025-02-26 page" in step.result  # no document named: all of them
        elif c["function"]["name"] == "filer_facts" and NVIDIA in c["function"]["arguments"]:
            assert "us-gaap:Revenues" in step.result and "(page " in step.result
        else:
            assert EXPECT[c["function"]["name"]] in step.result, step.result[:600]


@pytest.mark.parametrize(
    "name, arguments, phrase",
    [
        ("read_page", {"document": APPLE, "page": 300}, "has pages 1 to 59; page 300 is not one of them"),
        (
            "read_page",
            {"document": "msft-10-k", "page": 3},
            f"there is no document 'msft-10-k'; the documents are: {APPLE}, {NVIDIA}",
        ),
        ("outline", {}, "no document was named; the documents are"),
        ("search", {"query": ""}, "search needs a query"),
        ("get_filing", {"ticker": "AAPL"}, "there is no tool 'get_filing'"),
        ("read_page", "{not json", "the arguments must be a JSON object"),
    ],
)
def test_bad_calls_are_the_tools_result_naming_the_fix(library, name, arguments, phrase):
    step = runner(library, 300)(name, arguments if isinstance(arguments, str) else json.dumps(arguments))
    assert not step.ok and step.result.startswith("error: ") and phrase in step.result, step.result


def test_a_100000_character_query_is_bounded(library):
    step = runner(library, 300)("search", json.dumps({"query": "total net sales " * 6250}))
    assert step.ok and "query cut to its first 1,000 of 100,000 characters" in step.result
    assert len(step.arguments) <= 2000 and len(step.result) <= 300 * 4 + 4


class Scripted:
    """An engine whose replies are given, one per round; it records what each round was sent."""

    def __init__(self, *replies: str):
        self.entry = SimpleNamespace(key="m", tool_parser="hermes")
        self.tokenizer = None
        self.replies, self.sent = list(replies), []

    async def chat_parts(self, messages, settings, info):
        self.sent.append((messages, settings))
        text = self.replies.pop(0) if self.replies else SEARCH
        info.prompt_tokens, info.output_tokens, info.finish_reason = 10, len(text) // 4, "stop"
        for i in range(0, len(text), 5):
            yield "", text[i : i + 5]


SEARCH = '<tool_call>\n{"name": "search", "arguments": {"query": "total net sales 2024"}}\n</tool_call>'


def rounds(engine, library, **kw):
    info = ChatInfo()

    async def go():
        return [
            p
            async for p in loop.calculator_rounds(
                engine,
                [{"role": "user", "content": "Apple's total net sales in fiscal 2024?"}],
                ChatSettings(),
                info,
                specs=tuple(TOOLS),
                run=runner(library, 300),
                **kw,
            )
        ]

    return "".join(a for _, a in asyncio.run(go())), info


def test_a_search_result_goes_into_the_next_round_and_is_a_step(library):
    engine = Scripted(SEARCH, "Total net sales were $391,035 million [aapl-10-k-2024-11-01 p. 31].")
    answer, info = rounds(engine, library)
    assert answer == "Total net sales were $391,035 million [aapl-10-k-2024-11-01 p. 31]."
    [step] = info.tool_steps
    assert step.name == "search" and step.title == "📄 search: total net sales 2024"
    second = engine.sent[1][0]
    assert second[-1]["role"] == "tool" and "| Total net sales | 391,035 |" in second[-1]["content"]
    assert {t["function"]["name"] for t in engine.sent[0][1].tools} == {"calculate", *filing.NAMES}


def test_a_bad_call_is_answered_and_the_conversation_goes_on(library):
    bad = '<tool_call>\n{"name": "read_page", "arguments": {"document": "aapl-10-k-2024-11-01", "page": 999}}\n</tool_call>'
    engine = Scripted(bad, "I could not read that page.")
    answer, info = rounds(engine, library)
    assert answer == "I could not read that page." and not info.tool_steps[0].ok
    assert "page 999 is not one of them" in engine.sent[1][0][-1]["content"]


def test_a_model_that_calls_tools_forever_is_ended_by_the_round_bound_with_a_line_saying_so(library):
    engine = Scripted(*[SEARCH] * 50)
    _answer, info = rounds(engine, library, max_rounds=3)
    assert len(info.tool_steps) == 3 and len(engine.sent) == 4 and engine.sent[-1][1].tools is None
    assert "tool rounds ended at the bound (3): answered without tools" in info.notes


def test_a_forced_first_round_calls_search_through_the_tools_schema(library):
    engine = Scripted('{"query": "total net sales 2024"}', "It was $391,035 million.")
    _answer, info = rounds(engine, library, force=True, first=filing.SEARCH)
    schema = engine.sent[0][1].json_schema
    assert schema["properties"]["query"]["type"] == "string" and info.tool_steps[0].name == "search"
    assert "391,035" in engine.sent[1][0][-1]["content"]
