"""The matrix desk: what the page and the API call to fill a matrix on the loaded model (``Service.matrix``).

It holds the bounds that keep a public Space whole: documents and fields per matrix, cells per matrix, one
matrix at a time per client and ``max_running`` in all; the documents are converted as the chat's are (a
bounded child process each, the upload deleted after), and a document that fails to convert leaves its row
saying why while the rest of the matrix completes.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any

from finspace.documents.gate import ConversionGate
from finspace.documents.limits import DocumentLimits
from finspace.engine.api import EngineAPI
from finspace.documents.convert import Document, short_name
from finspace.documents.upload import convert_upload
from finspace.errors import BadInput, Busy, FinspaceError, NotReady
from finspace.matrix import pages, run
from finspace.matrix.cells import context_problem, reply_tokens
from finspace.matrix.filer import filer_values
from finspace.documents.upload import remove_upload
from finspace.matrix.fields import FILENAME, FieldPresets, MatrixField, load_field_presets, parse_fields
from finspace.matrix.limits import MatrixLimits
from finspace.matrix.table import MatrixResult, Row
from finspace.models.presets import presets_path


class MatrixDesk:
    """``engine``: the model the cells ask; ``conversions``: the gate every document conversion takes (the
    chat's too); ``documents``: their bounds; ``uploads``: the upload folder; ``catalog_path``: where the field
    presets sit beside models.yaml (None: the package's)."""

    def __init__(
        self,
        engine: EngineAPI,
        conversions: ConversionGate,
        documents: DocumentLimits,
        uploads: str,
        limits: MatrixLimits | None = None,
        catalog_path: Any = None,
    ):
        self.engine, self.conversions, self.documents, self.uploads = engine, conversions, documents, uploads
        self.limits = limits or MatrixLimits()
        self.presets: FieldPresets = load_field_presets(presets_path(catalog_path, FILENAME))
        self._clients: set[str] = set()
        self._running = 0

    def fields(self, spec: Any) -> tuple[MatrixField, ...]:
        """A preset's key or label, or the fields as JSON text or a list."""
        if isinstance(spec, str) and spec.strip() and not spec.lstrip().startswith("["):
            return self.presets.get(spec.strip()).fields
        try:
            if isinstance(spec, str):
                try:
                    spec = json.loads(spec)
                except ValueError as exc:  # JSONDecodeError, or a number past Python's 4,300 digits (no .msg)
                    why = f"{exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
                    raise BadInput(
                        f"fields: not valid JSON ({why}); send a list of "
                        '{"name", "type", "instruction"} objects or a preset name'
                    ) from None
            return parse_fields(spec)
        except RecursionError:  # JSON nested thousands deep: Python's parser gives up
            raise BadInput(
                'fields: nested too deeply; send a flat list of {"name", "type", "instruction"} '
                "objects or a preset name"
            ) from None

    def check(self, files: Sequence[Any], fields: Sequence[MatrixField]) -> None:
        lim = self.limits
        if not files:
            raise BadInput("add at least one document (PDF, HTML, DOCX, XLSX, CSV, TXT or MD)")
        if len(files) > lim.max_documents:
            raise BadInput(f"{len(files)} documents; a matrix takes at most {lim.max_documents}: split the set")
        cells = len(files) * len(fields)
        if cells > lim.max_cells:
            raise BadInput(
                f"{len(files)} documents x {len(fields)} fields = {cells} cells; a matrix has at most "
                f"{lim.max_cells}: use fewer documents or fields"
            )

    @contextlib.contextmanager
    def _slot(self, client: str | None) -> Iterator[None]:
        if client is not None and client in self._clients:
            raise Busy("a matrix of yours is already filling; wait for it or cancel it, then start the next", 10)
        if self._running >= self.limits.max_running:
            raise Busy(f"{self._running} matrices are filling on this Space, the limit; try again in a minute", 30)
        self._running += 1
        if client is not None:
            self._clients.add(client)
        try:
            yield
        finally:
            self._running -= 1
            self._clients.discard(client)

    async def _convert(self, path: str, name: str, client: str | None) -> Document | str:
        """One filing converted as the chat's are, through the same gate on conversions at once (one after another
        for a client, within the matrices' share: Service.conversions); a refusal or a failed conversion is the
        row's reason."""
        try:
            async with self.conversions.slot(client, bulk=True):
                return await convert_upload(path, name, self.documents, self.uploads)
        except FinspaceError as exc:
            return str(exc)

    def _ready(self, files: Sequence[tuple[str, str]], spec: Any) -> tuple[MatrixField, ...]:
        """The fields, when the matrix may start (else the refusal, naming the fix)."""
        fields = self.fields(spec)
        self.check(files, fields)
        engine = self.engine
        if engine.entry is None or not engine.ready:
            if not any(f.concepts for f in fields):  # XBRL fields fill from the filings alone
                raise NotReady("no model is loaded; load one from the model picker, then fill the matrix")
        elif problem := context_problem(engine.max_model_len):
            raise BadInput(problem)
        return fields

    async def fill(
        self,
        files: Sequence[tuple[str, str]],
        spec: Any,
        client: str | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> AsyncGenerator[MatrixResult, None]:
        """Fill a matrix of ``files`` ((path in the upload folder, name)) x the fields ``spec`` names, yielding the
        result as cells finish. Closing it cancels the unfinished cells (their vLLM requests are aborted).
        ``provenance``: the loaded model's (key, repo, revision, quantization, load id), kept with the result."""
        folder = self.uploads
        engine = self.engine
        try:  # whatever ends the matrix (a refusal, busy, a failure, a cancel), none of its uploads stay behind
            fields = self._ready(files, spec)
            with self._slot(client):
                try:
                    converted = [await self._convert(p, n, client) for p, n in files]
                finally:  # the filings are read: their uploads go now, not when the cells are done
                    for path, _name in files:
                        remove_upload(path, folder)
                rows = tuple(
                    Row(short_name(n), len(d.pages), facts=len(d.facts))
                    if isinstance(d, Document)
                    else Row(short_name(n), error=d)
                    for (_p, n), d in zip(files, converted, strict=True)
                )
                prov = dict(provenance or {}, created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                result = MatrixResult(fields, rows, provenance=prov)
                docs = [d if isinstance(d, Document) else None for d in converted]
                result.filer = filer_values(fields, [d.facts if d else None for d in docs])  # the filer's, at once
                pages.keep(result, docs)  # the pages the cells cite, for a click on a cell (matrix.pages)
                if engine.entry is None or not engine.ready:  # no model: the filer's XBRL values only
                    result.model, result.state = False, "done"
                yield result  # the filer's values show before any model answers
                if not result.model:
                    return
                async with contextlib.aclosing(
                    run.fill(
                        engine, result, docs, reply_tokens=reply_tokens(engine.max_model_len, self.limits.reply_tokens)
                    )
                ) as cells:
                    async for r in cells:
                        pages.keep(r, docs)
                        yield r
        finally:
            for path, _name in files:
                remove_upload(path, folder)
