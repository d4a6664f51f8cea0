"""A filing's table as an analyst reads it: one cell per figure, the years above their columns, as Markdown.

EDGAR filings (Workiva, Toppan Merrill, ...) lay a statement row out as
``Total net sales | | $ | 391,035 | | | 2 | % | | $ | 383,285 | ...``: the currency sign, the figure, the
percent sign and a negative's closing parenthesis each in a cell of its own, with empty spacer cells between,
and the header's years spanning (``colspan``) the sign, the figure and the suffix. ``clean`` puts them back
together:

- a cell that is only a currency sign or an opening parenthesis joins the next non-empty cell of its row
  (``$`` + ``391,035`` -> ``$391,035``); one that is only ``%`` or ``)`` joins the previous one
  (``(1,234`` + ``)`` -> ``(1,234)``, ``2`` + ``%`` -> ``2%``); the joined cell spans all of their columns;
- the table's grid columns are grouped into logical columns: the columns one non-empty cell spans belong to
  one column, narrowest cells first; a cell spanning two columns that narrower cells already made is a
  header over several columns ("Years ended") and goes above the first of them;
- grid columns no non-empty cell touches (spacers) are dropped, and so are empty rows.

So a header ``2024`` (colspan 3 over ``$``, figure, suffix) lands above ``$391,035``. Work is linear in the
grid's size (cells times their colspans, bounded by the caller: ``MAX_COLSPAN`` per cell).
"""

from __future__ import annotations

import re

MAX_COLSPAN = 1000  # browsers clamp colspan to 1,000; a larger one is read as 1,000
_PREFIX = re.compile(r"^[$€£¥(]+$")
_SUFFIX = re.compile(r"^[%)]+$")

Cell = tuple[str, int]  # (text, colspan)


def span(value: str | None) -> int:
    """A ``colspan`` attribute as a number of columns in 1..MAX_COLSPAN (junk reads as 1)."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return 1
    return min(max(n, 1), MAX_COLSPAN)


def _placed(row: list[Cell]) -> list[tuple[int, int, str]]:
    """A row's non-empty cells as (first column, past-last column, text), signs joined to their figures."""
    out: list[list] = []
    col, pending = 0, None  # pending: a prefix cell (start, text) waiting for its figure
    for text, width in row:
        text = " ".join(text.split())
        start, end = col, col + width
        col = end
        if not text:
            continue
        if _PREFIX.match(text):
            pending = (pending[0], pending[1] + text) if pending else (start, text)
            continue
        if pending:
            start, text, pending = pending[0], pending[1] + text, None
        if _SUFFIX.match(text) and out:
            out[-1][1], out[-1][2] = end, out[-1][2] + text
            continue
        out.append([start, end, text])
    if pending:
        out.append([pending[0], col, pending[1]])
    return [(a, b, t) for a, b, t in out]


def clean(rows: list[list[Cell]]) -> list[list[str]]:
    """The table's rows as lists of logical cells (see the module's doc); empty rows and columns dropped."""
    placed = [_placed(r) for r in rows]
    width = max((max((b for _, b, _ in r), default=0) for r in placed), default=0)
    group = list(range(width))  # union-find over grid columns
    used = [False] * width

    def find(c: int) -> int:
        while group[c] != c:
            group[c] = group[group[c]]
            c = group[c]
        return c

    wide: set[tuple[int, int, int]] = set()  # (row, start, end) of headers over several logical columns
    cells = sorted(((b - a, i, a, b) for i, r in enumerate(placed) for a, b, _ in r))
    for _, i, a, b in cells:
        roots = {find(c) for c in range(a, b) if used[c]}
        if len(roots) > 1:
            wide.add((i, a, b))
            continue
        root = roots.pop() if roots else a
        for c in range(a, b):
            used[c] = True
            group[find(c)] = find(root)
    index: dict[int, int] = {}  # a group's root -> its logical column, left to right
    for c in range(width):
        if used[c]:
            index.setdefault(find(c), len(index))
    out = []
    for i, r in enumerate(placed):
        line = [""] * len(index)
        for a, b, text in r:
            if (i, a, b) in wide:
                k = min(index[find(c)] for c in range(a, b) if used[c])
            else:
                k = index[find(a)]
            line[k] = f"{line[k]} {text}".strip()
        if any(line):
            out.append(line)
    return out


def markdown_table(rows: list[list[str]]) -> str:
    """Rows as a Markdown table (the first row is the header); pipes and line breaks in cells escaped."""
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    clean_rows = [[" ".join(c.split()).replace("|", "\\|") for c in r] + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(clean_rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in clean_rows[1:]]
    return "\n".join(lines)
