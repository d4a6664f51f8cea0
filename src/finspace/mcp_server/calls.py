"""What each MCP tool does, over the app's one ``Service``: the same paths as the page and the Gradio API.

``will_it_fit`` is the Will-it-fit tab's check (``Service.fits``: per-client and time bounds); ``extract_matrix``
the Filing Matrix (``Service.matrix``, a MatrixDesk: its bounds, one matrix per client), returned in the Matrix's
own JSON export shape (``finspace.matrix.table.to_json``); ``ask_document`` the documents chat (convert, fit
the context, answer with page citations); ``models``, ``health`` and ``scores`` the REST views; ``load_model``
the admin switch. Every argument was checked against the tool's schema first (``arguments.check``); domain
errors pass through to the endpoint, which answers them as tool errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from finspace.documents import desk as docs
from finspace.documents.convert import short_name
from finspace.documents.upload import remove_upload
from finspace.engine.prompt import ChatSettings
from finspace.engine.records import ChatInfo
from finspace.errors import BadInput, NotReady
from finspace.matrix.table import to_json
from finspace.mcp_server.arguments import document_file

if TYPE_CHECKING:
    from finspace.service import Service

_PAGE = re.compile(r"\bp(?:age|\.)?\s*(\d{1,5})\b", re.IGNORECASE)
FIT_SETTINGS = ("max_model_len", "dtype", "quantization", "gpu_memory_utilization")


@dataclass(frozen=True)
class Caller:
    """Who is calling: the client's address (for the per-client bounds) and the bearer token it sent, if any."""

    client: str | None
    token: str | None = None


class ToolCalls:
    def __init__(self, svc: Service, *, allow_loopback: bool = False, fetch_timeout_s: float = 30.0):
        self.svc = svc
        self.allow_loopback = allow_loopback
        self.fetch_timeout_s = fetch_timeout_s
        self.provenance = svc.provenance

    @property
    def upload_dir(self) -> str:
        return docs.upload_folder(self.svc.settings)

    async def _files(self, documents: list[dict], client: str | None) -> list[tuple[str, str]]:
        """Each document as a file in the upload folder; on any refusal the ones already written are removed. An
        ``upload`` must be ``client``'s own (the upload route's owner, ``Service.uploads``)."""
        held = getattr(self.svc, "uploads", None)
        owned = (lambda path: held.owns(client, path)) if held is not None else None
        files: list[tuple[str, str]] = []
        try:
            for i, doc in enumerate(documents):
                try:
                    if "filing" in doc:  # a filing on EDGAR, read from its archive (Service.edgar)
                        if len(doc) > 1:
                            raise BadInput("a document is exactly one of url, data, upload or filing")
                        f = doc["filing"]
                        picked = await self.svc.edgar.pick(
                            f["company"], f.get("accession"), f.get("form"), f.get("year"), f.get("document")
                        )
                        files.append(await self.svc.edgar.read(picked))
                        continue
                    files.append(
                        await document_file(
                            doc,
                            self.upload_dir,
                            self.svc.settings.documents.max_bytes,
                            allow_loopback=self.allow_loopback,
                            fetch_timeout_s=self.fetch_timeout_s,
                            owned=owned,
                        )
                    )
                except BadInput as exc:
                    if len(documents) > 1:
                        raise BadInput(f"documents[{i}]: {exc}") from None
                    raise
        except BaseException:
            for path, _name in files:
                remove_upload(path, self.upload_dir)
            raise
        return files

    # ------------------------------------------------------------------ tools
    async def will_it_fit(self, args: dict, caller: Caller) -> dict:
        settings = {k: args[k] for k in FIT_SETTINGS if k in args}
        return await self.svc.fits.run(
            caller.client,
            args.get("config_json"),
            args.get("repo"),
            args.get("gpu"),
            args.get("gpus"),
            caller_token=caller.token,
            **settings,
        )

    async def extract_matrix(self, args: dict, caller: Caller) -> dict:
        serving = self.svc.serving
        if serving.entry is None or not serving.ready:
            raise NotReady("no model is loaded yet; call health until ready is true, then extract again")
        files = await self._files(args["documents"], caller.client)
        result = None
        async with contextlib.aclosing(
            self.svc.matrix.fill(files, args.get("fields", "income-statement"), caller.client, self.provenance())
        ) as updates:
            async for result in updates:
                pass
        return to_json(result)

    async def ask_document(self, args: dict, caller: Caller) -> dict:
        if not self.svc.serving.ready:
            raise NotReady("no model is loaded yet; call health until ready is true, then ask again")
        if ("document" in args) == ("documents" in args):
            raise BadInput(
                "invalid arguments: arguments is missing document (one filing) or documents (a list); "
                "send one of them, not both"
            )
        files = await self._files(args["documents"] if "documents" in args else [args["document"]], caller.client)
        atts: list = []
        try:
            for path, name in files:
                atts.append(docs.with_id(await self.svc.documents.attach(path, name, caller.client), atts))
        finally:
            for path, _name in files:
                remove_upload(path, self.upload_dir)
        messages = [{"role": "user", "content": args["question"]}]
        info = ChatInfo()
        answer = []
        async with contextlib.aclosing(
            self.svc.answer(
                messages,
                ChatSettings(max_tokens=args.get("max_tokens")),
                info,
                calculator="auto",  # the page's default: tools if it calls them
                documents=atts,
            )
        ) as parts:
            async for _thinking, delta in parts:
                answer.append(delta)
        text = "".join(answer).strip()
        pages = max(len(a.doc.pages) for a in atts)
        cited = sorted({int(m) for m in _PAGE.findall(text) if 1 <= int(m) <= max(1, pages)})
        checked = await self.svc.check_answer(text, atts)
        return {
            "answer": text,
            "citations": cited,
            "document": info.documents,
            "name": short_name(files[0][1]),
            "ids": [a.ident for a in atts],
            "pages": pages,
            "checks": checked["checks"],
            "steps": [s.as_dict() for s in info.tool_steps],
            "model": info.model_key or getattr(self.svc.serving.entry, "key", None),
            "finish_reason": info.finish_reason,
            "output_tokens": info.output_tokens,
        }

    async def company_filings(self, args: dict, caller: Caller) -> dict:
        company, found = await self.svc.edgar.filings(
            args["company"], args.get("form"), args.get("year"), bool(args.get("older")), args.get("limit", 100)
        )
        return {"company": company.to_json(), "filings": [f.to_json() for f in found]}

    async def company_facts(self, args: dict, caller: Caller) -> dict:
        return await self.svc.edgar.facts(args["companies"], args["field"], args.get("period", "annual"))

    async def models(self, args: dict, caller: Caller) -> list:
        return self.svc.models()

    async def health(self, args: dict, caller: Caller) -> dict:
        return self.svc.health()[0]

    async def scores(self, args: dict, caller: Caller) -> dict:
        body = await asyncio.to_thread(self.svc.scoreboard.board)  # file I/O off the serving loop
        return {**body, "sets": self.svc.scoreboard.sets()}

    async def load_model(self, args: dict, caller: Caller) -> dict:
        self.svc.authorize(caller.token, client=caller.client)
        await self.svc.load(args["model"])
        return self.svc.health()[0]
