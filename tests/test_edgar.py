"""finspace.edgar against a local server that answers as SEC does (tests/support/sec_server.py) from the real
responses in ../shared/edgar and the filings in ../shared/filings: find, list, read, chart; SEC's rules (rate,
cache, bounds, retries, errors)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from finspace.documents.gate import ConversionGate
from finspace.documents.upload import convert_upload
from finspace.edgar.client import SecClient
from finspace.edgar.config import EdgarSettings
from finspace.edgar.desk import EdgarDesk, parse_request
from finspace.errors import BadInput, Busy, DataUnavailable, Forbidden, NotFound
from finspace.matrix.fields import load_field_presets
from finspace.matrix.filer import filer_values
from finspace.settings import Settings
from support.filings import shared_dir
from support.sec_server import serving

TXT_ACCESSION, TXT_DOCUMENT = "0001086364-24-006980", "us0378331005_021224.txt"  # a plain-text SC 13G/A


@pytest.fixture(scope="module")
def sec():
    """The local SEC server, in its own process group, on 127.0.0.1; its base URL."""
    if not (shared_dir() / "edgar" / "company_tickers.json").is_file():
        pytest.skip(f"needs SEC's recorded responses in {shared_dir() / 'edgar'}: see shared/edgar/SOURCES.md")
    with serving(shared_dir()) as base:
        yield base


def fault(base: str, **kw) -> None:
    httpx.get(base + "/_fault", params=kw).raise_for_status()


def log(base: str) -> list:
    return httpx.get(base + "/_log").json()


def edgar_settings(base: str, tmp_path: Path, **kw) -> EdgarSettings:
    return EdgarSettings(
        **{
            "contact": "test@example.com",
            "www_url": base,
            "data_url": base,
            "allow_loopback": True,
            "cache_dir": str(tmp_path / "cache"),
            "backoff_s": 0.01,
            **kw,
        }
    )


def desk_of(base: str, tmp_path: Path, **kw) -> EdgarDesk:
    settings = Settings(gradio_temp_dir=str(tmp_path / "gradio"), edgar=edgar_settings(base, tmp_path, **kw))
    svc = SimpleNamespace(
        settings=settings,
        matrix=SimpleNamespace(presets=load_field_presets()),
        conversions=ConversionGate.of(settings.documents),
    )
    return EdgarDesk(svc, settings.edgar)


def run(coro):
    return asyncio.run(coro)


def test_apple_found_by_ticker_name_and_cik_and_a_near_miss_named(sec, tmp_path):
    desk = desk_of(sec, tmp_path)
    for q in ("AAPL", "aapl", "apple", "CIK0000320193", "320193"):
        assert run(desk.company(q)).ticker == "AAPL", q
    with pytest.raises(NotFound, match=r"did you mean AAPL, Apple Inc\.\?"):
        run(desk.company("APPL"))
    with pytest.raises(NotFound, match="no listed company has CIK 99999999"):
        run(desk.company("CIK0099999999"))


def test_apples_filings_listed_and_filtered_and_the_10k_read_with_its_xbrl_facts(sec, tmp_path):
    desk = desk_of(sec, tmp_path)
    company, found = run(desk.filings("AAPL", form="10-K", year=2024))
    assert company.name == "Apple Inc."
    [tenk] = found
    assert (tenk.form, tenk.filed, tenk.accession, tenk.document) == (
        "10-K",
        "2024-11-01",
        "0000320193-24-000123",
        "aapl-20240928.htm",
    )
    _c, recent = run(desk.filings("AAPL", limit=1000))
    assert any(f.accession == "0000320193-24-000123" for f in recent)
    assert {f.form for f in run(desk.filings("AAPL", form="8-K"))[1]} <= {"8-K", "8-K/A"}
    # Tesla's older page is read only when asked
    _c, tsla = run(desk.filings("TSLA", form="10-K", older=True))
    assert len(tsla) > len(run(desk.filings("TSLA", form="10-K"))[1])

    picked = run(desk.pick("apple", form="10-K", year=2024))
    assert picked.filing.accession == "0000320193-24-000123"
    path, name = run(desk.read(picked))
    doc = run(convert_upload(path, name, desk.svc.settings.documents, str(tmp_path / "gradio")))
    fields = desk.svc.matrix.presets.get("income-statement").fields
    values = filer_values(fields, [doc.facts])
    assert values[(0, 0)].value == 391035000000  # Revenue, FY2024, the filing's own XBRL
    with pytest.raises(NotFound, match="no filing with accession 0000320193-24-999999"):
        run(desk.pick("AAPL", accession="0000320193-24-999999"))
    with pytest.raises(BadInput, match="accession must look like"):
        run(desk.pick("AAPL", accession="../../etc/passwd"))
    with pytest.raises(BadInput, match="document must be a file name"):
        run(desk.pick("AAPL", accession="0000320193-24-000123", document="../x.htm"))


def test_latest_10k_of_several_companies_as_matrix_files(sec, tmp_path):
    desk = desk_of(sec, tmp_path)
    assert parse_request("AAPL, NVDA: latest 10-K") == [
        {"company": "AAPL", "form": "10-K", "year": None},
        {"company": "NVDA", "form": "10-K", "year": None},
    ]
    # the recorded lists are of 2026: pick the 10-Ks whose documents are in ../shared/filings by year
    files = run(
        desk.matrix_files(
            [{"company": "AAPL", "form": "10-K", "year": 2024}, {"company": "NVDA", "form": "10-K", "year": 2025}]
        )
    )
    assert [n for _p, n in files] == [
        "AAPL-10-K-2024-11-01-aapl-20240928.htm",
        "NVDA-10-K-2025-02-26-nvda-20250126.htm",
    ]
    assert all(Path(p).stat().st_size > 100_000 for p, _n in files)


def test_apples_revenue_by_fiscal_year_names_the_latest_filing_and_nvidia_joins_the_chart(sec, tmp_path):
    desk = desk_of(sec, tmp_path)
    out = run(desk.facts("AAPL, NVDA", "revenue"))
    fy24 = next(p for p in out["points"] if p["company"] == "AAPL" and p["period"] == "FY2024")
    assert fy24["value"] == 391_035_000_000
    # reported in the 10-K of 2024-11-01 and again in that of 2025-10-31: the latest filing's, as SEC's frames
    assert (fy24["form"], fy24["filed"], fy24["accession"]) == ("10-K", "2025-10-31", "0000320193-25-000079")
    assert {p["company"] for p in out["points"]} == {"AAPL", "NVDA"} and out["units"] == ["USD"]
    assert len({p["period"] for p in out["points"] if p["company"] == "AAPL"}) == len(
        [p for p in out["points"] if p["company"] == "AAPL"]
    )  # one value per fiscal year
    assert out["csv"].splitlines()[0].startswith("company,period,start,end,value")
    assert "FY2024" in out["csv"] and "0000320193-25-000079" in out["csv"]
    assert fy24["url"] == "https://www.sec.gov/Archives/edgar/data/320193/000032019325000079/"
    q = run(desk.facts("AAPL", "Revenue", "quarterly"))["points"]
    q3 = next(p for p in q if p["end"] == "2025-06-28")  # Apple's Q3 FY2025, from its 10-Q of 2025-08-01
    assert (q3["value"], q3["form"], q3["filed"]) == (94_036_000_000, "10-Q", "2025-08-01")
    eps = next(p for p in run(desk.facts("AAPL", "Diluted EPS"))["points"] if p["period"] == "FY2024")
    assert (eps["value"], eps["unit"]) == (6.08, "USD/shares")
    with pytest.raises(NotFound, match="MSFT has no XBRL facts"):
        run(desk.facts("MSFT", "revenue"))  # no company-facts file on the local server: none on EDGAR
    with pytest.raises(BadInput, match="unknown field"):
        run(desk.facts("AAPL", "vibes"))


def test_100_lookups_stay_within_10_a_second_and_a_repeat_sends_nothing(sec, tmp_path):
    fault(sec)  # clears the log
    desk = desk_of(sec, tmp_path, fresh_s=0.0, max_wait_s=60.0)  # every look-up asks SEC (conditionally)

    async def many():
        await asyncio.gather(
            *(desk.client.get(sec + f"/submissions/CIK0000320193.json?n={i}", 1 << 20, "x") for i in range(100))
        )

    run(many())
    times = sorted(t for t, path, *_ in log(sec))
    assert len(times) == 100
    # 11 requests span at least a second, as the server's clock saw them arrive
    for i in range(len(times) - 10):
        assert times[i + 10] - times[i] >= 1.0, "more than 10 requests within a second"
    cached = desk_of(sec, tmp_path)  # the same cache folder, the default freshness
    run(cached.company("AAPL"))
    before = len(log(sec))
    run(cached.company("AAPL"))
    run(desk_of(sec, tmp_path).company("NVDA"))  # a new desk (a restart) reads the disk cache
    assert len(log(sec)) == before


def test_a_stale_entry_is_asked_for_conditionally_and_304_keeps_it(sec, tmp_path):
    desk = desk_of(sec, tmp_path, fresh_s=0.0)
    run(desk.filings("AAPL"))
    fault(sec)
    run(desk.filings("AAPL"))
    assert [s for _t, p, s, _ua in log(sec)] == [304]  # the filing list, unchanged (the company list: fresh a day)


def test_sec_errors_and_garbage_are_named_and_retried(sec, tmp_path):
    fault(sec, status="503", times="2")
    desk = desk_of(sec, tmp_path)
    assert run(desk.company("AAPL")).ticker == "AAPL"  # two 503s, then an answer: retried with backoff
    assert [s for *_x, s, _ua in log(sec)] == [503, 503, 200]
    for kw, error, words in (
        (dict(status="503"), DataUnavailable, "HTTP 503 .* after 4 tries"),
        (dict(status="429"), Busy, "slow down"),
        (dict(status="403"), DataUnavailable, "User-Agent"),
        (dict(garbage="1"), DataUnavailable, "not JSON"),
        (dict(delay="1.5"), DataUnavailable, "did not answer .* within 0.5 s"),
    ):
        fault(sec, **kw)
        with pytest.raises(error, match=words):
            run(desk_of(sec, tmp_path / str(len(kw)) / next(iter(kw)), timeout_s=0.5, retries=3).filings("AAPL"))
    fault(sec)


def test_bounds_hosts_contact_and_offline(sec, tmp_path):
    with pytest.raises(BadInput, match=r"larger than 0.1 MiB"):
        run(desk_of(sec, tmp_path, submissions_bytes=100 << 10).filings("AAPL"))
    desk = desk_of(sec, tmp_path)
    with pytest.raises(BadInput, match="not one of SEC's hosts"):
        run(desk.client.get("https://example.org/x.json", 1000, "x"))
    with pytest.raises(Forbidden, match="FINSPACE_EDGAR_CONTACT"):
        run(desk_of(sec, tmp_path, contact=None).company("AAPL"))
    # SEC's real hosts, from a machine without network: said, not failed
    offline = SecClient(EdgarSettings(contact="t@example.com", cache_dir=str(tmp_path / "c2")), str(tmp_path / "c2"))
    with pytest.raises(DataUnavailable, match="SEC cannot be reached"):
        run(offline.get("https://data.sec.gov/submissions/CIK0000320193.json", 1 << 20, "x"))
    # the User-Agent names the Space and the contact
    assert all("test@example.com" in ua and "finspace" in ua for *_x, ua in log(sec))


def test_200_users_at_once_wait_their_turn_or_get_a_clear_429(sec, tmp_path):
    fault(sec)
    desk = desk_of(sec, tmp_path, max_wait_s=1.0)
    run(desk.company("AAPL"))

    async def crowd():
        return await asyncio.gather(
            *(desk.client.get(sec + f"/submissions/CIK0000320193.json?u={i}", 1 << 20, "x") for i in range(200)),
            return_exceptions=True,
        )

    got = run(crowd())
    busy = [g for g in got if isinstance(g, Busy)]
    assert len(busy) + sum(isinstance(g, bytes) for g in got) == 200
    assert 150 <= len(busy) < 200 and all(b.http_status == 429 and "try again" in str(b) for b in busy)
    times = sorted(t for t, *_ in log(sec))
    assert all(times[i + 10] - times[i] >= 1.0 for i in range(len(times) - 10))


def test_identical_lookups_at_once_share_one_request_and_a_cancelled_first_caller_leaves_the_rest_served(sec, tmp_path):
    fault(sec, delay="0.3")
    desk = desk_of(sec, tmp_path)
    url = sec + "/submissions/CIK0001045810.json"

    async def together():
        first = asyncio.ensure_future(desk.client.get(url, 1 << 20, "x"))
        await asyncio.sleep(0.05)
        rest = [asyncio.ensure_future(desk.client.get(url, 1 << 20, "x")) for _ in range(20)]
        await asyncio.sleep(0.05)
        first.cancel()
        return await asyncio.gather(*rest)

    bodies = run(together())
    assert len(set(bodies)) == 1 and b"NVIDIA" in bodies[0]
    assert len(log(sec)) <= 2  # the cancelled first request, and the one that served the twenty
    fault(sec)


def test_a_primary_document_finspace_cannot_read_is_refused_by_name_and_a_pdf_or_text_one_is_read_as_an_upload(
    sec, tmp_path
):
    desk = desk_of(sec, tmp_path)
    form4 = run(desk.pick("AAPL", accession="0001059235-26-000004"))  # an ownership form: XML
    fault(sec)
    with pytest.raises(BadInput, match="PDF, HTML"):
        run(desk.read(form4))
    assert log(sec) == []  # refused before anything was fetched
    for accession, document in (("0000000000-24-005673", "filename1.pdf"), (TXT_ACCESSION, TXT_DOCUMENT)):
        picked = run(desk.pick("AAPL", accession=accession))
        assert picked.document == document
        with pytest.raises(NotFound, match=f"EDGAR has no document {document}"):  # not recorded here: named
            run(desk.read(picked))
    assert [p for _t, p, *_ in log(sec)][-1].endswith("/" + TXT_DOCUMENT)  # asked for at SEC's archive path
