"""The EDGAR client's settings (read from FINSPACE_EDGAR_* by finspace.settings, once).

SEC asks every program for a User-Agent that names it and gives a contact address; without the contact
(FINSPACE_EDGAR_CONTACT) the feature stays off and says how to turn it on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from finspace.errors import BadInput

WWW = "https://www.sec.gov"  # company_tickers.json and the filings' archive
DATA = "https://data.sec.gov"  # the submissions and company-facts APIs
SEC_HOSTS = ("www.sec.gov", "data.sec.gov")
_EMAIL = re.compile(r"^[^@\s<>\"']{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,24}$")

OFF_MESSAGE = (
    "company look-ups on EDGAR are off: SEC asks every program for a contact address; the Space's owner "
    "can set FINSPACE_EDGAR_CONTACT=you@example.com in the Space's settings (variables) to turn them on"
)


@dataclass(frozen=True)
class EdgarSettings:
    contact: str | None = None  # FINSPACE_EDGAR_CONTACT: an e-mail address for SEC's User-Agent
    space: str = "local"  # SPACE_ID, named in the User-Agent
    www_url: str = WWW  # FINSPACE_EDGAR_WWW_URL (tests: a local server)
    data_url: str = DATA  # FINSPACE_EDGAR_DATA_URL
    cache_dir: str | None = None  # FINSPACE_EDGAR_CACHE_DIR; else <data dir or tmp>/edgar-cache
    requests_per_s: float = 10.0  # FINSPACE_EDGAR_RATE: SEC's limit, for the whole Space
    max_wait_s: float = 10.0  # FINSPACE_EDGAR_MAX_WAIT_S: a look-up waits this long for its turn, else 429
    timeout_s: float = 30.0  # FINSPACE_EDGAR_TIMEOUT_S: one response, whole (connect, headers, body)
    retries: int = 3  # on 429 and 5xx, with backoff
    backoff_s: float = 0.5  # the first retry's wait; doubled each time (a Retry-After up to 4x this is obeyed)
    tickers_bytes: int = 8 << 20
    submissions_bytes: int = 10 << 20  # FINSPACE_EDGAR_SUBMISSIONS_MIB
    facts_bytes: int = 100 << 20  # FINSPACE_EDGAR_FACTS_MIB
    fresh_s: float = 3600.0  # FINSPACE_EDGAR_FRESH_S: a cached list is used without asking SEC for this long
    allow_loopback: bool = False  # TEST-ONLY (FINSPACE_TEST_EDGAR_LOOPBACK=1): the base URLs may be 127.0.0.1

    @property
    def enabled(self) -> bool:
        return self.contact is not None

    @property
    def user_agent(self) -> str:
        return f"finspace/1 (Hugging Face Space {self.space}) {self.contact}"

    @property
    def hosts(self) -> tuple[str, ...]:
        """The only hosts the client fetches from: SEC's two, or the base URLs' (a test's local server)."""
        return tuple({(urlsplit(u).hostname or "").lower() for u in (self.www_url, self.data_url)})


def check_contact(raw: str | None) -> str | None:
    value = (raw or "").strip()
    if not value:
        return None
    if not _EMAIL.match(value):
        raise BadInput(
            "FINSPACE_EDGAR_CONTACT must be one e-mail address (SEC puts it in the User-Agent to reach "
            "the Space's owner), e.g. you@example.com"
        )
    return value


def check_base(name: str, raw: str | None, default: str) -> str:
    value = (raw or "").strip().rstrip("/")
    if not value:
        return default
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query:
        raise BadInput(f"{name} must be a scheme and host only, e.g. {default}")
    return value
