"""The Filing Matrix with a model that reads: SmolLM2-135M-Instruct (the default without a GPU), greedy, through
the real app's /matrix and in a real browser (Playwright): 3 generated filings x 4 fields.

The documents state each figure once, in one sentence, on a known page; they are not tuned to the model. What is
asserted is only what a 135 M model does reliably: every cell completes (no reply cut at max_tokens, none
outside its schema), and a cell marked verified really quotes its page. The accuracy on the test matrix (cells
verified, and verified with the expected value) is printed, whatever it is; tests/reliability/README.md records it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

import documents_gen as gen
from support.smollm import KEY

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FIELDS = [
    {"name": "Revenue", "type": "money", "instruction": "Total revenue for fiscal 2024"},
    {"name": "Net income", "type": "money", "instruction": "Net income for fiscal 2024"},
    {"name": "Operating margin", "type": "percent", "instruction": "The operating margin for fiscal 2024"},
    {"name": "Auditor", "type": "text", "instruction": "The name of the auditor"},
]
# (document, field) -> (page, what the value must show): each stated once, in one sentence, on that page
TRUTH = {
    ("alpha-annual-report.pdf", "Revenue"): (2, "12.4 billion"),
    ("alpha-annual-report.pdf", "Net income"): (2, "1.9 billion"),
    ("alpha-annual-report.pdf", "Operating margin"): (3, "18.5%"),
    ("alpha-annual-report.pdf", "Auditor"): (3, "Ernst & Young LLP"),
    ("beta-annual-report.pdf", "Revenue"): (1, "830 million"),
    ("beta-annual-report.pdf", "Net income"): (2, "95 million"),
    ("beta-annual-report.pdf", "Operating margin"): (2, "14.2%"),
    ("beta-annual-report.pdf", "Auditor"): (3, "KPMG LLP"),
    ("gamma-10k.html", "Revenue"): (1, "4.2 billion"),
    ("gamma-10k.html", "Net income"): (1, "610 million"),
    ("gamma-10k.html", "Operating margin"): (1, "22.0%"),
    ("gamma-10k.html", "Auditor"): (1, "Deloitte & Touche LLP"),
}
GAMMA = (
    "<html><body><h1>Gamma Corp Form 10-K</h1><p>Gamma Corp makes industrial pumps.</p>"
    "<p>Total revenue was $4.2 billion in fiscal 2024.</p><p>Net income was $610 million in fiscal 2024.</p>"
    "<p>The operating margin was 22.0% in fiscal 2024.</p>"
    "<p>Our auditor is Deloitte &amp; Touche LLP.</p></body></html>"
)


def filings(folder: Path) -> list[Path]:
    alpha = gen.pdf(
        folder / "alpha-annual-report.pdf",
        pages=3,
        filler=1,
        facts={
            1: "Alpha Inc. designs payment software for banks.",
            2: "Revenue was $12.4 billion in fiscal 2024. Net income was $1.9 billion in fiscal 2024.",
            3: "The operating margin was 18.5% in fiscal 2024. The auditor is Ernst & Young LLP.",
        },
    )
    beta = gen.pdf(
        folder / "beta-annual-report.pdf",
        pages=3,
        filler=1,
        facts={
            1: "Revenue was $830 million in fiscal 2024.",
            2: "Net income was $95 million in fiscal 2024. The operating margin was 14.2% in fiscal 2024.",
            3: "The auditor is KPMG LLP.",
        },
    )
    gamma = folder / "gamma-10k.html"
    gamma.write_text(GAMMA)
    return [alpha, beta, gamma]


@pytest.fixture(scope="module")
def server(shared_smollm_server, tmp_path_factory):
    """conftest's shared SmolLM2 server (greedy, its own Gradio folder; shared with test_browser_smollm and
    test_smollm), with this module's filings."""
    srv = shared_smollm_server
    srv.ensure_model(KEY)
    srv.files = filings(tmp_path_factory.mktemp("smollm-matrix"))
    return srv


def accuracy(rows: list[dict]) -> tuple[int, int, list[str]]:
    """(cells verified, cells verified with the expected page and value, a line per cell)."""
    verified = right = 0
    lines = []
    for row in rows:
        for f, cell in zip(FIELDS, row["cells"], strict=True):
            page, shown = TRUTH[(row["document"], f["name"])]
            ok = cell["check"] == "verified"
            good = (
                ok
                and cell["page"] == page
                and shown.replace("%", "").split()[0].replace(",", "") in json.dumps(cell["value"]).replace(",", "")
            )
            verified, right = verified + ok, right + good
            lines.append(
                f"{row['document']:26} {f['name']:17} {cell['check']:18} p.{cell['page']} "
                f"{json.dumps(cell['value'])[:40]:40} {cell['quote'][:60]!r}"
            )
    return verified, right, lines


def test_every_cell_completes_and_a_verified_cell_quotes_its_page(server):
    from gradio_client import Client, handle_file

    job = Client(server.url, verbose=False).submit(
        [handle_file(str(f)) for f in server.files], json.dumps(FIELDS), api_name="/matrix"
    )
    final = list(job)[-1]
    rows = final["matrix"]["rows"]
    verified, right, lines = accuracy(rows)
    report = "\n".join(lines)
    print(
        f"\nSmolLM2-135M on the test matrix: {verified} of 12 cells verified, {right} with the expected page "
        f"and value\n{report}"
    )
    assert final["state"] == "done" and final["done"] == 12, report
    cells = [c for r in rows for c in r["cells"]]
    assert all(c["check"] not in ("cut", "invalid") for c in cells), report  # every cell completes
    texts = {r["document"]: r for r in rows}
    for doc, row in texts.items():
        for cell in row["cells"]:
            if cell["check"] == "verified":  # the check's promise: the quote is on the page it cites
                assert cell["found"] and cell["quote"].strip(), report


def test_a_matrix_filled_in_the_browser_exports_what_the_page_shows(server, tmp_path):
    from openpyxl import load_workbook

    from test_browser import chromium_context, open_page, shot

    with chromium_context(accept_downloads=True) as context:
        page = open_page(context, server.url, "SmolLM2 135M")
        page.click("button[role=tab]:has-text('Matrix')")
        page.set_input_files("#matrix-files input[type=file]", [str(f) for f in server.files])
        page.wait_for_function(
            "document.querySelectorAll('#matrix-files .file-preview tr, #matrix-files table tr').length >= 3",
            timeout=60_000,
        )
        page.fill("#matrix-fields .cm-content", "")
        page.locator("#matrix-fields .cm-content").fill(json.dumps(FIELDS))
        page.click("#matrix-fill")
        page.wait_for_function(
            "(document.querySelector('#matrix-count') || {innerText: ''}).innerText.includes('12 of 12 cells · done')",
            timeout=600_000,
        )
        grid = page.eval_on_selector_all(
            "#matrix-grid tr", "rows => rows.map(r => Array.from(r.children).map(c => c.innerText))"
        )
        assert grid[0] == ["Document", *(f["name"] for f in FIELDS)]
        assert [r[0] for r in grid[1:]] == [f.name for f in server.files]
        checks = page.eval_on_selector_all("#matrix-grid td[data-check]", "cs => cs.map(c => c.dataset.check)")
        assert len(checks) == 12 and "pending" not in checks
        assert page.page_errors == []
        shot(page, "matrix-filled", docs_name="matrix.png")
        # the exports arrive with the last update, but the File component may render a tick after the count
        page.wait_for_function("document.querySelectorAll('#matrix-downloads a').length >= 3", timeout=60_000)
        links = {
            Path(a).suffix: a for a in page.eval_on_selector_all("#matrix-downloads a", "as => as.map(a => a.href)")
        }
        csv_text = page.request.get(links[".csv"]).text()
        # the CSV is the page's grid, each money field as numbers with its unit and scale in the header and its
        # page, mark and quote in columns of their own (issue 40)
        back = list(csv.reader(io.StringIO(csv_text)))
        assert [r[0] for r in back] == [r[0] for r in grid]
        for name in ("Operating margin", "Auditor"):
            assert [r[back[0].index(name)] for r in back] == [r[grid[0].index(name)] for r in grid]
        money = [i for i, h in enumerate(back[0]) if re.fullmatch(r"(?:Revenue|Net income) \((?:[A-Z]{3} )?\w+\)", h)]
        assert len(money) == 2, back[0]
        xlsx = tmp_path / "m.xlsx"
        xlsx.write_bytes(page.request.get(links[".xlsx"]).body())
        wb = load_workbook(xlsx)
        sheet = [list(r) for r in wb["Matrix"].iter_rows(values_only=True)]
        assert sheet[0] == back[0]
        assert all(r[i] is None or isinstance(r[i], int | float) for r in sheet[1:] for i in money)
        assert wb["Provenance"]["B2"].value == KEY  # model_key first in the provenance sheet
