"""A reply's deltas on their way out of the engine: split into thinking and answer, or replayed for tests.

``split(deltas, tokenizer, parser, settings, info)`` takes the engine's raw
deltas ``(text, token_ids)`` and yields ``(thinking, answer)`` pairs: through
``ReasoningSplit`` when the model has a reasoning parser, as answer alone
otherwise. ``info.text`` gets the raw text (tags included), what Continue resumes.

``replay(path, ...)`` is TEST-ONLY: a random-weight test model never writes
``<think>``, so with FINSPACE_TEST_REPLAY set (off by default) a generated demo
model that has a reasoning parser streams a recorded reply instead of its own,
through the same split, coalescing and page as a real one. Nothing else
changes: the prompt is still templated, trimmed and counted.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo

Delta = tuple[str, list[int]]


async def split(
    deltas: AsyncIterator[Delta],
    tokenizer: Any,
    parser: str | None,
    settings: ChatSettings,
    info: ChatInfo,
    resumed: str = "",
) -> AsyncIterator[tuple[str, str]]:
    """(thinking delta, answer delta) for each raw delta; ``resumed`` is the raw text a Continue goes on from."""
    from finspace.engine.reasoning import ReasoningSplit

    cutter = None
    if parser is not None:
        in_answer = "</think>" in resumed or (bool(resumed) and "<think>" not in resumed)
        cutter = ReasoningSplit(tokenizer, parser, enable_thinking=settings.enable_thinking, in_answer=in_answer)
    raw: list[str] = []
    try:
        async for text, ids in deltas:
            raw.append(text)
            if cutter is None:
                yield "", text
                continue
            thinking, answer = cutter.feed(text, ids)
            if thinking or answer:
                yield thinking, answer
        if cutter is not None:
            thinking, answer = cutter.finish()
            if thinking or answer:
                yield thinking, answer
    finally:
        info.text = "".join(raw)


def recording(path: str | Path) -> list[list[str]]:
    """A recorded stream: {"deltas": [[token text, ...], ...]}, each inner list one delta's tokens."""
    doc = json.loads(Path(path).read_text())
    deltas = doc["deltas"]
    if not isinstance(deltas, list) or not all(
        isinstance(d, list) and all(isinstance(t, str) for t in d) for d in deltas
    ):
        raise ValueError(f"{path}: 'deltas' must be a list of lists of token strings")
    return deltas


async def replay(
    path: str | Path, tokenizer: Any, max_tokens: int, info: ChatInfo, resumed: str = "", pause_s: float = 0.03
) -> AsyncIterator[Delta]:
    """TEST-ONLY: the recorded deltas (from where ``resumed`` ends), cut at ``max_tokens`` tokens like vLLM."""
    sent = ""
    for pieces in recording(path):
        while pieces and len(sent) < len(resumed) and resumed.startswith(sent + pieces[0]):
            sent += pieces[0]  # a Continue: this token of the recording was already written
            pieces = pieces[1:]
        if not pieces:
            continue
        out_text, out_ids, cut = "", [], False
        for piece in pieces:
            ids = tokenizer.encode(piece, add_special_tokens=False)
            if info.output_tokens + len(out_ids) + len(ids) > max_tokens:
                cut = True
                break
            out_text, out_ids = out_text + piece, out_ids + ids
        info.output_tokens += len(out_ids)
        if out_text:
            if info.first_token_at is None:
                info.first_token_at = time.monotonic()
            yield out_text, out_ids
        if cut:
            info.finish_reason = "length"
            return
        await asyncio.sleep(pause_s)
    info.finish_reason = "stop"
