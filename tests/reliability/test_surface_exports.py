"""Spreadsheet formulas in the Matrix's exports, and the Scoreboard tab's limit, against a real ``python app.py``
(issue 33, finding 2 and finding 5's Scoreboard item).

- A field name a spreadsheet would run (``=HYPERLINK(...)``, ``+SUM(1,1)``, ``-2+3``, ``@SUM(1,1)``) reached
  matrix.csv's header row unchanged: it is refused where it is defined, naming the rule, on ``/matrix`` and on
  the Matrix tab, and the upload is deleted.
- Every exported cell and header that begins with =, +, -, @, a tab or a carriage return gets a leading
  apostrophe (OWASP), in the CSV and the XLSX, from the Matrix tab of the real app: a filing whose name begins
  with ``=`` is the cell here; a plain negative number stays a number (tests/test_matrix_export.py).
- A Scoreboard limit of ``"5"`` or ``[1]`` showed Gradio's raw "'<' not supported between instances".
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from rel_utils import SURFACE_ADMIN, TALLY, GradioRaw, assert_clean, gclient
from support.filings import filing

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

FORMULAS = ['=HYPERLINK("http://evil.example/","open")', "+SUM(1,1)", "-2+3", "@SUM(1,1)", " =1+1"]
RULE = "a field name cannot begin with =, +, -, @, a tab or a carriage return"


@pytest.fixture(scope="module")
def server(surface_server):
    return surface_server


def uploads_left(server) -> list[str]:
    return [
        str(p)
        for p in server.gradio_cache.rglob("*")
        if p.is_file() and p.suffix in {".pdf", ".html", ".txt"} and "finspace-exports" not in str(p)
    ]


@pytest.mark.parametrize("name", FORMULAS)
def test_a_field_name_a_spreadsheet_would_run_is_refused_naming_the_rule(server, name):
    from gradio_client import handle_file

    fields = [{"name": name, "type": "number", "instruction": "Total revenue"}]
    with pytest.raises(Exception) as err:
        gclient(server).predict(
            [handle_file(str(filing("INTEL_2022Q4_EARNINGS.pdf")))], json.dumps(fields), api_name="/matrix"
        )
    TALLY.add(inputs=1)
    assert RULE in str(err.value), str(err.value)[:400]
    assert_clean(str(err.value))
    assert uploads_left(server) == []


def _tab_fill(server, raw: GradioRaw, upload_path: str, name: str, fields: list[dict]):
    ref = {"path": upload_path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}
    fn = next(
        i
        for i, d in enumerate(server.config["dependencies"])
        if d.get("targets") and any(t[0] == server.fill_button for t in d["targets"])
    )
    return raw.call(fn, [[ref], json.dumps(fields)], timeout=300)


@pytest.fixture(scope="module")
def tab(server):
    """The Matrix tab's fill event (its fn_index, found by the button's elem_id in the page's config)."""
    import httpx

    server.config = httpx.get(server.url + "/config", timeout=30).json()
    server.fill_button = next(
        c["id"] for c in server.config["components"] if c.get("props", {}).get("elem_id") == "matrix-fill"
    )
    return server


def _upload(server, path, name: str) -> str:
    import httpx

    with open(path, "rb") as f:
        r = httpx.post(server.url + "/gradio_api/upload", files={"files": (name, f, "text/plain")}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()[0]


def test_the_matrix_tabs_exports_neutralise_formulas_in_headers_and_cells(tab, tmp_path):
    src = tmp_path / "filing.html"
    shutil.copy(filing("0000950153-99-001234.html"), src)
    name = "=HYPERLINK(evil).html"
    with GradioRaw(tab.url) as raw:
        bad = _tab_fill(
            tab,
            raw,
            _upload(tab, src, name),
            name,
            [{"name": "@SUM(1,1)", "type": "text", "instruction": "The auditor"}],
        )
        assert bad.success is False and RULE in (bad.error or ""), bad.text[:400]
        out = _tab_fill(
            tab,
            raw,
            _upload(tab, src, name),
            name,
            [{"name": "Auditor", "type": "text", "instruction": "The auditor's name"}],
        )
    TALLY.add(inputs=2)
    assert out.success, out.text[:600]
    assert_clean(out.text)
    written = (
        [f["path"] for f in out.output["data"][3]["value"]]
        if isinstance(out.output["data"][3], dict)
        else [f["path"] for f in out.output["data"][3]]
    )
    by_kind = {p.rsplit(".", 1)[1]: p for p in written}
    rows = list(csv.reader(io.StringIO(open(by_kind["csv"], encoding="utf-8").read())))
    assert rows[0] == ["Document", "Auditor"] and rows[1][0].startswith("'="), rows
    from openpyxl import load_workbook

    wb = load_workbook(by_kind["xlsx"])
    for ws in wb.worksheets:
        for line in ws.iter_rows(values_only=True):
            for v in line:
                assert not (isinstance(v, str) and v.startswith(("=", "+", "-", "@", "\t", "\r"))), (ws.title, line)
    assert wb["Matrix"]["A2"].value.startswith("'=") and wb["Matrix"]["A2"].data_type == "s"


@pytest.mark.parametrize("limit", ["5", [1], {"n": 5}, True])
def test_a_scoreboard_limit_that_is_not_a_number_is_named(server, limit):
    import httpx

    config = httpx.get(server.url + "/config", timeout=30).json()
    run_button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "scores-run")
    fn = next(
        i
        for i, d in enumerate(config["dependencies"])
        if d.get("targets") and any(t[0] == run_button for t in d["targets"])
    )
    sets = next(
        c["props"]["choices"] for c in config["components"] if c.get("props", {}).get("elem_id") == "scores-set"
    )
    set_name = sets[0][0] if sets and isinstance(sets[0], list) else (sets[0] if sets else "tatqa")
    with GradioRaw(server.url) as raw:
        out = raw.call(fn, [set_name, limit, SURFACE_ADMIN], timeout=120)
    TALLY.add(inputs=1)
    assert out.success is False, out.text[:400]
    assert "not supported between" not in (out.error or "") and "limit must be a whole number" in (out.error or ""), (
        out.error
    )
    assert_clean(out.text)
    with pytest.raises(Exception) as err:  # the named endpoint says the same
        gclient(server).predict(set_name, limit, SURFACE_ADMIN, api_name="/run_eval")
    assert "limit must be a whole number" in str(err.value), str(err.value)[:300]
