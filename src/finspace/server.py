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

Errors are ``{"error": message}`` with the domain error's status; never a
traceback, never a token. The Gradio Blocks are mounted at "/".
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from finspace.errors import FinspaceError, Unauthorized
from finspace.ui.service import Service

log = logging.getLogger("finspace.server")


class LoadRequest(BaseModel):
    """POST /load-model body: a catalogue key, nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str = Field(min_length=1, max_length=200, description="a catalogue key from GET /models")


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    """Pydantic's complaint without echoing the input (which may be 1 MB, or a secret)."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "extra_forbidden":
            msg = "unknown field; the body is {\"model\": KEY}"
        elif err.get("type") == "missing":
            msg = "missing; the body is {\"model\": KEY}"
        elif err.get("type") == "json_invalid":
            loc, msg = "body", "not valid JSON; send {\"model\": KEY} with Content-Type: application/json"
        elif err.get("type") in ("model_attributes_type", "dict_type"):
            msg = "the body must be a JSON object {\"model\": KEY}"
        parts.append(f"{loc}: {msg}")
    return "invalid request: " + "; ".join(parts)


def build_app(engine, catalog, monitor, *, ledger=None, admin_token: str | None = None,
              default_model: str | None = None) -> FastAPI:
    """The whole app: REST routes + the Gradio UI at "/". Run it with uvicorn in one process."""
    import gradio as gr

    from finspace.ui import build_ui

    _skip_absent_matplotlib()

    svc = Service(engine, catalog, monitor, ledger=ledger, admin_token=admin_token)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if default_model:
            try:
                svc.start_load(default_model)
                log.info("loading the default model %s in the background", default_model)
            except FinspaceError as exc:
                svc._load_error = svc.redact(str(exc))
                log.error("cannot load the default model %s: %s", default_model, svc._load_error)
        try:
            yield
        finally:
            log.info("shutting down: stopping the engine")
            await svc.close()

    app = FastAPI(title="finspace", version=svc.versions.get("finspace") or "0",
                  description="Finance LLMs on vLLM: chat UI at /, REST beside it.",
                  lifespan=lifespan, redoc_url=None)
    app.state.service = svc

    @app.exception_handler(FinspaceError)
    async def _domain_error(request: Request, exc: FinspaceError):
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        if getattr(exc, "retry_after_s", None):
            headers = {"Retry-After": str(exc.retry_after_s)}
        return _error(exc.http_status, svc.redact(str(exc)), headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        msg = exc.detail if isinstance(exc.detail, str) else "the request failed"
        if exc.status_code == 400 and "parsing the body" in msg:
            msg = "the body could not be parsed as JSON; send {\"model\": KEY} with Content-Type: application/json"
        return _error(exc.status_code, msg, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError):
        return _error(422, _validation_message(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.error("unexpected %s on %s", type(exc).__name__, request.url.path, exc_info=exc)
        return _error(500, f"unexpected server error ({type(exc).__name__}); the app is still running")

    def require_admin(request: Request) -> None:
        """401 unless 'Authorization: Bearer <FINSPACE_ADMIN_TOKEN>' (when one is set); checked before the body."""
        if not svc.locked:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        svc.authorize(given.strip() if scheme.lower() == "bearer" else None)

    @app.get("/health", summary="Status, model, engine stage, memory; 200 when ready, 503 otherwise")
    async def health():
        body, status = svc.health()
        return JSONResponse(body, status_code=status)

    @app.post("/load-model", status_code=202, dependencies=[Depends(require_admin)],
              summary="Switch to a catalogue model in the background",
              responses={401: {}, 409: {}, 422: {}, 400: {}})
    async def load_model(body: LoadRequest):
        import asyncio

        svc.start_load(body.model)
        await asyncio.sleep(0)  # let the load enter its first stage, so the answer shows it
        state, _ = svc.health()
        return JSONResponse({"accepted": True, "loading": body.model, **state}, status_code=202)

    @app.get("/models", summary="The catalogue with each model's plan for this hardware")
    async def models():
        return svc.models()

    @app.get("/loads", summary="The load ledger's last records (planned vs actual)")
    async def loads(limit: int = Query(50, ge=1, le=1000)):
        if ledger is None:
            return _error(404, "the load ledger is not enabled in this app")
        return svc.loads(limit)

    demo = build_ui(engine, catalog, monitor, ledger=ledger, admin_token=admin_token, service=svc)
    gr.mount_gradio_app(app, demo, path="/", css=_ui_css(), show_error=True, ssr_mode=False,
                        footer_links=["api", "gradio"], run_history=False, theme=gr.themes.Soft())
    return app


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
def _make_ledger(data_dir: str | None):
    """The load ledger (loads.jsonl in data_dir, else $FINSPACE_DATA_DIR, /data on a Space, ./data)."""
    try:
        from finspace.ledger import FILENAME, Ledger
    except ImportError:  # pragma: no cover - the ledger ships with finspace
        log.warning("finspace.ledger is not available: the load history is off")
        return None
    return Ledger(Path(data_dir) / FILENAME) if data_dir else Ledger()


def engine_options_from_env() -> dict:
    """The Engine's settings from the environment (the engine reads none itself); same names and defaults."""
    return {
        "cpu_kv_cache_bytes": int(os.environ.get("FINSPACE_CPU_KV_CACHE_MIB", "256")) << 20,
        "max_in_flight": int(os.environ.get("FINSPACE_MAX_IN_FLIGHT") or 256),
        "stop_grace_s": float(os.environ.get("FINSPACE_STOP_GRACE_S") or 0.0),
        "distributed_backend": os.environ.get("FINSPACE_DISTRIBUTED_BACKEND") or None,
        "hf_token": os.environ.get("HF_TOKEN") or None,
        "secrets": tuple(os.environ.get(name) or "" for name in ("HF_TOKEN", "FINSPACE_ADMIN_TOKEN",
                                                                  "HUGGING_FACE_HUB_TOKEN")),
    }


def run(*, host: str = "0.0.0.0", port: int = 7860, model: str | None = None,
        catalog_path: str | None = None, data_dir: str | None = None) -> int:
    """Build everything from the environment and serve until stopped. Returns an exit code."""
    import sys

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from finspace.catalog import load_catalog
    from finspace.engine import Engine
    from finspace.gpu import MemoryMonitor
    from finspace.priority import parse_nice

    try:
        catalog = load_catalog(catalog_path)
        front_nice = parse_nice(os.environ.get("FINSPACE_FRONT_NICE"), default=10)
    except FinspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    monitor = MemoryMonitor()
    key = model or os.environ.get("FINSPACE_MODEL") or catalog.default_key(monitor.has_gpu)
    if key not in catalog:
        print(f"error: FINSPACE_MODEL / --model {key!r} is not a catalogue key; "
              f"choose one of {', '.join(catalog.keys())}", file=sys.stderr)
        return 2
    ledger = _make_ledger(data_dir)
    on_load: Any = getattr(ledger, "append", None)
    engine = Engine(catalog, monitor, on_load=on_load, freeze_heap=True, front_nice=front_nice,
                    **engine_options_from_env())
    admin_token = os.environ.get("FINSPACE_ADMIN_TOKEN") or None
    if admin_token is None:
        log.warning("FINSPACE_ADMIN_TOKEN is not set: anyone who can open this app can switch its model")
    app = build_app(engine, catalog, monitor, ledger=ledger, admin_token=admin_token, default_model=key)

    import uvicorn

    where = "GPU" if monitor.has_gpu else "CPU (no NVIDIA GPU)"
    log.info("finspace on %s: default model %s; http://%s:%d/", where, key, host, port)
    config = uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
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
