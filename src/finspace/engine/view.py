"""What the doors may read of the engine: its state, never its work.

``Service.serving`` is one of these. The page, the Gradio API, ``/v1`` and MCP read the serving model, its plan,
its health and where it runs from it; everything that makes the engine work (a chat, a token count, a load)
goes through a ``Service`` method, so a door cannot build a request of its own. The view holds the engine
without exposing it: ``tests/test_imports.py`` checks that no module outside ``service.py`` reads ``.engine``
of the service.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from finspace.engine.api import EngineAPI, ServingState
from finspace.engine.records import Health
from finspace.tools.calls import reading_parser

if TYPE_CHECKING:
    from finspace.host.hardware import GPUSpec
    from finspace.models.catalog import ModelEntry
    from finspace.planner.result import Plan


class ServingView:
    """Read-only: each member asks the engine now (a switch or a restart shows at the next read)."""

    def __init__(self, engine: EngineAPI):
        self._engine = engine

    @property
    def kind(self) -> str:  # "local" (vLLM in-process) or "remote" (an endpoint)
        return self._engine.kind

    @property
    def gpu(self) -> GPUSpec | None:
        return self._engine.gpu

    @property
    def gpus(self) -> int:
        return self._engine.gpus

    def health(self) -> Health:
        return self._engine.health()

    @property
    def entry(self) -> ModelEntry | None:
        return self._engine.entry

    @property
    def plan(self) -> Plan | None:
        return self._engine.plan

    @property
    def max_model_len(self) -> int:
        return self._engine.max_model_len

    @property
    def ready(self) -> bool:
        return self._engine.ready

    def where(self) -> str:
        return self._engine.where()

    @property
    def tools_refused(self) -> str | None:
        """Why the model server refused tools (a remote one started without them), else None (read by
        tool_loop.offered, which is handed the view as often as the engine)."""
        return getattr(self._engine, "tools_refused", None)

    @property
    def tool_parser(self) -> str | None:
        """The vLLM parser that reads this model's tool calls (None: it has none)."""
        return reading_parser(self._engine)


class Provenance:
    """The serving model's provenance for a reply's record and a matrix's export: key, repo, revision, dtype,
    context, the load ledger's record id and when it loaded (the ledger read once per load)."""

    def __init__(self, engine: EngineAPI, ledger: Any = None):
        self._engine, self._ledger = engine, ledger
        self._cache: tuple[tuple[str, float | None], dict[str, Any]] | None = None

    def __call__(self) -> dict[str, Any] | None:
        entry, h = self._engine.entry, self._engine.health()
        if entry is None:
            return None
        stamp = (entry.key, h.loaded_since)
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        sv = entry.serving
        out = {
            "model_key": entry.key,
            "label": entry.label,
            # a converted model names its package and file; a local folder only "local" (no path leaves)
            "repo": entry.repo or (entry.source if getattr(entry, "convert", None) is not None else "local"),
            "revision": entry.revision,
            "dtype": sv.dtype,
            "quantization": sv.quantization or sv.prequantized,
            "max_model_len": self._engine.max_model_len or None,
            "load_record_id": self._ledger.last_load_id(entry.key) if self._ledger is not None else None,
            "loaded_at": _iso(h.loaded_since),
        }
        self._cache = (stamp, out)
        return out


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _iso(ts: float | None) -> str | None:
    if ts is None or not _finite(ts) or not 0 <= ts <= 253_402_300_799:  # up to 9999-12-31, as ui.saved
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _conforms(view: ServingView) -> ServingState:  # mypy (make lint) checks the view against the protocol
    return view
