"""Gradio's per-session state, dropped for sessions that never open a heartbeat.

Gradio keeps each session's state (a chat's conversation and its attached document: about 270 MiB for a large
inline-XBRL filing) until the page's heartbeat connection closes, then an hour more, or until 10,000 newer
sessions push it out (``Blocks.state_session_capacity``). A page opens its heartbeat
(``GET /gradio_api/heartbeat/<session>``) as it loads; a script that joins events without one is never
"closed", so one address attaching documents from fresh sessions filled a 16 GB Space in minutes (issue 41).
Gradio's ``gr.State(time_to_live=...)`` counts from the state's last write, so it would also drop an open page's
document while its user reads; the sweep here drops only sessions that never opened a heartbeat, that have no
event queued, running or streaming, and that no event has used for ``idle_s`` (FINSPACE_SESSION_IDLE_S).
Each State's ``delete_callback`` runs, as Gradio's own deletion does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("finspace.wall")
HEARTBEAT = "/gradio_api/heartbeat/"


class Sessions:
    def __init__(self, idle_s: float, busy: Callable[[str], bool] = lambda session: False):
        self.idle_s, self.busy = idle_s, busy
        self.holder: Any = None  # Gradio's StateHolder, attached once the app is mounted
        self.beating: set[str] = set()  # sessions that opened a heartbeat: Gradio's own rules keep them

    def attach(self, holder: Any) -> None:
        self.holder = holder

    def heard(self, path: str) -> None:
        """The guard saw ``path``: a heartbeat's marks its session as a page's."""
        if path.startswith(HEARTBEAT):
            self.beating.add(path[len(HEARTBEAT) :][:128])

    def sweep(self) -> int:
        """Drop the state of every session without a heartbeat, idle ``idle_s``; how many were dropped."""
        holder = self.holder
        if holder is None:
            return 0
        now, dropped = datetime.datetime.now(), 0
        for session in list(holder.session_data):
            last = holder.time_last_used.get(session)
            if (
                session in self.beating
                or last is None
                or (now - last).total_seconds() < self.idle_s
                or self.busy(session)
            ):
                continue
            holder.delete_state(session)  # each State's delete_callback, as Gradio's deletion
            with holder.lock:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
            dropped += 1
        self.beating &= set(holder.session_data)
        if dropped:
            log.info(
                "dropped the state of %d session(s) that never opened a heartbeat, idle %g s", dropped, self.idle_s
            )
        return dropped

    async def run(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - the sweeper must outlive any one bad session
                log.exception("sweeping sessions without a heartbeat failed")
