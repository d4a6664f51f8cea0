"""Where a cell's quote is on its page: exact, normalised, or close; and the table scale written above it.

The way google/langextract aligns an extraction to its source (``resolver.WordAligner``: an exact match, then
the token sequence, then a fuzzy match of normalised tokens over a window with difflib, accepted at a ratio of
0.75 or more), with two changes for filings:

- **exact**: the quote (less a closing full stop) is in the page's text as it is;
- **normalised**: the quote's tokens are a run of the page's tokens. Tokens are words (NFKC, case-folded) and
  figures; whitespace, case, a table's ``|`` separators, currency signs, unicode dashes and quotes, and every
  other punctuation are dropped. A figure is one token with its sign: ``(1,886 )`` is ``-1886``, ``12.5 %`` is
  ``12.5%``, so a quote that drops a negative's parentheses does not match;
- **normalised**, also when the quote and the page differ only in where words break: a filing that runs words
  together (``Totalnet sales``) or splits one (``administr ative``); words are compared run together, each
  figure set apart, so ``1 234`` never reads ``1234``;
- **row**: a statement row whose label and figures the page prints apart (the label on a line of its own, its
  figures on the next; a label broken over lines): the quote's label is a run of the page's tokens and the
  first figures after it are the quote's figures, in order, one after the other (another row's figures under
  a label never are: the label's own come first);
- **close**: a window of the page around a rare token of the quote, aligned with ``difflib.SequenceMatcher`` on
  tokens; the score is difflib's ratio between the quote's tokens and the page's tokens from the first to the
  last matched one, compared as text (so a PDF's "administr ative" scores near 1), and it must be at least
  ``CLOSE_THRESHOLD`` (0.85, stricter than langextract's 0.75) for a quote of at least ``CLOSE_MIN_TOKENS``
  tokens. **Every figure and scale word of the quote must be matched exactly**, in order:
  a true row with one figure changed is never close.

A page's tokens are read once and kept for the next cell that cites it (``page_tokens``, the last
``PAGES_CACHED`` pages): a 235,000-character page takes about 0.3 s to read here, a cell after that none.

``scale_above`` finds the scale line of the table a quote sits in: the nearest "(In millions, except
per-share amounts)", "(dollars in thousands)", "$ in billions" above the quote's place on its page.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

CLOSE_THRESHOLD = 0.85
CLOSE_MIN_TOKENS = 6  # a shorter quote must match exactly or normalised: one changed word of five is too much
MAX_ANCHORS = 64  # windows tried for a close match
ROW_MIN_WORDS = 2  # a row's label of fewer words ("Other") is too common to find its row by
ROW_REACH = 40  # tokens after a row's label searched for its figures (a label broken over lines, a "$")
PAGES_CACHED = 16  # pages whose tokens are kept (a Matrix's cells cite a few pages of each document)
_SEP = "\x00"
SCALE_REACH = 20_000  # characters above a quote searched for its table's scale line (a long table, its header)
_TOKEN = re.compile(
    r"(?P<num>(?P<open>\(\s*)?[$€£¥]?\s*(?P<sign>[-−–])?\s*[$€£¥]?\s*"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)(?(open)\s*\)|)(?P<pct>\s*%)?)"
    r"|(?P<word>[^\W\d_]+)"
)
_SCALES = {
    "thousand": "thousands",
    "thousands": "thousands",
    "million": "millions",
    "millions": "millions",
    "billion": "billions",
    "billions": "billions",
}
SCALE_WORDS = frozenset(_SCALES)
_SCALE_LINE = re.compile(
    r"\(\s*(?:(?:u\.?s\.?\s*)?dollars|\$|amounts|shares)?[^()\n]{0,40}?\bin\s+(?P<scale>thousands|millions|billions)\b"
    r"(?P<rest>[^()]{0,160})\)"
    r"|(?:^|\|)\s*(?:\$|dollars|amounts)\s+in\s+(?P<scale2>thousands|millions|billions)\b(?P<rest2>[^\n|]{0,120})",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class Token:
    text: str  # the word case-folded, or the figure with its sign: "-1886", "12.5%"
    start: int  # offset in the text it came from
    figure: bool


@dataclass(frozen=True)
class Match:
    how: str  # "exact", "normalised" or "close"
    score: float  # 1.0 unless close
    start: int  # where on the page the quote's match begins


@dataclass(frozen=True)
class Scale:
    scale: str  # "thousands", "millions" or "billions"
    except_per_share: bool  # "(In millions, except per-share amounts)": per-share figures are in units


def tokens(text: str) -> list[Token]:
    """The words and figures of ``text``, in order (offsets in its NFKC form)."""
    texts, starts, figures = _read(text)
    return [Token(t, a, f) for t, a, f in zip(texts, starts, figures, strict=True)]


def _read(text: str) -> tuple[list[str], list[int], list[bool]]:
    text = unicodedata.normalize("NFKC", text)
    texts: list[str] = []
    starts: list[int] = []
    figures: list[bool] = []
    for m in _TOKEN.finditer(text):
        word = m["word"]
        starts.append(m.start())
        if word:
            texts.append(word.casefold())
            figures.append(False)
            continue
        glued = m["sign"] and m.start("num") > 0 and text[m.start("num") - 1].isalnum()
        negative = bool(m["open"]) or (bool(m["sign"]) and not glued)
        texts.append(("-" if negative else "") + m["digits"].replace(",", "") + ("%" if m["pct"] else ""))
        figures.append(True)
    return texts, starts, figures


class _Page:
    """A page's tokens, read once for all the cells that cite it (``page_tokens``)."""

    def __init__(self, text: str) -> None:
        self.texts, self.starts, self.figures = _read(text)
        self.hay = _SEP + _SEP.join(self.texts) + _SEP
        self._where: dict[str, list[int]] | None = None
        self._compact: tuple[str, list[int]] | None = None

    @property
    def compact(self) -> tuple[str, list[int]]:
        if self._compact is None:
            self._compact = _compact(self.texts, self.figures)
        return self._compact

    @property
    def where(self) -> dict[str, list[int]]:
        if self._where is None:
            self._where = {}
            for i, t in enumerate(self.texts):
                self._where.setdefault(t, []).append(i)
        return self._where


@lru_cache(maxsize=PAGES_CACHED)
def page_tokens(text: str) -> _Page:
    return _Page(text)


def _must_match(t: Token) -> bool:
    return t.figure or t.text in SCALE_WORDS


def align(quote: str, page: str) -> Match | None:
    """The quote's place on the page and how it matched, or None when it is not there."""
    bare = quote.strip().rstrip(".").strip()
    if not bare:
        return None
    at = page.find(bare)
    if at >= 0:
        return Match("exact", 1.0, at)
    q = tokens(bare)
    if not q:
        return None
    p = page_tokens(page)
    found = p.hay.find(_SEP + _SEP.join(t.text for t in q) + _SEP)
    if found >= 0:
        return Match("normalised", 1.0, p.starts[p.hay.count(_SEP, 0, found)])
    spaced = _spaced(q, p)
    if spaced is not None:
        return Match("normalised", 1.0, p.starts[spaced])
    row = _row(q, p)
    if row is not None:
        return Match("row", 1.0, p.starts[row])
    return _close(q, p) if len(q) >= CLOSE_MIN_TOKENS else None


def _compact(texts: list[str], figures: list[bool]) -> tuple[str, list[int]]:
    """Words run together, each figure set apart (``totalnet sales`` and ``total net sales`` both read
    ``totalnetsales``; ``1 234`` never reads ``1234``), and the token each character came from."""
    out: list[str] = []
    owner: list[int] = []
    for i, (t, f) in enumerate(zip(texts, figures, strict=True)):
        piece = f"{_SEP}{t}{_SEP}" if f else t
        out.append(piece)
        owner += [i] * len(piece)
    return "".join(out), owner


def _spaced(q: list[Token], p: _Page) -> int | None:
    """The quote's first token's index on the page when the two differ only in where words break (a filing that
    runs words together, ``Totalnet sales``, or splits one, ``administr ative``), else None."""
    if sum(not t.figure for t in q) < 2:
        return None
    needle, _ = _compact([t.text for t in q], [t.figure for t in q])
    hay, owner = p.compact
    at = hay.find(needle)
    return None if at < 0 else owner[at]


def _row(q: list[Token], p: _Page) -> int | None:
    """A row whose label and figures the page prints apart (the label on a line of its own, its figures on the
    next, or a label broken over lines): the quote's label (its words before its first figure, at least
    ``ROW_MIN_WORDS``) is a run of the page's tokens, and the first figures after it, within ``ROW_REACH``
    tokens, are the quote's figures in order. The label's index on the page, else None."""
    k = next((i for i, t in enumerate(q) if t.figure), len(q))
    label, rest = q[:k], q[k:]
    figures = [t.text for t in rest if t.figure]
    if len(label) < ROW_MIN_WORDS or not figures or any(not t.figure for t in rest):  # a scale word: normalised
        return None
    needle = _SEP + _SEP.join(t.text for t in label) + _SEP
    at = p.hay.find(needle)
    while at >= 0:
        first = p.hay.count(_SEP, 0, at)
        after = first + len(label)
        got = [i for i in range(after, min(len(p.texts), after + ROW_REACH)) if p.figures[i]][: len(figures)]
        if [p.texts[i] for i in got] == figures and all(b == a + 1 for a, b in zip(got, got[1:])):
            return first
        at = p.hay.find(needle, at + 1)
    return None


def _close(q: list[Token], p: _Page) -> Match | None:
    qt, pt, where = [t.text for t in q], p.texts, p.where
    # anchor on the quote's rarest token present on the page (a figure, most often)
    present = [(len(where[t]), j) for j, t in enumerate(qt) if t in where]
    if not present:
        return None
    if any(_must_match(t) and t.text not in where for t in q):
        return None  # a figure or a scale word of the quote is nowhere on the page
    _, j = min(present)
    slack = len(qt) // 2 + 2
    best: Match | None = None
    for a in where[qt[j]][:MAX_ANCHORS]:
        lo, hi = max(0, a - j - slack), min(len(pt), a - j + len(qt) + slack)
        sm = SequenceMatcher(None, qt, pt[lo:hi], autojunk=False)
        blocks = [b for b in sm.get_matching_blocks() if b.size]
        if not blocks:
            continue
        matched_q = {b.a + k for b in blocks for k in range(b.size)}
        if any(_must_match(t) and i not in matched_q for i, t in enumerate(q)):
            continue
        span = pt[lo + blocks[0].b : lo + blocks[-1].b + blocks[-1].size]
        score = SequenceMatcher(None, " ".join(qt), " ".join(span), autojunk=False).ratio()
        if score >= CLOSE_THRESHOLD and (best is None or score > best.score):
            best = Match("close", round(score, 2), p.starts[lo + blocks[0].b])
    return best


def scale_above(page: str, at: int) -> Scale | None:
    """The scale line nearest above offset ``at`` of ``page`` (its table's "in millions"), or None."""
    found = None
    for m in _SCALE_LINE.finditer(page, max(0, at - SCALE_REACH), max(0, at)):
        found = m
    return None if found is None else _scale(found)


def scale_in(text: str) -> Scale | None:
    """The scale line inside ``text`` (a quote that copied its table's scale line), or None."""
    m = _SCALE_LINE.search(text)
    return None if m is None else _scale(m)


def _scale(m: re.Match[str]) -> Scale:
    rest = (m["rest"] or m["rest2"] or "").lower()
    return Scale(_SCALES[(m["scale"] or m["scale2"]).lower()], "except" in rest)
