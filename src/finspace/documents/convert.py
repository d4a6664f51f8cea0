"""An uploaded file as text with page labels: PDF, HTML, DOCX, XLSX, CSV, TXT, MD. Tables as Markdown tables.

Converters are small, well-kept libraries, each for one format, rather than one
umbrella (markitdown pulls in magika, onnxruntime and a dozen converters we
would not use, and hides page boundaries):

- PDF (finspace.documents.pdf): **PDFium** (pypdfium2), page by page, each line
  rebuilt from character positions, so every passage keeps its page number for
  citations and a statement row keeps its line, its columns tab-separated; every
  page of a real filing is read. It reads the text layer only: a scanned PDF has
  none, and OCR is not supported.
- HTML (finspace.documents.html, SEC filings): **lxml**'s HTML parser, walked
  without recursion. Pages end at CSS page breaks (finspace.xbrl.pagebreaks);
  scripts, styles, iframes, objects and hidden elements are removed, never
  executed; the document says how many scripts were removed. Tables become
  Markdown tables, cleaned (finspace.documents.tables) and with their caption.
- Page labels are "page N", or "page N (printed P)" when the page prints its
  number (finspace.documents.printed).
- DOCX: **python-docx**, paragraphs and tables in document order.
- XLSX: **openpyxl** in read-only mode, values only (formulas are not run); one
  "page" per sheet. CSV: Python's csv module.

The claimed type (the extension) must match the bytes: %PDF for PDF, a zip with
word/document.xml or xl/workbook.xml for DOCX/XLSX, UTF-8 text for the rest.
Every refusal is ``BadInput`` naming the limit or the reason.
"""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from finspace.documents.limits import DocumentLimits
from finspace.documents.tables import markdown_table
from finspace.documents.text import check_cells, read_text, short_name, tidy
from finspace.errors import BadInput
from finspace.xbrl.facts import Facts

__all__ = ["KINDS", "Document", "Page", "check_type", "convert", "kind_of", "markdown_table", "short_name"]

KINDS = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".txt": "txt",
    ".md": "md",
    ".markdown": "md",
}


@dataclass(frozen=True)
class Page:
    label: str  # "page 7", "sheet Income", "" for a document without pages
    text: str


@dataclass(frozen=True)
class Document:
    name: str
    kind: str
    pages: tuple[Page, ...]
    notes: tuple[str, ...] = field(default=())  # what was left out (scripts removed, ...)
    facts: Facts = field(default_factory=Facts)  # an inline-XBRL filing's tagged figures (finspace.xbrl)

    @property
    def text(self) -> str:
        return "\n\n".join(f"[{p.label}]\n{p.text}" if p.label else p.text for p in self.pages)

    @property
    def chars(self) -> int:
        return sum(len(p.text) for p in self.pages)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "notes": list(self.notes),
            "pages": [[p.label, p.text] for p in self.pages],
            "facts": self.facts.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict) -> Document:
        return cls(
            d["name"],
            d["kind"],
            tuple(Page(str(a), str(b)) for a, b in d["pages"]),
            tuple(d["notes"]),
            Facts.from_json(d.get("facts")),
        )


def kind_of(name: str) -> str:
    """The type a file name claims, or BadInput naming the types taken."""
    kind = KINDS.get(Path(name).suffix.lower())
    if kind is None:
        raise BadInput(
            f"{short_name(name)}: this file type is not supported; upload PDF, HTML, DOCX, XLSX, CSV, TXT or MD"
        )
    return kind


def check_type(kind: str, head: bytes, name: str) -> None:
    """BadInput when the first bytes are not what the extension says (a renamed file)."""
    n = short_name(name)
    if kind == "pdf":
        if b"%PDF-" not in head[:1024]:
            raise BadInput(f"{n} is named .pdf but is not a PDF (no %PDF header); upload the file itself")
    elif kind in ("docx", "xlsx"):
        if not head.startswith(b"PK\x03\x04"):
            raise BadInput(f"{n} is named .{kind} but is not an Office file (not a zip); upload the file itself")
    elif head.startswith((b"%PDF-", b"PK\x03\x04")) or b"\x00" in head:
        raise BadInput(f"{n} is named .{kind} but holds binary data, not text; name it after its real type")


def convert(path: str | Path, name: str, limits: DocumentLimits) -> Document:
    """The file at ``path`` (uploaded as ``name``) as a Document, or BadInput naming the limit or reason."""
    path = Path(path)
    kind = kind_of(name)
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise BadInput(
            f"{short_name(name)} is {size / (1 << 20):.1f} MiB; the limit is "
            f"{limits.max_bytes / (1 << 20):g} MiB per document"
        )
    if size == 0:
        raise BadInput(f"{short_name(name)} is empty")
    with path.open("rb") as f:
        check_type(kind, f.read(1024), name)
    doc = _CONVERTERS[kind](path, name, limits)
    if not any(p.text.strip() for p in doc.pages):
        if kind == "pdf":
            raise BadInput(
                f"{short_name(name)} has no text layer (a scanned document?); OCR is not supported: "
                "upload a PDF with selectable text, or the filing's HTML"
            )
        raise BadInput(f"{short_name(name)} has no text to read")
    if doc.chars > limits.max_chars:
        raise BadInput(f"{short_name(name)} holds {doc.chars:,} characters of text; the limit is {limits.max_chars:,}")
    if kind == "html":  # the filer's inline-XBRL figures, with their pages (finspace.xbrl)
        doc = replace(doc, facts=_facts(path))
    return doc


# ------------------------------------------------------------------ PDF, HTML
def _pdf(path: Path, name: str, limits: DocumentLimits) -> Document:
    from finspace.documents import pdf

    pages, notes = pdf.convert(path, name, limits)
    return Document(short_name(name), "pdf", tuple(Page(a, b) for a, b in pages), notes)


def _html(path: Path, name: str, limits: DocumentLimits) -> Document:
    from finspace.documents import html

    pages, notes = html.convert(path, name, limits)
    return Document(short_name(name), "html", tuple(Page(a, b) for a, b in pages), notes)


# ------------------------------------------------------------------ DOCX, XLSX, CSV
def _check_zip(path: Path, name: str, kind: str, limits: DocumentLimits) -> None:
    member = {"docx": "word/document.xml", "xlsx": "xl/workbook.xml"}[kind]
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = {i.filename for i in infos}
            unpacked = sum(i.file_size for i in infos)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise BadInput(f"{short_name(name)} is not a readable .{kind} (corrupt zip: {type(exc).__name__})") from None
    if member not in names:
        raise BadInput(f"{short_name(name)} is named .{kind} but is another kind of zip (no {member})")
    if unpacked > limits.max_unpacked_bytes:
        raise BadInput(
            f"{short_name(name)} unpacks to {unpacked / (1 << 20):,.0f} MiB; the limit is "
            f"{limits.max_unpacked_bytes / (1 << 20):g} MiB"
        )


def _docx(path: Path, name: str, limits: DocumentLimits) -> Document:
    import docx
    from docx.table import Table

    _check_zip(path, name, "docx", limits)
    try:
        d = docx.Document(str(path))
        parts, cells = [], 0
        for item in d.iter_inner_content():
            if isinstance(item, Table):
                rows = [[c.text.strip() for c in r.cells] for r in item.rows]
                cells += sum(len(r) for r in rows)
                check_cells(cells, name, limits)
                parts.append(markdown_table(rows))
            elif item.text.strip():
                parts.append(item.text.strip())
    except BadInput:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file is the sender's problem, named
        raise BadInput(f"{short_name(name)} is not a readable .docx ({type(exc).__name__})") from None
    return Document(short_name(name), "docx", (Page("", "\n\n".join(parts)),))


def _xlsx(path: Path, name: str, limits: DocumentLimits) -> Document:
    import openpyxl

    _check_zip(path, name, "xlsx", limits)
    try:
        wb = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    except Exception as exc:  # noqa: BLE001
        raise BadInput(f"{short_name(name)} is not a readable .xlsx ({type(exc).__name__})") from None
    pages, cells = [], 0
    try:
        for ws in wb.worksheets:
            rows = []
            for row in ws.iter_rows(values_only=True):
                cells += len(row)
                check_cells(cells, name, limits)
                rows.append(["" if v is None else str(v) for v in row])
            pages.append(Page(f"sheet {ws.title}", markdown_table(_trim(rows))))
    finally:
        wb.close()
    return Document(short_name(name), "xlsx", tuple(pages))


def _csv(path: Path, name: str, limits: DocumentLimits) -> Document:
    rows, cells = [], 0
    for row in csv.reader(io.StringIO(read_text(path, name))):
        cells += len(row)
        check_cells(cells, name, limits)
        rows.append(row)
    return Document(short_name(name), "csv", (Page("", markdown_table(_trim(rows))),))


def _plain(path: Path, name: str, limits: DocumentLimits) -> Document:
    return Document(short_name(name), kind_of(name), (Page("", tidy(read_text(path, name))),))


# ------------------------------------------------------------------ helpers
def _facts(path: Path) -> Facts:
    from finspace.xbrl.reader import read_file

    return read_file(path)


def _trim(rows: list[list[str]]) -> list[list[str]]:
    """Empty trailing columns dropped (spreadsheets pad rows to their widest)."""
    width = max((max((i + 1 for i, c in enumerate(r) if c.strip()), default=0) for r in rows), default=0)
    return [r[:width] for r in rows]


_CONVERTERS = {"pdf": _pdf, "html": _html, "docx": _docx, "xlsx": _xlsx, "csv": _csv, "txt": _plain, "md": _plain}
