"""The chat's calculator rounds: the model may call ``calculate``; finspace runs it, feeds the result back, and
the model goes on, for at most MAX_ROUNDS calls in a row, then answers without the tool.

``calculator_rounds(engine, messages, settings, info)`` yields (thinking, answer) deltas like
``engine.chat_parts`` (the answer never shows a call's text: finspace.tools.calls holds it back) and appends
each call to ``info.tool_steps`` (a ``registry.ToolStep``) as it is run, so the page can show it as a step
above the answer. ``info`` sums the tokens of every round. ``force=True`` makes the first round a call
(structured outputs, a named tool_choice): what the page's "always" setting and the tests use.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import PromptTooLong, ToolsRefused
from finspace.tools import registry
from finspace.tools.calls import CallReader, forced_schema, reading_parser
from finspace.tools.spec import ToolRequest

MAX_ROUNDS = 4  # calculator calls in one reply; then the model answers without the tool
NO_ROOM = ("tools stopped: the last tool result would not fit the model's context with room for the reply; "
           "answered from what it had")


def offered(engine: Any) -> bool:
    """Whether the chat offers the calculator to the engine's model: a tool parser reads its calls, and the
    engine has not found that its model server refuses tools (a remote one started without them)."""
    return reading_parser(engine) is not None and not getattr(engine, "tools_refused", None)


def _round_request(round_no: int, force: bool) -> ToolRequest:
    specs = tuple(registry.builtin_specs())
    if force and round_no == 0:
        return ToolRequest(specs, "named", registry.CALCULATE, parallel=False)
    return ToolRequest(specs, "auto", None, parallel=True)


def _merge(total: ChatInfo, part: ChatInfo) -> None:
    total.prompt_tokens = total.prompt_tokens or part.prompt_tokens
    total.output_tokens += part.output_tokens
    total.finish_reason = part.finish_reason
    total.trimmed_messages = max(total.trimmed_messages, part.trimmed_messages)
    total.first_token_at = total.first_token_at or part.first_token_at
    total.text += part.text
    total.request_id, total.model_key = part.request_id, part.model_key


async def calculator_rounds(engine: Any, messages: list[dict], settings: ChatSettings, info: ChatInfo,
                            *, force: bool = False) -> AsyncIterator[tuple[str, str]]:
    """The reply, with calculator calls run between rounds (see the module's docstring)."""
    parser = reading_parser(engine)
    msgs, fitted = list(messages), list(messages)  # fitted: the conversation of the last round that fitted
    for round_no in range(MAX_ROUNDS + 1):
        last = round_no == MAX_ROUNDS
        req = _round_request(round_no, force)
        if last:  # the bound: one more round without the tool, so the reply ends with an answer
            round_settings = dataclasses.replace(settings, tools=None)
        else:
            schema = forced_schema(req) if req.forced else settings.json_schema
            round_settings = dataclasses.replace(settings, tools=req.specs, json_schema=schema)
        reader = CallReader(parser, getattr(engine, "tokenizer", None), req) if not last else None
        part = ChatInfo()
        try:
            async with contextlib.aclosing(engine.chat_parts(msgs, round_settings, part)) as parts:
                async for thinking, answer in parts:
                    shown = reader.feed(answer) if reader is not None and answer else answer
                    if thinking or shown:
                        yield thinking, shown
        except PromptTooLong:
            if not round_no:  # the question itself does not fit: the caller's message says how to fix it
                raise
            # the last round's results overflow the context (nothing of this round was written yet): the
            # model answers, without tools, from the rounds that fitted, and the usage line says so
            info.notes.append(NO_ROOM)
            part = ChatInfo()
            async with contextlib.aclosing(engine.chat_parts(fitted, dataclasses.replace(settings, tools=None),
                                                             part)) as parts:
                async for pair in parts:
                    yield pair
            return
        except ToolsRefused as exc:
            if round_no:  # a server that took the first round's tools: its refusal is the reply's error
                raise
            # the model server takes no tools (the engine remembers it): the reply comes without the calculator
            info.notes.append(f"calculator off: {exc}")
            part = ChatInfo()  # what the finally below adds to info
            async with contextlib.aclosing(engine.chat_parts(messages, settings, part)) as parts:
                async for pair in parts:
                    yield pair
            return
        finally:
            _merge(info, part)
        if reader is None:
            return
        rest, calls = reader.finish()
        if reader.late_thinking or rest:
            yield reader.late_thinking, rest
        if not calls:
            return
        fitted = msgs
        steps = [_run(c) for c in calls]
        info.tool_steps.extend(steps)
        msgs = msgs + [{"role": "assistant", "content": rest, "tool_calls": calls}]
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": s.result} for c, s in zip(calls, steps)]


def _run(call: dict) -> registry.ToolStep:
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    if name != registry.CALCULATE:  # the model named a tool it was not given: it is told so
        return registry.ToolStep(name[:64], arguments[:2000], f"error: there is no tool {name[:64]!r}; use "
                                                              f"{registry.CALCULATE}", False)
    return registry.run(name, arguments)
