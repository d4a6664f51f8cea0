"""FinanceBench over the whole filings: each question asked about its PDF as the chat asks about an attached one.

A question's filing (finspace.scoreboard.pdfs: placed, cached, or fetched once) is converted as an upload is (the chat's
``attach``: child process, the document bounds) and answered through the Service, the chat's own path: its
budget set and the reply streamed by ``Service.answer``. Two formats
(finspace.scoreboard.asking):

- ``finspace-eval-v1+filing``: one shot, the passages of the filing that fit the model's context (the tools off);
- ``finspace-eval-v1+filing-tools``: the filing tools (outline, search, read_page, filer_facts, calculate), for a
  model with a tool parser. As the chat offers them: chosen by the model where its context holds their results
  (``calculator="auto"``); below that (a 2,048-token CPU model) the first round is forced to be a search
  ("always"), so the tools are used at all. Each round has room for a call (``CALL_TOKENS``) whatever the
  Scoreboard's reply bound.

``Filings`` holds a run's documents: one conversion at a time (the conversion gate's per-client bound), at most
``AT_ONCE`` converted filings in memory (a filing is let go when its last question is answered), and a filing
that can't be had (missing, not a PDF, too large) is each of its questions' error, with the fix; once GitHub is
found unreachable, the rest fail at once with the same message.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from finspace.documents import desk as docs
from finspace.engine.api import ServingState
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, DataUnavailable, FinspaceError
from finspace.scoreboard import pdfs
from finspace.scoreboard.asking import PROMPT_FORMAT_FILING_TOOLS, filing_messages
from finspace.grounding.chat import filing_tools

AT_ONCE = 4  # converted filings held at once
# a round of the tools format has at least this many tokens, so a small reply bound (FINSPACE_EVAL_REPLY_TOKENS) does
# not cut a sensible call (a query of a few words and a document id); a model that writes a query to its 200-character
# bound a token a character (SmolLM2: "... for 3M: 2018, 2018, ...") is cut, its item noted so (ItemResult.notes).
# Not more: the bound is every round's, and the rounds after a call would take it all (SmolLM2: 300 tokens of
# "<tool_response>" after the search, 2.5 times the 128's time)
CALL_TOKENS = 128
CLIENT = "scoreboard"  # the conversion gate's client for a run's filings


def calculator_mode(engine: ServingState, prompt_format: str, documents: list) -> str:
    """The chat's tool setting for this format: off for the passages; for the tools "auto" where the model's
    context holds them (finspace.grounding.chat.filing_tools), else "always" (a forced first search)."""
    if prompt_format != PROMPT_FORMAT_FILING_TOOLS:
        return "off"
    return "auto" if filing_tools(engine, "auto", documents) else "always"


class Filings:
    """A run's filings by FinanceBench doc_name (see the module's docstring)."""

    def __init__(
        self,
        svc: docs.Answering,
        items: Any,
        data_dir: str | Path,
        *,
        evalsets_dir: str | Path | None = None,
        base_url: str | None = None,
        timeout_s: float = 10.0,
    ):
        self.svc, self.data_dir, self.evalsets_dir = svc, data_dir, evalsets_dir
        self.base_url, self.timeout_s = base_url, timeout_s
        self._users = Counter(str((item.meta or {}).get("doc_name")) for item in items)
        self._held: dict[str, docs.Attached] = {}
        self._failed: dict[str, FinspaceError] = {}
        self._converting: str | None = None
        self._unreachable: DataUnavailable | None = None
        self._changed = asyncio.Event()

    async def acquire(self, name: Any) -> docs.Attached:
        """The converted filing ``name`` (converted now when it is not held); FinspaceError when it can't be had."""
        name = pdfs.check_name(name)
        while True:
            if name in self._failed:
                raise self._failed[name]
            if name in self._held:
                return self._held[name]
            if self._converting is None and len(self._held) < AT_ONCE:
                self._converting = name
                try:
                    self._held[name] = await self._convert(name)
                except FinspaceError as exc:
                    self._failed[name] = exc
                finally:
                    self._converting = None
                    self._changed.set()
                continue
            self._changed.clear()
            await self._changed.wait()

    def release(self, name: Any) -> None:
        """One question of ``name`` answered (or failed); the filing goes when none is left."""
        key = str(name)
        self._users[key] -= 1
        if self._users[key] <= 0 and self._held.pop(key, None) is not None:
            self._changed.set()

    async def _convert(self, name: str) -> docs.Attached:
        if self._unreachable is not None:
            raise DataUnavailable(f"{name}.pdf was not fetched: {self._unreachable}")
        try:
            path = await asyncio.to_thread(
                pdfs.pdf_path,
                name,
                self.data_dir,
                evalsets_dir=self.evalsets_dir,
                base_url=self.base_url,
                timeout_s=self.timeout_s,
                max_bytes=self.svc.settings.documents.max_bytes,
            )
        except DataUnavailable as exc:
            if getattr(exc, "unreachable", False):
                self._unreachable = exc
            raise
        data = await asyncio.to_thread(path.read_bytes)
        return docs.with_id(await self.svc.documents.attach_bytes(f"{name}.pdf", data, CLIENT), [])


async def ask(
    svc: docs.Answering, filings: Filings, item: Any, settings: ChatSettings, prompt_format: str
) -> tuple[str, ChatInfo, str | None]:
    """One FinanceBench item over its filing, through the chat's path: (reply, info, the usage's document phrase
    "document: 12 of 84 pages (5 passages): APPLE_2015_10K p. 31, 33")."""
    name = (item.meta or {}).get("doc_name")
    try:
        if not name:
            raise BadInput(f"{item.id} names no filing (its doc_name); check the set's file")
        att = await filings.acquire(name)
        messages = filing_messages(item, prompt_format)
        calculator = calculator_mode(svc.serving, prompt_format, [att])
        if calculator != "off":
            settings = dataclasses.replace(settings, max_tokens=max(settings.max_tokens or 0, CALL_TOKENS))
        info, parts = ChatInfo(), []
        async with contextlib.aclosing(
            svc.answer(messages, settings, info, calculator=calculator, documents=[att])
        ) as stream:
            async for _thinking, delta in stream:
                parts.append(delta)
        return "".join(parts), info, info.documents
    finally:
        filings.release(name)
