"""What the REST routes, the Gradio UI (and the OpenAI API) share: one object per app, no globals.

``Service`` wraps the engine (any ``finspace.engine.api.EngineAPI``: vLLM in-process, or a remote endpoint;
it never touches either implementation's internals) for the boundaries: it starts model loads as background
tasks owned by the app (a closed browser tab or a dropped HTTP request never cancels a load halfway), checks the
admin token in constant time, and builds the JSON views (/health, /models, /loads) both boundaries return.
Domain errors (finspace.errors) pass through unchanged; each boundary translates them once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from finspace.models.catalog import Catalog, ModelEntry
from finspace.documents.desk import DocumentDesk, upload_folder
from finspace.documents.gate import ConversionGate
from finspace.engine import MAX_MESSAGE_CHARS, MAX_TOKENS_CAP, ChatInfo, ChatSettings  # noqa: F401 - the UI's names
from finspace.engine.api import EngineAPI
from finspace.engine.view import Provenance, ServingView
from finspace.fit.verdict import Verdict, verdict_of  # noqa: F401 - Verdict: the views' name
from finspace.matrix.desk import MatrixDesk
from finspace.edgar.desk import EdgarDesk
from finspace.scoreboard.desk import ScoreDesk
from finspace.models.presets import Presets, load_presets, presets_path
from finspace.errors import (
    BadInput,
    DoesNotFit,
    EngineFailed,
    FinspaceError,
    SwitchInProgress,
    redact,
)
from finspace.wall.clients import request_client
from finspace.fit.marks import LedgerMarks, model_rows
from finspace.fit.runner import FitRunner
from finspace.ledger_line import jsonable
from finspace.settings import Settings
from finspace.wall.throttle import Throttle
from finspace.wall import secrets
from finspace.host.memory import MemoryHistory
from finspace.engine.health_body import health_body
from finspace.grounding import chat as grounded
from finspace.tools.calls import CallReader
from finspace.host.versions import versions

log = logging.getLogger("finspace.service")

MAX_LOADS_LIMIT = 1000


class Service:
    """Shared by the REST routes and the UI of one app. Create it anywhere; use it in the serving loop."""

    def __init__(
        self,
        engine: EngineAPI,
        catalog: Catalog,
        monitor,
        *,
        ledger=None,
        admin_token: str | None = None,
        settings: Settings | None = None,
    ):
        self.engine = engine
        self.serving = ServingView(engine)  # what the doors read of it (finspace.engine.view)
        self.provenance = Provenance(engine, ledger)  # svc.provenance(): a reply's or a matrix's record
        self.catalog = catalog
        self.monitor = monitor
        self.ledger = ledger
        self.settings = settings or Settings(admin_token=admin_token or None)
        self.presets: Presets = load_presets(presets_path(getattr(catalog, "path", None)))
        self.conversions = ConversionGate.of(self.settings.documents)  # conversions at once: app, per client
        self.documents = DocumentDesk(
            engine,
            self.conversions,
            self.settings.documents,
            upload_folder(self.settings),
            self.models,
            self.settings.matrix.max_documents,
        )  # a conversation's documents
        self.matrix = MatrixDesk(
            engine,
            self.conversions,
            self.settings.documents,
            upload_folder(self.settings),
            self.settings.matrix,
            getattr(catalog, "path", None),
        )  # the Filing Matrix
        self.scoreboard = ScoreDesk(self, engine, self.settings.evals)  # the Scoreboard (finspace.scoreboard)
        self.edgar = EdgarDesk(self, self.settings.edgar, self.settings.data_dir)  # companies on EDGAR (finspace.edgar)
        self.admin_token = self.settings.admin_token
        self._secrets = self.settings.secrets
        self.throttle = Throttle(self.settings.limits)  # wrong admin tokens and API keys per address
        self.fits = FitRunner(self.check_fit, self.settings.fits_per_client, self.settings.fit_timeout_s)
        self.blocking: str | None = None  # what keeps this machine from serving (finspace.fit.doctor), set at start
        self.storage_note: str | None = None  # why the load ledger will not survive a restart, if it won't
        self.uploads = None  # finspace.wall.uploads.Held, set by build_app: which client owns which upload
        self.started_at = time.time()
        self.versions = versions()
        self.active_streams = 0
        self.memory = MemoryHistory(lambda: self.engine.read_memory(self.monitor))  # the memory plot's readings
        self._load_task: asyncio.Task | None = None
        self._load_key: str | None = None
        self._load_error: str | None = None  # the last failed load, for /health when the engine has none
        self._progress: tuple[str, float, str] | None = None  # the running load's (stage, fraction, message)
        self._verdicts: dict[str, Verdict] = {}
        self.marks = LedgerMarks(ledger, catalog, self.redact)  # the ledger's word per model, on the page
        self.on_close: list = []  # called when the app stops (the exports' folder is removed)

    # ------------------------------------------------------------------ access
    @property
    def locked(self) -> bool:
        """True when switching models needs the admin token."""
        return self.admin_token is not None

    @property
    def switching(self) -> str:
        """ "token", "open" or "off" (a public Space with no admin token; see Settings.switching)."""
        return self.settings.switching

    def authorize(self, token: Any, client: str | None = None, action: str = "switching models") -> None:
        """Raise unless ``token`` may switch models (or take the GPU otherwise: ``action`` names it in the
        messages): Forbidden when switching is off, Busy (429) while ``client`` is throttled for wrong tokens,
        Unauthorized for a missing or wrong token. ``client`` is the caller's address at the public boundaries;
        None (an internal call) is not throttled."""
        secrets.authorize(self.switching, token, self._is_admin_token, self.throttle, client, action)

    def client_of(self, request: Any) -> str | None:
        """The caller's address from a Gradio/Starlette request (None when there is none, as in tests)."""
        return request_client(request, self.settings.limits.trusted_proxies)

    def check_throttle(self, client: str | None) -> None:
        self.throttle.check(client)

    def note_failure(self, client: str | None) -> None:
        self.throttle.failed(client)

    async def answer(
        self, messages: Any, settings: ChatSettings, info: ChatInfo, *, calculator: str = "off", documents: Any = None
    ) -> AsyncGenerator[tuple[str, str], None]:
        """The one way a question is answered, at every door that answers (the page, the Gradio API, MCP, the
        Companies tab, the Scoreboard's filings): ``documents`` (Attached) placed within the model's context after
        all else the prompt holds (``info.documents`` gets their usage phrase), then the reply's (thinking,
        answer) deltas with the calculator or the filing tools as ``calculator`` says. /v1 passes through
        (``generate``): its client runs its own tools."""
        if documents:
            settings, info.documents = await self.with_document(documents, messages, settings, calculator=calculator)
        async with contextlib.aclosing(
            self.chat_parts(messages, settings, info, calculator=calculator, documents=documents or None)
        ) as parts:
            async for pair in parts:
                yield pair

    def chat_parts(
        self, messages: Any, settings: ChatSettings, info: ChatInfo, *, calculator: str = "off", documents: Any = None
    ):
        """The reply's (thinking, answer) deltas; ``calculator`` "auto"/"always" (a forced first call) offers
        models with a tool parser the calculator, and with ``documents`` (Attached) the filing tools
        (finspace.grounding.chat; steps in ``info.tool_steps``)."""
        return grounded.chat_parts(
            self.engine,
            messages,
            settings,
            info,
            calculator=calculator,
            documents=documents,
            max_rounds=self.settings.tool_rounds,
        )

    async def check_answer(self, answer: str, documents: Any) -> dict:  # figures against cited pages, and those pages
        return await asyncio.to_thread(grounded.checked, answer, list(documents or ()))

    def chat_tools(self, calculator: str = "off", documents: Any = None) -> tuple[dict, ...] | None:
        return grounded.chat_tools(self.engine, calculator, documents)  # what chat_parts offers (None: none)

    async def with_document(
        self, attached: Any, messages: Any, settings: ChatSettings, *, calculator: str = "off"
    ) -> tuple[ChatSettings, str]:  # finspace.grounding.chat
        return await grounded.with_documents(self.documents, self.engine, attached, messages, settings, calculator)

    def generate(self, messages: Any, settings: ChatSettings, info: ChatInfo) -> Any:
        """The model's (thinking, answer) deltas as it writes them, nothing offered: /v1 (its client runs tools)."""
        return self.engine.chat_parts(messages, settings, info)

    def call_reader(self, tools: Any) -> CallReader:  # /v1: the calls in a reply, read with the model's parser
        return CallReader(self.serving.tool_parser, getattr(self.engine, "tokenizer", None), tools)

    def redact(self, text: Any) -> Any:
        return redact(text, self._secrets)

    # ------------------------------------------------------------------- plans
    @property
    def on_gpu(self) -> bool:
        return self.engine.gpu is not None

    def verdict(self, entry_or_key: ModelEntry | str) -> Verdict:
        """The planner's verdict for one catalogue model on this machine (cached: hardware doesn't change)."""
        entry = entry_or_key if isinstance(entry_or_key, ModelEntry) else self.catalog.get(entry_or_key)
        cached = self._verdicts.get(entry.key)
        if cached is not None:
            return cached
        v = verdict_of(self.engine, entry)
        self._verdicts[entry.key] = v
        return v

    def check_loadable(self, key: Any) -> ModelEntry:
        """UnknownModel (422) for anything not a catalogue key, DoesNotFit (400) when the planner says no."""
        if not isinstance(key, str):
            raise BadInput(
                f"model must be a catalogue key (text), got {type(key).__name__}; "
                f"choose one of {', '.join(self.catalog.keys())}"
            )
        entry = self.catalog.get(key)
        v = self.verdict(entry)
        if not v.fits:
            raise DoesNotFit(v.reason, plan=v.plan)
        return entry

    # ------------------------------------------------------------------- loads
    @property
    def load_running(self) -> bool:
        return self._load_task is not None and not self._load_task.done()

    @property
    def load_error(self) -> str | None:
        """The last failed load's message (redacted), for views when the engine has none."""
        return self._load_error

    @property
    def loading_key(self) -> str | None:
        return self._load_key

    @property
    def load_task(self) -> asyncio.Task | None:
        """The running (or last) background load, to wait on."""
        return self._load_task

    def start_default_load(self, key: str) -> None:
        """The load at start-up: a refusal is recorded for /health and the page, never raised."""
        try:
            self.start_load(key)
            log.info("loading the default model %s in the background", key)
        except FinspaceError as exc:
            self._load_error = self.redact(str(exc))
            log.error("cannot load the default model %s: %s", key, self._load_error)

    @property
    def load_progress(self) -> tuple[str, float, str] | None:
        return self._progress if self.load_running else None

    def start_load(self, key: Any) -> asyncio.Task:
        """Validate ``key`` and start loading it in the background; the task belongs to the app.

        Raises at once: BadInput/UnknownModel (422), SwitchInProgress or EvalRunning (409), DoesNotFit (400).
        """
        if self.blocking:
            raise EngineFailed(f"no model can load on this machine: {self.blocking}")
        entry = self.check_loadable(key)
        self.scoreboard.check_switch()  # EvalRunning (409) while a scoreboard run goes
        if self.load_running or self.engine.health().state in ("loading", "switching"):
            busy = self._load_key or self.engine.health().loading_key
            raise SwitchInProgress(
                f"a model switch is in progress (loading {busy}); wait for it to finish, then try again"
            )
        self._load_key = entry.key
        self._progress = ("plan", 0.0, f"checking {entry.label}")
        task = asyncio.get_running_loop().create_task(self._run_load(entry.key), name=f"finspace-load-{entry.key}")
        task.add_done_callback(_retrieve)  # failures are logged and shown on /health, never "never retrieved"
        self._load_task = task
        return task

    async def _run_load(self, key: str):
        def progress(stage: str, fraction: float, message: str) -> None:
            self._progress = (stage, float(fraction), message)

        try:
            health = await self.engine.load(key, progress=progress)
            self._load_error = None
            return health
        except FinspaceError as exc:
            self._load_error = self.redact(str(exc))
            log.warning("loading %s failed: %s", key, self._load_error)
            raise
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._load_error = f"loading {key} failed unexpectedly ({type(exc).__name__}); see the server log"
                log.exception("loading %s failed", key)
            raise

    async def load(self, key: Any):
        """Start a load and wait for it. A cancelled caller leaves the load running (shield)."""
        task = self.start_load(key)
        return await asyncio.shield(task)

    async def wait_load(self, timeout: float | None = None) -> None:
        task = self._load_task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):  # a failed load was already logged and recorded
                await asyncio.wait_for(asyncio.shield(task), timeout)

    async def open(self) -> None:
        """At start, in the serving loop: the engine's own start (a remote engine's client and probe)."""
        await self.engine.open()

    async def close(self, timeout: float = 180.0) -> None:
        """Shutdown: let a running load finish (vLLM's start-up can't be interrupted safely), then stop the engine."""
        await self.wait_load(timeout)
        task = self._load_task
        if task is not None and not task.done():
            task.cancel()
        await self.scoreboard.close()  # a running scoreboard run is stored, partial, before the engine stops
        with contextlib.suppress(Exception):
            await self.engine.close()
        for fn in self.on_close:
            with contextlib.suppress(Exception):
                fn()

    # ------------------------------------------------------------------ memory
    def read_memory(self) -> list:
        """Device readings, at most every SAMPLE_EVERY_S; each new reading joins the plot's history."""
        return self.memory.read()

    def history(self) -> list[tuple[float, list]]:
        return self.memory.history()

    # ------------------------------------------------------------------- views
    def health(self) -> tuple[dict, int]:
        """The /health body and its HTTP status (200 only when a model is ready; finspace.engine.health_body)."""
        h = self.engine.health()
        readings = self.read_memory()
        own = {
            "uptime_s": round(time.time() - self.started_at, 1),
            "version": self.versions,
            "admin_token_required": self.locked,
            "switching": self.switching,
            "blocking": self.blocking,
            "ledger": {
                "enabled": self.ledger is not None,
                "persistent": self.storage_note is None,
                "note": self.storage_note,
            },
        }
        return health_body(
            self.engine, h, readings, self.redact, blocking=self.blocking, load_error=self._load_error, service=own
        )

    def ledger_marks(self) -> dict[str, dict]:
        """What the load ledger knows per model on this GPU (finspace.fit.marks)."""
        return self.marks.read(self.engine.hardware_info().get("gpu_key"), self.on_gpu)

    def ledger_mark(self, key: str) -> dict | None:
        return self.ledger_marks().get(key)

    def models(self) -> list[dict]:
        """The catalogue, each model with the planner's verdict for this machine and the ledger's mark."""
        return model_rows(self.catalog.entries, self.verdict, self.ledger_marks(), self.engine.health().model_key)

    def loads(self, limit: Any = 50) -> list[dict]:
        """The last ``limit`` load records from the ledger (newest last)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LOADS_LIMIT:
            raise BadInput(f"limit must be a whole number in [1, {MAX_LOADS_LIMIT}], got {str(limit)[:40]}")
        if self.ledger is None:
            return []
        try:
            records = self.ledger.records(limit)
        except FinspaceError:
            raise
        except Exception as exc:
            log.exception("reading the load ledger failed")
            raise FinspaceError(f"cannot read the load ledger ({type(exc).__name__}); see the server log") from None
        return [jsonable(self.redact_record(r)) for r in list(records)[-limit:]]

    def check_fit(
        self, config_text: Any, repo: Any, gpu: Any, gpus: Any = None, *, caller_token: Any = None, **settings: Any
    ) -> dict:
        """Will it fit? for any model (finspace.fit.service); reads the Hub for a repo id: call from a thread. The
        Hub is read with the Space's HF_TOKEN only for a caller who gave the admin token; anyone else reads it
        without a token (``False``: not even the environment's), so public repos only, as that caller could."""
        from finspace.fit.service import check_fit

        default = self.engine.gpu.key if self.engine.gpu is not None else "l40s"
        token = self.settings.hf_token if self._is_admin_token(caller_token) else False
        return check_fit(
            config_text, repo, gpu, gpus, default_gpu=default, hf_token=token, catalog=self.catalog, **settings
        )

    def is_api_key(self, token: Any) -> bool:
        """True when ``token`` is one of FINSPACE_API_KEYS (/v1's), every key compared in constant time."""
        return secrets.is_api_key(token, self.settings.api_keys)

    def _is_admin_token(self, token: Any) -> bool:  # in constant time, bounded work for any length
        return secrets.is_admin_token(token, self.admin_token)

    def redact_record(self, record: Any) -> Any:
        if isinstance(record, dict):
            return {k: self.redact_record(v) for k, v in record.items()}
        if isinstance(record, list):
            return [self.redact_record(v) for v in record]
        return self.redact(record)


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
