"""Who may switch the model on a public Space, and what a wrong token costs (issue 16, findings 11 and 13).

Each server here is the real app (`python app.py`) whose default model the planner
refuses ("big": 65,536 tokens of context on a 72 MiB CPU KV space), so no vLLM
engine starts and each costs a few seconds: the access rules are checked before
any model is looked at, so a refused key still shows which rule answered.

- 13: on a Space (SPACE_ID set) with no FINSPACE_ADMIN_TOKEN, switching is off (403,
  naming both ways to turn it on); FINSPACE_OPEN_SWITCHING=1 opens it deliberately.
- 11: wrong admin tokens are throttled per address (429 with Retry-After, the right
  token too, for that address only); a token of any length is answered at once; an
  admin token under 16 characters stops the app at start, naming the rule.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

from helpers import REPO, demo_entry, write_catalog
from rel_utils import TALLY, GradioRaw, assert_clean
from server_utils import Server

pytestmark = [pytest.mark.timeout(300)]

TOKEN = "adm-POLICY-token-7b2f01"


def policy_server(root, model_dir, *, admin_token=None, env=None) -> Server:
    root.mkdir(parents=True, exist_ok=True)
    models = {
        "big": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Too big", max_model_len=65536),
        "a": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama"),
    }
    catalog = write_catalog(root / "catalog", models, default="big")
    srv = Server(
        root,
        catalog,
        admin_token=admin_token,
        env={"FINSPACE_CPU_KV_CACHE_MIB": "72", "FINSPACE_MODEL": "big", **(env or {})},
    )
    try:
        srv.wait(ready=False, timeout=120)
        body = srv.health()
        assert body["status"] != "ready" and "big" not in str(body.get("model")), body
    except BaseException:
        srv.stop()
        raise
    return srv


def load(srv: Server, token: str | None, *, model: str = "big", local: str = "127.0.0.1") -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=local)) as http:
        r = http.post(srv.url + "/load-model", json={"model": model}, headers=headers)
    TALLY.response(r.status_code, r.text)
    TALLY.add(inputs=1)
    assert_clean(r.text, TOKEN)
    return r


def test_a_space_without_an_admin_token_does_not_switch_unless_opened(tmp_path, model_dir):
    srv = policy_server(tmp_path / "off", model_dir, env={"SPACE_ID": "someone/finspace"})
    try:
        assert srv.health()["switching"] == "off"
        r = load(srv, None)
        assert r.status_code == 403, r.text
        assert "FINSPACE_ADMIN_TOKEN" in r.json()["error"] and "FINSPACE_OPEN_SWITCHING=1" in r.json()["error"]
        assert load(srv, "anything-at-all-here").status_code == 403
        with GradioRaw(srv.url, timeout=30) as g:
            fns = {
                d["api_name"]: d["id"]
                for d in httpx.get(srv.url + "/config").json()["dependencies"]
                if d.get("api_name")
            }
            out = g.call(fns["load_model"], ["a", None])
        assert out.success is False and "switching models is off" in out.error, out.text
        assert "switching models is off" in srv.log_path.read_text()
    finally:
        srv.stop()
    srv = policy_server(
        tmp_path / "open", model_dir, env={"SPACE_ID": "someone/finspace", "FINSPACE_OPEN_SWITCHING": "1"}
    )
    try:
        assert srv.health()["switching"] == "open"
        r = load(srv, None)
        assert r.status_code == 400, r.text  # past the access rule: the planner's refusal of "big"
    finally:
        srv.stop()


def test_wrong_tokens_are_throttled_per_address(tmp_path, model_dir):
    srv = policy_server(tmp_path / "token", model_dir, admin_token=TOKEN, env={"FINSPACE_TOKEN_FAILURES": "5"})
    try:
        assert srv.health()["switching"] == "token"
        for i in range(5):
            r = load(srv, f"wrong-{i}", local="127.0.0.3")
            assert r.status_code == 401, r.text
        t0 = time.monotonic()
        r = load(srv, "wrong-5", local="127.0.0.3")
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text
        assert "too many wrong admin tokens" in r.json()["error"]
        assert load(srv, TOKEN, local="127.0.0.3").status_code == 429  # even the right one, from there
        assert time.monotonic() - t0 < 2
        # another address is not affected: its right token passes, and the planner answers
        r = load(srv, TOKEN, local="127.0.0.1")
        assert r.status_code == 400, r.text
        # any length answers at once (and counts as wrong)
        t0 = time.monotonic()
        r = load(srv, "x" * 60_000, local="127.0.0.4")
        assert r.status_code in (401, 431) and time.monotonic() - t0 < 2, r.status_code
        # the Gradio API's /load_model counts towards the same throttle
        with GradioRaw(srv.url, timeout=30) as g:
            g.http = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.5"))
            fns = {
                d["api_name"]: d["id"]
                for d in g.http.get(srv.url + "/config").json()["dependencies"]
                if d.get("api_name")
            }
            errors = [g.call(fns["load_model"], ["a", f"nope-{i}"]).error for i in range(6)]
        assert all("admin token is wrong" in e for e in errors[:5]), errors
        assert "too many wrong admin tokens" in errors[5], errors
        log = srv.log_path.read_text()
        assert TOKEN not in log
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "token, phrase",
    [
        ("abc", "needs 16 to 256"),
        ("fifteen-chars-x", "needs 16 to 256"),
        ("x" * 257, "needs 16 to 256"),
        (" padded-token-with-spaces ", "spaces at its ends"),
    ],
)
def test_a_weak_admin_token_stops_the_app_at_start(tmp_path, token, phrase):
    env = {**os.environ, "FINSPACE_ADMIN_TOKEN": token, "PORT": "1"}
    p = subprocess.run(
        [sys.executable, str(REPO / "app.py")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    TALLY.add(inputs=1)
    assert p.returncode == 2, (p.returncode, p.stderr[-500:])
    assert phrase in p.stderr and "secrets.token_urlsafe" in p.stderr, p.stderr[-500:]
    assert token.strip() not in p.stderr  # the message never repeats the secret
