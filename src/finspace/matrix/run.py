"""A matrix filled on the loaded model, document by document in waves that fit the engine's KV cache.

Each cell is one guided request (its schema from ``cells``), greedy, with the document first in the prompt
(``prompt``): a document's cells share the prefix, and vLLM's prefix cache computes the document once. The
documents go in waves (``waves``): as many at once as the KV cache holds, a document's cells together (vLLM
batches them), the next document when one finishes. A document is prepared (counted, its passages chosen) only
when it is next, off the serving loop; a document whose preparation fails (the tokenizing bound) leaves its row
saying why while the rest completes.

``fill`` yields the result after each finished cell, so the page and the API show progress; closing it
(a Cancel, a closed page, a failure) cancels every unfinished cell, which aborts its request in vLLM, stops the
preparation under way at its next count, and the result is marked cancelled with the cells that had finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from finspace.documents.convert import Document
from finspace.engine import fanout
from finspace.engine.api import EngineAPI
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import FinspaceError
from finspace.matrix import cell_prompt
from finspace.matrix.cells import cell_schema, read_cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.limits import REPLY_TOKENS
from finspace.matrix.table import CellResult, MatrixResult
from finspace.matrix.verify import verify
from finspace.matrix.waves import Waves, cost


COUNT_PIECE_CHARS = 20_000


class Stopped(Exception):
    """The matrix ended while a document was being prepared: its preparation stops at the next count."""


@dataclass(frozen=True)
class Prepared:
    row: int
    doc: Document
    prompts: list[cell_prompt.CellPrompt]
    kv_tokens: int  # what its cells hold in the KV cache together (waves.cost)


def count_upto(count: Any, text: str, limit: int, piece_chars: int = COUNT_PIECE_CHARS) -> int:
    """``text``'s tokens, counted a piece at a time (cut at whitespace, a token of slack each) and only until they
    pass ``limit``: a 3.9 M-character document is one uninterruptible 30-s call otherwise, though a few thousand
    characters already tell that it does not fit whole."""
    total, start = 0, 0
    while start < len(text) and total <= limit:
        end = len(text) if len(text) - start <= piece_chars else text.rfind(" ", start + 1, start + piece_chars) + 1
        end = end if end > start else start + piece_chars
        total += count(text[start:end]) + (1 if end < len(text) else 0)
        start = end
    return total


async def _prepare(
    engine: EngineAPI, row: int, doc: Document, fields: Sequence[MatrixField], reply_tokens: int, stop: threading.Event
) -> Prepared:
    """Each field's prompt for ``doc`` and their KV tokens, in the tokenizer's thread (one call per document).
    ``stop`` set, or this preparation given up (its time bound, a cancel): the work ends at its next count
    (Stopped), so a cancelled or failed matrix leaves no tokenizing behind."""
    budget = cell_prompt.budget(engine.max_model_len, reply_tokens)
    room = cell_prompt.TEMPLATE_ROOM_TOKENS
    given_up = threading.Event()

    def build(count: Callable[[str], int]) -> Prepared:
        def counted(text: str) -> int:
            if stop.is_set() or given_up.is_set():
                raise Stopped
            return count(text)

        rules, block = counted(cell_prompt.RULES), count_upto(counted, cell_prompt.document_block(doc), budget)
        asks = [counted(cell_prompt.field_message(f)) for f in fields]
        prompts = [cell_prompt.cell_prompt(doc, f, budget, counted, whole_tokens=block + max(asks)) for f in fields]
        if all(cp.whole for cp in prompts):  # one prefix, shared by the document's cells
            kv = cost(rules + block, [a + reply_tokens + room for a in asks])
        else:  # each cell has its own passages: no prefix shared
            kv = cost(0, [rules + counted(cp.document) + a + reply_tokens + room for cp, a in zip(prompts, asks)])
        return Prepared(row, doc, prompts, kv)

    try:
        return await engine.measure(build, size=len(cell_prompt.document_block(doc)))
    finally:
        given_up.set()


async def _cell(
    engine: EngineAPI, doc: Document, field: MatrixField, cp: cell_prompt.CellPrompt, settings: ChatSettings
) -> CellResult:
    info = ChatInfo()
    settings = replace(settings, json_schema=cell_schema(field, len(doc.pages)), document=cp.document)
    parts = []
    async with contextlib.aclosing(engine.chat_parts([cp.user], settings, info)) as stream:
        async for _thinking, answer in stream:
            parts.append(answer)
    cell = read_cell("".join(parts), field, len(doc.pages), info.finish_reason)
    return CellResult(cell, verify(cell, field, cell_prompt.numbered(doc)), cp.whole)


def cell_settings(entry: Any, reply_tokens: int) -> ChatSettings:
    """Greedy, the rules as the system prompt; a reasoning model answers without thinking (the cell is the answer)."""
    kwargs = {"enable_thinking": False} if getattr(entry, "reasoning", None) else None
    return ChatSettings(
        system_prompt=cell_prompt.RULES, temperature=0.0, max_tokens=reply_tokens, chat_template_kwargs=kwargs
    )


def kv_capacity(engine: EngineAPI) -> int | None:
    """The engine's KV cache in tokens, or None when it does not say (then every document goes at once)."""
    tokens = getattr(engine, "kv_cache_tokens", None)
    return tokens if isinstance(tokens, int) and tokens > 0 else None


async def fill(
    engine: EngineAPI,
    result: MatrixResult,
    docs: Sequence[Document | None],
    *,
    reply_tokens: int = REPLY_TOKENS,
    on_wave: Any = None,
) -> AsyncGenerator[MatrixResult, None]:
    """Fill ``result``'s cells for ``docs`` (None where a row's document did not convert), yielding ``result``
    after each finished cell; the last yield has state done (or, when closed early, the result is cancelled).
    ``on_wave(row, kv_tokens, waves)``: called as each document's cells are sent (for tests and benchmarks)."""
    settings = cell_settings(engine.entry, reply_tokens)
    waves = Waves(kv_capacity(engine))
    waiting = deque((r, d) for r, d in enumerate(docs) if d is not None)
    stop = threading.Event()
    tasks: dict[asyncio.Task[Any], tuple[int, int]] = {}
    left: dict[int, int] = {}  # row -> its cells not finished
    ready: list[Prepared] = []  # the next document, prepared, waiting for room

    async def send_what_fits() -> None:
        while waiting or ready:
            if not ready:
                r, doc = waiting.popleft()
                try:
                    ready.append(await _prepare(engine, r, doc, result.fields, reply_tokens, stop))
                except FinspaceError as exc:  # this row says why; the rest completes
                    result.rows = result.rows[:r] + (replace(result.rows[r], error=str(exc)),) + result.rows[r + 1 :]
                    continue
            nxt = ready[0]
            if not waves.fits(nxt.kv_tokens):
                return
            ready.pop()
            waves.start(nxt.row, nxt.kv_tokens)
            left[nxt.row] = len(nxt.prompts)
            for c, (f, cp) in enumerate(zip(result.fields, nxt.prompts, strict=True)):
                tasks[asyncio.create_task(_cell(engine, nxt.doc, f, cp, settings))] = (nxt.row, c)
            if on_wave is not None:
                on_wave(nxt.row, nxt.kv_tokens, waves)

    try:
        await send_what_fits()
        yield result
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                r, c = tasks[task]
                result.cells[(r, c)] = task.result()
                left[r] -= 1
                if not left[r]:
                    waves.finish(r)
            before = set(tasks)
            await send_what_fits()
            pending |= set(tasks) - before
            yield result
        result.state = "done"
        yield result
    finally:
        stop.set()
        if result.state != "done":
            result.state = "cancelled"
        await fanout.cancel_all(tasks)
