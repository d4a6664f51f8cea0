"""The engine reads no environment: server.run reads FINSPACE_* (same names, same defaults) and passes them in."""

from __future__ import annotations

import pytest

from finspace.server import engine_options_from_env

NAMES = ("FINSPACE_CPU_KV_CACHE_MIB", "FINSPACE_MAX_IN_FLIGHT", "FINSPACE_STOP_GRACE_S", "FINSPACE_DISTRIBUTED_BACKEND",
         "HF_TOKEN", "FINSPACE_ADMIN_TOKEN", "HUGGING_FACE_HUB_TOKEN")


@pytest.mark.parametrize("env, expected", [
    ({}, {"cpu_kv_cache_bytes": 256 << 20, "max_in_flight": 256, "stop_grace_s": 0.0, "distributed_backend": None,
          "hf_token": None, "secrets": ("", "", "")}),
    ({"FINSPACE_MAX_IN_FLIGHT": "", "FINSPACE_STOP_GRACE_S": "", "FINSPACE_DISTRIBUTED_BACKEND": ""},
     {"max_in_flight": 256, "stop_grace_s": 0.0, "distributed_backend": None}),
    ({"FINSPACE_CPU_KV_CACHE_MIB": "72", "FINSPACE_MAX_IN_FLIGHT": "2", "FINSPACE_STOP_GRACE_S": "1.5",
      "FINSPACE_DISTRIBUTED_BACKEND": "ray"},
     {"cpu_kv_cache_bytes": 72 << 20, "max_in_flight": 2, "stop_grace_s": 1.5, "distributed_backend": "ray"}),
    ({"HF_TOKEN": "hf_abc", "FINSPACE_ADMIN_TOKEN": "admin", "HUGGING_FACE_HUB_TOKEN": "hub"},
     {"hf_token": "hf_abc", "secrets": ("hf_abc", "admin", "hub")}),
])
def test_engine_options_come_from_the_environment(monkeypatch, env, expected):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    options = engine_options_from_env()
    assert {k: options[k] for k in expected} == expected


def test_a_bad_number_is_refused(monkeypatch):
    monkeypatch.setenv("FINSPACE_CPU_KV_CACHE_MIB", "lots")
    with pytest.raises(ValueError, match="lots"):
        engine_options_from_env()
