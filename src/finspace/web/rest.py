"""The REST routes beside the page: /health, /load-model (the admin token), /models, EDGAR's /edgar/company,
/edgar/filings and /edgar/facts, /loads. Each calls one Service method; errors are web.errors'."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from finspace.web.errors import error_response

if TYPE_CHECKING:
    from finspace.service import Service


class LoadRequest(BaseModel):
    """POST /load-model body: a catalogue key, nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str = Field(min_length=1, max_length=200, description="a catalogue key from GET /models")


def rest_router(svc: Service, require_admin: Any) -> APIRouter:
    """/health, /load-model (behind ``require_admin``), /models, /edgar/*, /loads."""
    app = APIRouter()

    @app.get("/health", summary="Status, model, engine stage, memory; 200 when ready, 503 otherwise")
    async def health():
        body, status = svc.health()
        return JSONResponse(body, status_code=status)

    @app.post(
        "/load-model",
        status_code=202,
        dependencies=[Depends(require_admin)],
        summary="Switch to a catalogue model in the background",
        responses={401: {}, 403: {}, 409: {}, 422: {}, 400: {}, 429: {}},
    )
    async def load_model(body: LoadRequest):
        svc.start_load(body.model)
        await asyncio.sleep(0)  # let the load enter its first stage, so the answer shows it
        state, _ = svc.health()
        return JSONResponse({"accepted": True, "loading": body.model, **state}, status_code=202)

    @app.get("/models", summary="The catalogue with each model's plan for this hardware")
    async def models():
        return svc.models()

    @app.get("/edgar/company", summary="A company on SEC's EDGAR by ticker, CIK or name (a near miss: the closest)")
    async def edgar_company(q: str = Query(..., max_length=120)):
        return (await svc.edgar.company(q)).to_json()

    @app.get("/edgar/filings", summary="A company's filings on EDGAR, newest first (form, year: the period's)")
    async def edgar_filings(
        company: str = Query(..., max_length=120),
        form: str | None = Query(None, max_length=8),
        year: int | None = Query(None),
        older: bool = False,
        limit: int = Query(100, ge=1, le=1000),
    ):
        found, filings = await svc.edgar.filings(company, form, year, older, limit)
        return {"company": found.to_json(), "filings": [f.to_json() for f in filings]}

    @app.get("/edgar/facts", summary="Companies' reported figures by fiscal year or quarter (XBRL company facts)")
    async def edgar_facts(
        companies: str = Query(..., max_length=400),
        field: str = Query(..., max_length=160),
        period: str = Query("annual", max_length=12),
    ):
        return await svc.edgar.facts(companies, field, period)

    @app.get("/loads", summary="The load ledger's last records (planned vs actual)")
    async def loads(limit: int = Query(50, ge=1, le=1000)):
        if svc.ledger is None:
            return error_response(404, "the load ledger is not enabled in this app")
        return await asyncio.to_thread(svc.loads, limit)  # file I/O off the serving loop

    return app
