"""The Filing Matrix over three real 10-Ks on a `demo`-sized model (1,024 tokens, the default
FINSPACE_MATRIX_REPLY_TOKENS of 768): the matrix completes (each cell's reply is sized to the context, no
refusal), and the filer's XBRL values, read from the filings with no model help, are right, shown at once and
carried by the exports with their concepts; a click on the filer's Revenue cell opens Apple's page 31 with the row
that prints it marked. Real `python app.py`, real vLLM (a random-weight llama: its own
values are noise, marked against the filer's). Takes the README's docs/matrix-filings.png
(FINSPACE_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import csv
import io
import json
import re

import httpx
import pytest

from helpers import demo_entry, write_catalog
from server_utils import Server
from support.catalog import long_context_copy
from support.filings import filing

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FILINGS = ["aapl-10-k-2024-11-01.html", "nvda-10-k-2025-02-26.html", "nflx-10-k-2025-01-27.html"]
# read from the filings by hand: the statements of operations (Apple p. 31, NVIDIA p. 52, Netflix p. 39) and the
# cover page's period end (p. 1); Apple and NVIDIA report in millions, Netflix in thousands
EXPECTED = {
    "aapl-10-k-2024-11-01.html": [
        "USD 391,035 million (p. 31)",
        "USD 123,216 million (p. 31)",
        "USD 93,736 million (p. 31)",
        "6.08 (p. 31)",
        "2024-09-28 (p. 1)",
    ],
    "nvda-10-k-2025-02-26.html": [
        "USD 130,497 million (p. 52)",
        "USD 81,453 million (p. 52)",
        "USD 72,880 million (p. 52)",
        "2.94 (p. 52)",
        "2025-01-26 (p. 1)",
    ],
    "nflx-10-k-2025-01-27.html": [
        "USD 39,000,966 thousand (p. 39)",
        "USD 10,417,614 thousand (p. 39)",
        "USD 8,711,631 thousand (p. 39)",
        "19.83 (p. 39)",
        "2024-12-31 (p. 1)",
    ],
}
CONCEPTS = {
    "aapl-10-k-2024-11-01.html": "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
    "nvda-10-k-2025-02-26.html": "us-gaap:Revenues",
    "nflx-10-k-2025-01-27.html": "us-gaap:Revenues",
}
CHECKS = {"verified", "not_on_page", "value_not_in_quote", "not_found", "cut", "invalid"}


@pytest.fixture(scope="module")
def paths():
    return [filing(name) for name in FILINGS]


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir, paths):
    root = tmp_path_factory.mktemp("matrix-filings")
    demo = long_context_copy(model_dir / "tiny-llama", root / "demo", 1024)
    models = {"demo": demo_entry(demo, None, label="Demo (tiny, offline)", max_model_len=1024)}
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="demo"),
        env={"FINSPACE_CPU_KV_CACHE_MIB": "64", "GRADIO_TEMP_DIR": str(root / "gradio")},
    )
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


def test_three_10ks_on_demo_complete_with_the_filers_values_at_once(server, paths):
    from gradio_client import Client, handle_file

    job = Client(server.url, verbose=False).submit(
        [handle_file(str(p)) for p in paths], "income-statement", api_name="/matrix"
    )
    updates = list(job)
    final = updates[-1]
    assert final["state"] == "done" and final["done"] == final["total"] == 15, final
    first = updates[0]["matrix"]  # before any model answer, the filer's values are there
    assert updates[0]["done"] == 0
    for row in first["rows"]:
        assert [c["xbrl"]["shown"] + f" (p. {c['xbrl']['page']})" for c in row["cells"]] == EXPECTED[row["document"]]
        assert all(c["check"] == "pending" for c in row["cells"])
    for row in final["matrix"]["rows"]:
        cells = row["cells"]
        assert [c["xbrl"]["shown"] + f" (p. {c['xbrl']['page']})" for c in cells] == EXPECTED[row["document"]]
        assert cells[0]["xbrl"]["concept"] == CONCEPTS[row["document"]] and row["xbrl_facts"] > 1000
        assert {c["check"] for c in cells} <= CHECKS, cells  # every cell ran on the model: no refusal
        for c in cells:  # the model's answer is marked against the filer's value: none for a cut or invalid reply
            expected = (
                (None,)
                if c["check"] in ("cut", "invalid")
                else ("missed",)
                if not c["found"]
                else ("agrees", "differs")
            )
            assert c["xbrl"]["agreement"] in expected, c
    apple = next(r for r in final["matrix"]["rows"] if r["document"].startswith("aapl"))
    assert apple["cells"][0]["xbrl"]["value"] == {"amount": 391035, "currency": "USD", "scale": "millions"}
    assert apple["cells"][0]["xbrl"]["number"] == "391035000000"
    assert apple["cells"][0]["xbrl"]["period"] == {"start": "2023-10-01", "end": "2024-09-28"}


def test_the_matrix_tab_shows_the_xbrl_column_and_exports_both_values(server, paths):
    from test_browser import chromium_context, open_page, shot

    with chromium_context() as context:
        page = open_page(context, server.url, "Demo (tiny, offline)")
        page.click("button[role=tab]:has-text('Matrix')")
        with page.expect_response(lambda r: "/gradio_api/upload" in r.url and r.status == 200, timeout=120_000):
            page.set_input_files("#matrix-files input[type=file]", [str(p) for p in paths])
        page.wait_for_timeout(500)
        page.click("#matrix-fill")
        page.wait_for_function(
            "(document.querySelector('#matrix-grid') || {innerText: ''}).innerText"
            ".includes('USD 391,035 million (p. 31)')",
            timeout=300_000,
        )
        page.wait_for_function(
            "document.querySelector('#matrix-count').innerText.includes('15 of 15 cells · done')", timeout=600_000
        )
        page.wait_for_selector("#matrix-downloads a", timeout=60_000)
        text = page.inner_text("#matrix-grid")
        for row in EXPECTED.values():
            assert all(v in text for v in row), text
        assert "Revenue (XBRL)" in text and page.locator("#matrix-grid td[data-check='xbrl']").count() == 15
        marks = page.eval_on_selector_all(
            "#matrix-grid td[data-xbrl]", "els => els.map(e => [e.dataset.check, e.dataset.xbrl])"
        )
        model = [m for m in marks if m[0] != "xbrl"]
        assert len(model) == 15 and all((x == "") == (k in ("cut", "invalid")) for k, x in model), model
        hrefs = page.eval_on_selector_all("#matrix-downloads a", "els => els.map(e => e.href)")
        assert page.page_errors == []
        page.eval_on_selector("#matrix-progress", "e => e.scrollIntoView({block: 'start'})")  # progress, grid, exports
        shot(page, "matrix-filings", docs_name="matrix-filings.png")
        # a click on a cell opens its page with the figure's row marked (issue 39: the chat's Sources view)
        assert "Click a cell" in page.inner_text("#matrix-cell")
        page.locator("#matrix-grid td[data-check='xbrl']:has-text('USD 391,035 million (p. 31)')").click()
        page.wait_for_function(
            "document.querySelector('#matrix-cell').innerText.includes('page 31 (printed 29)')", timeout=30_000
        )
        view = page.inner_text("#matrix-cell")
        assert "aapl-10-k-2024-11-01.html · Revenue (XBRL): USD 391,035 million (p. 31)" in view, view
        assert "Total net sales ⟵ the filer's XBRL value: USD 391,035 million (p. 31)" in view, view
        assert "CONSOLIDATED STATEMENTS OF OPERATIONS" in view and page.page_errors == []
    exports = {h.rsplit("/", 1)[-1].split("?")[0]: httpx.get(h, timeout=30).content for h in hrefs}
    name = next(n for n in exports if n.endswith(".csv"))
    rows = list(csv.reader(io.StringIO(exports[name].decode("utf-8"))))
    header = rows[0]
    # money as numbers, unit and scale in the header, page, mark and quote in columns of their own (issue 40)
    assert header[0] == "Document" and re.fullmatch(r"Revenue \((?:[A-Z]{3} )?\w+\)", header[1]), header
    assert header[2:5] == ["Revenue page", "Revenue check", "Revenue quote"] and "Revenue (XBRL concept)" in header
    apple = next(r for r in rows[1:] if r[0].startswith("aapl"))
    assert apple[header.index("Revenue (XBRL, USD millions)")] == "391035"
    assert apple[header.index("Revenue (XBRL) page")] == "31"
    assert apple[header.index("Revenue (XBRL concept)")] == CONCEPTS["aapl-10-k-2024-11-01.html"]
    assert apple[header.index("Revenue check")] != ""  # the model's mark beside the filer's value
    nflx = next(r for r in rows[1:] if r[0].startswith("nflx"))
    assert nflx[header.index("Revenue (XBRL, USD millions)")] == "39000.966"  # its thousands, in the column's scale
    data = json.loads(exports[next(n for n in exports if n.endswith(".json"))])
    cell = next(r for r in data["rows"] if r["document"].startswith("nvda"))["cells"][0]
    assert cell["xbrl"]["concept"] == "us-gaap:Revenues" and cell["xbrl"]["shown"] == "USD 130,497 million"
    assert "check" in cell and "value" in cell  # the model's value beside it
