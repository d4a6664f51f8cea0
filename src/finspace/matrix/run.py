"""A matrix filled on the loaded model: every cell's request sent to the engine at once, so vLLM batches them.

Each cell is one guided request (its schema from ``cells``), greedy, with the document first in the prompt
(``prompt``): a document's cells share the prefix, and vLLM's prefix cache computes the document once.
``fill`` yields the result after each finished cell, so the page and the API show progress; closing it
(a Cancel, a closed page) cancels every unfinished cell, which aborts its request in vLLM, and the result
is marked cancelled with the cells that had finished.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any

from finspace.documents.convert import Document
from finspace.engine import fanout
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.matrix import prompt
from finspace.matrix.cells import cell_schema, read_cell
from finspace.matrix.fields import MatrixField
from finspace.matrix.limits import REPLY_TOKENS
from finspace.matrix.table import CellResult, MatrixResult
from finspace.matrix.verify import verify


async def _prepare(engine: Any, doc: Document, fields: Sequence[MatrixField], reply_tokens: int) -> list[prompt.CellPrompt]:
    """Each field's prompt for ``doc``, in the tokenizer's thread (one call per document)."""
    budget = prompt.budget(engine.max_model_len, reply_tokens)

    def build(count: Any) -> list[prompt.CellPrompt]:
        whole = count(prompt.document_block(doc)) + max(count(prompt.field_message(f)) for f in fields)
        return [prompt.cell_prompt(doc, f, budget, count, whole_tokens=whole) for f in fields]

    return await engine.measure(build, size=len(prompt.document_block(doc)))


async def _cell(engine: Any, doc: Document, field: MatrixField, cp: prompt.CellPrompt,
                settings: ChatSettings) -> CellResult:
    info = ChatInfo()
    settings = replace(settings, json_schema=cell_schema(field, len(doc.pages)), document=cp.document)
    parts = []
    async with contextlib.aclosing(engine.chat_parts([cp.user], settings, info)) as stream:
        async for _thinking, answer in stream:
            parts.append(answer)
    cell = read_cell("".join(parts), field, len(doc.pages), info.finish_reason)
    return CellResult(cell, verify(cell, field, prompt.numbered(doc)), cp.whole)


def cell_settings(entry: Any, reply_tokens: int) -> ChatSettings:
    """Greedy, the rules as the system prompt; a reasoning model answers without thinking (the cell is the answer)."""
    kwargs = {"enable_thinking": False} if getattr(entry, "reasoning", None) else None
    return ChatSettings(system_prompt=prompt.RULES, temperature=0.0, max_tokens=reply_tokens,
                        chat_template_kwargs=kwargs)


async def fill(engine: Any, result: MatrixResult, docs: Sequence[Document | None], *,
               reply_tokens: int = REPLY_TOKENS) -> AsyncGenerator[MatrixResult, None]:
    """Fill ``result``'s cells for ``docs`` (None where a row's document did not convert), yielding ``result``
    after each finished cell; the last yield has state done (or, when closed early, the result is cancelled)."""
    settings = cell_settings(engine.entry, reply_tokens)
    tasks: dict[asyncio.Task, tuple[int, int]] = {}
    try:
        for r, doc in enumerate(docs):
            if doc is None:
                continue
            prompts = await _prepare(engine, doc, result.fields, reply_tokens)
            for c, (f, cp) in enumerate(zip(result.fields, prompts, strict=True)):
                tasks[asyncio.create_task(_cell(engine, doc, f, cp, settings))] = (r, c)
        yield result
        async with contextlib.aclosing(fanout.finished(tasks)) as batches:
            async for batch in batches:
                for key, cell in batch:
                    result.cells[key] = cell
                yield result
        result.state = "done"
        yield result
    finally:
        if result.state != "done":
            result.state = "cancelled"
        await fanout.cancel_all(tasks)
