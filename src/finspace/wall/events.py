"""Gradio events per client: bounded, and cancelled when nobody opens their result stream (finspace.wall.guard uses it).

``EventTracker.refusal`` says why a client may not join (the guard answers 429); the guard records each join and
each result stream opened and closed; ``run`` sweeps once a second from the app's lifespan.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from finspace.settings import Limits

log = logging.getLogger("finspace.wall.guard")


@dataclass
class _Event:
    event_id: str
    session: str
    client: str
    joined_at: float
    streamed: bool = False


class EventTracker:
    """Gradio events per client: bounded, and cancelled when nobody opens their result stream.

    Gradio runs a joined event whether or not anyone reads its result, and never drops one whose stream is not
    opened: a client that joins hundreds and reads none fills the queue for everyone while the engine generates for
    nobody. Each join is recorded here with its client; an event counts until Gradio has delivered its result (it
    leaves the session's pending ids) or is cancelled. ``sweep`` (every second, from the app's lifespan) cancels
    events whose session has not opened its stream within ``stream_open_s``: the queued ones are removed and the
    running ones' tasks cancelled, which closes the engine's stream and aborts the vLLM request.
    """

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.clock = clock
        self.queue: Any = None  # Gradio's queue, attached once the Blocks are built
        self._events: dict[str, _Event] = {}
        self._open: dict[str, int] = {}  # session -> result streams open now
        self._admitting: dict[str, int] = {}  # client -> joins admitted and not yet answered by Gradio
        self.cancelled = 0
        self._cancelling: set[asyncio.Task] = set()  # cancels of events whose reader went away, under way

    def attach(self, queue: Any) -> None:
        self.queue = queue

    def _alive(self, ev: _Event) -> bool:
        q = self.queue
        if q is None:
            return False
        return ev.event_id in q.pending_event_ids_session.get(ev.session, ()) or ev.event_id in q.event_ids_to_events

    def prune(self) -> None:
        for eid in [eid for eid, ev in self._events.items() if not self._alive(ev)]:
            del self._events[eid]

    def in_flight(self, client: str) -> int:
        self.prune()
        return sum(1 for ev in self._events.values() if ev.client == client) + self._admitting.get(client, 0)

    def refusal(self, client: str) -> str | None:
        """Why ``client`` may not join another event now (it has its bound queued or running), else None."""
        bound = self.limits.events_per_client
        if self.in_flight(client) >= bound:
            return (
                f"this client already has {bound} requests queued or running (the bound per client, "
                "FINSPACE_MAX_EVENTS_PER_CLIENT); wait for one to finish and read its result, then try again"
            )
        return None

    def admit(self, client: str) -> str | None:
        """Check and take one of ``client``'s places in one step (no await between: 20 simultaneous joins from
        one address see each other): None when admitted (then ``settle`` once Gradio has answered), else why not."""
        refusal = self.refusal(client)
        if refusal is None:
            self._admitting[client] = self._admitting.get(client, 0) + 1
        return refusal

    def settle(self, client: str, event_id: str | None = None, session: str | None = None) -> None:
        """An admitted join was answered: its place is now its event's (``event_id``), or free (refused)."""
        n = self._admitting.get(client, 0) - 1
        if n > 0:
            self._admitting[client] = n
        else:
            self._admitting.pop(client, None)
        if event_id is not None:
            self.joined(client, event_id, session)

    def joined(self, client: str, event_id: str, session: str | None) -> None:
        q = self.queue
        event = q.event_ids_to_events.get(event_id) if q is not None else None
        session = getattr(event, "session_hash", None) or session or event_id
        self._events[event_id] = _Event(event_id, session, client, self.clock(), self._open.get(session, 0) > 0)

    def stream_opened(self, session: str) -> None:
        self._open[session] = self._open.get(session, 0) + 1
        for ev in self._events.values():
            if ev.session == session:
                ev.streamed = True

    def stream_closed(self, session: str, finished: bool = False) -> None:
        """The session's last result stream ended.

        ``finished``: Gradio ended it ("close_stream": the session had nothing left to deliver when it looked).
        An event joined while it was closing counted as streamed, but its result will come on the next stream
        the client opens: it waits for that one as a new join does (``stream_open_s``), never cancelled here.
        Cancelling it (and dropping the session's messages) made the page's next stream a 404, after which
        Gradio's page never opens another: every later chat on it hung.

        Otherwise the reader went away, and the session's events no longer count. Delivered ones are done;
        Gradio cleans up what a closed stream leaves, but keeps their ids, so they would count against the client
        forever: a page reloaded a few times would be refused. An event still running has lost its reader (the
        client was killed, the page closed): it is cancelled now. Gradio only marks it, and stops it at its next
        update, which for a Matrix converting its filings came minutes later, its slot held all that while."""
        n = self._open.get(session, 0) - 1
        if n > 0:
            self._open[session] = n
            return
        self._open.pop(session, None)
        if finished:
            self.prune()
            now = self.clock()
            for ev in self._events.values():
                if ev.session == session and ev.streamed:
                    ev.streamed, ev.joined_at = False, now
            return
        for eid in [eid for eid, ev in self._events.items() if ev.session == session and ev.streamed]:
            ev = self._events.pop(eid)
            if self._alive(ev) and self._has_task(ev):
                task = asyncio.get_running_loop().create_task(self._cancel(ev))
                self._cancelling.add(task)
                task.add_done_callback(self._cancelling.discard)

    def busy(self, session: str) -> bool:
        """Whether ``session`` has an event queued or running, or a result stream open."""
        return self._open.get(session, 0) > 0 or any(
            ev.session == session and self._alive(ev) for ev in self._events.values()
        )

    def has_session(self, session: str) -> bool:
        """Whether Gradio's queue holds messages for ``session`` (True before the queue is attached): a stream
        opened for a session it has dropped (its events swept or done) would fail half-way through its reply."""
        q = self.queue
        return q is None or session in q.pending_messages_per_session

    def session_of(self, event_id: str) -> str | None:
        ev = self._events.get(event_id)
        return ev.session if ev is not None else None

    async def sweep(self) -> int:
        """Cancel the events whose stream was not opened in time; returns how many."""
        self.prune()
        now = self.clock()
        late = [
            ev for ev in self._events.values() if not ev.streamed and now - ev.joined_at >= self.limits.stream_open_s
        ]
        if late:  # said first: a running event's cancel waits for its engine request's abort, which can be slow
            log.warning(
                "cancelled %d event(s) whose result stream was never opened (clients: %s)",
                len(late),
                ", ".join(sorted({ev.client for ev in late}))[:200],
            )
        for ev in late:
            await self._cancel(ev)
        return len(late)

    @staticmethod
    def _has_task(ev: _Event) -> bool:
        """Whether the event is running now (Gradio names its task after the event id)."""
        try:
            tasks = asyncio.all_tasks()
        except RuntimeError:  # no serving loop: nothing runs
            return False
        suffix = f"<gradio-sep>{ev.event_id}"
        return any(t.get_name().endswith(suffix) and not t.done() for t in tasks)

    async def _cancel(self, ev: _Event) -> None:
        self._events.pop(ev.event_id, None)
        self.cancelled += 1
        q = self.queue
        suffix = f"<gradio-sep>{ev.event_id}"
        tasks = [t for t in asyncio.all_tasks() if t.get_name().endswith(suffix)]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if q is None:
            return
        await q.clean_events(event_id=ev.event_id)
        ids = q.pending_event_ids_session.get(ev.session)
        if ids is not None:
            ids.discard(ev.event_id)
            if not ids:
                q.pending_event_ids_session.pop(ev.session, None)
                if self._open.get(ev.session, 0) == 0:
                    q.pending_messages_per_session.pop(ev.session, None)

    async def run(self, every_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.sweep()
            except Exception:  # noqa: BLE001 - the sweeper must outlive any one bad event
                log.exception("sweeping unread events failed")
