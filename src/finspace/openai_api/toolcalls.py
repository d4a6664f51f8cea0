"""A reply with tools, as OpenAI deltas: the thinking as it comes, the answer's text until a call may begin,
then each call as ``delta.tool_calls`` (finspace.tools.calls reads them with vLLM's parsers); a ``required``
reply's calls each as soon as it is written whole.

Shared by the streaming and the whole replies, so both say the same thing: the whole reply is these deltas
joined (``joined``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from finspace.tools.calls import CallReader


async def tool_deltas(parts, reader: CallReader) -> AsyncIterator[dict]:
    """The engine's (thinking, answer) pieces as OpenAI deltas, the calls last (one delta each, whole); for
    ``required``, each call as soon as it is written whole."""
    sent = 0
    async with contextlib.aclosing(parts):
        async for thinking, answer in parts:
            if thinking:
                yield {"reasoning_content": thinking}
            if answer:
                shown = reader.feed(answer)
                if shown:
                    yield {"content": shown}
                for c in reader.early_calls():
                    yield {"tool_calls": [{"index": sent, **c}]}
                    sent += 1
    rest, calls = reader.finish()
    reader.calls = calls
    if reader.late_thinking:
        yield {"reasoning_content": reader.late_thinking}
    if rest:
        yield {"content": rest}
    for i, c in enumerate(calls[sent:], sent):
        yield {"tool_calls": [{"index": i, **c}]}


def joined(deltas: list[dict]) -> dict:
    """The assistant message the deltas make: content (None when there are calls and no text), the thinking
    (None when there is none) and the tool calls."""
    content = "".join(d.get("content", "") for d in deltas)
    calls = [c for d in deltas for c in d.get("tool_calls", ())]
    message: dict = {"role": "assistant", "content": content or (None if calls else "")}
    thinking = "".join(d.get("reasoning_content", "") for d in deltas)
    message["reasoning_content"] = thinking or None
    if calls:
        message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
    return message
