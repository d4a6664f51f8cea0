"""A company found by ticker, CIK or name in SEC's company_tickers.json, forgiving of case and of a near miss.

The list is ordered by SEC (largest companies first); a name matches when it starts with the words asked
("apple" is Apple Inc.), else when it contains them; the first in SEC's order wins. Nothing found: the nearest
tickers and names are offered ("did you mean AAPL, Apple Inc.?").
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from finspace.errors import BadInput, NotFound

MAX_QUERY_CHARS = 120
_CIK = re.compile(r"^(?:cik)?\s*0*(\d{1,10})$", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Company:
    cik: int
    ticker: str
    name: str

    @property
    def cik10(self) -> str:
        return f"{self.cik:010d}"

    def to_json(self) -> dict:
        return {"cik": self.cik, "ticker": self.ticker, "name": self.name}


def _fold(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


class CompanyIndex:
    def __init__(self, companies: list[Company]):
        self.companies = companies
        self.by_ticker = {}
        self.by_cik = {}
        for c in companies:
            self.by_ticker.setdefault(c.ticker.upper(), c)
            self.by_cik.setdefault(c.cik, c)
        self.folded = [(_fold(c.name), c) for c in companies]

    @classmethod
    def parse(cls, data: Any) -> CompanyIndex:
        rows = data.values() if isinstance(data, dict) else []
        out = []
        for r in rows:
            try:
                out.append(Company(int(r["cik_str"]), str(r["ticker"]), str(r["title"])))
            except (KeyError, TypeError, ValueError):
                continue
        return cls(out)

    def find(self, query: Any) -> Company:
        """The company ``query`` names; NotFound with the nearest ones otherwise."""
        if not isinstance(query, str) or not query.strip():
            raise BadInput("company must be a ticker (AAPL), a CIK (320193) or a name (Apple)")
        q = query.strip()
        if len(q) > MAX_QUERY_CHARS:
            raise BadInput(
                f"company has {len(q)} characters; send a ticker, a CIK or a name of at most {MAX_QUERY_CHARS}"
            )
        if m := _CIK.match(q):
            cik = int(m[1])
            if cik in self.by_cik:
                return self.by_cik[cik]
            if q.lower().startswith("cik") or len(m[1]) > 5:
                raise NotFound(f"no listed company has CIK {cik}; search by ticker or name instead")
        if (c := self.by_ticker.get(q.upper().replace(".", "-"))) is not None:
            return c
        folded = _fold(q)
        if folded:
            tests = [lambda n: n == folded, lambda n: n.startswith(folded + " "), lambda n: f" {folded} " in f" {n} "]
            if len(folded) >= 5:  # "micros" is Microsoft; "APPL" is a near miss of a ticker, not a name
                tests.append(lambda n: n.startswith(folded))
            for test in tests:
                for name, c in self.folded:
                    if test(name):
                        return c
        raise NotFound(self.did_you_mean(q))

    def did_you_mean(self, q: str) -> str:
        near = self.near(q)
        if not near:
            return f"no listed company matches {q[:40]!r}; send a ticker (AAPL), a CIK or a name"
        first, rest = near[0], near[1:]
        also = f" (or {', '.join(f'{c.ticker}, {c.name}' for c in rest)})" if rest else ""
        return f"no listed company matches {q[:40]!r}: did you mean {first.ticker}, {first.name}?{also}"

    def near(self, q: str, n: int = 3) -> list[Company]:
        """The nearest tickers (edit distance 1, a swap of two letters counting one), then names; SEC's order (the
        largest companies first) breaks ties."""
        rank = {c.ticker: i for i, c in enumerate(self.companies)}
        up = q.upper()
        scored = [
            (d, rank[c.ticker], c)
            for t, c in self.by_ticker.items()
            if abs(len(t) - len(up)) <= 1 and (d := _distance(up, t)) <= 1
        ]
        if not scored:
            names = {name: c for name, c in reversed(self.folded)}
            for name in difflib.get_close_matches(_fold(q), list(names), n=n, cutoff=0.75):
                scored.append((0, rank[names[name].ticker], names[name]))
        return [c for *_k, c in sorted(scored, key=lambda s: (s[0], s[1]))][:n]


def _distance(a: str, b: str) -> int:
    """Edit distance with adjacent swaps (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]
