"""A company's filings from SEC's submissions API (data.sec.gov/submissions/CIK##########.json), newest first.

The file lists the latest ~1,000 filings in columns (``filings.recent``) and names older pages
(``filings.files``: CIK##########-submissions-001.json, ...), read only when asked. A filing's year is its report
period's (``reportDate``: Apple's 10-K for fiscal 2024, filed 2024-11-01, is 2024), else its filing date's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from finspace.errors import BadInput, NotFound

FORMS = ("10-K", "10-Q", "8-K", "20-F", "40-F")
ANNUAL = ("10-K", "20-F", "40-F")
_ACCESSION = re.compile(r"^\d{10}-\d{2}-\d{6}$")
_DOCUMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")
MAX_LIST = 1000


@dataclass(frozen=True)
class Filing:
    cik: int
    form: str
    filed: str  # YYYY-MM-DD
    period: str  # the report period's end, YYYY-MM-DD ("" when SEC gives none)
    accession: str  # 0000320193-24-000123
    document: str  # the primary document's name
    description: str = ""
    xbrl: bool = False

    @property
    def year(self) -> int:
        return int((self.period or self.filed)[:4])

    def path(self, document: str | None = None) -> str:
        """The archive path of the primary document (or another document of the filing, such as an exhibit)."""
        return f"/Archives/edgar/data/{self.cik}/{self.accession.replace('-', '')}/{document or self.document}"

    def to_json(self) -> dict:
        return {
            "form": self.form,
            "filed": self.filed,
            "period": self.period,
            "accession": self.accession,
            "document": self.document,
            "description": self.description,
            "xbrl": self.xbrl,
            "year": self.year,
            "url": "https://www.sec.gov" + self.path(),
        }


def parse(cik: int, columns: Any) -> list[Filing]:
    """The filings of one page (``filings.recent``, or an older page's top level)."""
    if not isinstance(columns, dict):
        return []

    def col(name: str) -> list:
        v = columns.get(name)
        return v if isinstance(v, list) else []

    acc, form, filed = col("accessionNumber"), col("form"), col("filingDate")
    period, doc, desc, xbrl = col("reportDate"), col("primaryDocument"), col("primaryDocDescription"), col("isXBRL")
    out = []
    for i in range(min(len(acc), len(form), len(filed))):
        try:
            out.append(
                Filing(
                    cik,
                    str(form[i]),
                    str(filed[i]),
                    str(period[i] if i < len(period) else "") or "",
                    str(acc[i]),
                    str(doc[i] if i < len(doc) else ""),
                    str(desc[i] if i < len(desc) else ""),
                    bool(xbrl[i] if i < len(xbrl) else 0),
                )
            )
        except (TypeError, ValueError):
            continue
    return [f for f in out if _ACCESSION.match(f.accession) and f.filed[:4].isdigit()]


def older_pages(submissions: Any) -> list[str]:
    files = (submissions.get("filings") or {}).get("files") if isinstance(submissions, dict) else None
    names = [f.get("name") for f in files or [] if isinstance(f, dict)]
    return [n for n in names if isinstance(n, str) and re.match(r"^CIK\d{10}-submissions-\d{3}\.json$", n)]


def check_form(form: Any) -> str | None:
    if form is None or form == "" or form == "any":
        return None
    if not isinstance(form, str) or form.strip().upper() not in FORMS:
        raise BadInput(f"form must be one of {', '.join(FORMS)} (or empty for every form)")
    return form.strip().upper()


def check_year(year: Any) -> int | None:
    if year is None or year == "":
        return None
    try:
        y = int(year)
    except (TypeError, ValueError):
        raise BadInput("year must be a year such as 2024 (the report period's)") from None
    if not 1993 <= y <= 2100:
        raise BadInput("year must be between 1993 (EDGAR's first filings) and 2100")
    return y


def select(filings: list[Filing], form: str | None = None, year: int | None = None, limit: int = 100) -> list[Filing]:
    """The filings of ``form`` (its amendments, 10-K/A, too) and ``year``, newest first."""
    out = [f for f in filings if (form is None or f.form in (form, form + "/A")) and (year is None or f.year == year)]
    return out[:limit]


def check_accession(accession: Any) -> str:
    if not isinstance(accession, str) or not _ACCESSION.match(accession.strip()):
        raise BadInput("accession must look like 0000320193-24-000123 (ten digits, two, six)")
    return accession.strip()


def check_document(name: Any) -> str | None:
    """An exhibit's (or other document's) file name within the filing, or None for the primary document."""
    if name is None or name == "":
        return None
    if not isinstance(name, str) or not _DOCUMENT.match(name) or ".." in name:
        raise BadInput("document must be a file name within the filing, such as wfc-1231x2024xex13.htm")
    return name


def find(filings: list[Filing], accession: str, company: str) -> Filing:
    for f in filings:
        if f.accession == accession:
            return f
    raise NotFound(f"{company} has no filing with accession {accession}; list its filings to pick one")
