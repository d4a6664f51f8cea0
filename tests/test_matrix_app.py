"""The Filing Matrix through the real app (vLLM on CPU): gradio_client's /matrix with generated filings.

The tiny random-weight llama cannot read, so these tests prove the plumbing and the guarantees that hold for any
model: every cell is JSON of its schema or marked cut at max_tokens (never a parse error passed off as a value),
a document's cells share its prefix, a bad document leaves its row saying why while the rest completes, Cancel
aborts the cells in vLLM, the bounds hold, and the uploads are deleted. What a real model reads is checked in
tests/test_smollm_matrix.py on SmolLM2.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import documents_gen as gen
from helpers import demo_entry, write_catalog
from server_utils import Server
from support.catalog import long_context_copy

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FIELDS = [
    {"name": "Revenue", "type": "number", "instruction": "Total revenue, in millions"},
    {"name": "Margin", "type": "percent", "instruction": "The operating margin"},
    {"name": "Profitable", "type": "yesno", "instruction": "Was the company profitable?"},
    {"name": "Auditor", "type": "text", "instruction": "The auditor's name"},
]
CHECKS = {"verified", "not_on_page", "value_not_in_quote", "not_found", "cut"}


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir):
    root = tmp_path_factory.mktemp("matrix")
    long_ctx = long_context_copy(model_dir / "tiny-llama", root / "tiny-llama-2k", 2048)
    models = {"a": demo_entry(long_ctx, None, label="Tiny Llama 2k", max_model_len=2048)}
    srv = Server(
        root,
        write_catalog(root / "catalog", models, default="a"),
        env={
            "FINSPACE_CPU_KV_CACHE_MIB": "64",
            "FINSPACE_TEST_PROMPT_LOG": str(root / "prompts.jsonl"),
            "GRADIO_TEMP_DIR": str(root / "gradio"),
            "FINSPACE_MATRIX_MAX_DOCUMENTS": "4",
            "FINSPACE_MATRIX_MAX_CELLS": "16",
        },
    )
    srv.root, srv.prompts, srv.uploads = root, root / "prompts.jsonl", root / "gradio"
    try:
        srv.wait(ready=True)
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def filings(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("filings")
    return [
        gen.pdf(d / "alpha-10k.pdf", pages=3, facts={2: "Revenue was 1,234.5 million in fiscal 2024."}),
        gen.xlsx(d / "beta.xlsx"),
        _write(d / "gamma.html", gen.HTML),
    ]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def gclient(server):
    from gradio_client import Client

    return Client(server.url, verbose=False)


def leftovers(server) -> list[str]:
    kinds = {".pdf", ".html", ".docx", ".xlsx", ".csv", ".txt", ".md"}
    return [str(p) for p in server.uploads.rglob("*") if p.is_file() and p.suffix in kinds]


def matrix(server, files, fields=FIELDS):
    from gradio_client import handle_file

    job = gclient(server).submit([handle_file(str(f)) for f in files], json.dumps(fields), api_name="/matrix")
    updates = list(job)
    return updates, job


def test_every_cell_is_json_of_its_schema_or_marked_cut(server, filings):
    updates, _job = matrix(server, filings)
    final = updates[-1]
    assert final["state"] == "done" and final["done"] == final["total"] == 12, final
    assert [u["done"] for u in updates] == sorted(u["done"] for u in updates)  # progress only grows
    cells = [c for row in final["matrix"]["rows"] for c in row["cells"]]
    assert len(cells) == 12 and {c["check"] for c in cells} <= CHECKS, cells
    for c in cells:  # a value is only ever a typed value from a parsed reply
        if c["check"] == "cut":
            assert c["value"] is None and c["found"] is False
    assert [r["document"] for r in final["matrix"]["rows"]] == ["alpha-10k.pdf", "beta.xlsx", "gamma.html"]
    assert final["matrix"]["fields"] == FIELDS and final["matrix"]["provenance"]["model_key"] == "a"
    assert leftovers(server) == []


def test_a_documents_cells_share_its_prefix_and_go_to_the_engine_together(server, filings):
    before = len(server.prompts.read_text().splitlines()) if server.prompts.exists() else 0
    matrix(server, filings[:1])
    prompts = [json.loads(line)["prompt"] for line in server.prompts.read_text().splitlines()[before:]]
    assert len(prompts) == 4
    doc_end = prompts[0].index("</document>") + len("</document>")
    assert all(p[:doc_end] == prompts[0][:doc_end] for p in prompts)  # the document first: one shared prefix
    assert "[page 2]\nPage 2 of the annual report." in prompts[0] and "Revenue was 1,234.5 million" in prompts[0]
    assert sorted(p[doc_end:].split("Field: ")[1].split(". Find")[0] for p in prompts) == sorted(
        f["name"] for f in FIELDS
    )


def test_a_document_that_fails_leaves_its_row_saying_why_and_the_rest_completes(server, filings, tmp_path):
    fake = _write(tmp_path / "broken.pdf", "this is not a PDF")
    updates, _ = matrix(server, [filings[0], fake], FIELDS[:2])
    final = updates[-1]
    rows = final["matrix"]["rows"]
    assert final["state"] == "done" and final["total"] == 2
    assert rows[1]["document"] == "broken.pdf" and "PDF" in rows[1]["error"] and rows[1]["cells"] == [None, None]
    assert all(c["check"] in CHECKS for c in rows[0]["cells"])
    assert leftovers(server) == []


@pytest.mark.parametrize(
    "fields, match",
    [
        ("no-such-preset", r"unknown field preset 'no-such-preset'; choose one of: income-statement"),
        (json.dumps([{"name": "A", "type": "currency", "instruction": "x"}]), r"field 1 \(type\)"),
        (json.dumps([{"name": f"f{i}", "type": "text", "instruction": "x"} for i in range(13)]), r"at most 12"),
        (json.dumps(FIELDS * 2)[:-1], r"fields: not valid JSON"),
    ],
)
def test_bad_fields_are_refused_naming_the_fix(server, filings, fields, match):
    from gradio_client import handle_file

    with pytest.raises(Exception, match=match):
        gclient(server).predict([handle_file(str(filings[0]))], fields, api_name="/matrix")
    assert leftovers(server) == []


def test_too_many_documents_or_cells_are_refused(server, filings):
    from gradio_client import handle_file

    with pytest.raises(Exception, match=r"5 documents; a matrix takes at most 4"):
        gclient(server).predict([handle_file(str(filings[0]))] * 5, json.dumps(FIELDS), api_name="/matrix")
    five = [{"name": f"f{i}", "type": "text", "instruction": "x"} for i in range(5)]
    with pytest.raises(Exception, match=r"4 documents x 5 fields = 20 cells; a matrix has at most 16"):
        gclient(server).predict([handle_file(str(filings[0]))] * 4, json.dumps(five), api_name="/matrix")
    assert leftovers(server) == []


def test_one_matrix_at_a_time_per_client_and_cancel_aborts_its_cells(server, filings, tmp_path):
    from gradio_client import handle_file

    c = gclient(server)
    long_fields = [{"name": f"Quote {i}", "type": "text", "instruction": "Quote the first sentence"} for i in range(4)]
    # The second matrix's only document fails to convert, so were it accepted it would end at once: a first still
    # filling after it came back was filling all the while, and the second must have been refused. A first that
    # ended before (a busy machine: the second's upload outlasted the first's 12 short cells) proves nothing:
    # tried again, at most 3 times.
    broken = _write(tmp_path / "broken.pdf", "this is not a PDF")
    for _attempt in range(3):
        first = c.submit([handle_file(str(f)) for f in filings], json.dumps(long_fields), api_name="/matrix")
        t0 = time.monotonic()
        while server.health()["engine"]["running_requests"] == 0:
            assert time.monotonic() - t0 < 120, "the matrix never reached the engine"
            time.sleep(0.1)
        try:
            c.predict([handle_file(str(broken))], json.dumps(FIELDS), api_name="/matrix")
        except Exception as exc:  # noqa: BLE001 - gradio_client's AppError
            assert "a matrix of yours is already filling" in str(exc), exc
            break
        assert first.done(), "a second matrix was accepted while the client's first was still filling"
    else:
        pytest.fail("the first matrix ended before the second reached the app, 3 times: the machine is too slow")
    first.cancel()
    t0 = time.monotonic()
    while server.health()["engine"]["running_requests"] > 0:
        assert time.monotonic() - t0 < 30, "cancelled cells still run in the engine"
        time.sleep(0.1)
    # the slot is free again
    updates, _ = matrix(server, filings[:1], FIELDS[:1])
    assert updates[-1]["state"] == "done"
