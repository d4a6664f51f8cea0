"""The figures an answer states and the page each one cites, however the model wrote the citation.

A citation is "page 31", "(p. 31)", "pp. 31-33" (its first page), "page 31 (printed 29)" (page 31: labels count
pages from 1, the printed number is the filer's), "printed page 29" (the page whose label says "printed 29"),
with or without a document before it ("[aapl-10-k-2024-11-01 p. 31]", "aapl-10-k-2024-11-01, page 31") or after
it ("page 31 of aapl-10-k-2024-11-01"). A document is one the
library resolves (its id, case folded, without an extension, or a unique prefix); a word that resolves to none
("on page 31") leaves the citation's document unnamed.

A figure is a number the answer states: an amount ("$391,035 million", "391.0 billion", "(1,577)"), a
percentage ("46.2%"). Not figures: years (1900 to 2100 written bare), small bare counts (under 1,000 with no
currency, percent, scale word or separator: "3 segments"), numbers glued to letters ("Q3", "FY2024"), and the
numbers inside citations, document ids, forms ("10-K"), Items and Notes ("Item 7A", "Note 13") and dates.

Each figure takes the first citation after it in its sentence (a line, or text up to a full stop), else the
last one before it in the sentence, else none: uncited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from finspace.grounding.library import Library, resolve
from finspace.matrix.numbers import numbers_in

MAX_ANSWER_CHARS = 60_000  # an answer is read to here
MAX_FIGURES = 100  # figures checked in one answer
_DOC = r"[A-Za-z][\w.\-]{0,78}[A-Za-z0-9]"  # bounded: a long word costs no backtracking
_CITE = re.compile(
    r"(?:(?<![\w.\-])(?P<doc>" + _DOC + r")[\s,:;]*)?"
    r"(?P<kw>\b(?:pages?|pgs?|pp|p)\.?)\s*(?P<page>\d{1,5})(?:\s*[-–]\s*\d{1,5})?"
    r"(?:\s*\(\s*printed\s+[\w\-]{1,8}\s*\))?"
    r"(?:\s+(?:of|in)\s+(?P<doc2>" + _DOC + r"))?",
    re.IGNORECASE,
)
_MASKS = [
    re.compile(r"\b(?:form\s+)?(?:10|20|40|8)-[KQF]\b", re.IGNORECASE),
    re.compile(r"\b(?:item|note|part|section|exhibit)\s+\d{1,3}[A-Za-z]?(?:\.\d+)?\b", re.IGNORECASE),
    re.compile(
        r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?\s+\d{4}\b", re.IGNORECASE
    ),
    re.compile(r"\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d{4}\b", re.IGNORECASE),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
]
_FIGURE = re.compile(
    r"(?P<open>\(\s*)?(?P<cur>[$€£¥]\s*)?(?P<sign>[-−–]\s*)?(?P<cur2>[$€£¥]\s*)?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)(?P<close>\s*\))?"
    r"(?:\s*(?P<pct>%|percent\b|per\s+cent\b))?"
    r"(?:\s*(?P<scale>thousands?|millions?|billions?|trillions?|bn|mn|m|b|k)\b)?",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\n|(?<=[.!?;])\s+(?=[A-Z(\[*\-•])")


@dataclass(frozen=True)
class Citation:
    page: int
    document: str | None  # the library's id it names, None when unnamed
    named: str | None  # the document as written, when one was written
    start: int
    end: int
    text: str
    printed: bool = False  # "printed page 29": the number the page prints, not the page's own

    def to_json(self) -> dict:
        return {
            "page": self.page,
            "document": self.document,
            "named": self.named,
            "text": self.text,
            "printed": self.printed,
        }


@dataclass(frozen=True)
class Figure:
    text: str  # as written: "$391,035 million"
    start: int
    end: int
    value: Decimal  # as written, signed: 391035; (1,577) -> -1577
    scale: int  # the scale word's multiplier: 10**6 for "million", 1 for none
    percent: bool
    money: bool  # a currency sign or a scale word
    places: int  # digits after the decimal point, as written
    sentence: str  # the sentence (or line) it stands in
    citation: Citation | None
    clause: str = ""  # the words before it in its sentence, from the figure before it: what it is ("net income")

    @property
    def amount(self) -> Decimal:
        """The value in units (391,035 million -> 391035000000)."""
        return self.value * self.scale


def citations_in(text: str, lib: Library) -> list[Citation]:
    """Every citation of ``text`` (read to ``MAX_ANSWER_CHARS``), in order."""
    out = []
    for m in _CITE.finditer(text[:MAX_ANSWER_CHARS]):
        named, doc_word, start = m["doc2"] or m["doc"], m["doc"], m.start("kw")
        printed = bool(doc_word and doc_word.casefold() == "printed")
        if printed:  # "[aapl-10-k printed page 29]": the document, if any, is the word before
            head = text[max(0, m.start("doc") - 90) : m.start("doc")]
            before = re.search(r"(?<![\w.\-])(" + _DOC + r")[\s,:;]*$", head)
            doc_word = before[1] if before else None
            named = m["doc2"] or doc_word
            start = m.start("doc") - (len(before[0]) if before else 0)
        doc = resolve(lib, m["doc2"]) or resolve(lib, doc_word)
        if doc is None and doc_word and m["doc2"] is None:  # "on page 31": the word is not a document
            named = doc_word if _looks_like_id(doc_word) else None
        if not printed and m["doc"] and (doc or named == m["doc"]):
            start = m.start("doc")
        elif printed and not (doc or named):
            start = m.start("doc")
        out.append(Citation(int(m["page"]), doc, named, start, m.end(), text[start : m.end()], printed))
    return out


def _looks_like_id(word: str) -> bool:
    return len(word) >= 6 and bool(re.search(r"\d", word)) and bool(re.search(r"[-_]", word))


def _masked(text: str, lib: Library, cites: list[Citation]) -> str:
    """``text`` with citations, document ids, forms, Items, Notes and dates blanked (offsets kept)."""
    chars = list(text)

    def blank(a: int, b: int) -> None:
        chars[a:b] = " " * (b - a)

    for c in cites:
        blank(c.start, c.end)
    for key in lib:
        for m in re.finditer(re.escape(key), text, re.IGNORECASE):
            blank(m.start(), m.end())
    for pattern in _MASKS:
        for m in pattern.finditer(text):
            blank(m.start(), m.end())
    return "".join(chars)


def _sentences(text: str) -> list[tuple[int, int]]:
    out, at = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((at, m.start()))
        at = m.end()
    out.append((at, len(text)))
    return out


def figures_in(text: str, lib: Library, max_figures: int = MAX_FIGURES) -> list[Figure]:
    """The figures ``text`` states, each with the citation that goes with it (or None), at most ``max_figures``."""
    text = text[:MAX_ANSWER_CHARS]
    cites = citations_in(text, lib)
    masked = _masked(text, lib, cites)
    spans = _sentences(text)
    out: list[Figure] = []
    for m in _FIGURE.finditer(masked):
        if len(out) >= max_figures:
            break
        fig = _figure(m, masked)
        if fig is None:
            continue
        a, b = next(((a, b) for a, b in spans if a <= m.start() < max(b, a + 1)), (0, len(text)))
        after = [c for c in cites if m.end() <= c.start < b]
        before = [c for c in cites if a <= c.start and c.end <= m.start()]
        cite = after[0] if after else (before[-1] if before else None)
        value, scale, percent, money, places = fig
        lead = max([a, *(f.end for f in out if a <= f.start)])
        out.append(
            Figure(
                text[m.start() : m.end()].strip(),
                m.start(),
                m.end(),
                value,
                scale,
                percent,
                money,
                places,
                text[a:b].strip(),
                cite,
                masked[lead : m.start()].strip(),
            )
        )
    return out


def _figure(m: re.Match, text: str) -> tuple[Decimal, int, bool, bool, int] | None:
    digits = m["digits"]
    if m.start("digits") > 0 and (text[m.start("digits") - 1].isalpha() or text[m.start("digits") - 1] in "_./"):
        return None  # Q3, FY2024, a path
    if m.end("digits") < len(text) and (text[m.end("digits")].isalpha() and not (m["pct"] or m["scale"])):
        return None  # 3rd, 10x
    found = numbers_in(m.group(0))
    if not found:
        return None
    n = found[0]
    currency = bool(m["cur"] or m["cur2"])
    parens = bool(m["open"] and m["close"])  # an accounting negative: (565)
    bare = not (currency or parens or m["pct"] or m["scale"] or "," in digits or "." in digits)
    if bare and (Decimal(digits) < 1000 or 1900 <= int(digits) <= 2100):
        return None
    places = len(digits.split(".")[1]) if "." in digits else 0
    scale = n.scale
    if m["scale"] and m["scale"].lower() in ("m", "b", "k") and not currency:
        scale = 1  # "5 m" is a length, "3 b" a label: only "$5m" carries a scale
        if bare or (Decimal(digits) < 1000 and "," not in digits and "." not in digits):
            return None
    return n.value, scale, n.percent, currency or scale != 1, places
