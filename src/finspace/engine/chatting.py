"""The Engine's chat streaming: a request checked, templated and tokenized off the serving loop, streamed from
vLLM, split into thinking and answer for reasoning models, aborted in vLLM when the caller stops reading.

A mixin of ``Engine`` (core.py), which owns the state it reads: the running AsyncLLM, its catalogue entry,
tokenizer and context, the active request ids and why any of them was ended.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from finspace.engine import process, stream
from finspace.engine.prompt import (
    ChatSettings,
    build_prompt,
    check_template_kwargs,
    normalize_messages,
    sampling_for,
    source_chars,
)
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, Busy, EngineFailed, ModelSwitching, NotReady
from finspace.structured import refusals

RESTARTING = "the engine stopped unexpectedly and is restarting; send your message again in a few seconds"


class ChatStreams:
    kind = "local"  # finspace.engine.api.EngineAPI: vLLM in this process's children

    @property
    def ready(self) -> bool:
        return self._entry is not None and self._tokenizer is not None and self._state == "ready"

    def where(self) -> str:
        return "this machine"

    async def open(self) -> None:
        """Nothing to do at start: the service loads the default model."""

    def read_memory(self, monitor) -> list:
        return monitor.read(self._engine_pids)

    async def count_tokens(self, texts) -> list[int]:
        """Each text's tokens in the loaded model's tokenizer (no special tokens), in the renderer's lanes."""
        texts = list(texts)
        return await self.run_tokenizer(_count_all, texts, size=sum(len(t) for t in texts))

    async def measure(self, fn, *, size: int | None = None):
        """``fn(count)`` in the renderer's lane, ``count(text)`` the loaded tokenizer's count (EngineAPI)."""
        return await self.run_tokenizer(_with_counter, fn, size=size)

    async def run_tokenizer(self, fn, *args, size: int | None = None):
        """``fn(tokenizer, *args)`` off the serving loop, in the renderer's lane for ``size`` characters (by
        default the text arguments' length; the large lane when there are none: engine/render.py). NotReady
        with no model loaded."""
        tok = self._tokenizer
        if tok is None:
            raise NotReady(
                f"no model is loaded ({self._last_error or 'load one from the model picker'}); "
                "a document is measured in the loaded model's tokens"
            )
        if size is None:
            texts = [len(a) for a in args if isinstance(a, str)]
            size = sum(texts) if texts else self._renderer.small_chars + 1
        return await self._renderer.run(tok, fn, *args, size=size)

    async def chat(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[str, None]:
        """Stream the answer to ``messages`` as text deltas (a reasoning model's thinking left out: see
        ``chat_parts``). Cancelling it aborts the request."""
        async with contextlib.aclosing(self.chat_parts(messages, settings, info)) as parts:
            async for _thinking, answer in parts:
                if answer:
                    yield answer

    async def chat_parts(
        self, messages: Any, settings: ChatSettings | None = None, info: ChatInfo | None = None
    ) -> AsyncGenerator[tuple[str, str], None]:
        """Stream the reply as (thinking delta, answer delta) pairs; the thinking is split off by vLLM's
        reasoning parser for models the catalogue marks ``reasoning`` (engine/reasoning.py)."""
        settings = settings or ChatSettings()
        info = info if info is not None else ChatInfo()
        entry, tok = self._entry, self._tokenizer
        resumed = ""
        if (
            settings.continue_final_message
            and isinstance(messages, (list, tuple))
            and messages
            and isinstance(messages[-1], dict)
            and isinstance(messages[-1].get("content"), str)
        ):
            resumed = messages[-1]["content"]
        raw = self._raw(messages, settings, info, resumed)
        parser = entry.reasoning if entry is not None else None
        async with contextlib.aclosing(raw):
            async for pair in stream.split(raw, tok, parser, settings, info, resumed):
                yield pair

    async def _raw(
        self, messages: Any, settings: ChatSettings, info: ChatInfo, resumed: str
    ) -> AsyncGenerator[tuple[str, list[int]], None]:
        """vLLM's deltas (text, token ids) for the request; aborted in vLLM when closed early."""
        llm, entry, tok, max_len = self._llm, self._entry, self._tokenizer, self._max_model_len
        if llm is None or entry is None or self._state != "ready":
            if self._state in ("switching", "loading"):
                raise ModelSwitching(
                    f"the model is switching to {self._loading_key}; send your message again when it is ready"
                )
            raise NotReady(f"no model is loaded ({self._last_error or 'load one from the model picker'})")
        # After the check: with no model loaded yet, importing vLLM here would hold the serving loop ~5 s
        engine_dead, refused = process.engine_dead_error(), process.client_error()
        if len(self._active) >= self.max_in_flight:
            raise Busy(f"the server is busy ({len(self._active)} requests running); retry in 5 s", retry_after_s=5)
        msgs = normalize_messages(messages, continue_final=settings.continue_final_message)
        sp = sampling_for(entry, settings, max_len)
        check_template_kwargs(entry, settings.chat_template_kwargs)
        rid = f"chat-{uuid.uuid4().hex}"
        self._active.add(rid)  # holds its place in the queue bound while it is tokenized
        finished = submitted = False
        try:
            # Templating and tokenizing (and trimming: several encodes) run off the serving loop, in the
            # renderer's lane for the prompt's size: a conversation at the size limits takes ~1 s to encode, and
            # streams, pages, /health and smaller chats must not wait for it (engine/render.py).
            ids, dropped = await self._renderer.run(
                tok, _build, msgs, entry, settings, sp["max_tokens"], max_len, size=source_chars(msgs, entry, settings)
            )
            info.request_id, info.model_key, info.trimmed_messages, info.prompt_tokens = (
                rid,
                entry.key,
                dropped,
                len(ids),
            )
            if self.test_prompt_log:  # TEST-ONLY: off unless FINSPACE_TEST_PROMPT_LOG names a file
                await self._renderer.run(tok, record_prompt_with, self.test_prompt_log, rid, ids, size=len(ids))
            params = process.delta_sampling(sp, settings.stop, settings.json_schema)
            if self._llm is not llm:  # the model switched while this prompt was tokenized
                raise ModelSwitching(
                    f"the model is switching to {self._loading_key or 'another model'}; "
                    f"send your message again when it is ready"
                )
            if self.test_replay and entry.generate and entry.reasoning:  # TEST-ONLY (engine/stream.py)
                finished = True
                async for delta in stream.replay(self.test_replay, tok, sp["max_tokens"], info, resumed):
                    yield delta
                return
            submitted = True
            gen = llm.generate({"prompt_token_ids": ids}, params, rid)
            async with contextlib.aclosing(gen):
                async for out in gen:
                    o = out.outputs[0]
                    info.output_tokens += len(o.token_ids)
                    if out.finished:
                        finished = True
                        info.finish_reason = o.finish_reason
                        reason = self._abort_reasons.pop(rid, None)
                        if reason is not None:
                            raise reason
                    if o.text:
                        if info.first_token_at is None:
                            info.first_token_at = time.monotonic()
                        yield o.text, list(o.token_ids)
        except engine_dead:
            finished = True
            reason = self._abort_reasons.pop(rid, None)
            raise reason or EngineFailed(RESTARTING) from None
        except refused as exc:  # vLLM refused the request (a schema xgrammar cannot build): the caller's to fix
            finished = True
            raise BadInput(refusals.explain(exc)) from None
        finally:
            self._active.discard(rid)
            self._abort_reasons.pop(rid, None)
            if submitted and not finished and self._llm is llm:
                with contextlib.suppress(Exception):
                    await llm.abort(rid)


def count_with(tok: Any, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def _count_all(tok: Any, texts: list[str]) -> list[int]:
    return [count_with(tok, t) for t in texts]


def _with_counter(tok: Any, fn: Any) -> Any:
    return fn(lambda text: count_with(tok, text))


def _build(
    tok: Any, msgs: list[dict], entry: Any, settings: ChatSettings, max_tokens: int, max_len: int
) -> tuple[list[int], int]:
    return build_prompt(msgs, entry, settings, max_tokens, tok, max_len)


def record_prompt_with(tok: Any, path: str, rid: str, ids: list[int]) -> None:
    record_prompt(path, tok, rid, ids)


def record_prompt(path: str, tok: Any, rid: str, ids: list[int]) -> None:
    """TEST-ONLY: append the prompt the engine receives, decoded, as one JSON line to ``path``."""
    import json

    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"request_id": rid, "tokens": len(ids), "prompt": tok.decode(ids)}) + "\n")
