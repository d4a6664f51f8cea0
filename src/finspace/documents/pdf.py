"""A PDF filing as pages of text whose table rows stay on one line, their columns apart, every page read.

**PDFium** (the ``pypdfium2`` package: Apache-2.0 or BSD-3-Clause; PDFium itself BSD-3-Clause), page by page
(every passage keeps its page for citations). PDFium parses a page's content stream in C++: with the lines
rebuilt here, 4.7-8.0 ms of CPU a page of the shared 10-Ks, against pypdf's 46-71 ms in its layout mode
(bench/filings.py; docs/documents.md has the side by side with pdfplumber). It reads the text layer only: a
scanned PDF has none, and OCR is not supported.

A 10-K's statements are tables without ruled lines: a year's column exists only in the layout. PDFium's own text
runs a statement's rows together (``Net sales $ 233,715 $ 182,795 $ 170,910 Cost of sales 140,089 ...``), so each
line is rebuilt from positions here:

- the page's text is split into words (PDFium's text, in its order, at whitespace); each word's box is its first
  and last character's (``FPDFText_GetLooseCharBox``: the font's height, so digits and letters of one row share
  it). Words whose box is not a number (NaN, infinite) or lies off the page are left out, counted in a note;
- words are grouped into lines by their vertical middle (within half a line's height), lines top to bottom, words
  left to right; a gap under ``JOIN`` of the height joins two pieces of one word (words are never cut), under
  ``COLUMN`` is a space, wider is a column gap;
- a column gap becomes a **tab** where a figure starts or ends on either side of it (a statement's columns),
  elsewhere one space (``columns``); a currency sign is joined to its figure (``$233,715``), a negative's inner
  spaces are dropped (``(1,886 )`` -> ``(1,886)``), a figure glued to its label is split from it
  (``merchandise50,401`` -> ``merchandise 50,401``);
- a page of two columns of prose (a gutter that most lines leave empty, words on both sides, few figures on the
  right) is read left column then right, a line that spans the gutter (a heading) in its place;
- a page whose rebuilt lines come out empty, or mostly one word a line (text drawn rotated), is read as PDFium's
  own text instead (the same figure fixes, no columns), and counted in a note;
- a page of more than ``PAGE_CHARS`` characters, or whose characters are mostly unmappable (a font without a
  Unicode map gives U+FFFD, control or private-use characters: garbage to index), is left out with a note
  naming it;
- pages are labelled "page N", and "page N (printed P)" when the page's footer or header prints a number.

Time: the conversion child is killed after ``limits.convert_bound_s(pages)`` (finspace.documents.upload), which
stops a page that makes the parser spin. A real 10-K is read whole in seconds; as a last guard, pages are read
until ``BUDGET_SHARE`` of that bound is spent and the rest named in a note rather than lost to the kill.
"""

from __future__ import annotations

import ctypes
import math
import re
import time
from pathlib import Path

from finspace.documents.limits import DocumentLimits
from finspace.documents.printed import label
from finspace.documents.text import fix_figures, short_name, tidy
from finspace.errors import BadInput

BUDGET_SHARE = 0.6  # of the conversion's time bound, for reading pages (the child's start and answer need the rest)
PAGE_CHARS = 100_000  # a page's characters past this: left out (a dense 10-K page holds 3,000-9,000)
GARBLED_SHARE = 0.3  # of a page's non-space characters unmappable: the page is left out as garbled
JOIN = 0.08  # a gap under this share of the line's height joins two pieces of one word
COLUMN = 0.9  # a gap over this share of the line's height is a column gap (justified prose stays under it)
FILL = 0.25  # ...and most of their left column's lines end within this share of the column's width of the gutter
WORDS = 4  # a two-column page's lines average this many words a side (a form's label-value rows fewer)
OFF_PAGE = 0.1  # a word this share of the page's size past its edge is off the page
_COLUMNS = re.compile(r" {2,}")
_FIGURE_START = re.compile(r"[\d$€£¥(—–-]")
_FIGURE_END = re.compile(r"[\d%)]$")
_FIGURE = re.compile(r"^[$€£¥(—–-]*\d[\d,.]*[%)]*$")
_SIGNS = {"%", "$", "—", "–", "-"}
_WORD = re.compile(r"\S+")
_BAD = re.compile("[\ufffd\ue000-\uf8ff\x00-\x08\x0b\x0c\x0e-\x1f]")


def convert(
    path: Path, name: str, limits: DocumentLimits, clock=time.monotonic
) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """The PDF's pages as (label, text) and its notes, or BadInput naming the reason."""
    started = clock()
    pdf = _open(path, name, limits)
    n = short_name(name)
    try:
        count = len(pdf)
        budget = BUDGET_SHARE * limits.convert_bound_s(count)
        pages: list[tuple[str, str]] = []
        odd: dict[str, list[int]] = {}
        off = 0
        for i in range(count):
            if i > 0 and clock() - started > budget:
                return pages, (
                    f"pages {i + 1}-{count} of {count} were left out: reading them would pass the "
                    f"{limits.convert_bound_s(count):g} s conversion bound on this machine; upload "
                    "those pages as a PDF of their own to ask about them",
                    *_notes(odd, off),
                )
            try:
                page = pdf[i]
                try:
                    text, how, dropped = page_text(page)
                finally:
                    page.close()
            except Exception:  # noqa: BLE001 - one damaged page must not hide the rest
                text, how, dropped = "", "damaged", 0
            off += dropped
            if how:
                odd.setdefault(how, []).append(i + 1)
            pages.append((label(i + 1, text), text))
    finally:
        pdf.close()
    if not any(t.strip() for _, t in pages):
        if odd.get("garbled"):
            raise BadInput(
                f"{n}: its fonts have no Unicode map (the text comes out as garbage, "
                f"{len(odd['garbled'])} page{'s' if len(odd['garbled']) != 1 else ''}); export the filing "
                "again with its text, or upload its HTML"
            )
        if odd.get("dense") or odd.get("damaged"):  # nothing read, and not for want of a text layer
            raise BadInput(f"{n}: no page could be read: " + "; ".join(_notes(odd, off)))
    return pages, _notes(odd, off)


_WHY = {
    "plain": "read without columns (their lines could not be rebuilt from positions)",
    "garbled": "left out: their fonts have no Unicode map, so their text would be garbage",
    "dense": f"left out: each holds more than {PAGE_CHARS:,} characters",
    "damaged": "left out: damaged, or deeper in the page tree than PDFium reads",
}


def _notes(odd: dict[str, list[int]], off: int) -> tuple[str, ...]:
    notes = [
        f"{len(nums)} page{'s' if len(nums) != 1 else ''} {_WHY[how]}: {_ranges(nums)}" for how, nums in odd.items()
    ]
    if off:
        notes.append(f"{off:,} word{'s' if off != 1 else ''} placed off the page or at no position were left out")
    return tuple(notes)


def _ranges(nums: list[int]) -> str:
    out, start = [], None
    for k, v in enumerate(nums):
        if start is None:
            start = v
        if k + 1 == len(nums) or nums[k + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    shown = ", ".join(out[:10])
    return f"page{'s' if len(nums) > 1 else ''} {shown}{', ...' if len(out) > 10 else ''}"


def _open(path: Path, name: str, limits: DocumentLimits):
    import pypdfium2 as pdfium

    n = short_name(name)
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        if exc.err_code == 4:  # FPDF_ERR_PASSWORD (an empty user password was tried, as viewers do)
            raise BadInput(
                f"{n} is an encrypted PDF (it needs a password); save an unprotected copy and upload it"
            ) from None
        raise BadInput(f"{n} is not a readable PDF (corrupt or truncated)") from None
    count = len(pdf)
    if count > limits.max_pages:
        pdf.close()
        raise BadInput(f"{n} has {count:,} pages; the limit is {limits.max_pages:,} pages per document")
    if count == 0:
        pdf.close()
        raise BadInput(f"{n} is not a readable PDF (no pages found: corrupt, or its page tree is too deep)")
    return pdf


def page_count(path: str) -> int | None:
    """A PDF's page count (its page tree only, nothing read), or None when PDFium cannot open it."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(path)
    except pdfium.PdfiumError:
        return None
    try:
        return len(pdf)
    finally:
        pdf.close()


def page_text(page) -> tuple[str, str, int]:
    """One page's text with its columns tab-separated; how it was read ("" rebuilt, "plain", "garbled",
    "dense"); words left out for their positions."""
    import pypdfium2.raw as raw

    tp = page.get_textpage()
    try:
        n = raw.FPDFText_CountChars(tp.raw)
        if n <= 0:
            return "", "", 0
        if n > PAGE_CHARS:
            return "", "dense", 0
        text = tp.get_text_range(0, n).replace("\ufffe", "-")  # PDFium's mark for a hyphen that broke a word
        solid = len(text) - sum(text.count(c) for c in " \r\n\t")
        if solid and len(_BAD.findall(text)) > GARBLED_SHARE * solid:
            return "", "garbled", 0
        if len(text) != n:  # characters past U+FFFF shift the indices: PDFium's own lines
            return fix_figures(tidy(text)), "plain", 0
        words, dropped = _words(tp.raw, text, page.get_size())
    finally:
        tp.close()
    lines = _lines(words)
    if not lines or (len(words) >= 40 and len(lines) > 0.7 * len(words)):
        plain = fix_figures(tidy(text))
        return plain, ("plain" if plain else ""), dropped
    return columns("\n".join(_order(lines))), "", dropped


def _words(tp, text: str, size: tuple[float, float]) -> tuple[list[tuple[float, float, float, float, str]], int]:
    """(left, bottom, right, top, word) for each word placed on the page, and how many were not."""
    import pypdfium2.raw as raw

    width, height = size
    lo_x, hi_x, lo_y, hi_y = -OFF_PAGE * width, (1 + OFF_PAGE) * width, -OFF_PAGE * height, (1 + OFF_PAGE) * height
    rc = raw.FS_RECTF()
    ref = ctypes.byref(rc)
    box = raw.FPDFText_GetLooseCharBox
    isfinite = math.isfinite
    words, dropped = [], 0
    for m in _WORD.finditer(text):
        a, z = m.span()
        box(tp, a, ref)
        left, top, bottom = rc.left, rc.top, rc.bottom
        box(tp, z - 1, ref)
        right = rc.right
        if (
            not (isfinite(left) and isfinite(right) and isfinite(top) and isfinite(bottom))
            or top < bottom
            or right < lo_x
            or left > hi_x
            or top < lo_y
            or bottom > hi_y
        ):
            dropped += 1
            continue
        words.append((left, bottom, right if right > left else left, top, m.group()))
    return words, dropped


def _lines(words: list[tuple[float, float, float, float, str]]) -> list[list[tuple[float, float, float, float, str]]]:
    """Words grouped into lines by their vertical middle, top to bottom; each line's words left to right."""
    lines: list[list] = []
    mid = height = 0.0
    for w in sorted(words, key=lambda w: -(w[1] + w[3])):
        m, h = (w[1] + w[3]) / 2, w[3] - w[1]
        if lines and abs(mid - m) < 0.5 * max(1.0, min(h, height)):
            lines[-1].append(w)
        else:
            lines.append([w])
            mid, height = m, h
    for line in lines:
        line.sort(key=lambda w: w[0])
    return lines


def _join(words) -> tuple[str, list[tuple[float, float]]]:
    """A line's text (three spaces at a column gap), and its column gaps as (from x, to x)."""
    out, gaps, prev = [], [], None
    for left, bottom, right, top, word in words:
        h = max(1.0, top - bottom)
        if prev is not None:
            p_right, p_word = prev
            gap = left - p_right
            if word == p_word and gap < 0:  # drawn twice (a bold effect): once
                continue
            if gap >= COLUMN * h:
                out.append("   ")
                gaps.append((p_right, left))
            elif gap >= JOIN * h:
                out.append(" ")
        out.append(word)
        prev = (right, word)
    return "".join(out), gaps


def _order(lines) -> list[str]:
    """The lines' texts in reading order: a two-column page's left column, then its right; a line across the
    gutter (a heading) or whose right part is only figures (a table's row) in its place, after what came before."""
    joined = [_join(line) for line in lines]
    gaps = sum(len(g) for _, g in joined)
    joined = [text for text, _ in joined]
    gutter = _gutter(lines) if gaps >= 0.5 * len(lines) else None  # most lines of two columns have a gap
    if gutter is None:
        return joined
    out, left, right = [], [], []
    for line, text in zip(lines, joined):
        a = [w for w in line if w[2] <= gutter]
        b = [w for w in line if w[0] >= gutter]
        if len(a) + len(b) < len(line) or (
            a
            and b
            and (
                all(_FIGURE.match(w[4]) or w[4] in _SIGNS for w in b)
                or b[0][0] - a[-1][2] < COLUMN * max(1.0, a[-1][3] - a[-1][1])
            )
        ):
            out += left + right + [text]
            left, right = [], []
            continue
        if a:
            left.append(_join(a)[0])
        if b:
            right.append(_join(b)[0])
    return out + left + right


def _gutter(lines) -> float | None:
    """The x of a two-column page's gutter, or None: the middle of the widest run, in the text's middle 40%, that
    fewest lines' words cover; a gutter when at most 15% of lines cross it (a word over it, or only a space
    there), half have words on both sides, most of those fill their left column up to it, and the right side is
    prose (at most 20% figures, ``WORDS`` words a side), not a statement's or a list's columns."""
    if len(lines) < 10:
        return None
    events = sorted(e for line in lines for w in line for e in ((w[0], 1), (w[2], -1)))
    x0, x1 = events[0][0], events[-1][0]
    lo, hi = x0 + 0.3 * (x1 - x0), x0 + 0.7 * (x1 - x0)
    best, cover, prev = None, 0, x0
    for x, step in events:  # (coverage, -width, centre) of each run between two events, inside [lo, hi]
        a, b = max(prev, lo), min(x, hi)
        if b > a and (best is None or (cover, a - b) < best[:2]):
            best = (cover, a - b, (a + b) / 2)
        cover += step
        prev = x
    if best is None or best[0] > 0.15 * len(lines):
        return None
    g = best[2]
    both = right_words = right_figures = side_words = full = crossing = 0
    for line in lines:
        lefts = [w for w in line if w[2] <= g]
        rights = [w for w in line if w[0] >= g]
        if len(lefts) + len(rights) < len(line) or (
            lefts and rights and rights[0][0] - lefts[-1][2] < COLUMN * max(1.0, lefts[-1][3] - lefts[-1][1])
        ):
            crossing += 1  # a word over the gutter, or a line whose gap there is a space between two words
            continue
        if lefts and rights:
            both += 1
            side_words += len(line)
            full += g - lefts[-1][2] < FILL * (g - x0)
        right_words += len(rights)
        right_figures += sum(1 for w in rights if _FIGURE.match(w[4]))
    if (
        crossing > 0.15 * len(lines)
        or both < 0.5 * len(lines)
        or full < 0.6 * both
        or right_figures > 0.2 * max(1, right_words)
        or side_words < 2 * WORDS * both
    ):
        return None
    return g


def columns(text: str) -> str:
    """Rebuilt lines: runs of 2+ spaces as tabs where a figure starts or ends, else a space; figures fixed;
    blank runs made one blank line."""
    out = []
    for line in fix_figures(text.replace("\r\n", "\n").replace("\r", "\n")).split("\n"):
        cells = [" ".join(cell.split()) for cell in _COLUMNS.split(line.strip())]
        line = cells[0]
        for prev, cell in zip(cells, cells[1:]):
            line += ("\t" if _FIGURE_START.match(cell) or _FIGURE_END.search(prev) else " ") + cell
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
