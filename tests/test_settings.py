"""finspace.settings: every variable read once, each bad value refused with its fix, secrets redacted."""

from __future__ import annotations

import pytest

from finspace.errors import BadInput
from finspace.errors import hide_paths, redact
from finspace.settings import Settings

TOKEN = "a-good-admin-token-0123"


@pytest.mark.parametrize(
    "env, match",
    [
        ({"PORT": "http"}, r"PORT='http' is not a whole number; use 1 to 65535"),
        ({"PORT": "70000"}, r"PORT=70000 is out of range"),
        ({"FINSPACE_ADMIN_TOKEN": "short"}, r"has 5 characters; it needs 16 to 256"),
        ({"FINSPACE_ADMIN_TOKEN": "x" * 257}, r"has 257 characters"),
        ({"FINSPACE_ADMIN_TOKEN": " " + TOKEN}, r"spaces at its ends"),
        ({"FINSPACE_ADMIN_TOKEN": TOKEN + "\n"}, r"spaces at its ends"),
        ({"FINSPACE_OPEN_SWITCHING": "maybe"}, r"FINSPACE_OPEN_SWITCHING='maybe' is not a yes/no value"),
        ({"FINSPACE_FRONT_NICE": "ten"}, r"FINSPACE_FRONT_NICE='ten' is not a whole number; use 0 \(off\) to 19"),
        ({"FINSPACE_MAX_EVENTS_PER_CLIENT": "0"}, r"out of range; use 1 to"),
        ({"FINSPACE_STREAM_OPEN_S": "0.1"}, r"out of range; use 0.5 to 600"),
        ({"FINSPACE_HEADER_TIMEOUT_S": "soon"}, r"is not a number"),
        ({"FINSPACE_LEDGER_MAX_MIB": "-1"}, r"out of range"),
        ({"FINSPACE_STREAM_INTERVAL_MS": "0"}, r"out of range"),
    ],
)
def test_bad_values_are_refused_naming_the_variable_and_the_fix(env, match):
    with pytest.raises(BadInput, match=match):
        Settings.from_env(env)


def test_a_refused_token_is_never_repeated():
    with pytest.raises(BadInput) as info:
        Settings.from_env({"FINSPACE_ADMIN_TOKEN": "hunter2-pw"})
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    "env, switching",
    [
        ({}, "open"),  # your own machine: as before
        ({"SPACE_ID": "me/finspace"}, "off"),  # a public Space with no token: off
        ({"SPACE_ID": "me/finspace", "FINSPACE_OPEN_SWITCHING": "1"}, "open"),  # opened deliberately
        ({"SPACE_ID": "me/finspace", "FINSPACE_ADMIN_TOKEN": TOKEN}, "token"),
        ({"FINSPACE_ADMIN_TOKEN": TOKEN, "FINSPACE_OPEN_SWITCHING": "1"}, "token"),  # a token always wins
    ],
)
def test_who_may_switch(env, switching):
    assert Settings.from_env(env).switching == switching


def test_defaults_and_derived_values():
    s = Settings.from_env({})
    assert (s.host, s.port, s.admin_token, s.api_docs, s.front_nice) == ("0.0.0.0", 7860, None, False, 10)
    assert s.limits.events_per_client == 16 and s.limits.trust_proxy is False
    assert s.ledger_max_bytes == 4 << 20 and s.stream_interval_s == 0.05
    assert Settings.from_env({"SPACE_ID": "me/x"}).limits.trust_proxy is True  # behind the Space's proxy
    assert Settings.from_env({}).limits.trusted_proxies == () and Settings.from_env({}).limits.body_timeout_s == 60
    env = {"SPACE_ID": "me/x", "FINSPACE_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1", "FINSPACE_BODY_TIMEOUT_S": "5"}
    assert Settings.from_env(env).limits.trusted_proxies == ("10.0.0.0/8", "127.0.0.1")  # an explicit list wins
    assert Settings.from_env(env).limits.body_timeout_s == 5
    assert Settings.from_env({"FINSPACE_TRUST_PROXY": "1"}).limits.trusted_proxies == ("*",)
    with pytest.raises(BadInput, match="FINSPACE_TRUSTED_PROXIES: 'proxy.local' is not an address"):
        Settings.from_env({"FINSPACE_TRUSTED_PROXIES": "proxy.local"})
    s = Settings.from_env({"FINSPACE_ADMIN_TOKEN": TOKEN, "HF_TOKEN": "hf_abcdefgh"})
    assert s.secrets == (TOKEN, "hf_abcdefgh") and TOKEN not in repr(s) and "hf_abc" not in repr(s)


@pytest.mark.parametrize(
    "text, secrets, shown",
    [
        ("token abc123 and hf_xyz", ("abc123", "hf_xyz"), "token *** and ***"),
        ("ab", ("ab",), "***"),  # any length is redacted (no 4-character floor)
        ("outer-secret-inner", ("secret", "outer-secret-inner"), "***"),  # longest first
        ("failed: /home/user/app/data/loads.jsonl is locked", (), "failed: …/loads.jsonl is locked"),
        (
            "see https://huggingface.co/org/repo or GET /health",
            (),
            "see https://huggingface.co/org/repo or GET /health",
        ),
        (None, ("x",), None),
    ],
)
def test_redact(text, secrets, shown):
    assert redact(text, secrets) == shown


def test_hide_paths_keeps_relative_paths_and_routes():
    assert hide_paths("org/repo and ./data/x and /load-model") == "org/repo and ./data/x and /load-model"


@pytest.mark.parametrize(
    "raw, match",
    [
        ("short-key", r"FINSPACE_API_KEYS: key 1 has 9 characters; each key needs 16 to 256"),
        (f"{TOKEN},tiny", r"key 2 has 4 characters"),
        (f"{TOKEN},has space in it-0123456", r"key 2 has spaces"),
        (" , ", r"holds no key"),
    ],
)
def test_api_keys_are_refused_naming_the_rule_never_the_key(raw, match):
    with pytest.raises(BadInput, match=match) as info:
        Settings.from_env({"FINSPACE_API_KEYS": raw})
    assert "short-key" not in str(info.value) and "tiny" not in str(info.value)


def test_api_keys_are_secrets():
    other = "second-api-key-abcdefgh"
    s = Settings.from_env({"FINSPACE_API_KEYS": f" {TOKEN} ,{other}"})
    assert s.api_keys == (TOKEN, other) and set(s.secrets) == {TOKEN, other}
    assert TOKEN not in repr(s) and redact(f"key {other} sent", s.secrets) == "key *** sent"
    assert Settings.from_env({}).api_keys == ()
