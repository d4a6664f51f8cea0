"""Companies on EDGAR through every door of the real app (`python app.py`, vLLM on CPU, a tiny random-weight
llama): REST (/edgar/...), the Gradio API (gradio_client), MCP (company_filings, company_facts, and a `filing` in
place of a URL), and the page (Playwright, Debian's chromium): ticker in, filing picked, question asked, the chart
shown. SEC is a local server answering from ../shared/edgar and ../shared/filings (tests/support/sec_server.py).
The random weights cannot read: the answers prove the plumbing; the values checked are SEC's and the filer's XBRL.
"""

from __future__ import annotations

import json

import httpx
import pytest

from server_utils import Server
from support.catalog import demo_entry, long_context_copy, write_catalog
from support.filings import shared_dir
from support.sec_server import serving
from test_mcp_app import call, text_of

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]
AAPL_10K = "0000320193-24-000123"
TWO_10KS = [{"company": "AAPL", "form": "10-K", "year": 2024}, {"company": "NVDA", "form": "10-K", "year": 2025}]


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    if not (shared_dir() / "edgar" / "company_tickers.json").is_file():
        pytest.skip(f"needs SEC's recorded responses in {shared_dir() / 'edgar'}: see shared/edgar/SOURCES.md")
    root = tmp_path_factory.mktemp("edgar-app")
    demo = long_context_copy(model_dir / "tiny-llama", root / "tiny-llama-2k", 2048)
    models = {"demo": demo_entry(demo, None, label="Demo (random weights)", max_model_len=2048, max_tokens=16)}
    with serving(shared_dir()) as sec:
        srv = Server(
            root,
            write_catalog(root / "catalog", models, default="demo"),
            env={
                "FINSPACE_CPU_KV_CACHE_MIB": "64",
                "GRADIO_TEMP_DIR": str(root / "gradio"),
                "FINSPACE_EDGAR_CONTACT": "test@example.com",
                "FINSPACE_EDGAR_WWW_URL": sec,
                "FINSPACE_EDGAR_DATA_URL": sec,
                "FINSPACE_TEST_EDGAR_LOOPBACK": "1",
                "FINSPACE_EDGAR_CACHE_DIR": str(root / "edgar-cache"),
            },
        )
        srv.sec = sec
        try:
            srv.wait(ready=True)
            yield srv
        finally:
            srv.stop()


def test_rest_finds_lists_and_charts_and_answers_bad_input_with_4xx(server):
    get = lambda path, **q: httpx.get(server.url + path, params=q, timeout=60)  # noqa: E731
    assert get("/edgar/company", q="apple").json()["ticker"] == "AAPL"
    miss = get("/edgar/company", q="APPL")
    assert miss.status_code == 404 and "did you mean AAPL, Apple Inc.?" in miss.text
    filings = get("/edgar/filings", company="AAPL", form="10-K").json()["filings"]
    assert any(f["accession"] == AAPL_10K and f["filed"] == "2024-11-01" for f in filings)
    facts = get("/edgar/facts", companies="AAPL", field="Revenue").json()
    fy24 = next(p for p in facts["points"] if p["period"] == "FY2024")
    assert fy24["value"] == 391_035_000_000 and fy24["filed"] == "2025-10-31"
    for path, q, status in (
        ("/edgar/filings", {"company": "AAPL", "form": "S-1"}, 422),
        ("/edgar/filings", {"company": "ZZZZQQ"}, 404),
        ("/edgar/facts", {"companies": "MSFT", "field": "Revenue"}, 404),
        ("/edgar/filings", {"company": "AAPL", "year": "x"}, 422),
    ):
        r = get(path, **q)
        assert r.status_code == status, (path, q, r.text)
        assert "Traceback" not in r.text


def test_gradio_curl_route_names_the_company_endpoints(server):
    """POST /gradio_api/call/<name>, then its result stream: the guard lists the EDGAR endpoints as public."""
    with httpx.Client(timeout=60) as http:
        r = http.post(server.url + "/gradio_api/call/company_facts", json={"data": ["AAPL", "Revenue", "annual"]})
        assert r.status_code == 200, r.text
        stream = http.get(server.url + f"/gradio_api/call/company_facts/{r.json()['event_id']}").text
    assert "event: complete" in stream and "391035000000" in stream.replace(".0", "")


def test_gradio_api_asks_a_filing_and_fills_the_matrix_with_two_10ks(server):
    from gradio_client import Client

    c = Client(server.url + "/", verbose=False)
    out = c.predict("AAPL", "10-K", 2024, False, 10, api_name="/company_filings")
    assert out["filings"][0]["accession"] == AAPL_10K
    facts = c.predict("AAPL, NVDA", "Revenue", "annual", api_name="/company_facts")
    assert {p["company"] for p in facts["points"]} == {"AAPL", "NVDA"} and facts["units"] == ["USD"]
    answer = c.predict("AAPL", "What were total net sales in fiscal 2024?", "10-K", 2024, None, api_name="/ask_filing")
    assert answer["filing"]["accession"] == AAPL_10K and answer["pages"] > 50 and isinstance(answer["answer"], str)
    last = None
    for last in c.submit(json.dumps(TWO_10KS), "income-statement", api_name="/filing_matrix"):
        pass
    last = (
        c.submit(json.dumps(TWO_10KS), "income-statement", api_name="/filing_matrix").result() if last is None else last
    )
    rows = last["matrix"]["rows"]
    assert [r["document"][:10] for r in rows] == ["AAPL-10-K-", "NVDA-10-K-"]
    assert rows[0]["cells"][0]["xbrl"]["number"] == "391035000000"  # Apple's FY2024 revenue, the filer's own tag
    assert rows[1]["cells"][0]["xbrl"]["number"] == "130497000000"  # NVIDIA's FY2025


def test_mcp_tools_list_and_chart_and_ask_a_filing_named_by_ticker_form_and_year(server):
    r = call(server, "company_filings", {"company": "apple", "form": "10-K", "year": 2024})
    assert not r.is_error, text_of(r)
    assert r.structured_content["filings"][0]["accession"] == AAPL_10K
    r = call(server, "company_facts", {"companies": "NVDA, AAPL", "field": "net income"})
    assert not r.is_error and {p["company"] for p in r.structured_content["points"]} == {"AAPL", "NVDA"}
    r = call(
        server,
        "ask_document",
        {"question": "What were net sales?", "document": {"filing": {"company": "AAPL", "form": "10-K", "year": 2024}}},
    )
    assert not r.is_error, text_of(r)
    assert r.structured_content["pages"] > 50
    r = call(server, "extract_matrix", {"documents": [{"filing": TWO_10KS[1]}], "fields": "balance-sheet"})
    assert not r.is_error, text_of(r)
    [row] = r.structured_content["rows"]
    assert row["document"].startswith("NVDA-10-K-2025-02-26") and row["cells"][0]["xbrl"]["number"] == "111601000000"
    r = call(server, "company_filings", {"company": "APPL"})
    assert r.is_error and "did you mean AAPL, Apple Inc.?" in text_of(r)
    r = call(
        server,
        "ask_document",
        {"question": "x", "document": {"filing": {"company": "AAPL", "accession": "0000320193-24-999999"}}},
    )
    assert r.is_error and "no filing with accession" in text_of(r)


def test_the_page_lists_a_tickers_filings_answers_about_one_and_shows_the_chart(server):
    from test_browser import bot_texts, chromium_context, open_page, shot

    with chromium_context() as context:
        pg = open_page(context, server.url)
        pg.get_by_role("tab", name="Companies").click()
        pg.fill("#edgar-company textarea, #edgar-company input", "AAPL")
        pg.fill("#edgar-year input", "2024")
        pg.click("#edgar-find")
        pg.wait_for_function("document.querySelector('#edgar-who').innerText.includes('Apple Inc.')", timeout=60_000)
        assert AAPL_10K in pg.inner_text("#edgar-filings")
        pg.fill("#edgar-question textarea", "What were total net sales?")
        pg.click("#edgar-ask")
        pg.wait_for_function(
            "document.querySelector('#edgar-answer').innerText.includes('Source: 10-K filed 2024-11-01')",
            timeout=240_000,
        )
        # the same filing into the chat, as an attached document: asked there, answered from its pages
        pg.click("#edgar-to-chat")
        pg.wait_for_function(
            "document.querySelector('#edgar-answer').innerText.includes('attached to the Chat')", timeout=240_000
        )
        pg.get_by_role("tab", name="Chat").click()
        assert "AAPL-10-K-2024-11-01" in pg.inner_text("#doc-fit")
        pg.fill("#chat-input textarea", "What were total net sales in fiscal 2024?")
        pg.press("#chat-input textarea", "Enter")
        pg.wait_for_function(
            "[...document.querySelectorAll('#chatbot [data-testid=\"bot\"]')]"
            ".some(e => e.innerText.includes('document:'))",
            timeout=240_000,
        )
        assert "pages" in bot_texts(pg)[-1]
        pg.get_by_role("tab", name="Companies").click()
        pg.fill("#edgar-companies textarea, #edgar-companies input", "AAPL, NVDA")
        pg.click("#edgar-chart-btn")
        pg.wait_for_function("document.querySelector('#edgar-notes').innerText.includes('Revenue')", timeout=60_000)
        pg.wait_for_selector("#edgar-chart canvas, #edgar-chart svg", timeout=30_000)
        assert "FY2024" in pg.inner_text("#edgar-facts")
        shot(pg, "edgar", "edgar.png")
        assert pg.page_errors == []
