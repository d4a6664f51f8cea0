"""Every figure of an answer checked against the page it cites, as the Matrix checks a cell's quote.

For each figure with its citation (finspace.grounding.citations), the cited page is read row by row (a line of
its text: a table's row, a sentence): the figure **verifies** when a row prints it, by the Matrix's checker
(finspace.matrix.verify.value_in_quote) with the row's table scale from the Matrix's aligner
(finspace.matrix.align.scale_above: "(In millions, except per-share amounts)" above the row counts, so "$391,035
million" verifies against "Total net sales | 391,035" under it); "exact" then. It verifies "close" when the answer
rounded a printed figure (391.0 billion for 391,035 million: the page's value within half of the answer's last
digit, with at least two significant digits written), and "xbrl" when the filer's tagged fact on that page has
the value (finspace.xbrl). A loss written as a positive figure verifies against its row's "(1,577)". A figure's
currency counts: the sign just before it in the row, else any sign the row prints ("$14.2 billion" is not the
"€14.2 billion" of "€14.2 billion or $15.8 billion"; a row with no sign takes the figure's).

Otherwise the mark says what is wrong:
- **differs**: a row of the page whose label carries the words before the figure in its sentence (from the
  figure before it; else the sentence's words), at least half of the label's words, prints another figure within
  ``DIFFERS_REACH`` of it: the mark gives what the page prints (the row's first such figure: the current period);
- **not_on_page**: the page prints neither the figure nor a row about it (``found_at`` says where the library
  prints the figure as written, when it does);
- **other_document**: the citation names a document whose page does not print it, and another document's page does;
- **no_such_page**: the document has no such page (the mark gives its range); **unknown_document**: the
  citation names no document of the library;
- **uncited**: the figure has no citation in its sentence.
A citation naming no document, in a library of several, is checked against each document's page (at most
``MAX_PAGE_CHECKS`` pages per answer; past them the mark asks for the document).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal

from finspace.documents.convert import Document
from finspace.grounding.citations import MAX_FIGURES, Citation, Figure, figures_in
from finspace.grounding.library import Library
from finspace.matrix import align, verify
from finspace.matrix.numbers import numbers_in

VERIFIED, DIFFERS, NOT_ON_PAGE, UNCITED = "verified", "differs", "not_on_page", "uncited"
NO_SUCH_PAGE, OTHER_DOCUMENT, UNKNOWN_DOCUMENT = "no_such_page", "other_document", "unknown_document"
MARKS = {
    VERIFIED: ("✓", "verified"),
    DIFFERS: ("≠", "differs from the page"),
    NOT_ON_PAGE: ("✗", "not on the cited page"),
    UNCITED: ("?", "uncited"),
    NO_SUCH_PAGE: ("∅", "no such page"),
    OTHER_DOCUMENT: ("⇄", "on a page of another document"),
    UNKNOWN_DOCUMENT: ("∅", "no such document"),
}
MAX_LOOKUPS = 20  # figures searched for across the library (found_at), per answer
MAX_PAGE_CHECKS = 200  # pages checked per answer for citations that name no document, in a library of several
QUOTE_CHARS = 300
DIFFERS_REACH = 10  # a row "differs" only with a figure within this factor of the answer's (a copy error)
_SCALE_NAME = {1: "units", 10**3: "thousands", 10**6: "millions", 10**9: "billions"}
_WORD = re.compile(r"[a-z][a-z']+")
_STOP = frozenset(
    (
        "the a an and or of in on for to by from at as was were is are its it this that with total "
        "net fiscal year years ended million millions billion billions thousand thousands dollars usd "
        "company company's page printed per which while than compared reported"
    ).split()
)


@dataclass(frozen=True)
class FigureCheck:
    figure: str  # as the answer writes it
    start: int  # offsets in the answer
    end: int
    mark: str  # VERIFIED, DIFFERS, NOT_ON_PAGE, UNCITED, NO_SUCH_PAGE, OTHER_DOCUMENT, UNKNOWN_DOCUMENT
    how: str = ""  # verified: "exact", "close", "xbrl"
    document: str | None = None  # the document checked (the cited one)
    page: int | None = None  # the cited page
    label: str = ""  # the cited page's label
    quote: str = ""  # the page's row that prints the figure (verified) or the row about it (differs)
    printed: str = ""  # differs: what the page prints
    found_at: str = ""  # not on the page: where the library prints the figure ("aapl-10-k-2024-11-01 page 24")
    concept: str = ""  # xbrl: the filer's concept
    note: str = ""  # one sentence for the page

    @property
    def symbol(self) -> str:
        return MARKS[self.mark][0]

    def to_json(self) -> dict:
        return {
            "figure": self.figure,
            "start": self.start,
            "end": self.end,
            "mark": self.mark,
            "label_text": MARKS[self.mark][1],
            "symbol": self.symbol,
            "how": self.how,
            "document": self.document,
            "page": self.page,
            "label": self.label,
            "quote": self.quote,
            "printed": self.printed,
            "found_at": self.found_at,
            "concept": self.concept,
            "note": self.note,
        }


def summary(checks: list[FigureCheck]) -> dict[str, int]:
    """mark -> how many figures carry it."""
    out: dict[str, int] = {}
    for c in checks:
        out[c.mark] = out.get(c.mark, 0) + 1
    return out


def check_answer(answer: str, lib: Library, max_figures: int = MAX_FIGURES) -> list[FigureCheck]:
    """Each figure the answer states, marked against the page it cites (see the module's doc)."""
    out = []
    lookups = [0, 0]  # figures searched for across the library, pages checked
    for fig in figures_in(str(answer), lib, max_figures):
        out.append(_check(fig, lib, lookups))
    return out


def _base(fig: Figure, mark: str, **kw) -> FigureCheck:
    return FigureCheck(fig.text, fig.start, fig.end, mark, **kw)


def _check(fig: Figure, lib: Library, lookups: list[int]) -> FigureCheck:
    cite = fig.citation
    if cite is None:
        where = _found_at(fig, lib, lookups)
        return _base(
            fig,
            UNCITED,
            found_at=where,
            note="no page cited" + (f"; the figure is printed on {where}" if where else ""),
        )
    if cite.document is None and cite.named:
        return _base(
            fig,
            UNKNOWN_DOCUMENT,
            page=cite.page,
            note=f"{cite.named!r} is not a document here; the documents are: {', '.join(lib)}",
        )
    keys = [cite.document] if cite.document else list(lib)
    if cite.printed:  # "printed page 29": the page whose label says so
        return _check_printed(fig, cite, lib, lookups, keys)
    in_range = [k for k in keys if 1 <= cite.page <= len(lib[k].pages)]
    if not in_range:
        ranges = "; ".join(f"{k} has pages 1 to {len(lib[k].pages)}" for k in keys)
        return _base(
            fig, NO_SUCH_PAGE, document=cite.document, page=cite.page, note=f"page {cite.page} does not exist: {ranges}"
        )
    if len(in_range) > 1:  # a citation naming no document: each document's page, within the answer's bound
        room = max(1, MAX_PAGE_CHECKS - lookups[1])
        if len(in_range) > room:
            key = in_range[0]
            return _base(
                fig,
                NOT_ON_PAGE,
                page=cite.page,
                note=f"page {cite.page} of which document? The answer's checks reached their bound of "
                f"{MAX_PAGE_CHECKS} pages: cite the document with the page ({key} p. {cite.page})",
            )
    lookups[1] += len(in_range)
    results = [(k, _on_page(fig, lib[k], cite.page)) for k in in_range]
    for key, got in results:
        if got is not None and got.mark == VERIFIED:
            return _with(got, key, cite.page, lib[key])
    for key, got in results:
        if got is not None:
            return _with(got, key, cite.page, lib[key])
    return _not_on_page(fig, cite, lib, lookups, in_range[0])


def _check_printed(fig: Figure, cite: Citation, lib: Library, lookups: list[int], keys: list[str]) -> FigureCheck:
    """A citation of a printed page number ("printed page 29"): each document's page whose label prints it, the
    first that verifies."""
    pages = {k: _printed_page(lib[k], cite.page) for k in keys}
    if not any(pages.values()):
        return _base(
            fig,
            NO_SUCH_PAGE,
            document=cite.document,
            page=None,
            note=f"no page prints the number {cite.page}: cite the page's own number, as its label "
            "gives it (\"page 31 (printed 29)\" is page 31)",
        )
    tried = [
        _check(replace(fig, citation=replace(cite, page=pages[k], printed=False, document=k)), lib, lookups)
        for k in keys
        if pages[k]
    ]  # each document's page that prints the number: the first that verifies
    return next((c for c in tried if c.mark == VERIFIED), tried[0])


def _not_on_page(fig: Figure, cite: Citation, lib: Library, lookups: list[int], key: str) -> FigureCheck:
    """The cited page does not print the figure: where it is printed, if anywhere (another document's page is
    OTHER_DOCUMENT when the citation named its document)."""
    where = _found_at(fig, lib, lookups)
    label = _label(lib[key], cite.page)
    if cite.document and where and not where.startswith(f"{key} "):
        return _base(
            fig,
            OTHER_DOCUMENT,
            document=key,
            page=cite.page,
            label=label,
            found_at=where,
            note=f"{key} {label} does not print it; {where} does",
        )
    return _base(
        fig,
        NOT_ON_PAGE,
        document=key,
        page=cite.page,
        label=label,
        found_at=where,
        note=f"{key} {label} does not print it" + (f"; {where} does" if where else ""),
    )


def _printed_page(doc: Document, printed: int) -> int | None:
    """The page whose label says "(printed N)", or None."""
    tag = f"(printed {printed})"
    return next((n for n, p in enumerate(doc.pages, 1) if p.label.endswith(tag)), None)


def _label(doc: Document, page: int) -> str:
    return doc.pages[page - 1].label or f"page {page}"


def _with(got: FigureCheck, key: str, page: int, doc: Document) -> FigureCheck:
    return replace(got, document=key, page=page, label=_label(doc, page))


def _rows(text: str) -> list[tuple[int, str]]:
    """(offset, line) of each line of the page that prints a digit."""
    out, at = [], 0
    for line in text.split("\n"):
        if any(c.isdigit() for c in line):
            out.append((at, line))
        at += len(line) + 1
    return out


def _currency_agrees(fig: Figure, row: str) -> bool:
    """A figure written in euros, pounds or yen is not a row's dollars (and dollars not a row in another
    currency only); a row that prints no currency sign takes the figure's."""
    mine = re.search(r"[$€£¥]", fig.text)
    signs = set(re.findall(r"[$€£¥]", row))
    if mine is None or not signs:
        return True
    digits = re.search(r"\d[\d,]*(?:\.\d+)?", fig.text)
    before = (
        [
            row[max(0, m.start() - 3) : m.start()]
            for m in re.finditer(r"(?<![\d,.])" + re.escape(digits[0]) + r"(?![\d]|[.,]\d)", row)
        ]
        if digits
        else []
    )
    if before:  # the figure as written is in the row: the sign just before it decides
        return any(mine[0] in b or not re.search(r"[$€£¥]", b) for b in before)
    return mine[0] in signs


def _exact(fig: Figure, row: str, table: align.Scale | None) -> bool:
    if not _currency_agrees(fig, row):
        return False
    for value in (fig.value, -fig.value):  # a loss written as a positive figure: its row prints "(1,577)"
        if fig.percent:
            if verify.value_in_quote(value, "percent", row):
                return True
        elif fig.money and fig.scale in _SCALE_NAME:
            if verify.value_in_quote({"amount": value, "scale": _SCALE_NAME[fig.scale]}, "money", row, table):
                return True
        elif fig.money:  # a trillion
            if verify.value_in_quote({"amount": value * fig.scale / 10**9, "scale": "billions"}, "money", row, table):
                return True
        elif verify.value_in_quote(value, "number", row):
            return True
    return False


def _page_values(fig: Figure, row: str, table: align.Scale | None) -> list[tuple[Decimal, str]]:
    """(value in the answer's terms, as printed) of each figure of the row."""
    out = []
    for n, printed in zip(numbers_in(row), re.findall(r"\(?[$€£¥]?\s?-?\d[\d,]*(?:\.\d+)?\s*\)?%?", row)):
        if n.percent != fig.percent or (
            n.value == n.value.to_integral_value() and 1900 <= n.value <= 2100 and "," not in printed
        ):
            continue  # a year heading a column is not a figure
        if fig.percent or not fig.money:
            out.append((n.value, printed.strip()))
        elif n.scale != 1:
            out.append((n.scaled, printed.strip()))
        else:
            out.append(
                (
                    n.value * (10 ** {"thousands": 3, "millions": 6, "billions": 9}[table.scale] if table else 1),
                    printed.strip(),
                )
            )
    return out


def _close(fig: Figure, value: Decimal) -> bool:
    """The answer's figure is ``value`` rounded to the digits it wrote (two significant digits at least)."""
    mine = fig.value if (fig.percent or not fig.money) else fig.amount
    unit = Decimal(1) if (fig.percent or not fig.money) else Decimal(fig.scale)
    digits = len(str(abs(fig.value)).replace(".", "").lstrip("0"))
    if digits < 2 or value == 0:
        return False
    half = Decimal(5).scaleb(-fig.places - 1) * unit
    return abs(abs(value) - abs(mine)) <= half


def _words(text: str) -> set[str]:
    return {w.rstrip("'s") for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 2}


def _label_of(row: str) -> str:
    cells = [c.strip() for c in re.split(r"\||\t", row) if c.strip()]
    first = cells[0] if cells else row
    return re.split(r"[$(]?\s?\d", first, maxsplit=1)[0]


def _on_page(fig: Figure, doc: Document, page: int) -> FigureCheck | None:
    """VERIFIED or DIFFERS against one page, or None (neither the figure nor a row about it)."""
    text = doc.pages[page - 1].text
    rows = _rows(text)
    tables = {at: align.scale_above(text, at + 1) for at, _ in rows} if fig.money else {}
    words = _words(fig.clause) or _words(fig.sentence)
    exact = [row for at, row in rows if _exact(fig, row, tables.get(at))]
    if exact:  # the row the figure's words name, when several print it ("Total net sales", "Net income")
        row = max(exact, key=lambda r: len(_words(_label_of(r)) & words))
        return _base(fig, VERIFIED, how="exact", quote=_quote(row), note="the page prints it")
    for at, row in rows:
        for value, printed in _page_values(fig, row, tables.get(at)) if _currency_agrees(fig, row) else ():
            if _close(fig, value):
                return _base(
                    fig,
                    VERIFIED,
                    how="close",
                    quote=_quote(row),
                    printed=printed,
                    note=f"rounded from {printed} on the page",
                )
    xbrl = _xbrl(fig, doc, page)
    if xbrl is not None:
        return xbrl
    return _differs(fig, rows, tables)


def _xbrl(fig: Figure, doc: Document, page: int) -> FigureCheck | None:
    if fig.percent or not doc.facts.facts:
        return None
    mine = fig.amount
    for f in doc.facts.facts:
        if f.page == page and f.value is not None and (abs(f.value) == abs(mine) or _close(fig, f.value)):
            how = "exact" if abs(f.value) == abs(mine) else "close"
            return _base(
                fig,
                VERIFIED,
                how="xbrl",
                concept=f.concept,
                note=f"the filer's tagged {f.concept} on this page ({how})",
            )
    return None


def _differs(fig: Figure, rows: list[tuple[int, str]], tables: dict) -> FigureCheck | None:
    sentence = _words(fig.clause) or _words(fig.sentence)  # what the figure is: the words just before it
    mine = abs(fig.value if (fig.percent or not fig.money) else fig.amount)
    best, best_key = None, (0.0, 0)
    for at, row in rows:
        label = _words(_label_of(row))
        hit = len(label & sentence)
        if not label or hit == 0 or hit / len(label) < 0.5:
            continue
        values = [
            (v, p)
            for v, p in _page_values(fig, row, tables.get(at))
            if mine / DIFFERS_REACH <= abs(v) <= mine * DIFFERS_REACH
        ]
        if values and (hit / len(label), hit) > best_key:
            best_key, best = (hit / len(label), hit), (row, values)
    if best is None:
        return None
    row, values = best
    printed = values[0][1]  # the row's first figure of the answer's size: the current period's column, in filings
    return _base(fig, DIFFERS, quote=_quote(row), printed=printed, note=f"the page prints {printed} in that row")


def _quote(row: str) -> str:
    row = " ".join(row.split())
    return row if len(row) <= QUOTE_CHARS else row[: QUOTE_CHARS - 1] + "…"


def _found_at(fig: Figure, lib: Library, lookups: list[int]) -> str:
    """ "<id> <label>" of the first page of the library that prints the figure as written, or ""."""
    if lookups[0] >= MAX_LOOKUPS:
        return ""
    lookups[0] += 1
    digits = re.search(r"\d[\d,]*(?:\.\d+)?", fig.text)
    if digits is None or len(digits[0].replace(",", "").replace(".", "")) < 3:
        return ""
    pattern = re.compile(r"(?<![\d,.])" + re.escape(digits[0]) + r"(?![\d,]|\.\d)")
    for key, doc in lib.items():
        for n, page in enumerate(doc.pages, 1):
            if digits[0] in page.text and pattern.search(page.text) and _on_page_exact(fig, page.text):
                return f"{key} {page.label or f'page {n}'}"
    return ""


def _on_page_exact(fig: Figure, text: str) -> bool:
    return any(_exact(fig, row, align.scale_above(text, at + 1) if fig.money else None) for at, row in _rows(text))
