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
from collections.abc import AsyncIterator, Callable

from finspace.engine.api import EngineAPI, ServingState
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import PromptTooLong, ToolsRefused
from finspace.tools import registry
from finspace.tools.calls import CallReader, forced_schema, reading_parser
from finspace.tools.spec import ToolRequest

MAX_ROUNDS = 4  # rounds of calls in one reply (FINSPACE_TOOL_ROUNDS); then the model answers without tools
TOLD = "error: this result would not fit the model's context with room for the answer; answer now with what you have"
NO_ROOM = (
    "tools stopped: the last tool result would not fit the model's context with room for the reply; "
    "answered from what it had"
)


CUT = (
    "tools stopped: a tool call was cut at max tokens (its arguments unfinished); raise max tokens so the "
    "model can write its calls"
)


def offered(engine: ServingState) -> bool:
    """Whether the chat offers the calculator to the engine's model: a tool parser reads its calls, and the
    engine has not found that its model server refuses tools (a remote one started without them)."""
    return reading_parser(engine) is not None and not getattr(engine, "tools_refused", None)


def _round_request(
    round_no: int, force: bool, specs: tuple[dict, ...] | None = None, first: str = registry.CALCULATE
) -> ToolRequest:
    specs = specs or tuple(registry.builtin_specs())
    if force and round_no == 0:
        return ToolRequest(specs, "named", first, parallel=False)
    return ToolRequest(specs, "auto", None, parallel=True)


def _merge(total: ChatInfo, part: ChatInfo) -> None:
    total.prompt_tokens = total.prompt_tokens or part.prompt_tokens
    total.output_tokens += part.output_tokens
    total.finish_reason = part.finish_reason
    total.trimmed_messages = max(total.trimmed_messages, part.trimmed_messages)
    total.first_token_at = total.first_token_at or part.first_token_at
    total.text += part.text
    total.request_id, total.model_key = part.request_id, part.model_key


async def calculator_rounds(
    engine: EngineAPI,
    messages: list[dict],
    settings: ChatSettings,
    info: ChatInfo,
    *,
    force: bool = False,
    specs: tuple[dict, ...] | None = None,
    run: Callable[[str, str], registry.ToolStep] | None = None,
    first: str | None = None,
    max_rounds: int = MAX_ROUNDS,
) -> AsyncIterator[tuple[str, str]]:
    """The reply, with tool calls run between rounds (see the module's docstring). ``specs`` and ``run``: the
    tools offered and how a call is run (default: the calculator alone); ``first``: the tool a forced first
    round calls; ``max_rounds``: rounds with tools before the answer."""
    parser = reading_parser(engine)
    run = run or _run
    msgs, fitted = list(messages), list(messages)  # fitted: the conversation of the last round that fitted
    for round_no in range(max_rounds + 1):
        req = _round_request(round_no, force, specs, first or registry.CALCULATE)
        round_settings, reader = _round(engine, parser, req, settings, info, round_no, max_rounds)
        part: ChatInfo | None = ChatInfo()
        try:
            async with contextlib.aclosing(engine.chat_parts(msgs, round_settings, part)) as parts:
                async for thinking, answer in parts:
                    shown = reader.feed(answer) if reader is not None and answer else answer
                    if thinking or shown:
                        yield thinking, shown
        except PromptTooLong:
            if not round_no:  # the question itself does not fit: the caller's message says how to fix it
                raise
            part = None  # the answer from what fitted adds its own
            async with contextlib.aclosing(_from_what_fitted(engine, msgs, fitted, settings, info)) as pairs:
                async for pair in pairs:
                    yield pair
            return
        except ToolsRefused as exc:
            if round_no:  # a server that took the first round's tools: its refusal is the reply's error
                raise
            part = None  # the answer without the calculator adds its own
            async with contextlib.aclosing(_without_calculator(engine, messages, settings, info, exc)) as pairs:
                async for pair in pairs:
                    yield pair
            return
        finally:
            if part is not None:
                _merge(info, part)
        if reader is None:
            return
        rest, calls = reader.finish()
        if reader.late_thinking or rest:
            yield reader.late_thinking, rest
        if not calls:
            return
        if part.finish_reason == "length":  # a call cut at the reply's bound: its arguments are not whole JSON
            info.notes.append(CUT)
            return
        fitted = msgs
        steps = [run(c["function"]["name"], c["function"]["arguments"]) for c in calls]
        info.tool_steps.extend(steps)
        msgs = msgs + [{"role": "assistant", "content": rest, "tool_calls": calls}]
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": s.result} for c, s in zip(calls, steps)]


def _round(
    engine: EngineAPI,
    parser: str | None,
    req: ToolRequest,
    settings: ChatSettings,
    info: ChatInfo,
    round_no: int,
    max_rounds: int,
) -> tuple[ChatSettings, CallReader | None]:
    """One round's settings (its tools, a forced call's schema) and the reader of its calls; the last round (the
    bound) offers no tools and reads no calls, so the reply ends with an answer."""
    if round_no == max_rounds:
        if max_rounds:
            info.notes.append(f"tool rounds ended at the bound ({max_rounds}): answered without tools")
        return dataclasses.replace(settings, tools=None), None
    schema = forced_schema(req) if req.forced else settings.json_schema
    reader = CallReader(parser, getattr(engine, "tokenizer", None), req)
    return dataclasses.replace(settings, tools=req.specs, json_schema=schema), reader


async def _from_what_fitted(
    engine: EngineAPI, msgs: list[dict], fitted: list[dict], settings: ChatSettings, info: ChatInfo
) -> AsyncIterator[tuple[str, str]]:
    """The last round's results overflow the context (nothing of that round was written yet): the model is told
    so in place of those results and answers without tools; if even that does not fit, from the rounds that
    fitted. The usage line says so."""
    info.notes.append(NO_ROOM)
    told = msgs[: len(fitted) + 1] + [{**m, "content": TOLD} for m in msgs[len(fitted) + 1 :]]
    part = ChatInfo()
    try:
        for conversation in (told, fitted):
            part = ChatInfo()
            try:
                async with contextlib.aclosing(
                    engine.chat_parts(conversation, dataclasses.replace(settings, tools=None), part)
                ) as parts:
                    async for pair in parts:
                        yield pair
                return
            except PromptTooLong:
                if conversation is fitted:
                    raise
    finally:
        _merge(info, part)


async def _without_calculator(
    engine: EngineAPI, messages: list[dict], settings: ChatSettings, info: ChatInfo, refused: ToolsRefused
) -> AsyncIterator[tuple[str, str]]:
    """The model server takes no tools (the engine remembers it): the reply comes without the calculator."""
    info.notes.append(f"calculator off: {refused}")
    part = ChatInfo()
    try:
        async with contextlib.aclosing(engine.chat_parts(messages, settings, part)) as parts:
            async for pair in parts:
                yield pair
    finally:
        _merge(info, part)


def _run(name: str, arguments: str) -> registry.ToolStep:
    if name != registry.CALCULATE:  # the model named a tool it was not given: it is told so
        return registry.ToolStep(
            name[:64], arguments[:2000], f"error: there is no tool {name[:64]!r}; use {registry.CALCULATE}", False
        )
    return registry.run(name, arguments)
