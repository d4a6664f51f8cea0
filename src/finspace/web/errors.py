"""The HTTP app's errors: every domain error answered with its own status (errors.py's table) and headers
(``errors.http_headers``) as ``{"error": message}`` (OpenAI's shape under /v1), FastAPI's own the same way, a
surprise as a 500 without a traceback; never a token (redacted), never the input echoed."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from finspace.errors import FinspaceError, http_headers
from finspace.openai_api import error_body

if TYPE_CHECKING:
    from finspace.service import Service

log = logging.getLogger("finspace.web.server")


def error_response(status: int, message: str, headers: dict[str, str] | None = None, path: str = "") -> JSONResponse:
    body = error_body(status, message) if path.startswith("/v1/") else {"error": message}
    return JSONResponse(body, status_code=status, headers=headers)


def validation_message(exc: RequestValidationError, body: str = '{"model": KEY}') -> str:
    """Pydantic's complaint without echoing the input (which may be 1 MB, or a secret); ``body``: the route's shape."""
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "extra_forbidden":
            msg = f"unknown field; the body is {body}"
        elif err.get("type") == "missing":
            msg = f"missing; the body is {body}"
        elif err.get("type") == "json_invalid":
            loc, msg = "body", f"not valid JSON; send {body} with Content-Type: application/json"
        elif err.get("type") in ("model_attributes_type", "dict_type"):
            msg = f"the body must be a JSON object {body}"
        parts.append(f"{loc}: {msg}")
    return "invalid request: " + "; ".join(parts)


def add_error_handlers(app: FastAPI, svc: Service) -> None:
    """Domain errors with their status, FastAPI's own as {"error": ...}, a surprise as a 500 without a traceback."""

    @app.exception_handler(FinspaceError)
    async def _domainerror_response(request: Request, exc: FinspaceError):
        return error_response(exc.http_status, svc.redact(str(exc)), http_headers(exc) or None, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _httperror_response(request: Request, exc: StarletteHTTPException):
        msg = exc.detail if isinstance(exc.detail, str) else "the request failed"
        if exc.status_code == 400 and "parsing the body" in msg:
            msg = "the body could not be parsed as JSON; send {\"model\": KEY} with Content-Type: application/json"
        return error_response(exc.status_code, msg, getattr(exc, "headers", None), request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError):
        body = '{"set": NAME, "limit": N}' if request.url.path.startswith("/scores") else '{"model": KEY}'
        return error_response(422, validation_message(exc, body), path=request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.error("unexpected %s on %s", type(exc).__name__, request.url.path, exc_info=exc)
        return error_response(
            500, f"unexpected server error ({type(exc).__name__}); the app is still running", path=request.url.path
        )
