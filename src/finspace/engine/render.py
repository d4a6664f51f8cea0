"""Templating and tokenizing off the serving loop, in lanes by size, each thread with its own tokenizer copy.

Every chat's prompt (templated, tokenized, trimmed) and every document's token
count runs here, never in the serving loop. One thread for all of them (as
before) let one large job hold up every chat: a 4,000,000-character document
takes seconds to count. So the work goes to a lane by the size of its input:

* the small lane (one thread) takes jobs of at most ``small_chars`` characters: an
  ordinary chat is never queued behind a conversation at the size limits or a
  document;
* the large lane (``large_threads`` threads) takes the rest.

Each thread uses its own deep copy of the engine's tokenizer (a fast tokenizer
must not be used from two threads at once); tokenizers' Rust encoder releases the
GIL, so the lanes run side by side. A job that takes more than ``timeout_s`` is
answered with BadInput (its thread finishes it, then moves on): with the model's
own chat template and bounded messages a render is linear in its input, so no
job runs unbounded, and nobody waits for one past the bound.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from finspace.errors import BadInput

SMALL_CHARS = 32_000  # a few pages of conversation: the small lane's jobs
LARGE_THREADS = 2
TIMEOUT_S = 60.0


class _Lane:
    """Threads that each adopt their own copy of ``tok`` on first use."""

    def __init__(self, tok: Any, threads: int, name: str):
        self._local = threading.local()
        self._tok = tok
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"finspace-tokenize-{name}")

    def _call(self, fn: Callable, args: tuple) -> Any:
        tok = getattr(self._local, "tok", None)
        if tok is None:
            tok = self._local.tok = copy.deepcopy(self._tok)
        return fn(tok, *args)

    def submit(self, fn: Callable, args: tuple) -> asyncio.Future:
        return asyncio.get_running_loop().run_in_executor(self.pool, self._call, fn, args)


class Renderer:
    """``await run(tok, fn, *args, size=n)``: ``fn(own copy of tok, *args)`` in the lane for ``n`` characters."""

    def __init__(
        self, small_chars: int = SMALL_CHARS, large_threads: int = LARGE_THREADS, timeout_s: float = TIMEOUT_S
    ):
        self.small_chars, self.large_threads, self.timeout_s = small_chars, large_threads, timeout_s
        self._tok: Any = None
        self._lanes: tuple[_Lane, _Lane] | None = None

    def _lanes_for(self, tok: Any) -> tuple[_Lane, _Lane]:
        if self._lanes is None or self._tok is not tok:  # a new model: new copies of its tokenizer
            self.close()
            self._tok = tok
            self._lanes = (_Lane(tok, 1, "small"), _Lane(tok, self.large_threads, "large"))
        return self._lanes

    async def run(self, tok: Any, fn: Callable, *args: Any, size: int) -> Any:
        small, large = self._lanes_for(tok)
        lane = small if size <= self.small_chars else large
        try:
            return await asyncio.wait_for(lane.submit(fn, args), self.timeout_s)
        except asyncio.TimeoutError:
            raise BadInput(
                f"templating and tokenizing this request took over {self.timeout_s:g} s; shorten the "
                f"conversation or the document"
            ) from None

    def close(self) -> None:
        if self._lanes is not None:
            for lane in self._lanes:
                lane.pool.shutdown(wait=False, cancel_futures=True)
        self._lanes, self._tok = None, None
