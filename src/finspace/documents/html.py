"""An HTML filing as pages of text, its tables cleaned, each table with its caption and scale line.

Parsed with **lxml**'s HTML parser (libxml2: fast, forgiving, no network, no entity expansion from outside) and
walked once, in document order, without recursion (``iterwalk``), so nesting depth costs nothing:

- scripts, styles, iframes, objects and elements hidden with ``display:none`` (the inline-XBRL header, with
  its thousand contexts) are left out; scripts are counted for the document's note, never run;
- pages end at CSS page breaks, by ``finspace.xbrl.pagebreaks.breaks`` (the rule the XBRL reader uses
  too: page N is everything after the (N-1)th break). A file without CSS breaks that marks its pages with
  ``<!-- PAGEBREAK -->`` comments (EDGAR's older HTML) is split there; a file with neither is one page
  without a label. Empty pages at the end are dropped;
- each page is labelled "page N", and "page N (printed P)" when its footer or header prints a number
  (finspace.documents.printed);
- a table becomes a Markdown table (finspace.documents.tables.clean: signs joined to figures, spacer columns
  dropped, years above their columns), set apart by blank lines with the lines just above it (its caption
  and scale line, "(In millions, except ...)") glued on top, so the caption travels with the table.
  A page break inside a table takes effect after the table.

Bounds, before any work that grows with them: ``limits.max_tags`` elements, ``limits.max_pages`` pages,
``limits.max_cells`` table cells (each counted for its colspan) over the document.
"""

from __future__ import annotations

import re
from pathlib import Path

from finspace.documents import tables
from finspace.documents.limits import DocumentLimits
from finspace.xbrl.pagebreaks import breaks
from finspace.documents.printed import label
from finspace.documents.text import check_cells, fix_figures, short_name, tidy
from finspace.errors import BadInput

_SKIP = {"script", "style", "noscript", "iframe", "object", "embed", "template", "head", "title"}
_BLOCKS = {
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "section",
    "article",
    "hr",
    "center",
    "blockquote",
    "pre",
    "dl",
    "dt",
    "dd",
    "header",
    "footer",
    "body",
    "html",
}
_HIDDEN = re.compile(r"display\s*:\s*none", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_COMMENT_BREAK = re.compile(r"^\s*PAGE\s*BREAK\s*$", re.IGNORECASE)
CAPTION_LINES = 3  # at most this many lines above a table are its caption
CAPTION_CHARS = 300  # a longer line above a table is body text, not a caption
WINDOW = 2 * CAPTION_LINES * CAPTION_CHARS  # how far back a table looks for its caption, in characters


def convert(path: Path, name: str, limits: DocumentLimits) -> tuple[list[tuple[str, str]], tuple[str, ...]]:
    """The file's pages as (label, text) and its notes, or BadInput naming the bound it passed."""
    root = _parse(path, name)
    css_breaks, scripts = _measure(root, name, limits)
    walker = _Walker(name, limits, comment_breaks=css_breaks == 0)
    walker.walk(root)
    texts = [tidy("".join(p)) for p in walker.pages]
    while len(texts) > 1 and not texts[-1]:
        texts.pop()
    if len(texts) > limits.max_pages:
        raise BadInput(
            f"{short_name(name)} has {len(texts):,} pages (page breaks); the limit is "
            f"{limits.max_pages:,} pages per document"
        )
    if len(texts) == 1:
        pages = [("", texts[0])]
    else:
        pages = [(label(i, t), t) for i, t in enumerate(texts, 1)]
    n = scripts
    return pages, ((f"{n} script{'s' if n != 1 else ''} removed, never executed",) if n else ())


def _parse(path: Path, name: str):
    from lxml import etree
    from lxml import html as lhtml

    data = path.read_bytes()
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"{short_name(name)} is not UTF-8 text; save it as UTF-8 and upload it again") from None
    parser = lhtml.HTMLParser(encoding="utf-8", no_network=True)
    try:
        root = lhtml.document_fromstring(data, parser=parser)
    except (etree.ParserError, ValueError):
        raise BadInput(f"{short_name(name)} has no text to read") from None
    if any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log):  # libxml2 stopped reading, silently
        raise BadInput(
            f"{short_name(name)} nests its elements deeper than the HTML parser's limit (256 levels), "
            "so part of it would be lost; upload the filing as EDGAR serves it"
        )
    return root


def _measure(root, name: str, limits: DocumentLimits) -> tuple[int, int]:
    """The numbers of CSS page breaks and of scripts; BadInput past the element, page or cell bounds (before any
    work that grows with them)."""
    tags = cells = pages = scripts = 0
    for el in root.iter():
        tags += 1
        if tags > limits.max_tags:
            raise BadInput(
                f"{short_name(name)} has more than {limits.max_tags:,} HTML elements, the limit per "
                "document; upload the filing itself or the part you need"
            )
        tag = el.tag.lower() if isinstance(el.tag, str) else ""
        scripts += tag == "script"
        if tag in ("td", "th"):
            cells += tables.span(el.get("colspan"))
            check_cells(cells, name, limits)
        style = el.get("style") if tag else None
        if style:
            before, after = breaks(style)
            pages += before + after
            if pages >= limits.max_pages:
                raise BadInput(
                    f"{short_name(name)} has {pages:,} or more page breaks; the limit is "
                    f"{limits.max_pages:,} pages per document"
                )
    return pages, scripts


class _Walker:
    def __init__(self, name: str, limits: DocumentLimits, comment_breaks: bool):
        self.name, self.limits, self.comment_breaks = name, limits, comment_breaks
        self.pages: list[list[str]] = [[]]
        self.pre = 0  # depth inside <pre>: its line breaks are kept

    def walk(self, root) -> None:
        from lxml import etree

        walker = etree.iterwalk(root, events=("start", "end", "comment", "pi"))
        for event, el in walker:
            tag = el.tag.lower() if isinstance(el.tag, str) else None
            if tag is None:  # a comment or processing instruction: its text is not shown, its tail is
                if (
                    self.comment_breaks
                    and event == "comment"
                    and _COMMENT_BREAK.match(el.text or "")
                    and any(p.strip() for p in self.pages[-1])
                ):
                    self.pages.append([])
                self._text(el.tail)
                continue
            if event == "start":
                self._start(walker, el, tag)
            else:
                self._end(el, tag)

    def _start(self, walker, el, tag: str) -> None:
        style = el.get("style") or ""
        if tag in _SKIP or (style and _HIDDEN.search(style)):
            walker.skip_subtree()
            el.set("data-finspace-skipped", "1")
            return
        if style and breaks(style)[0]:
            self.pages.append([])
        if tag == "pre":
            self.pre += 1
        if tag == "table":
            self._table(el)
            walker.skip_subtree()
            return
        if tag in _BLOCKS:
            self._newline()
        elif tag == "br":
            self.pages[-1].append("\n")
        elif tag in ("td", "th"):
            self.pages[-1].append(" ")
        self._text(el.text)

    def _end(self, el, tag: str) -> None:
        if el.get("data-finspace-skipped"):
            self._text(el.tail)
            return
        if tag == "pre":
            self.pre -= 1
        if tag in _BLOCKS:
            self._newline()
        if tag == "table":
            self.pages.extend(
                []
                for _ in range(
                    sum(
                        breaks(d.get("style"))[0] + breaks(d.get("style"))[1]
                        for d in el.iter()
                        if isinstance(d.tag, str) and d is not el
                    )
                )
            )
        style = el.get("style")
        if style and breaks(style)[1]:
            self.pages.append([])
        self._text(el.tail)

    def _newline(self) -> None:
        for piece in reversed(self.pages[-1]):
            if piece.strip(" "):
                if not piece.rstrip(" ").endswith("\n"):
                    self.pages[-1].append("\n")
                return

    def _text(self, text: str | None) -> None:
        if not text:
            return
        _push(self.pages[-1], text.replace("\xa0", " ") if self.pre else _SPACES.sub(" ", text))

    def _table(self, table) -> None:
        rows = []
        for tr in table.iter("tr"):
            if _owner(tr) is not table:
                continue  # a row of a table nested in a cell: its text is in that cell
            rows.append(
                [
                    (_cell_text(td), tables.span(td.get("colspan")))
                    for td in tr
                    if isinstance(td.tag, str) and td.tag.lower() in ("td", "th")
                ]
            )
        body = tables.markdown_table(tables.clean(rows))
        if not body:
            return
        page = self.pages[-1]
        caption = _take_caption(page)
        _push(page, "\n\n" + (caption + "\n" if caption else "") + body + "\n\n")


def _cell_text(td) -> str:
    """A cell's text as shown: inline pieces joined as they are, blocks and line breaks as spaces, figures fixed."""
    from lxml import etree

    parts: list[str] = []
    walker = etree.iterwalk(td, events=("start", "end"))
    for event, el in walker:
        tag = el.tag.lower() if isinstance(el.tag, str) else None
        if event == "start" and el is not td and (tag is None or tag in _SKIP or _HIDDEN.search(el.get("style") or "")):
            walker.skip_subtree()
            parts.append(" ")
            continue
        if event == "start":
            parts.append(" " if tag in _BLOCKS or tag == "br" else "")
            parts.append(el.text or "")
        else:
            parts.append(" " if tag in _BLOCKS else "")
            if el is not td:
                parts.append(el.tail or "")
    return fix_figures(" ".join("".join(parts).split()))


def _owner(tr):
    parent = tr.getparent()
    while parent is not None and not (isinstance(parent.tag, str) and parent.tag.lower() == "table"):
        parent = parent.getparent()
    return parent


def _push(page: list[str], text: str) -> None:
    """``text`` added to the page in pieces of at most WINDOW characters (so a look back is bounded)."""
    for i in range(0, len(text), WINDOW):
        page.append(text[i : i + WINDOW])


def _take_caption(page: list[str]) -> str:
    """The lines just above a table (at most CAPTION_LINES short ones), taken off the page to sit on the table."""
    tail, size = [], 0
    while page and size < WINDOW:  # look back a bounded window (pieces are at most WINDOW), never the whole page
        piece = page.pop()
        tail.append(piece)
        size += len(piece)
    text = "".join(reversed(tail))
    lines = text.rstrip().split("\n")
    caption: list[str] = []
    while lines and len(caption) < CAPTION_LINES:
        line = " ".join(lines[-1].split())
        if not line:
            if caption:
                break
            lines.pop()
            continue
        if line.startswith("|") or len(line) > CAPTION_CHARS or (len(lines) == 1 and page):
            break  # a table row, body text, or the window's first line (maybe cut) when the page goes on
        caption.append(line)
        lines.pop()
    _push(page, "\n".join(lines) + "\n" if caption else text)  # in pieces again: the window never grows
    return "\n".join(reversed(caption))
