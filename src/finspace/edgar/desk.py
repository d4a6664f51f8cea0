"""What the doors call (``Service.edgar``): a company, its filings, a filing read into the chat or the Matrix, its
figures over time. One client per app (one limiter and one cache for the whole Space)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tempfile
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from finspace.documents import desk as docs
from finspace.documents.convert import kind_of
from finspace.documents.upload import remove_upload
from finspace.edgar import facts as figures
from finspace.edgar import filings as listing
from finspace.edgar.client import FOREVER, SecClient
from finspace.edgar.companies import Company, CompanyIndex
from finspace.edgar.config import OFF_MESSAGE, EdgarSettings
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, DataUnavailable, NotFound
from finspace.matrix.desk import MatrixDesk

FOLDER = "finspace-edgar"  # filings read from the archive, inside the upload folder, deleted after conversion
TICKERS_FRESH_S = 24 * 3600.0
MAX_COMPANIES = 12  # on one chart, or in one "AAPL, MSFT: latest 10-K"
MAX_QUESTION_CHARS = 4000
_SPLIT = re.compile(r"[,;\s]+")
_PAGE = re.compile(r"\bp(?:age|\.)?\s*(\d{1,5})\b", re.IGNORECASE)


class EdgarHost(docs.Answering, Protocol):
    """What the Companies desk is given (Service implements it): answering from a filing, and the Matrix's desk
    for a matrix of filings."""

    matrix: MatrixDesk


@dataclass(frozen=True)
class Picked:
    company: Company
    filing: listing.Filing
    document: str  # the file read: the primary document or an exhibit


class EdgarDesk:
    def __init__(self, svc: EdgarHost, settings: EdgarSettings, data_dir: str | None = None):
        self.svc = svc
        self.settings = settings
        folder = settings.cache_dir or str(Path(data_dir or tempfile.gettempdir()) / "finspace-edgar-cache")
        self.client = SecClient(settings, folder)
        self._index: tuple[int, CompanyIndex] | None = None

    @property
    def off_message(self) -> str:
        return OFF_MESSAGE

    # -------------------------------------------------------------- companies
    async def index(self) -> CompanyIndex:
        body = await self.client.get(
            self.client.url("www", "/files/company_tickers.json"),
            self.settings.tickers_bytes,
            "company list",
            TICKERS_FRESH_S,
        )
        key = hash(body)
        if self._index is None or self._index[0] != key:
            try:
                data = await asyncio.to_thread(json.loads, body)
            except (ValueError, RecursionError):
                raise DataUnavailable(
                    "SEC answered the company list with something that is not JSON; try again later"
                ) from None
            self._index = (key, await asyncio.to_thread(CompanyIndex.parse, data))
        return self._index[1]

    async def company(self, query: Any) -> Company:
        index = await self.index()
        return await asyncio.to_thread(index.find, query)

    # ---------------------------------------------------------------- filings
    async def filings(
        self, query: Any, form: Any = None, year: Any = None, older: bool = False, limit: int = 100
    ) -> tuple[Company, list[listing.Filing]]:
        form, year = listing.check_form(form), listing.check_year(year)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= listing.MAX_LIST:
            raise BadInput(f"limit must be a whole number in [1, {listing.MAX_LIST}]")
        company = await self.company(query)
        every = await self._all(company, older)
        return company, listing.select(every, form, year, limit)

    async def _all(self, company: Company, older: bool) -> list[listing.Filing]:
        data = await self.client.json(
            self.client.url("data", f"/submissions/CIK{company.cik10}.json"),
            self.settings.submissions_bytes,
            f"filing list of {company.ticker}",
        )
        recent = (data.get("filings") or {}).get("recent") if isinstance(data, dict) else None
        out = listing.parse(company.cik, recent)
        if older:
            for name in listing.older_pages(data)[:20]:
                try:
                    page = await self.client.json(
                        self.client.url("data", f"/submissions/{name}"),
                        self.settings.submissions_bytes,
                        f"older filings of {company.ticker}",
                    )
                except NotFound:  # a page SEC lists but does not serve: the filings of the others stand
                    continue
                out += listing.parse(company.cik, page)
        return out

    async def pick(
        self, query: Any, accession: Any = None, form: Any = None, year: Any = None, document: Any = None
    ) -> Picked:
        """One filing: by accession, else the latest of ``form`` (10-K by default) in ``year`` (any by default)."""
        document = listing.check_document(document)
        company = await self.company(query)
        if accession not in (None, ""):
            acc = listing.check_accession(accession)
            every = await self._all(company, older=False)
            if not any(f.accession == acc for f in every):
                every = await self._all(company, older=True)
            filing = listing.find(every, acc, company.ticker)
        else:
            f, y = listing.check_form(form) or "10-K", listing.check_year(year)
            recent = await self._all(company, older=False)
            found = listing.select(recent, f, y, 1)
            if not found and y is not None and recent and min(x.year for x in recent) >= y:
                found = listing.select(await self._all(company, older=True), f, y, 1)  # the year is older: its pages
            if not found:
                raise NotFound(
                    f"{company.ticker} has no {f}" + (f" for {y}" if y else "") + " on EDGAR; list its "
                    "filings to see what it filed"
                )
            filing = found[0]
        return Picked(company, filing, document or filing.document)

    async def read(self, picked: Picked) -> tuple[str, str]:
        """The filing's document fetched into the upload folder: (path, name) for the converters."""
        f = picked.filing
        name = f"{picked.company.ticker}-{f.form.replace('/', '')}-{f.filed}-{picked.document}"
        kind_of(name)  # BadInput naming the types finspace reads (a .txt or .pdf filing converts as such)
        limit = self.svc.settings.documents.max_bytes
        body = await self.client.get(
            self.client.url("www", f.path(picked.document)),
            limit,
            f"document {picked.document} of filing {f.accession}",
            FOREVER,
        )
        folder = Path(docs.upload_folder(self.svc.settings)) / FOLDER / uuid.uuid4().hex
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ("document" + Path(picked.document).suffix.lower())
        await asyncio.to_thread(path.write_bytes, body)
        return str(path), name

    async def attach(self, picked: Picked, client: str | None) -> docs.Attached:
        """The filing as the chat's attached document: the same conversion as an upload (child process, bounds)."""
        path, name = await self.read(picked)
        return await self.svc.documents.attach(path, name, client)

    async def ask(self, picked: Picked, question: Any, client: str | None, max_tokens: int | None = None) -> dict:
        """A question about the filing, answered by the loaded model from it (whole, or its passages), as the
        documents chat does; the pages it cites that exist."""
        if not isinstance(question, str) or not question.strip():
            raise BadInput("question must be text: what do you want to know from the filing?")
        if len(question) > MAX_QUESTION_CHARS:
            raise BadInput(f"question has {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}")
        att = await self.attach(picked, client)
        messages = [{"role": "user", "content": question.strip()}]
        info, parts = ChatInfo(), []
        async with contextlib.aclosing(
            self.svc.answer(messages, ChatSettings(max_tokens=max_tokens), info, documents=[att])
        ) as stream:
            async for _thinking, delta in stream:
                parts.append(delta)
        text, pages = "".join(parts).strip(), len(att.doc.pages)
        cited = sorted({int(m) for m in _PAGE.findall(text) if 1 <= int(m) <= max(1, pages)})
        return {
            "answer": text,
            "citations": cited,
            "document": info.documents,
            "pages": pages,
            "filing": {**picked.filing.to_json(), "company": picked.company.to_json()},
            "url": "https://www.sec.gov" + picked.filing.path(picked.document),
        }

    # ----------------------------------------------------------------- matrix
    async def matrix_files(self, request: Any) -> list[tuple[str, str]]:
        """ "AAPL, MSFT, NVDA: latest 10-K" (or a list of {company, form, year, accession}) as files for the Matrix."""
        specs = parse_request(request)
        picked = [
            await self.pick(s.get("company"), s.get("accession"), s.get("form"), s.get("year"), s.get("document"))
            for s in specs
        ]
        files: list[tuple[str, str]] = []
        try:
            for p in picked:
                files.append(await self.read(p))
        except BaseException:
            for path, _name in files:
                remove_upload(path, docs.upload_folder(self.svc.settings))
            raise
        return files

    async def fill_matrix(
        self, request: Any, fields: Any, client: str | None, provenance: dict | None = None
    ) -> AsyncGenerator:
        files = await self.matrix_files(request)
        async with contextlib.aclosing(self.svc.matrix.fill(files, fields, client, provenance)) as updates:
            async for result in updates:
                yield result

    # ---------------------------------------------------------------- figures
    def concepts(self, field: Any) -> tuple[str, list[str]]:
        """(label, concepts) of a Matrix preset field ("revenue", "Net income") or one concept (us-gaap:Assets)."""
        if not isinstance(field, str) or not field.strip():
            raise BadInput(
                f"field must be one of: {', '.join(self.field_names())}, or a concept such as us-gaap:Revenues"
            )
        want = field.strip()
        if re.match(r"^(us-gaap|dei|ifrs-full|srt):[A-Za-z][A-Za-z0-9]{1,150}$", want):
            return want, [want]
        for preset in self.svc.matrix.presets.entries:
            for f in preset.fields:
                if f.concepts and f.name.lower() == want.lower() and not f.concepts[0].startswith("dei:Document"):
                    return f.name, list(f.concepts)
        raise BadInput(
            f"unknown field {want[:60]!r}; choose one of: {', '.join(self.field_names())}, or a concept "
            "such as us-gaap:Revenues"
        )

    def field_names(self) -> list[str]:
        names = []
        for preset in self.svc.matrix.presets.entries:
            names += [
                f.name for f in preset.fields if f.concepts and f.type in ("money", "number") and f.name not in names
            ]
        return names

    async def facts(self, companies: Any, field: Any, period: Any = "annual") -> dict:
        """The field's values over time for each company (several on one chart when their units agree)."""
        label, concepts = self.concepts(field)
        if not isinstance(period, str) or period not in figures.PERIODS:
            raise BadInput(f"period must be one of {', '.join(figures.PERIODS)}")
        queries = split_companies(companies)
        points, notes = [], []
        for q in queries:
            company = await self.company(q)
            try:
                data = await self.client.json(
                    self.client.url("data", f"/api/xbrl/companyfacts/CIK{company.cik10}.json"),
                    self.settings.facts_bytes,
                    f"XBRL facts of {company.ticker}",
                )
            except NotFound:
                raise NotFound(
                    f"{company.ticker} has no XBRL facts on EDGAR (companies file them since 2009; older "
                    "filers and some foreign ones have none): read its filings instead"
                ) from None
            got = await asyncio.to_thread(figures.series, data, concepts, company.ticker, period)
            if not got:
                notes.append(f"{company.ticker} reports no {label} ({', '.join(concepts)}) for a {period} period")
            elif points and figures.units_of(got) != figures.units_of(points):
                notes.append(
                    f"{company.ticker}'s {label} is in {', '.join(sorted(figures.units_of(got)))}, not "
                    f"{', '.join(sorted(figures.units_of(points)))}: left off the chart"
                )
            else:
                points += got
        ciks = {c.ticker: c.cik for c in [await self.company(q) for q in queries]}
        rows = [
            {
                **p.to_json(),
                "url": f"https://www.sec.gov/Archives/edgar/data/{ciks.get(p.company, '')}/"
                f"{p.accession.replace('-', '')}/",
            }
            for p in points
        ]  # the filing's folder on EDGAR: it opens
        return {
            "field": label,
            "concepts": concepts,
            "period": period,
            "points": rows,
            "units": sorted(figures.units_of(points)),
            "notes": notes,
            "csv": figures.to_csv(points),
        }


def split_companies(companies: Any) -> list[str]:
    items = (
        companies if isinstance(companies, list) else _SPLIT.split(companies) if isinstance(companies, str) else None
    )
    items = [c.strip() for c in items or [] if isinstance(c, str) and c.strip()]
    if not items:
        raise BadInput("companies: send one or more tickers, e.g. AAPL, NVDA")
    if len(items) > MAX_COMPANIES:
        raise BadInput(f"{len(items)} companies; send at most {MAX_COMPANIES}")
    return items


def parse_request(request: Any) -> list[dict]:
    """ "AAPL, MSFT, NVDA: latest 10-K" or "AAPL, NVDA: 10-Q 2025" -> one spec per company; a list of specs (or its
    JSON text) as is."""
    if isinstance(request, str) and request.lstrip().startswith("["):
        try:
            request = json.loads(request)
        except (ValueError, RecursionError):
            raise BadInput(
                'filings: not valid JSON; send [{"company": "AAPL", "form": "10-K", "year": 2024}, ...] '
                'or "AAPL, NVDA: latest 10-K"'
            ) from None
    if isinstance(request, list):
        if not request or not all(isinstance(s, dict) for s in request):
            raise BadInput("filings: send a list of {company, form, year} (or accession) objects")
        if len(request) > MAX_COMPANIES:
            raise BadInput(f"{len(request)} filings; send at most {MAX_COMPANIES}")
        return request
    if not isinstance(request, str) or not request.strip():
        raise BadInput('filings: write the tickers and the form, e.g. "AAPL, MSFT, NVDA: latest 10-K"')
    who, _, what = request.partition(":")
    form = next((f for f in listing.FORMS if re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", what.upper())), "10-K")
    year = re.search(r"\b(19|20)\d{2}\b", what)
    return [{"company": c, "form": form, "year": year[0] if year else None} for c in split_companies(who)]
