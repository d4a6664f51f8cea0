"""The engine reads no environment: Settings reads FINSPACE_* once (same names, same defaults) and run() passes them."""

from __future__ import annotations

import pytest

from finspace.errors import BadInput
from finspace.settings import Settings

TOKEN = "an-admin-token-of-16+"


@pytest.mark.parametrize("env, expected", [
    ({}, {"cpu_kv_cache_bytes": 256 << 20, "max_in_flight": 256, "stop_grace_s": 0.0, "distributed_backend": None,
          "hf_token": None, "secrets": ()}),
    ({"FINSPACE_MAX_IN_FLIGHT": "", "FINSPACE_STOP_GRACE_S": "", "FINSPACE_DISTRIBUTED_BACKEND": ""},
     {"max_in_flight": 256, "stop_grace_s": 0.0, "distributed_backend": None}),
    ({"FINSPACE_CPU_KV_CACHE_MIB": "72", "FINSPACE_MAX_IN_FLIGHT": "2", "FINSPACE_STOP_GRACE_S": "1.5",
      "FINSPACE_DISTRIBUTED_BACKEND": "ray"},
     {"cpu_kv_cache_bytes": 72 << 20, "max_in_flight": 2, "stop_grace_s": 1.5, "distributed_backend": "ray"}),
    ({"HF_TOKEN": "hf_abc", "FINSPACE_ADMIN_TOKEN": TOKEN},
     {"hf_token": "hf_abc", "secrets": (TOKEN, "hf_abc")}),
    ({"HUGGING_FACE_HUB_TOKEN": "hub"}, {"hf_token": "hub", "secrets": ("hub",)}),
])
def test_engine_options_come_from_the_settings(env, expected):
    options = Settings.from_env(env).engine_options()
    assert {k: options[k] for k in expected} == expected


@pytest.mark.parametrize("env, match", [
    ({"FINSPACE_CPU_KV_CACHE_MIB": "lots"}, r"FINSPACE_CPU_KV_CACHE_MIB='lots' is not a whole number"),
    ({"FINSPACE_MAX_IN_FLIGHT": "0"}, r"FINSPACE_MAX_IN_FLIGHT=0 is out of range"),
    ({"FINSPACE_STOP_GRACE_S": "-1"}, r"FINSPACE_STOP_GRACE_S=-1 is out of range"),
])
def test_a_bad_number_is_refused(env, match):
    with pytest.raises(BadInput, match=match):
        Settings.from_env(env)


def test_the_engine_module_reads_no_environment():
    from pathlib import Path

    import finspace.engine as engine_pkg

    folder = Path(engine_pkg.__file__).parent
    # allowed: the engine's socket folder, and the variables written for the engine's processes while they start
    # (process._child_env; marked "# child env"), which are vLLM's, never a finspace setting
    readers = [f"{p.name}:{i}" for p in folder.glob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
               if ("os.environ" in line or "getenv" in line) and "VLLM_RPC_BASE_PATH" not in line
               and not (p.name == "process.py" and "# child env" in line)]
    assert not readers, readers
