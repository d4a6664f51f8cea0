"""The Engine's stops: the running vLLM engine stopped (each of its chats ended saying why), its memory waited
for, the watchdog that restarts a dead engine once, and ``close``.

A mixin of ``Engine`` (core.py), which owns the state it changes: the running AsyncLLM and its processes, the
active request ids, the switch lock and the switch itself (a restart is a switch).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import Any

from finspace import planner
from finspace.engine import process
from finspace.engine.chatting import RESTARTING
from finspace.errors import EngineFailed, FinspaceError, ModelSwitching

log = logging.getLogger("finspace.engine")


class Stopping:
    async def _stop_current(self, message: str) -> None:
        llm = self._llm
        if llm is None:
            return
        self._llm = None
        self._tokenizer = None
        if self.freeze_heap:
            gc.unfreeze()  # what the stopped engine leaves in cycles must be collectable
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()
        self._watchdog = None
        ids = self._end_active(ModelSwitching(message))
        if ids:
            with contextlib.suppress(Exception):
                await llm.abort(ids)
            await asyncio.sleep(0)  # let the streams see their final output
        await self._shutdown(llm)

    def _end_active(self, reason: FinspaceError) -> list[str]:
        """Every running chat's id; each will end with ``reason`` once vLLM aborts it."""
        ids = list(self._active)
        for rid in ids:
            self._abort_reasons[rid] = reason
        return ids

    async def _shutdown(self, llm: Any, *, died: bool = False) -> None:
        held = await process.shutdown(llm, self._engine_pids, self.stop_grace_s, died=died)
        self._engine_ipc = tuple(sorted(set(self._engine_ipc) | set(held)))  # removed once they have exited

    async def _wait_release(self, next_plan: planner.Plan | None) -> None:
        """Wait until the stopped engine's memory is free (process.wait_release); forget its processes."""
        old, self._engine_pids = self._engine_pids, ()
        ipc, self._engine_ipc = self._engine_ipc, ()
        await process.wait_release(
            self.monitor, next_plan, old, ipc, on_gpu=self.gpu is not None, timeout_s=self.release_timeout_s
        )

    # --------------------------------------------------------------- watchdog
    async def _watch(self, llm: Any) -> None:
        """Detect a dead engine (EngineDeadError or its process killed) and restart it once."""
        while True:
            await asyncio.sleep(0.5)
            if self._llm is not llm or self._closed:
                return
            if self._alive():
                continue
            if self._switch_lock.locked():
                continue
            entry = self._entry
            log.error("the engine for %s died; restarting it once", entry.key if entry else "?")
            self._state = "failed"
            self._last_error = f"the engine process for {entry.label if entry else '?'} died; restarting it"
            async with self._switch_lock:
                if self._llm is not llm:
                    return
                ids = self._end_active(EngineFailed(RESTARTING))
                self._llm = None
                self._watchdog = None
                if ids:  # end every stream now with that message, whether or not vLLM has noticed the death yet
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(llm.abort(ids), 2.0)
                await self._shutdown(llm, died=True)
                self._entry, self._plan = None, None
                self._restarts += 1
                self._last_restart = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                try:
                    await self._switch(entry, None, reason="restart")
                    self._last_error = f"the engine died and was restarted at {self._last_restart}"
                except FinspaceError as exc:
                    self._set_none(f"the engine died and the automatic restart failed: {exc}")
            return

    # ----------------------------------------------------------------- close
    async def close(self) -> None:
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        await self._stop_current("the server is shutting down")
        with contextlib.suppress(Exception):
            await self._wait_release(None)
        self._renderer.close()
        self._launcher.close()
        self._entry, self._plan, self._state = None, None, "none"
