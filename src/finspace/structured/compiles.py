"""At most ``per_client`` new schemas compiling at once for each client.

vLLM compiles a request's grammar before its first token, in its engine process, and keeps what it compiled:
its xgrammar backend builds ``GrammarCompiler(cache_enabled=True, cache_limit_bytes=VLLM_XGRAMMAR_CACHE_MB)``,
keyed by the schema's text, so a schema sent again is not compiled again (finspace passes the schema as a dict;
vLLM serialises it the same way each time). What vLLM does not do is keep one client from filling its compile
threads with new schemas, nor stop a compile whose client left: a started compile runs to its end. So:

- the cost bound (finspace.structured.cost) keeps any one compile short, before it starts;
- this gate lets a client have at most ``per_client`` schemas that this app has not seen compiled yet waiting
  for their first token; one more is ``Busy`` (429) naming the fix. A schema whose request has produced a token
  counts as compiled: sending it again takes no slot. A client that leaves before its token keeps its slot for
  the compile's estimated time (its cost figure), since the compile goes on in vLLM.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

from finspace.errors import Busy
from finspace.structured.cost import schema_cost

PER_CLIENT = 1
KNOWN = 1024  # schemas remembered as compiled (vLLM's cache holds more; a forgotten one just takes a slot again)
UNIT_S = 2e-4  # seconds of compile per unit of finspace.structured.cost, with a margin (0.1 ms measured)
MAX_LINGER_S = 30.0


class Slot:
    """One schema compiling for a client; ``compiled()`` once its request has a token."""

    def __init__(self) -> None:
        self.done = False
        self.until: float | None = None  # a client that left: the slot stays taken until then

    def compiled(self) -> None:
        self.done = True


class CompileGate:
    def __init__(self, per_client: int = PER_CLIENT, known: int = KNOWN, clock=time.monotonic):
        self.per_client, self.known_max, self.clock = per_client, known, clock
        self._known: OrderedDict[str, None] = OrderedDict()
        self._slots: dict[str, list[Slot]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(schema: dict) -> str:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def compiling(self, client: str | None) -> int:
        with self._lock:
            return len(self._live(client or "local"))

    def _live(self, who: str) -> list[Slot]:
        now = self.clock()
        live = [s for s in self._slots.get(who, []) if s.until is None or s.until > now]
        if live:
            self._slots[who] = live
        else:
            self._slots.pop(who, None)
        return live

    @contextlib.contextmanager
    def hold(self, client: str | None, schema: dict | None) -> Iterator[Slot]:
        """A slot for ``schema``'s compile while the block runs; the block calls ``slot.compiled()`` when the
        request has its first token. No slot for a schema already compiled. Busy when the client already has
        ``per_client`` new schemas compiling. A block left before its token (the client went away, an error)
        keeps the slot for the compile's estimated time: vLLM cannot stop a compile that has started."""
        slot = Slot()
        if schema is None:
            yield slot
            return
        key, who = self.key(schema), client or "local"
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                yield_slot = None
            else:
                live = self._live(who)
                if len(live) >= self.per_client:
                    raise Busy(
                        f"{len(live)} new response_format schema(s) of yours are still compiling (the limit "
                        f"is {self.per_client} at once per client); wait for that request's first token, or "
                        f"send a schema you have used before (compiled grammars are cached)",
                        retry_after_s=5,
                    )
                self._slots.setdefault(who, []).append(slot)
                yield_slot = slot
        try:
            yield slot
        finally:
            if yield_slot is not None:
                self._release(who, key, schema, slot)

    def _release(self, who: str, key: str, schema: dict, slot: Slot) -> None:
        with self._lock:
            if slot.done:
                self._slots[who] = [s for s in self._slots.get(who, []) if s is not slot]
                self._known[key] = None
                while len(self._known) > self.known_max:
                    self._known.popitem(last=False)
            else:
                slot.until = self.clock() + min(MAX_LINGER_S, schema_cost(schema) * UNIT_S)
            self._live(who)
