"""The Space's HTTP app: REST routes beside the Gradio UI, and how to run it.

``build_app`` is a factory (no globals, nothing happens on import). Its
lifespan starts loading the default model as a background task in the serving
event loop, so the page and /health answer during the first load, and closes
the engine on shutdown. REST:

    GET  /health            200 when a model is ready, 503 otherwise (JSON either way)
    POST /load-model        {"model": KEY} -> 202 and the new state; 401 bad/missing admin token,
                            409 a switch is running, 422 not a catalogue key, 400 won't fit (planner's reason)
    GET  /models            the catalogue with each model's plan for this hardware
    GET  /loads?limit=N     the load ledger's last N records
    GET  /scores            the Scoreboard's stored results; POST /scores/run {"set", "limit"} and /scores/cancel
                            with the admin token (finspace.web.scores)
    POST /v1/chat/completions, GET /v1/models: OpenAI-compatible (finspace.openai_api; errors in OpenAI's shape)
    POST /gradio_api/mcp/   MCP over streamable HTTP (finspace.mcp_server: will_it_fit, extract_matrix, ask_document,
                            models, health, scores; load_model with the admin token)

Errors are ``{"error": message}`` with the domain error's status; never a
traceback, never a token. The Gradio Blocks are mounted at "/".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from fastapi import FastAPI

from finspace.documents.desk import upload_folder
from finspace.documents.convert import KINDS
from finspace.scoreboard.limits import FILE_TYPES as EVAL_FILE_TYPES
from finspace.errors import FinspaceError
from finspace.wall import uploads
from finspace.wall.guard import MCP_PATHS, EventTracker, Guard
from finspace.wall.sessions import Sessions
from finspace.mcp_server.endpoint import McpEndpoint
from finspace.openai_api import add_openai_routes
from finspace.service import Service
from finspace.settings import Settings
from finspace.web import auth
from finspace.web.errors import add_error_handlers
from finspace.web.rest import rest_router
from finspace.web.scores import scores_router

log = logging.getLogger("finspace.web.server")


PUBLIC_API = (
    "chat",
    "chat_with_thinking",
    "load_model",
    "models",
    "health",
    "loads",
    "fit",
    "matrix",
    "scores",
    "run_eval",
    "cancel_eval",
    "company_filings",
    "company_facts",
    "ask_filing",
    "filing_matrix",
)


def blocked_paths(settings: Settings, catalog=None) -> list[str]:
    """Folders Gradio must never serve or copy from, whatever a payload names (its blocked_paths): the app's
    code and catalogue, the data folder, the Hub cache, the system's secrets and devices."""
    here = Path(__file__).resolve().parents[3]
    out = [str(here), str(Path.cwd()), "/proc", "/sys", "/dev", "/etc", "/root", "/home", "/var", "/run"]
    for extra in (
        settings.data_dir,
        settings.catalog_path and str(Path(settings.catalog_path).parent),
        settings.hf_home,
    ):
        if extra:
            out.append(str(Path(extra).resolve()))
    upload = Path(settings.gradio_temp_dir or Path(tempfile.gettempdir()) / "gradio").resolve()
    return sorted({p for p in out if not upload.is_relative_to(Path(p))})


def build_app(
    engine,
    catalog,
    monitor,
    *,
    ledger=None,
    admin_token: str | None = None,
    default_model: str | None = None,
    settings: Settings | None = None,
    blocking: str | None = None,
    storage_note: str | None = None,
) -> FastAPI:
    """The whole app: REST routes + the Gradio UI at "/", behind finspace.wall.guard. Run it with uvicorn in one process."""
    from finspace.ui import build_ui

    _skip_absent_matplotlib()
    settings = settings or Settings()
    if admin_token and not settings.admin_token:
        settings = replace(settings, admin_token=admin_token)
    svc = Service(engine, catalog, monitor, ledger=ledger, settings=settings)
    svc.blocking, svc.storage_note = blocking, storage_note  # finspace.fit.doctor's findings at start
    tracker = EventTracker(settings.limits)
    sessions = Sessions(settings.limits.session_idle_s, tracker.busy)  # state of sessions without a heartbeat
    mcp = McpEndpoint(svc, max_body_bytes=mcp_body_bound(settings), allow_loopback=settings.test_mcp_fetch_loopback)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        sweeper = asyncio.get_running_loop().create_task(tracker.run(), name="finspace-event-sweeper")
        idle = asyncio.get_running_loop().create_task(
            sessions.run(min(30.0, sessions.idle_s / 4)), name="finspace-session-sweeper"
        )
        await svc.open()
        if svc.blocking:
            log.error("no model will load: %s", svc.blocking)
        elif default_model:
            svc.start_default_load(default_model)
        try:
            async with mcp.run():  # the MCP SDK's task group (finspace.mcp_server)
                yield
        finally:
            sweeper.cancel()
            idle.cancel()
            log.info("shutting down: stopping the engine")
            await svc.close()

    docs = settings.api_docs
    app = FastAPI(
        title="finspace",
        version=svc.versions.get("finspace") or "0",
        description="Finance LLMs on vLLM: chat UI at /, REST beside it.",
        lifespan=lifespan,
        redoc_url=None,
        docs_url="/docs" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.service = svc
    add_error_handlers(app, svc)
    require_admin = auth.admin(svc)
    app.include_router(rest_router(svc, require_admin))  # /health, /load-model, /models, /edgar/*, /loads
    app.include_router(scores_router(svc, require_admin))  # GET /scores, POST /scores/run and /scores/cancel
    add_openai_routes(app, svc)  # before the Gradio mount at "/", which would take /v1 otherwise
    for path in MCP_PATHS:  # MCP, before the mount too (an ASGI endpoint: the SDK's transport)
        app.router.add_route(path, mcp, methods=["POST"], include_in_schema=False)
    demo = build_ui(svc, chat_concurrency=settings.chat_concurrency, queue_size=settings.queue_size)
    tracker.attach(demo._queue)
    _mount_behind_the_guard(app, demo, settings, catalog, tracker, sessions)
    sessions.attach(demo.state_holder)
    app.state.tracker = tracker
    return app


def _mount_behind_the_guard(
    app: FastAPI, demo, settings: Settings, catalog, tracker: EventTracker, sessions: Sessions
) -> None:
    """The Gradio UI at "/", Gradio's own file checks on, and finspace.wall.guard in front of every route."""
    import gradio as gr

    gr.mount_gradio_app(
        app,
        demo,
        path="/",
        css=_ui_css(),
        show_error=True,
        ssr_mode=False,
        footer_links=["api", "gradio"],
        run_history=False,
        theme=gr.themes.Soft(),
        allowed_paths=[],
        blocked_paths=blocked_paths(settings, catalog),
        max_file_size=settings.documents.max_bytes,
    )  # Gradio's own bound: the document limit
    # gr.mount_gradio_app never marks the Blocks launched, and Gradio skips its check of file paths in payloads
    # until they are (gradio 6.31 processing_utils._check_allowed): mark them, so Gradio's own wall stands too.
    demo.has_launched = True
    held = uploads.Held(settings.limits.upload_client_files, settings.limits.upload_client_bytes)
    demo.finspace_service.uploads = held  # who owns which upload: MCP's upload argument names only its caller's
    app.add_middleware(
        Guard,
        limits=settings.limits,
        public_api=PUBLIC_API,
        tracker=tracker,
        mcp_bytes=mcp_body_bound(settings),
        events=lambda: {i: _event_shape(fn) for i, fn in demo.fns.items()},
        api_docs=settings.api_docs,
        upload_dir=upload_folder(settings),
        upload_files=settings.matrix.max_documents,
        upload_file_bytes=settings.documents.max_bytes,
        upload_bytes=upload_body_bound(settings),
        upload_types=tuple(sorted({*KINDS, *EVAL_FILE_TYPES})),
        held=held,
        stored=demo.upload_file_set.update,
        heard=sessions.heard,
        document_events=lambda: {i for i, fn in demo.fns.items() if getattr(fn.fn, "finspace_takes_document", False)},
    )


def upload_body_bound(settings: Settings) -> int:
    """The upload route's body bound: the largest legal upload, one document for the chat or the Matrix's filings
    together (each within the document limit), and never over FINSPACE_MATRIX_UPLOAD_MIB past one document."""
    one, most = settings.documents.upload_body_bytes, settings.matrix.max_documents
    return max(one, min(settings.matrix.upload_bytes, most * one))


def mcp_body_bound(settings: Settings) -> int:
    """An MCP request's body bound: the Matrix's filings together as base64 (each within the document limit), and
    room for the JSON-RPC envelope; the same bound as the upload route's, in base64."""
    return upload_body_bound(settings) * 4 // 3 + (64 << 10)


def _event_shape(fn) -> tuple[str | None, int, int]:
    """(api_name, inputs, inputs required) of one Gradio event: /chat's trailing document is optional."""
    n = len(fn.inputs)
    return (fn.api_name if isinstance(fn.api_name, str) else None, n, n - getattr(fn.fn, "finspace_optional_inputs", 0))


def _skip_absent_matplotlib() -> None:
    """Gradio runs every event step (each streamed update) inside a context manager that does `import matplotlib`
    twice. Without matplotlib each failed import searched sys.path again: a quarter of the app's CPU while 16
    chats streamed (py-spy), CPU the engine needs on a small machine. A None entry in sys.modules makes the
    import fail at once, exactly as before. Nothing here uses matplotlib; if it is installed this does nothing."""
    import importlib.util
    import sys

    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]


def _ui_css() -> str:
    from finspace.ui.blocks import CSS

    return CSS


# --------------------------------------------------------------------------- run
def _make_ledger(settings: Settings):
    """The load ledger (loads.jsonl in FINSPACE_DATA_DIR, else /data on a Space, ./data), capped in size."""
    from finspace.ledger import FILENAME, Ledger, default_data_dir

    folder = Path(settings.data_dir) if settings.data_dir else default_data_dir()
    return Ledger(folder / FILENAME, max_bytes=settings.ledger_max_bytes)


def _host_problems(monitor, ledger, settings: Settings) -> tuple[str | None, str | None]:
    """finspace doctor's start-up checks: what stops this machine from serving (a CUDA vLLM without a GPU, a
    driver too old for torch's CUDA), and whether the ledger's folder survives a restart. Fast and offline."""
    from finspace.fit.doctor import WARN, blocking_problem, check_data_dir

    env = {"SPACE_ID": settings.space_id or "", "FINSPACE_DATA_DIR": settings.data_dir or ""}  # what they read
    blocking = blocking_problem(env, nvml=monitor.nvml)
    data = check_data_dir(env, ledger.path.parent)
    note = f"{data.message}; {data.fix}" if data.status == WARN else None
    if note:
        log.warning("%s", note)
    return blocking, note


def run(settings: Settings) -> int:
    """Build everything from ``settings`` and serve until stopped. Returns an exit code."""
    import sys

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from finspace.models.catalog import load_catalog
    from finspace.engine import Engine
    from finspace.host.gpu import MemoryMonitor
    from finspace.web.http_server import uvicorn_config

    try:
        catalog = load_catalog(settings.catalog_path)
    except FinspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    monitor = MemoryMonitor()
    key = settings.model or catalog.default_key(monitor.has_gpu)
    if key not in catalog and not settings.remote.url:  # remote: FINSPACE_MODEL names a served model
        print(
            f"error: FINSPACE_MODEL / --model {key!r} is not a catalogue key; "
            f"choose one of {', '.join(catalog.keys())}",
            file=sys.stderr,
        )
        return 2
    ledger = _make_ledger(settings)
    if settings.remote.url:  # FINSPACE_ENGINE_URL: an endpoint serves; its models are the catalogue
        from finspace.remote import RemoteEngine

        for name in ("httpx", "httpx2"):  # the openai client logs with httpx2: a line per probe and per chat
            logging.getLogger(name).setLevel(logging.WARNING)
        engine = RemoteEngine(
            settings.remote, catalog=catalog, preferred=settings.model, max_in_flight=settings.max_in_flight
        )
        engine.prime()  # the served models before the page is built (bounded; the probe keeps reading them)
        catalog, key, (blocking, storage_note) = engine.catalog, None, (None, None)
    else:
        engine = Engine(
            catalog,
            monitor,
            on_load=ledger.append,
            freeze_heap=True,
            front_nice=settings.front_nice,
            models_dir=ledger.path.parent / "models",
            **settings.engine_options(),
        )
        blocking, storage_note = _host_problems(monitor, ledger, settings)
    if settings.switching == "open":
        log.warning("FINSPACE_ADMIN_TOKEN is not set: anyone who can open this app can switch its model")
    elif settings.switching == "off":
        log.warning(
            "switching models is off on this Space: set FINSPACE_ADMIN_TOKEN (a secret) to allow it with "
            "the token, or FINSPACE_OPEN_SWITCHING=1 to let anyone switch"
        )
    app = build_app(
        engine,
        catalog,
        monitor,
        ledger=ledger,
        default_model=key,
        settings=settings,
        blocking=blocking,
        storage_note=storage_note,
    )

    import uvicorn

    where = engine.where() if engine.kind == "remote" else "GPU" if monitor.has_gpu else "CPU (no NVIDIA GPU)"
    log.info("finspace on %s: default model %s; http://%s:%d/", where, key, settings.host, settings.port)
    config = uvicorn_config(app, settings.host, settings.port, settings.limits)
    logging.getLogger("uvicorn.access").addFilter(QuietGradioTraffic())  # after Config has set up logging
    uvicorn.Server(config).run()
    return 0


class QuietGradioTraffic(logging.Filter):
    """Leave Gradio's own requests (/gradio_api/...) out of uvicorn's access log. Each chat is two of them
    (join, event stream) and every open page's memory tick two more, every 2 s: on a Space, hundreds of lines
    a minute that hid the lines worth reading. Page loads and the REST routes are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (isinstance(args, tuple) and len(args) >= 3 and str(args[2]).startswith("/gradio_api/"))
