"""A filing's map for a model that navigates it: each page's label (with the number the page prints), the Items
and headings that start on it, the financial statements found by their titles, and whether the filing carries
the filer's XBRL facts.

- **Items**: a line that starts "Item 7." / "ITEM 1A." followed by a title (a contents page, one naming five
  Items or more, is marked as contents instead, so each Item is listed where it starts). "PART II" lines too.
- **Headings**: short Title Case or UPPER CASE lines (2 to 12 words, no sentence's full stop, at most
  ``MAX_HEADING_CHARS``), not table rows, not running headers (a line printed on more than ``RUNNING_SHARE`` of the
  pages, "Table of Contents"); at most ``HEADINGS_PER_PAGE`` per page.
- **Statements**: a page whose first lines carry a statement's title (finspace.documents.finance_words, the
  titles the passages' statement pages use: income, balance, cash) and that prints at least
  ``passages.STATEMENT_MIN_FIGURES`` figures, so a contents page naming them is not one; the statement of
  shareholders' (stockholders') equity by its title here.

``Outline.render(max_tokens, count)`` is the compact text a model is given: the statements' pages first, then one
line per page that starts something, cut to ``max_tokens`` (headings go before Items do) with a line saying what
was left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from finspace.documents import finance_words as fw
from finspace.documents import passages
from finspace.documents.convert import Document
from finspace.documents.printed import printed
from finspace.grounding.library import approx_tokens

EQUITY = "equity"
STATEMENT_NAMES = {
    fw.INCOME: "income statement",
    fw.BALANCE: "balance sheet",
    fw.CASH: "cash flow statement",
    EQUITY: "shareholders' equity statement",
}
HEADINGS_PER_PAGE = 4
MAX_HEADING_CHARS = 90
RUNNING_SHARE = 0.2  # a line on more than this share of the pages (3 at least) is a running header or footer
CONTENTS_ITEMS = 5  # a page naming this many Items is a table of contents
_ITEM = re.compile(r"^\s*item\s+(\d{1,2}[a-d]?)\s*[.:\-–—]\s*(\S.{1,110})$", re.IGNORECASE)
_PART = re.compile(r"^\s*part\s+(i{1,3}v?|iv)\s*$", re.IGNORECASE)
_ITEM_MENTION = re.compile(r"(?im)^\s*\|?\s*item\s+\d{1,2}[a-d]?\b")
_EQUITY = re.compile(
    r"(?:(?:condensed|consolidated)\s+){0,2}statements?\s+of\s+(?:consolidated\s+)?"
    r"(?:changes\s+in\s+)?(?:shareholders|stockholders|shareowners)['’]?\s+equity(?:\s*\(deficit\))?"
    r"(?:\s+and\s+comprehensive\s+income)?",
    re.IGNORECASE,
)
_SMALL = frozenset("a an and as at by for from in of on or per the to with vs".split())


@dataclass(frozen=True)
class OutlinePage:
    page: int  # numbered from 1
    label: str  # "page 31 (printed 29)"
    printed: str | None  # the number the page prints
    items: tuple[str, ...] = ()  # "Item 7. Management's Discussion ...", "PART II"
    headings: tuple[str, ...] = ()
    statement: str | None = None  # income, balance, cash, equity
    contents: bool = False  # a table of contents

    def to_json(self) -> dict:
        return {
            "page": self.page,
            "label": self.label,
            "printed": self.printed,
            "items": list(self.items),
            "headings": list(self.headings),
            "statement": self.statement,
            "contents": self.contents,
        }


@dataclass(frozen=True)
class Outline:
    document: str  # the document's id
    kind: str  # pdf, html ...
    pages: int
    entries: tuple[OutlinePage, ...]  # only the pages that start something
    xbrl_facts: int  # the filer's tagged facts (0: none, a PDF or a filing without inline XBRL)
    labels: tuple[str, ...] = ()  # every page's label, in order ("page 31 (printed 29)")

    @property
    def has_xbrl(self) -> bool:
        return self.xbrl_facts > 0

    @property
    def statements(self) -> dict[str, int]:
        """statement kind -> its first page."""
        out: dict[str, int] = {}
        for e in self.entries:
            if e.statement and e.statement not in out:
                out[e.statement] = e.page
        return out

    def to_json(self) -> dict:
        return {
            "document": self.document,
            "kind": self.kind,
            "pages": self.pages,
            "xbrl_facts": self.xbrl_facts,
            "statements": self.statements,
            "entries": [e.to_json() for e in self.entries],
            "labels": list(self.labels),
        }

    def printed_runs(self) -> str:
        """The printed numbers in runs: "pages 3-59 print 1-57; pages 60-62 print none"."""
        runs: list[list] = []  # [first page, last page, first printed, offset or None]
        for n, label in enumerate(self.labels, 1):
            m = re.search(r"\(printed ([^)]+)\)", label)
            p = m[1] if m else None
            offset = n - int(p) if p and p.isdigit() else None
            if runs and runs[-1][3] == offset and offset is not None and runs[-1][1] == n - 1:
                runs[-1][1] = n
            elif runs and p is None and runs[-1][2] is None and runs[-1][1] == n - 1:
                runs[-1][1] = n
            else:
                runs.append([n, n, p, offset])
        parts = []
        for a, b, p, offset in runs[:12]:
            pages = f"page {a}" if a == b else f"pages {a}-{b}"
            if p is None:
                parts.append(f"{pages} {'prints' if a == b else 'print'} no number")
            elif offset is None or a == b:
                parts.append(f"{pages} prints {p}")
            else:
                parts.append(f"{pages} print {p}-{b - offset}")
        return "; ".join(parts) + ("; ..." if len(runs) > 12 else "")

    def render(self, max_tokens: int = 600, count: Callable[[str], int] = approx_tokens) -> str:
        """The outline as compact text within ``max_tokens`` (by ``count``)."""
        xbrl = (
            f"XBRL: {self.xbrl_facts:,} tagged facts (filer_facts)"
            if self.has_xbrl
            else "no XBRL facts (read the pages)"
        )
        head = [f"{self.document} ({self.kind}, {self.pages} pages; {xbrl})"]
        st = self.statements
        if st:
            head.append(
                "statements: "
                + "; ".join(f"{STATEMENT_NAMES[k]} p. {p}" for k, p in sorted(st.items(), key=lambda kv: kv[1]))
            )
        else:
            head.append("statements: none found by their titles (search for them)")
        if self.labels:
            head.append(f"cite pages by these numbers (1 to {self.pages}); printed numbers: {self.printed_runs()}")
        for detail in (2, 1, 0):  # with headings, Items only, and cut
            lines = [ln for e in self.entries if (ln := _line(e, detail))]
            text = "\n".join([*head, *lines])
            if count(text) <= max_tokens or detail == 0:
                break
        return _cut(head, lines, max_tokens, count)


def _line(e: OutlinePage, detail: int) -> str:
    parts = []
    if e.contents:
        parts.append("contents")
    if e.statement:
        parts.append(STATEMENT_NAMES[e.statement].upper())
    parts += e.items
    if detail == 2:
        parts += e.headings
    return f"{e.label}: " + "; ".join(parts) if parts else ""


def _cut(head: list[str], lines: list[str], max_tokens: int, count: Callable[[str], int]) -> str:
    out = list(head)
    for i, line in enumerate(lines):
        more = f"... {len(lines) - i} more pages' entries left out: search or read_page"
        if count("\n".join([*out, line, more])) > max_tokens:
            out.append(more)
            break
        out.append(line)
    text = "\n".join(out)
    while out and count(text) > max_tokens:  # even the head is too long for the bound
        out.pop()
        text = "\n".join(out)
    return text


def outline(doc: Document, document: str | None = None) -> Outline:
    """The outline of ``doc`` (``document``: its id in the library, else its name)."""
    running = _running(doc)
    entries = []
    seen_items: set[str] = set()
    for n, page in enumerate(doc.pages, 1):
        lines = [ln.strip() for ln in page.text.split("\n") if ln.strip()]
        contents = len(_ITEM_MENTION.findall(page.text)) >= CONTENTS_ITEMS
        items: list[str] = []
        headings: list[str] = []
        if not contents:
            for line in lines:
                if line.startswith("|") or line in running:
                    continue
                if (m := _ITEM.match(line)) and m[1].upper() not in seen_items and m[2][0].isupper():
                    seen_items.add(m[1].upper())
                    items.append(f"Item {m[1].upper()}. {_short(m[2])}")
                elif _PART.match(line):
                    items.append(" ".join(line.split()).upper())
                elif len(headings) < HEADINGS_PER_PAGE and _heading(line):
                    headings.append(line)
        kind = _statement(page.text)
        if items or headings or kind or contents:
            entries.append(
                OutlinePage(
                    n, page.label or f"page {n}", printed(page.text), tuple(items), tuple(headings), kind, contents
                )
            )
    labels = tuple(p.label or f"page {n}" for n, p in enumerate(doc.pages, 1))
    return Outline(document or doc.name, doc.kind, len(doc.pages), tuple(entries), len(doc.facts), labels)


def _short(title: str, chars: int = 70) -> str:
    title = " ".join(title.split())
    return title if len(title) <= chars else title[: chars - 1].rstrip() + "…"


def _statement(text: str) -> str | None:
    head = text[: passages.STATEMENT_HEAD_CHARS]
    kind = fw.statement_of(head)
    if kind is None:
        rows = [ln.strip() for ln in head.split("\n") if ln.strip() and not ln.lstrip().startswith("|")][:8]
        kind = EQUITY if any(_EQUITY.fullmatch(_bare(r)) for r in rows) else None
    if kind and len(passages._FIGURE.findall(text)) >= passages.STATEMENT_MIN_FIGURES:  # noqa: SLF001
        return kind
    return None


def _bare(line: str) -> str:
    return " ".join(re.sub(r"(?:\s*\([^()]*\)?)+\s*$|[\s:.]+$", "", line).split())


def _running(doc: Document) -> set[str]:
    """Lines printed on many pages: running headers and footers."""
    counts = Counter(ln.strip() for p in doc.pages for ln in set(p.text.split("\n")) if ln.strip())
    floor = max(3, int(len(doc.pages) * RUNNING_SHARE))
    return {ln for ln, c in counts.items() if c >= floor} | {"Table of Contents"}


def _heading(line: str) -> bool:
    if len(line) > MAX_HEADING_CHARS or line.endswith((".", ",", ";", ":")) or "\t" in line:
        return False
    words = line.split()
    if not 2 <= len(words) <= 12 or not line[0].isupper() or sum(c.isdigit() for c in line) > 4:
        return False
    big = [w for w in words if w.casefold() not in _SMALL]
    return bool(big) and all(w[0].isupper() or not w[0].isalpha() for w in big)
