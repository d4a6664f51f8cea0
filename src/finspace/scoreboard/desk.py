"""The score desk: what the page, the API and the CLI call to run a set on the loaded model (``Service.scores``).

One run at a time, in the background (a task the desk owns: a closed page never stops a run; Cancel does, and
the items that had finished are stored, marked partial). A run needs the admin token when one is set, as a
switch does, because it occupies the engine; reading results is public. While a run goes, a switch is refused
(``check_switch``, called by Service.start_load); while a switch goes, a run is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol

from finspace.documents.desk import Answering
from finspace.engine.api import EngineAPI, ServingState
from finspace.errors import BadInput, EvalRunning, NotReady, SwitchInProgress
from finspace.scoreboard import result as results
from finspace.scoreboard.limits import EvalLimits
from finspace.scoreboard.run import EvalRun, run_items
from finspace.scoreboard.store import FOLDER, ScoreStore

log = logging.getLogger("finspace.scoreboard")


class ScoreboardHost(Answering, Protocol):
    """What the Scoreboard's desk is given besides the engine it sends a set's items to (Service implements it):
    answering a filing's questions as the chat does, the admin token's check, the load in progress, the ledger,
    the serving model's provenance."""

    ledger: Any
    load_running: bool
    loading_key: str | None
    provenance: Callable[[], dict[str, Any] | None]  # the serving model's (engine.view.Provenance)

    def authorize(self, token: Any, client: str | None = None, action: str = "switching models") -> None: ...


class Job:
    """One run: its set, the model it runs on, its progress, and (when it ends) the stored result."""

    def __init__(
        self, eval_set: Any, provenance: dict, context_chars: int, reply_tokens: int, prompt_format: str | None = None
    ):
        self.eval_set, self.provenance, self.prompt_format = eval_set, provenance, prompt_format
        self.context_chars, self.reply_tokens = context_chars, reply_tokens
        self.run = EvalRun(eval_set.name, len(eval_set.items))
        self.at = time.time()
        self.task: asyncio.Task | None = None
        self.result: dict | None = None
        self.file: str | None = None
        self.error: str | None = None
        self.asker: Any = None  # the filing formats' (ScoreDesk._asker)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def progress(self) -> dict:
        r = self.run
        out = {
            "state": "running" if self.running else r.state,
            "set": self.eval_set.name,
            "model_key": self.provenance.get("model_key"),
            "done": r.done,
            "total": r.total,
            "errors": sum(1 for x in r.results.values() if x.error),
            "file": self.file,
            "error": self.error,
        }
        if self.result is not None:
            out.update(
                score=self.result["score"],
                n=self.result["n"],
                partial=self.result["partial"],
                tokens_per_s=self.result["tokens_per_s"],
            )
        return out


class ScoreDesk:
    def __init__(
        self, svc: ScoreboardHost, engine: EngineAPI, limits: EvalLimits | None = None, folder: Path | str | None = None
    ):
        """``svc``: the service a run is authorized, waits on loads and asks a filing's questions through (as the
        chat does); ``engine``: what the set's items are sent to, all at once."""
        self.svc, self.engine = svc, engine
        self.limits = limits or EvalLimits()
        self.store = ScoreStore(
            Path(folder) if folder is not None else data_folder(svc) / FOLDER, self.limits.max_results
        )
        self.job: Job | None = None
        self._starting = False

    # ----------------------------------------------------------------- state
    @property
    def running(self) -> bool:
        return self._starting or (self.job is not None and self.job.running)

    def check_switch(self) -> None:
        """Service.start_load's check: no switch while a run goes (it would end every item's request)."""
        if self.running:
            job = self.job
            what = (
                f"{job.eval_set.name} on {job.provenance.get('model_key')}, {job.run.done} of {job.run.total} "
                f"items done"
                if job is not None
                else "starting"
            )
            raise EvalRunning(
                f"a scoreboard run is going ({what}); wait for it to finish or cancel it (Cancel on "
                f"the Scoreboard tab), then switch models"
            )

    def _check_free(self) -> None:
        svc, engine = self.svc, self.svc.serving
        if self.running:
            raise EvalRunning(
                "a scoreboard run is already going; wait for it to finish or cancel it, then start the next"
            )
        h = engine.health()
        if svc.load_running or h.state in ("loading", "switching"):
            busy = svc.loading_key or h.loading_key or "a model"
            raise SwitchInProgress(
                f"a model switch is in progress (loading {busy}); wait for it to finish, then start the run"
            )
        if engine.entry is None or h.state != "ready":
            raise NotReady("no model is ready; load one from the model picker, then start the run")

    def sets(self) -> list[str]:
        from finspace.scoreboard.sets import SETS

        return list(SETS)

    def _check_args(self, set_name: Any, limit: Any) -> int | None:
        names = self.sets()
        if not isinstance(set_name, str) or set_name not in names:
            shown = str(set_name)[:40] if isinstance(set_name, str) else type(set_name).__name__
            raise BadInput(f"unknown set {shown!r}; choose one of {', '.join(names)}")
        if limit is None or limit == 0:
            return self.limits.max_items
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= self.limits.max_items:
            raise BadInput(
                f"limit must be a whole number of items in [1, {self.limits.max_items}] "
                f"(FINSPACE_EVAL_MAX_ITEMS), got {str(limit)[:40]}"
            )
        return limit

    # ------------------------------------------------------------------ runs
    async def start(
        self,
        set_name: Any,
        limit: Any = None,
        *,
        token: Any = None,
        client: str | None = None,
        internal: bool = False,
        path: str | None = None,
        prompt_format: Any = None,
    ) -> Job:
        """Check everything, load the set (off the serving loop), start the run in the background.

        Raises at once: Unauthorized/Forbidden (the admin token, as for a switch), BadInput (unknown set, bad
        limit, a corrupt data file), EvalRunning, SwitchInProgress, NotReady. ``internal``: the CLI's own run."""
        from finspace.scoreboard.sets import load_set

        if not internal:
            self.svc.authorize(token, client=client, action="a Scoreboard run")
        n = self._check_args(set_name, limit)
        fmt = self._check_format(prompt_format, set_name)
        self._check_free()
        self._starting = True  # a switch asked for while the set loads is refused too
        try:
            eval_set = await asyncio.to_thread(
                load_set,
                set_name,
                limit=n,
                path=path or self._placed(set_name),
                data_dir=data_folder(self.svc),
                evalsets_dir=getattr(self.svc.settings, "evalsets_dir", None),
                base_url=getattr(self.svc.settings, "financebench_base_url", None),
            )
            if not eval_set.items:
                raise BadInput(f"the set {set_name} has no items; check its data file")
            engine = self.svc.serving
            served, h = self.svc.provenance(), engine.health()
            if served is None or h.state != "ready":
                raise NotReady("the model stopped being ready while the set loaded; try again when it is")
            job = Job(
                eval_set,
                results.provenance(served, h.device),
                self._context_chars(engine),
                self.limits.reply_tokens,
                fmt,
            )
            job.answer_chars = self.limits.answer_chars
            job.asker = self._asker(eval_set, fmt)
            job.task = asyncio.get_running_loop().create_task(self._work(job), name=f"finspace-eval-{set_name}")
            job.task.add_done_callback(_retrieve)
            self.job = job
        finally:
            self._starting = False
        log.info("scoreboard run: %s, %d items on %s", set_name, len(eval_set.items), job.provenance["model_key"])
        return job

    def _check_format(self, value: Any, set_name: Any = None) -> str:
        """The run's prompt format; the calculator's and the filing tools' need a model whose calls finspace can
        read, and the filing formats are FinanceBench's (its questions name their filings)."""
        from finspace.scoreboard.asking import (
            FILING_FORMATS,
            PROMPT_FORMAT_CALC,
            PROMPT_FORMAT_FILING_TOOLS,
            check_format,
        )
        from finspace.engine.tool_loop import offered

        fmt = check_format(value)
        if fmt in FILING_FORMATS and set_name != "financebench":
            raise BadInput(
                f"{fmt} asks each question about its whole filing, which only FinanceBench's questions "
                "name; run it on financebench, or choose finspace-eval-v1 for this set"
            )
        if fmt in (PROMPT_FORMAT_CALC, PROMPT_FORMAT_FILING_TOOLS) and not offered(self.svc.serving):
            key = getattr(self.svc.serving.entry, "key", None)
            what = "the calculator" if fmt == PROMPT_FORMAT_CALC else "the filing tools"
            other = "finspace-eval-v1" if fmt == PROMPT_FORMAT_CALC else "finspace-eval-v1+filing (the passages)"
            raise BadInput(
                f"{fmt} lets the model call {what}, and {key!r} has no tool parser (the catalogue's "
                f"tool_parser); run {other}, or load a model that has one"
            )
        return fmt

    def _asker(self, eval_set: Any, fmt: str) -> Any:
        """For the filing formats, how an item is asked: about its PDF, through the Service as the chat asks
        (finspace.scoreboard.filings); None for the others (the set's context, straight to the engine)."""
        from finspace.scoreboard import filings
        from finspace.scoreboard.asking import FILING_FORMATS
        from finspace.scoreboard.run import item_settings

        if fmt not in FILING_FORMATS:
            return None
        svc = self.svc
        held = filings.Filings(
            svc,
            eval_set.items,
            data_folder(svc),
            evalsets_dir=getattr(svc.settings, "evalsets_dir", None),
            base_url=getattr(svc.settings, "financebench_base_url", None),
        )
        settings = item_settings(svc.serving.entry, self.limits.reply_tokens)

        async def ask(item: Any):
            return await filings.ask(svc, held, item, settings, fmt)

        return ask

    def _placed(self, set_name: str) -> str | None:
        """FINSPACE_FINANCEBENCH_FILE: the user's own copy of FinanceBench (never vendored, else fetched)."""
        return getattr(self.svc.settings, "financebench_file", None) if set_name == "financebench" else None

    def _context_chars(self, engine: ServingState) -> int:
        """The items' context in characters: the bound, and what fits the model's context at ~2.5 characters a
        token (tables are digits and separators) after the answer's tokens and the instructions."""
        room = int((int(engine.max_model_len or 0) - self.limits.reply_tokens - 320) * 2.5)
        return max(400, min(self.limits.context_chars, room))

    async def _work(self, job: Job) -> None:
        runs = run_items(
            self.engine,
            job.eval_set.name,
            job.eval_set.items,
            reply_tokens=job.reply_tokens,
            context_chars=job.context_chars,
            prompt_format=job.prompt_format,
            asker=getattr(job, "asker", None),
        )
        try:
            async with contextlib.aclosing(runs) as stream:
                async for run in stream:
                    job.run = run
        finally:
            self._store(job)

    def _store(self, job: Job) -> None:
        """The run's result (partial when it did not finish), written at once: small, and a cancelled task must
        not wait on a thread to keep what it had."""
        try:
            job.result = results.build(job)
            job.file = self.store.write(job.result).name
        except (OSError, ValueError, TypeError) as exc:
            job.error = f"the result could not be stored ({type(exc).__name__}); see the server log"
            log.exception("storing a scoreboard result failed")

    async def cancel(self, *, token: Any = None, client: str | None = None, internal: bool = False) -> dict:
        """Stop the running run; the items that had finished are stored, marked partial. Needs the admin token."""
        if not internal:
            self.svc.authorize(token, client=client, action="a Scoreboard run")
        job = self.job
        if job is None or not job.running:
            raise BadInput("no scoreboard run is going; nothing to cancel")
        job.task.cancel()
        await asyncio.wait({job.task})
        return job.progress()

    async def close(self) -> None:
        """At shutdown: a running run is cancelled, so it is stored partial rather than with every item failed."""
        job = self.job
        if job is not None and job.running:
            job.task.cancel()
            await asyncio.wait({job.task})

    async def wait(self, job: Job) -> dict:
        if job.task is not None:
            await asyncio.wait({job.task})
        return job.progress()

    def progress(self) -> dict | None:
        return self.job.progress() if self.job is not None else None

    # ---------------------------------------------------------------- reading
    def board(self) -> dict:
        """Every stored result (newest first), the files skipped and why, and the running run's progress.
        File I/O: call from a worker thread."""
        found, notes = self.store.results()
        return {
            "results": list(reversed(found)),
            "notes": notes,
            "running": self.progress() if self.running else None,
            "last": self.progress(),
        }

    def latest(self, model_key: str | None) -> dict | None:
        """The newest complete result per set for ``model_key`` (cached reads; for the model picker)."""
        if not model_key:
            return None
        found, _ = self.store.results()
        mine = [r for r in found if r.get("model_key") == model_key and not r.get("partial")]
        return mine[-1] if mine else None


def data_folder(svc: ScoreboardHost) -> Path:
    """Beside the load ledger when there is one; else FINSPACE_DATA_DIR's folder (Settings.data_dir), else the
    ledger's default (/data on a Space with storage, ./data)."""
    from finspace.ledger import default_data_dir

    path = getattr(getattr(svc, "ledger", None), "path", None)
    if path is not None:
        return Path(path).parent
    settings = getattr(svc, "settings", None)
    if settings is not None and settings.data_dir:
        return Path(settings.data_dir)
    return default_data_dir()


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("a scoreboard run failed", exc_info=task.exception())
