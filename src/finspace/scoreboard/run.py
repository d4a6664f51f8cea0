"""A scoreboard run on the loaded model: every item's request sent to the engine at once, so vLLM batches them.

Each item is one greedy request (its messages from ``finspace.scoreboard.asking``), through the engine's ``chat_parts``
only (the same call for the in-process engine and a remote one). An item whose prompt is too long for the
model's context, or whose request fails, is recorded as that item's error: counted, never the run's end.
``run_items`` yields the run after each finished item, so the page and the API show progress; closing it (a
Cancel) cancels every unfinished item, which aborts its request in vLLM, and the run is marked cancelled with
the items that had finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from finspace.engine import fanout
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, FinspaceError

log = logging.getLogger("finspace.scoreboard")

RETRIES = 2  # an item whose prompt is too long is asked again with half the context, this many times at most
MIN_CONTEXT_CHARS = 400


@dataclass(frozen=True)
class ItemResult:
    """One item's outcome: the model's answer and how it scored, or the error that stopped it."""

    id: str
    answer: str = ""
    extracted: Any = None
    correct: bool = False
    f1: float | None = None
    refused: bool = False
    error: str | None = None
    output_tokens: int = 0
    finish_reason: str | None = None
    context_chars: int | None = None  # the item's context, at most, in characters (less after a retry)
    tool_calls: int = 0  # tool calls made for it (the +calc and +filing-tools prompt formats)
    document: str | None = None  # the filing formats: what the model was given ("12 of 84 pages (5 passages)...")
    notes: tuple[str, ...] = ()  # what the reply's usage line says (a tool round bound, a call cut at max tokens)


@dataclass
class EvalRun:
    """A run in progress (or finished): the items' results by position, and its clock."""

    set_name: str
    total: int
    results: dict[int, ItemResult] = field(default_factory=dict)
    state: str = "running"  # running / done / cancelled
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def done(self) -> int:
        return len(self.results)

    @property
    def wall_s(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def completion_tokens(self) -> int:
        return sum(r.output_tokens for r in self.results.values())

    @property
    def tokens_per_s(self) -> float | None:
        wall = self.wall_s
        return round(self.completion_tokens / wall, 2) if wall > 0 and self.results else None


def item_settings(entry: Any, reply_tokens: int) -> ChatSettings:
    """Greedy, bounded; a reasoning model answers without thinking (the answer is what is scored)."""
    kwargs = {"enable_thinking": False} if getattr(entry, "reasoning", None) else None
    return ChatSettings(temperature=0.0, top_p=1.0, max_tokens=reply_tokens, chat_template_kwargs=kwargs)


def short_error(exc: BaseException) -> str:
    """An item's error for the stored result: the domain error's message, else only its type (no trace, no path)."""
    if isinstance(exc, FinspaceError):
        text = " ".join(str(exc).split())
        return text if len(text) <= 300 else text[:299] + "…"
    return f"the request failed ({type(exc).__name__})"


async def _ask(
    engine: Any, messages: list[dict], settings: ChatSettings, calculator: bool = False
) -> tuple[str, ChatInfo]:
    from finspace.engine.tool_loop import calculator_rounds

    info = ChatInfo()
    parts: list[str] = []
    replies = (
        calculator_rounds(engine, messages, settings, info)
        if calculator
        else engine.chat_parts(messages, settings, info)
    )
    async with contextlib.aclosing(replies) as stream:
        async for _thinking, answer in stream:
            parts.append(answer)
    return "".join(parts), info


async def _asked(asker: Any, item: Any) -> tuple[str, ChatInfo, str | None] | ItemResult:
    """The item asked by ``asker`` (the filing formats: finspace.scoreboard.filings.ask through the Service), or its
    error as the item's result."""
    try:
        return await asker(item)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - an item's failure is recorded, the run goes on
        if not isinstance(exc, FinspaceError):
            log.warning("eval item %s failed: %s", getattr(item, "id", "?"), type(exc).__name__, exc_info=exc)
        return ItemResult(id=str(item.id), error=short_error(exc))


async def run_item(
    engine: Any,
    set_name: str,
    item: Any,
    settings: ChatSettings,
    *,
    context_chars: int,
    prompt_mod: Any,
    score_mod: Any,
    prompt_format: str | None = None,
    asker: Any = None,
) -> ItemResult:
    """One item: asked, scored; a failure is the item's error. The context budget is a guess at the tokenizer's
    characters per token (the engine's tokenizer is not ours to call: it may be remote): when the engine says the
    prompt is too long (BadInput, before anything is generated), the item is asked again with half the context,
    twice at most, and the characters it was asked with are recorded. ``asker``: the item is asked by it instead
    (``asker(item) -> (reply, info, document)``), once, its context sized by the chat's own budget."""
    if asker is not None:
        asked = await _asked(asker, item)
        if isinstance(asked, ItemResult):
            return asked
        reply, info, document = asked
        return _scored(score_mod, set_name, item, reply, info, None, document)
    budget = context_chars
    for attempt in range(RETRIES + 1):
        try:
            fmt = {"prompt_format": prompt_format} if prompt_format else {}
            messages = prompt_mod.messages(set_name, item, max_context_chars=budget, **fmt)
            reply, info = await _ask(
                engine, messages, settings, calculator=bool(prompt_format and "+calc" in prompt_format)
            )
            break
        except asyncio.CancelledError:
            raise
        except BadInput as exc:
            if attempt == RETRIES or budget <= MIN_CONTEXT_CHARS:
                return ItemResult(id=str(item.id), error=short_error(exc), context_chars=budget)
            budget = max(MIN_CONTEXT_CHARS, budget // 2)
        except Exception as exc:  # noqa: BLE001 - an item's failure is recorded, the run goes on
            if not isinstance(exc, FinspaceError):
                log.warning("eval item %s failed: %s", getattr(item, "id", "?"), type(exc).__name__, exc_info=exc)
            return ItemResult(id=str(item.id), error=short_error(exc), context_chars=budget)
    return _scored(score_mod, set_name, item, reply, info, budget)


def _scored(
    score_mod: Any,
    set_name: str,
    item: Any,
    reply: str,
    info: ChatInfo,
    budget: int | None,
    document: str | None = None,
) -> ItemResult:
    s = score_mod.score(set_name, item, reply)
    return ItemResult(
        id=str(item.id),
        answer=reply,
        extracted=s.extracted,
        correct=bool(s.correct),
        f1=None if s.f1 is None else float(s.f1),
        refused=bool(s.refused),
        output_tokens=int(info.output_tokens),
        finish_reason=info.finish_reason,
        context_chars=budget,
        tool_calls=len(info.tool_steps),
        document=document,
        notes=tuple(info.notes),
    )


async def run_items(
    engine: Any,
    set_name: str,
    items: tuple,
    *,
    reply_tokens: int,
    context_chars: int,
    prompt_mod: Any = None,
    score_mod: Any = None,
    prompt_format: str | None = None,
    asker: Any = None,
) -> AsyncGenerator[EvalRun, None]:
    """Ask every item at once; yield the run after each finished item (the last yield has state done; closed
    early, the run is cancelled with the items that had finished). ``asker``: see run_item."""
    if prompt_mod is None or score_mod is None:  # the sets' own prompt and scorer (tests may pass others)
        from finspace.scoreboard import asking as default_prompt, score as default_score

        prompt_mod, score_mod = prompt_mod or default_prompt, score_mod or default_score
    run = EvalRun(set_name, len(items))
    settings = item_settings(engine.entry, reply_tokens)
    tasks: dict[asyncio.Task, int] = {
        asyncio.create_task(
            run_item(
                engine,
                set_name,
                item,
                settings,
                context_chars=context_chars,
                prompt_mod=prompt_mod,
                score_mod=score_mod,
                prompt_format=prompt_format,
                asker=asker,
            )
        ): i
        for i, item in enumerate(items)
    }
    try:
        yield run
        async with contextlib.aclosing(fanout.finished(tasks)) as batches:
            async for batch in batches:
                for i, item_result in batch:
                    run.results[i] = item_result
                yield run
        run.state, run.ended = "done", time.monotonic()
        yield run
    finally:
        if run.state != "done":
            run.state, run.ended = "cancelled", time.monotonic()
        await fanout.cancel_all(tasks)
