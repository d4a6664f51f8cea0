"""The Scoreboard's REST routes beside /loads: GET /scores (public), POST /scores/run and /scores/cancel (the
admin token, as /load-model). Errors are the app's {"error": message} with the domain error's status."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from finspace.service import Service


class RunRequest(BaseModel):
    """POST /scores/run body: a set name and, optionally, how many items."""

    model_config = ConfigDict(extra="forbid", strict=True)
    set: str = Field(min_length=1, max_length=100, description="a set from GET /scores's 'sets'")
    limit: int | None = Field(default=None, ge=1, le=1_000_000, description="items to run (null: the bound)")
    prompt_format: str | None = Field(
        default=None,
        max_length=40,
        description="finspace-eval-v1 (default), "
        "finspace-eval-v1+calc (the model may call the calculator), or for financebench "
        "finspace-eval-v1+filing / +filing-tools (each question's whole filing)",
    )


def scores_router(svc: Service, require_admin: Any) -> APIRouter:
    app = APIRouter()

    @app.get("/scores", summary="Every stored scoreboard result (newest first), files skipped, the running run")
    async def scores():
        body = await asyncio.to_thread(svc.scoreboard.board)  # file I/O off the serving loop
        return {**body, "sets": svc.scoreboard.sets()}

    @app.post(
        "/scores/run",
        status_code=202,
        dependencies=[Depends(require_admin)],
        summary="Run a set on the loaded model in the background",
        responses={401: {}, 409: {}, 422: {}},
    )
    async def run(body: RunRequest):
        job = await svc.scoreboard.start(
            body.set, body.limit, internal=True, prompt_format=body.prompt_format
        )  # the token was checked by require_admin
        return JSONResponse({"accepted": True, **job.progress()}, status_code=202)

    @app.post("/scores/cancel", dependencies=[Depends(require_admin)], summary="Cancel the running run (kept, partial)")
    async def cancel():
        return await svc.scoreboard.cancel(internal=True)

    return app
