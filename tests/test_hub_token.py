"""Will it fit?'s Hub read and the Space's HF_TOKEN (issue 41, finding 7): an anonymous caller's read is made
with no token at all (public repos only) and its refusals do not tell "gated" from "no such repo"; a caller who
gave the admin token reads with the Space's token. The Hub is faked at its edge (``hf_hub_download``): there is
no network here."""

from __future__ import annotations

import json
import types

import httpx
import pytest
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from finspace.errors import FinspaceError
from finspace.service import Service
from helpers import REPO

SPACE_TOKEN, ADMIN = "hf_SPACEsecretToken0123456789", "adm-token-for-the-hub-test-1234"
CONFIG = (REPO / "configs" / "meta-llama__Llama-3.1-8B-Instruct.json").read_text()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The Hub: owner/public for anyone, owner/gated for the Space's token only, nothing else. Records each
    read's token (None would be the environment's HF_TOKEN: huggingface_hub reads it then)."""
    import huggingface_hub

    (tmp_path / "config.json").write_text(CONFIG)
    seen: list = []

    def download(repo_id, filename, revision=None, token=None, cache_dir=None):
        seen.append(token)
        response = httpx.Response(404, request=httpx.Request("GET", f"https://huggingface.co/{repo_id}"))
        if repo_id == "owner/gated" and token != SPACE_TOKEN:
            raise GatedRepoError("gated", response=response)
        if repo_id not in ("owner/public", "owner/gated"):
            raise RepositoryNotFoundError("no repo", response=response)
        if filename != "config.json":
            raise RepositoryNotFoundError("no index", response=response)
        return str(tmp_path / "config.json")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return seen


def service() -> types.SimpleNamespace:
    svc = types.SimpleNamespace(
        engine=types.SimpleNamespace(gpu=None),
        admin_token=ADMIN,
        catalog=None,
        settings=types.SimpleNamespace(hf_token=SPACE_TOKEN),
    )
    svc._is_admin_token = lambda token: Service._is_admin_token(svc, token)
    return svc


def fit(repo: str, token: str | None = None) -> dict | str:
    try:
        return Service.check_fit(service(), None, repo, "l40s", 1, caller_token=token)
    except FinspaceError as exc:
        return str(exc)


def test_an_anonymous_caller_reads_public_repos_only_and_learns_nothing_of_the_others(hub):
    assert fit("owner/public")["fits"] is not None
    gated, absent = fit("owner/gated"), fit("owner/nothing")
    assert isinstance(gated, str) and gated == absent.replace("owner/nothing", "owner/gated"), (gated, absent)
    assert "gated" in gated and "does not exist" in gated  # the one message names every reason, never which
    assert set(hub) == {False}, hub  # never the Space's token, nor the environment's (None)
    assert fit("owner/gated", token="wrong") == gated and set(hub) == {False}
    assert SPACE_TOKEN not in json.dumps([gated, absent])


def test_the_admin_token_lets_the_read_use_the_spaces_token(hub):
    out = fit("owner/gated", token=ADMIN)
    assert isinstance(out, dict) and out["fits"] is not None, out
    assert hub and set(hub) == {SPACE_TOKEN}
