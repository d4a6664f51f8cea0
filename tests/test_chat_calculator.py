"""The chat's calculator rounds (finspace.engine.tool_loop) on a scripted engine: the model's call is run, its result
fed back, the answer streamed without the call's text; a model that keeps calling is stopped after MAX_ROUNDS
calls and answers without the tool. The page's steps, usage line and export (finspace.ui). The same on the real
engine and page: tests/test_browser_calculator.py."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.engine import tool_loop as loop
from finspace.ui import chat as convo
from finspace.ui import saved

CALL = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "2400 * 15%"}}\n</tool_call>'


class Scripted:
    """An engine whose replies are given, one per round; it records what each round was sent."""

    def __init__(self, *replies: str):
        self.entry = SimpleNamespace(key="m", tool_parser="hermes")
        self.tokenizer = None
        self.replies, self.sent = list(replies), []

    async def chat_parts(self, messages, settings, info):
        self.sent.append((messages, settings))
        text = self.replies.pop(0) if self.replies else CALL
        info.prompt_tokens, info.output_tokens, info.finish_reason = 10, len(text) // 4, "stop"
        for i in range(0, len(text), 5):  # several characters a delta, as finspace's deltas come
            yield "", text[i : i + 5]


def run(engine, force=False):
    info = ChatInfo()

    async def go():
        return [
            p
            async for p in loop.calculator_rounds(
                engine, [{"role": "user", "content": "15% of 2,400?"}], ChatSettings(), info, force=force
            )
        ]

    return "".join(a for _, a in asyncio.run(go())), info


def test_a_call_is_run_and_its_result_fed_back_for_the_answer():
    engine = Scripted(f"Let me compute. {CALL}", "15% of 2,400 is 360.")
    answer, info = run(engine)
    assert answer == "Let me compute. 15% of 2,400 is 360."  # the call's text never shown
    assert [(s.name, s.result, s.ok) for s in info.tool_steps] == [("calculate", "360", True)]
    second_messages, second_settings = engine.sent[1]
    assert second_messages[-1] == {
        "role": "tool",
        "tool_call_id": second_messages[-2]["tool_calls"][0]["id"],
        "content": "360",
    }
    assert second_settings.tools and second_settings.tools[0]["function"]["name"] == "calculate"
    assert info.output_tokens > 0 and info.prompt_tokens == 10


def test_always_forces_the_first_round_through_the_tools_schema():
    engine = Scripted('{"expression": "1/0"}', "It cannot be computed.")
    answer, info = run(engine, force=True)
    first_settings = engine.sent[0][1]
    assert first_settings.json_schema["properties"]["expression"]["type"] == "string"
    assert engine.sent[1][1].json_schema is None  # later rounds are free
    assert info.tool_steps[0].result.startswith("error: division by zero") and not info.tool_steps[0].ok
    assert answer == "It cannot be computed."


def test_a_model_that_calls_50_times_is_stopped_after_the_bound():
    engine = Scripted(*[CALL] * 50)
    answer, info = run(engine)
    assert len(info.tool_steps) == loop.MAX_ROUNDS and len(engine.sent) == loop.MAX_ROUNDS + 1
    assert engine.sent[-1][1].tools is None  # the last round has no tool: the model must answer
    assert CALL in answer  # what it wrote then is text: nothing runs it


def test_steps_are_shown_collapsed_above_the_answer_counted_and_exported():
    steps = [{"name": "calculate", "arguments": '{"expression": "2400 * 15%"}', "result": "360", "ok": True}]
    usage = {"prompt_tokens": 5, "output_tokens": 9, "finish_reason": "stop", "tool_calls": 1}
    turns = [
        convo.turn("user", "15% of 2,400?"),
        {**convo.turn("assistant", "It is 360.", model="m"), "tools": steps, "usage": usage},
    ]
    shown = convo.display(turns)
    assert shown[1]["metadata"] == {"title": "🧮 calculate: 2400 * 15%", "status": "done"}
    assert "360" in shown[1]["content"] and shown[2]["content"].startswith("It is 360.")
    assert "1 calculator call" in shown[2]["content"]
    checked = saved.check_turns(turns)
    doc = saved.export_json("t", checked)
    assert doc["messages"][1]["tools"] == steps
    assert "Tool: calculate" in saved.export_markdown(doc) and "**360**" in saved.export_markdown(doc)
    assert json.dumps(doc)


def test_the_scoreboards_calc_format_lets_the_model_call_the_calculator_and_counts_the_calls():
    import pytest

    from finspace.errors import BadInput
    from finspace.scoreboard import asking as eval_prompt
    from finspace.scoreboard import score as eval_score
    from finspace.scoreboard.formats import EvalItem
    from finspace.scoreboard.run import item_settings, run_item

    item = EvalItem(id="q1", question="What is 15% of 2,400?", context="| a | 2,400 |", gold=360.0, meta={})
    plain = eval_prompt.messages("finqa", item)
    calc = eval_prompt.messages("finqa", item, prompt_format=eval_prompt.PROMPT_FORMAT_CALC)
    assert "calculate tool" in calc[0]["content"] and "calculate" not in plain[0]["content"]
    assert calc[1] == plain[1]
    with pytest.raises(BadInput, match=r"finspace-eval-v1\+calc"):
        eval_prompt.check_format("v2")
    engine = Scripted(CALL, "It is 360.\nAnswer: 360")
    result = asyncio.run(
        run_item(
            engine,
            "finqa",
            item,
            item_settings(engine.entry, 64),
            context_chars=3000,
            prompt_mod=eval_prompt,
            score_mod=eval_score,
            prompt_format=eval_prompt.PROMPT_FORMAT_CALC,
        )
    )
    assert result.tool_calls == 1 and result.correct and result.answer == "It is 360.\nAnswer: 360"
    engine = Scripted("Answer: 350")
    result = asyncio.run(
        run_item(
            engine,
            "finqa",
            item,
            item_settings(engine.entry, 64),
            context_chars=3000,
            prompt_mod=eval_prompt,
            score_mod=eval_score,
        )
    )
    assert result.tool_calls == 0 and not result.correct and engine.sent[0][1].tools is None


class Overflowing(Scripted):
    """The second round's prompt (the first call's result added) no longer fits: the engine refuses it."""

    async def chat_parts(self, messages, settings, info):
        from finspace.errors import PromptTooLong

        if any(m["role"] == "tool" for m in messages):
            self.sent.append((messages, settings))
            raise PromptTooLong("your last message is 2,100 tokens with the system prompt; ...")
        async for pair in super().chat_parts(messages, settings, info):
            yield pair


def test_a_result_that_would_overflow_the_context_ends_the_rounds_with_an_answer_from_what_fitted():
    engine = Overflowing(CALL, "From the question alone: 360.")
    answer, info = run(engine)
    assert answer == "From the question alone: 360."
    last_messages, last_settings = engine.sent[-1]
    assert last_settings.tools is None and last_messages[-1]["role"] == "user"  # the rounds that fitted, no tools
    assert info.notes == [loop.NO_ROOM] and "would not fit" in info.notes[0]
    assert "would not fit" in convo.usage_line({**convo.usage(info, 0.0, 1.0), "document": None})


class Cut(Scripted):
    """The first round ends at max tokens in the middle of its call's JSON."""

    async def chat_parts(self, messages, settings, info):
        first = not self.sent
        async for pair in super().chat_parts(messages, settings, info):
            yield pair
        if first:
            info.finish_reason = "length"


def test_a_call_cut_at_max_tokens_ends_the_rounds_with_a_note_not_a_refused_reply():
    """A forced call whose arguments the reply's bound cut (SmolLM2 with the Scoreboard's 48 tokens wrote a long
    query) was run and sent back as unfinished JSON, and the next round was refused ("tool_calls[0].function.
    arguments is not valid JSON"), losing the reply. The rounds end there, with a line saying why."""
    engine = Cut('{"expression": "2400 * 15% + 2400 * 15% + 24', "never asked")
    answer, info = run(engine, force=True)
    assert len(engine.sent) == 1 and info.tool_steps == [] and answer == ""
    assert info.notes == [loop.CUT] and "raise max tokens" in info.notes[0]
