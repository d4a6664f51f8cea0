"""A PDF filing as pages of text whose table rows stay on one line, their columns apart.

**pypdf**, page by page (every passage keeps its page for citations; pure Python; it says when a file is
encrypted, an empty user password tried as viewers do, or corrupt). It reads the text layer only: a scanned
PDF has none, and OCR is not supported.

A 10-K's statements are tables without ruled lines: a year's column exists only in the layout. pypdf's plain
mode runs the rows together (``Net sales\\n$ 233,715 $ 182,795 $ 170,910 Cost of sales\\n140,089 ...``) and
cuts words in two (``administr\\native``). Its ``extraction_mode="layout"`` places text on a fixed-width grid,
so each row keeps its line; here:

- a run of two or more spaces becomes a **tab**, the column separator, where a figure starts or ends on either
  side of it (a statement's columns); elsewhere (justified prose, a header's words) one space. A tab is one
  token for the tokenizers we serve (``" | "`` is two or three), and it is whitespace: BM25's word split and
  the Matrix's quote check (which folds whitespace) read ``Net sales\\t$233,715\\t$182,795`` exactly as
  ``Net sales $233,715 $182,795``. Tabs at every run of spaces cost 10% more tokens than plain mode on
  Apple's 2015 10-K (SmolLM2's tokenizer); at figures only, about none (bench/filings.py);
- a currency sign is joined to its figure (``$       233,715`` -> ``$233,715``), a negative's inner spaces are
  dropped (``(1,886 )``, ``( 25 )`` -> ``(1,886)``, ``(25)``), and a figure glued to its label is split from it
  (``merchandise50,401`` -> ``merchandise 50,401``);
- a page that layout mode leaves empty, or pads past ``LAYOUT_RATIO`` times its own characters (a PDF made to
  explode its layout grid), is read in plain mode instead (the same fixes, no columns);
- pages are labelled "page N", and "page N (printed P)" when the page's footer or header prints a number.

Time: pypdf parses each page's content stream in Python (about 0.1 s per 10-K page on a quiet core, 3x that
on a busy one). Pages are converted until ``BUDGET_SHARE`` of ``limits.convert_timeout_s`` is spent; the pages
after that are left out with a note naming them, so a long report on a busy machine is read in part rather
than refused for its size.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from finspace.documents.limits import DocumentLimits
from finspace.documents.printed import label
from finspace.documents.text import fix_figures, short_name
from finspace.errors import BadInput

LAYOUT_RATIO = 100  # a layout page's raw length past this many times its non-space characters: plain mode
BUDGET_SHARE = 0.6  # of the conversion's time bound, for reading pages (the child's start, its imports and its
# answer need the rest: on a busy machine the start alone took 5-10 s)
_COLUMNS = re.compile(r" {2,}")
_FIGURE_START = re.compile(r"[\d$€£¥(—–-]")
_FIGURE_END = re.compile(r"[\d%)]$")


def convert(path: Path, name: str, limits: DocumentLimits, clock=time.monotonic) -> tuple[list[tuple[str, str]],
                                                                                       tuple[str, ...]]:
    """The PDF's pages as (label, text) and its notes, or BadInput naming the reason."""
    started = clock()
    reader = _open(path, name, limits)
    n = short_name(name)
    pages: list[tuple[str, str]] = []
    plain = 0
    for i, page in enumerate(reader.pages, 1):
        if i > 1 and clock() - started > BUDGET_SHARE * limits.convert_timeout_s:
            return pages, (f"pages {i}-{len(reader.pages)} of {len(reader.pages)} were left out: reading them "
                           f"would pass the {limits.convert_timeout_s:g} s conversion bound on this machine; "
                           "upload those pages as a PDF of their own to ask about them",
                           *_plain_note(plain))
        try:
            text, used_plain = page_text(page)
        except Exception as exc:  # noqa: BLE001 - one damaged page must not hide the rest
            raise BadInput(f"{n}: page {i} cannot be read (corrupt PDF: {type(exc).__name__})") from None
        plain += used_plain
        pages.append((label(i, text), text))
    return pages, _plain_note(plain)


def _plain_note(plain: int) -> tuple[str, ...]:
    return (f"{plain} page{'s' if plain != 1 else ''} read without columns (layout mode left "
            f"{'them' if plain != 1 else 'it'} empty or oversized)",) if plain else ()


def _open(path: Path, name: str, limits: DocumentLimits):
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    n = short_name(name)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise BadInput(f"{n} is an encrypted PDF (it needs a password); save an unprotected copy and upload it")
        count = len(reader.pages)
    except BadInput:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        if "decrypt" in str(exc).lower() or "encrypt" in str(exc).lower():
            raise BadInput(f"{n} is an encrypted PDF (it needs a password); save an unprotected copy") from None
        raise BadInput(f"{n} is not a readable PDF (corrupt or truncated: {type(exc).__name__})") from None
    if count > limits.max_pages:
        raise BadInput(f"{n} has {count:,} pages; the limit is {limits.max_pages:,} pages per document")
    return reader


def page_text(page) -> tuple[str, bool]:
    """One page's text with its columns tab-separated, and whether plain mode had to be used."""
    raw = page.extract_text(extraction_mode="layout", layout_mode_space_vertically=False) or ""
    solid = sum(1 for c in raw if not c.isspace())
    if solid and len(raw) <= LAYOUT_RATIO * solid + 10_000:
        return columns(raw), False
    return fix_figures(_lines(page.extract_text() or "")), True


def columns(text: str) -> str:
    """Layout text: runs of 2+ spaces as tabs, figures fixed, blank runs made one blank line."""
    out = []
    for line in fix_figures(text.replace("\r\n", "\n").replace("\r", "\n")).split("\n"):
        cells = [" ".join(cell.split()) for cell in _COLUMNS.split(line.strip())]
        line = cells[0]
        for prev, cell in zip(cells, cells[1:]):
            line += ("\t" if _FIGURE_START.match(cell) or _FIGURE_END.search(prev) else " ") + cell
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _lines(text: str) -> str:
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line).strip()
