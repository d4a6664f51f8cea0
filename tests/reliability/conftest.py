"""The reliability suite's plumbing: the shared "surface" server, the tally, and the summary line.

Tests add to ``rel_utils.TALLY`` as they go; the ``pytest_terminal_summary`` hook
prints, whatever the outcome::

    reliability: inputs=N faults=F survived=S load_requests=R errors=E lost=L server_errors=N leaks=N

Servers: test_faults.py and test_load.py each start their own; the two
test_surface_*.py modules (access and fuzzing: neither may change the model)
share ``surface_server``, started on first use and stopped when the package's
last test ends (package scope: hence the __init__.py), so the suite pays for
three engine start-ups, not four, and nothing of it outlives the package.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import corrupt_copy, demo_entry
from rel_utils import (
    SURFACE_ADMIN,
    SURFACE_BODY_S,
    SURFACE_CONTEXT,
    SURFACE_EVENTS_PER_CLIENT,
    SURFACE_HEADER_S,
    SURFACE_HF_TOKEN,
    SURFACE_MAX_IN_FLIGHT,
    SURFACE_STREAM_OPEN_S,
    TALLY,
    listing,
    start_server,
    tiny,
)


def pytest_configure(config):
    config.addinivalue_line("markers", "reliability: hardening tests against a real server (tests/reliability)")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(scope="package")
def surface_server(tmp_path_factory, model_dir):
    """The app with every guard on: FINSPACE_ADMIN_TOKEN, a fake HF_TOKEN, an empty HF_HOME (offline), and a
    queue bound of SURFACE_MAX_IN_FLIGHT chats. Its stdout and stderr go to ``server.log_path``.

    Models: "a" (tiny llama, 16,384-token context, 32 MiB of KV each: two long streams fit the 72 MiB CPU KV
    space, for the overload test), "b" (tiny qwen3), "big" (65,536 tokens, 128 MiB: the planner refuses it, 400),
    "broken" (truncated weights).
    """
    root = tmp_path_factory.mktemp("rel-surface")
    hf_home = root / "hf-home"
    hf_home.mkdir()
    gradio_cache = root / "gradio-cache"  # Gradio's upload folder and file cache: nothing may land there
    gradio_cache.mkdir()
    long_ctx = root / "tiny-llama-64k"  # the same weights with a longer position limit (rope: no new weights)
    shutil.copytree(model_dir / "tiny-llama", long_ctx)
    cfg = json.loads((long_ctx / "config.json").read_text())
    cfg["max_position_embeddings"] = 65536
    (long_ctx / "config.json").write_text(json.dumps(cfg))
    models = {
        "a": demo_entry(long_ctx, None, label="Tiny Llama", max_model_len=SURFACE_CONTEXT, max_tokens=8),
        "b": tiny(model_dir, "tiny-qwen3", label="Tiny Qwen3", max_tokens=8),
        "big": demo_entry(long_ctx, None, label="Tiny Llama long context", max_model_len=65536),
        "broken": demo_entry(corrupt_copy(model_dir / "tiny-llama", root / "broken"), None, label="Broken"),
    }
    env = {
        "HF_TOKEN": SURFACE_HF_TOKEN,
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "GRADIO_TEMP_DIR": str(gradio_cache),
        "FINSPACE_MAX_IN_FLIGHT": str(SURFACE_MAX_IN_FLIGHT),
        "FINSPACE_CPU_KV_CACHE_MIB": "72",
        # the public-Space guards at their defaults but three, shortened so their tests wait less
        "FINSPACE_MAX_EVENTS_PER_CLIENT": str(SURFACE_EVENTS_PER_CLIENT),
        "FINSPACE_STREAM_OPEN_S": str(SURFACE_STREAM_OPEN_S),
        "FINSPACE_HEADER_TIMEOUT_S": str(SURFACE_HEADER_S),
        "FINSPACE_BODY_TIMEOUT_S": str(SURFACE_BODY_S),
        "FINSPACE_MATRIX_MAX_DOCUMENTS": "2",
    }  # an upload takes at most 2 documents (the Matrix tab's bound)
    srv = start_server(root, models, admin_token=SURFACE_ADMIN, env=env)
    try:
        srv.hf_home = hf_home
        srv.gradio_cache = gradio_cache
        srv.hf_home_at_start = listing(hf_home)
        yield srv
    finally:
        srv.stop()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # in lanes (pytest-xdist) the run sums each lane's counts and prints them (tests/conftest.py)
    if not hasattr(config, "workerinput") and config.getoption("dist", default="no") == "no":
        terminalreporter.write_line(TALLY.line())
