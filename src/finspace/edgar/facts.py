"""A filer's reported figures over time, from SEC's company-facts API (data.sec.gov/api/xbrl/companyfacts/).

For a field's concepts (the Matrix presets', most preferred first) the values by fiscal year or quarter,
deduplicated as SEC's frames are: one value per period, the latest filing's (its form, accession and filed date
kept), since a figure is reported again in the next years' filings. A period is a duration of about a year (or a
quarter) for a flow such as revenue, or an instant for a balance-sheet item (annual: the instants the annual
reports give). Several concepts: for each period the first of them that has it. A fiscal year is named by the
year its period ends in (a year ending in the first week of January belongs to the year before).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date
from typing import Any

from finspace.edgar.filings import ANNUAL
from finspace.errors import BadInput, NotFound
from finspace.xbrl.concepts import QUARTER_DAYS, YEAR_DAYS

PERIODS = ("annual", "quarterly")


@dataclass(frozen=True)
class Point:
    company: str  # the ticker
    label: str  # FY2024, or Q ending 2024-06-29
    start: str | None
    end: str
    value: float
    unit: str
    concept: str
    form: str
    accession: str
    filed: str

    def to_json(self) -> dict:
        return {
            "company": self.company,
            "period": self.label,
            "start": self.start,
            "end": self.end,
            "value": self.value,
            "unit": self.unit,
            "concept": self.concept,
            "form": self.form,
            "accession": self.accession,
            "filed": self.filed,
        }


def _days(start: str | None, end: str) -> int | None:
    try:
        return (date.fromisoformat(end) - date.fromisoformat(start)).days if start else None
    except ValueError:
        return None


def fiscal_year(end: str) -> int:
    d = date.fromisoformat(end)
    return d.year - 1 if d.month == 1 and d.day <= 7 else d.year


def _fits(row: dict, period: str) -> bool:
    start, end = row.get("start"), row.get("end")
    if not isinstance(end, str):
        return False
    if start is None:  # an instant: annual series take the annual reports' balance-sheet dates
        return (
            period == "quarterly"
            or (row.get("form") in ANNUAL or row.get("form", "").rstrip("/A") in ANNUAL)
            and row.get("fp") == "FY"
        )
    days = _days(start, end)
    return days is not None and days in (YEAR_DAYS if period == "annual" else QUARTER_DAYS)


def series(facts: Any, concepts: list[str], company: str, period: str = "annual") -> list[Point]:
    """The deduplicated points of the first concepts that have them, oldest first."""
    if period not in PERIODS:
        raise BadInput(f"period must be one of {', '.join(PERIODS)}")
    tree = facts.get("facts") if isinstance(facts, dict) else None
    if not isinstance(tree, dict) or not tree:
        raise NotFound(
            f"{company} has no XBRL facts on EDGAR (companies file them since 2009; older filers and "
            "some foreign ones have none)"
        )
    best: dict[tuple, Point] = {}
    for rank, concept in enumerate(concepts):
        prefix, _, name = concept.partition(":")
        node = (tree.get(prefix) or {}).get(name) if isinstance(tree.get(prefix), dict) else None
        units = node.get("units") if isinstance(node, dict) else None
        for unit, rows in (units or {}).items():
            for row in rows if isinstance(rows, list) else []:
                if not isinstance(row, dict) or not _fits(row, period) or not isinstance(row.get("val"), (int, float)):
                    continue
                key = (row.get("start"), row["end"])
                p = Point(
                    company,
                    _label(row, period),
                    row.get("start"),
                    row["end"],
                    float(row["val"]),
                    unit,
                    concept,
                    str(row.get("form", "")),
                    str(row.get("accn", "")),
                    str(row.get("filed", "")),
                )
                held = best.get(key)
                if held is None or (rank, _neg(p.filed)) < (held_rank(held, concepts), _neg(held.filed)):
                    best[key] = p
    points = sorted(best.values(), key=lambda p: p.end)
    return _one_per_label(points)


def held_rank(p: Point, concepts: list[str]) -> int:
    return concepts.index(p.concept)


def _neg(filed: str) -> tuple:
    return tuple(-int(x) for x in filed.split("-") if x.isdigit())


def _label(row: dict, period: str) -> str:
    if period == "annual":
        return f"FY{fiscal_year(row['end'])}"
    return f"Q ending {row['end']}" if row.get("start") else f"at {row['end']}"


def _one_per_label(points: list[Point]) -> list[Point]:
    """A fiscal year twice (a 52/53-week year and a restated span ending days apart): the latest filing's."""
    by: dict[str, Point] = {}
    for p in points:
        held = by.get(p.label)
        if held is None or p.filed > held.filed:
            by[p.label] = p
    return sorted(by.values(), key=lambda p: p.end)


def units_of(points: list[Point]) -> set[str]:
    return {p.unit for p in points}


def to_csv(points: list[Point]) -> str:
    out = io.StringIO()
    cols = ["company", "period", "start", "end", "value", "unit", "concept", "form", "accession", "filed"]
    w = csv.DictWriter(out, fieldnames=cols)
    w.writeheader()
    for p in points:
        w.writerow(p.to_json())
    return out.getvalue()
