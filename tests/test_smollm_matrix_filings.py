"""The Filing Matrix on real 10-Ks, on the real engine: SmolLM2-135M-Instruct (2,048 tokens of context) through the
real app's /matrix, Apple's and Amazon's FY2015 10-K PDFs (84 and 85 pages, far past the context) x 3 statement
fields. Every cell's document block is the passages that fit (one BM25 index per document, tables whole with
their scale line, the statement pages first); every cell completes, and a cell marked verified has its quote on
the page it cites, with its figure as the filing prints it (checked here again against the filing's own text).
What the 135 M model gets right is printed, whatever it is.
"""

from __future__ import annotations

import json

import pytest

from support.filings import filing
from support.smollm import KEY

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FIELDS = [
    {"name": "Revenue", "type": "money", "instruction": "Total net sales for the fiscal year 2015"},
    {"name": "Net income", "type": "money", "instruction": "Net income for the fiscal year 2015"},
    {"name": "Total assets", "type": "money", "instruction": "Total assets at the end of fiscal 2015"},
]
FILES = ["APPLE_2015_10K.pdf", "AMAZON_2015_10K.pdf"]


@pytest.fixture(scope="module")
def server(shared_smollm_server):
    """conftest's shared SmolLM2 server (greedy, its own Gradio folder), with the real filings."""
    paths = [filing(name) for name in FILES]  # skips, naming the folder, without the real filings
    srv = shared_smollm_server
    srv.ensure_model(KEY)
    srv.files = paths
    return srv


def test_a_matrix_of_real_10ks_completes_and_verifies_only_what_its_page_prints(server):
    from gradio_client import Client, handle_file

    from finspace.documents.convert import convert
    from finspace.documents.limits import DocumentLimits
    from finspace.matrix import verify as v

    job = Client(server.url, verbose=False).submit(
        [handle_file(str(f)) for f in server.files], json.dumps(FIELDS), api_name="/matrix"
    )
    final = list(job)[-1]
    rows = final["matrix"]["rows"]
    lines = [
        f"{r['document']:22} {f['name']:13} {c['check']:18} p.{c['page']} {json.dumps(c['value'])[:50]:50} "
        f"{c['quote'][:70]!r}"
        for r in rows
        for f, c in zip(FIELDS, r["cells"], strict=True)
    ]
    report = "\n".join(lines)
    print(f"\nSmolLM2-135M on Apple's and Amazon's FY2015 10-Ks:\n{report}")
    assert final["state"] == "done" and final["done"] == 6, report
    cells = [(r["document"], c) for r in rows for c in r["cells"]]
    assert all(not c["whole_document"] for _, c in cells), report  # 80,000 tokens: passages, never whole
    assert all(c["check"] not in ("cut", "invalid") for _, c in cells), report
    pages = {
        name: {i: p.text for i, p in enumerate(convert(path, name, DocumentLimits()).pages, 1)}
        for name, path in zip(FILES, server.files, strict=True)
    }
    for name, c in cells:
        if c["check"] == "verified":  # the promise: its quote is on the page it cites
            assert v.locate(c["quote"], pages[name][c["page"]]) is not None, report
        if c["check"] == "not_on_page" and c["page"] in pages[name]:
            assert v.locate(c["quote"], pages[name][c["page"]]) is None, report
