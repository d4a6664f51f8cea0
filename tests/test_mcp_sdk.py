"""finspace's MCP server on both majors of the official ``mcp`` SDK.

The venv has mcp 2.3.0 (vLLM 0.32 requires 2.x); a Space builder that installs ``gradio[mcp]`` after
requirements.txt puts mcp 1.x back (scripts/space_check.py replays it). The same endpoint must serve on either:
tools listed (load_model only with the admin token), a call answered, a bad argument and an unknown tool as tool
errors naming the fix. The 1.x run needs that SDK in a folder of its own, never in the venv:

    .venv/bin/python -m pip install --target /tmp/mcp1 "mcp==1.30.0" httpx-sse --no-deps
    FINSPACE_TEST_MCP1_DIR=/tmp/mcp1 pytest tests/test_mcp_sdk.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
TOOLS = [
    "will_it_fit",
    "extract_matrix",
    "ask_document",
    "models",
    "health",
    "scores",
    "company_filings",
    "company_facts",
]


def served_by(sdk_dir: str | None) -> dict:
    path = os.pathsep.join(filter(None, [sdk_dir, str(SRC)]))
    out = subprocess.run(
        [sys.executable, str(HERE / "support" / "mcp_sdk_check.py")],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("major", ["2", "1"])
def test_the_endpoint_serves_on_either_sdk_major(major):
    sdk_dir = None
    if major == "1":
        sdk_dir = os.environ.get("FINSPACE_TEST_MCP1_DIR")
        if not sdk_dir:
            pytest.skip("set FINSPACE_TEST_MCP1_DIR to a folder holding mcp 1.x (see this module's docstring)")
    got = served_by(sdk_dir)
    assert got["sdk"].split(".")[0] == major and got["problem"] is None, got
    assert got["tools"] == TOOLS and got["admin_tools"] == TOOLS + ["load_model"], got
    assert got["health"] == {
        "isError": False,
        "text": '{"ready": true, "model": "demo"}',
        "structured": {"ready": True, "model": "demo"},
    }, got
    assert got["bad"]["isError"] and "arguments.gpus must be a whole number" in got["bad"]["text"], got
    assert got["unknown"]["isError"] and "unknown tool 'nope'" in got["unknown"]["text"], got
    assert got["switch"]["isError"] and "needs the admin token" in got["switch"]["text"], got
