"""A Hub repo id to what the planner needs: config.json and the checkpoint's exact weight bytes.

``read_repo("OWNER/NAME")`` downloads (or reads from the hub cache) ``config.json``
and ``model.safetensors.index.json`` with ``huggingface_hub.hf_hub_download``:
``HF_TOKEN`` opens gated repos, ``HF_HUB_CACHE`` / ``HF_HOME`` choose the cache
and ``HF_HUB_OFFLINE=1`` reads it without the network. An anonymous caller's read (``token=False``) uses a cache
of its own (``anonymous_cache``): huggingface_hub answers from its cache whenever the Hub refuses or cannot be
reached, so a gated or private repo the Space once read with its token would be read from the Space's cache
for anyone (issue 41). The index's
``metadata.total_size`` is the exact byte count of the weights; a
single-file checkpoint has no index, and the planner counts from the config.

Every failure is a ``HubError`` that says what happened and points to
``--config`` (plan a config.json saved by hand). The planner itself stays pure:
this module is the command layer's.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from finspace.errors import FinspaceError

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
INDEX_FILE = "model.safetensors.index.json"


class HubError(FinspaceError):
    """The Hub (or its cache) could not give a repo's config.json."""

    http_status = 502


@dataclass(frozen=True)
class RepoModel:
    repo_id: str
    config: dict
    total_size_bytes: int | None  # the safetensors index's metadata.total_size; None without an index


def _fallback(repo_id: str) -> str:
    return (
        f"plan its config.json instead (https://huggingface.co/{repo_id}/blob/main/config.json): paste it as "
        f"config_json (MCP, the Gradio API's /fit, the Will it fit? tab) or run `python -m finspace fit --config "
        f"config.json` (add --total-size-bytes N from {INDEX_FILE}'s metadata.total_size for exact weights); "
        f"a catalogue model is planned offline by its key (qwen-3-8b-fin)"
    )


def check_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise HubError(f"{repo_id!r} is not a Hub repo id; give OWNER/NAME, e.g. Qwen/Qwen3-30B-A3B")
    return repo_id


def anonymous_cache() -> str:
    """The hub cache of anonymous callers' reads, beside the Space's own (``<HF_HUB_CACHE>-anonymous``): only what
    was read without a token lands there, so only that is read from it."""
    from huggingface_hub import constants

    return os.path.normpath(constants.HF_HUB_CACHE) + "-anonymous"


def _download(repo_id: str, filename: str, revision: str | None, token: str | bool | None) -> str:
    """The local path of one file of the repo, or HubError (None-able errors are the caller's). ``token``: None
    reads HF_TOKEN from the environment (the command line's user), False reads without any token, and never from
    the cache of reads made with one."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    anonymous = (GatedRepoError, RepositoryNotFoundError) if token is False else ()  # nothing to catch else
    try:
        if token is False:
            return hf_hub_download(repo_id, filename, revision=revision, token=False, cache_dir=anonymous_cache())
        return hf_hub_download(repo_id, filename, revision=revision, token=token)
    except anonymous:  # an anonymous caller (False):
        # one answer for gated, private and absent, so the refusal tells nothing of the owner's repos
        raise HubError(
            f"no public Hub repo {repo_id} that this app may read for you (it does not exist, or it "
            f"is private or gated); or {_fallback(repo_id)}"
        ) from None
    except GatedRepoError:
        raise HubError(
            f"{repo_id} is gated: accept its licence on huggingface.co and set HF_TOKEN to a token "
            f"that may read it; or {_fallback(repo_id)}"
        ) from None
    except RepositoryNotFoundError:
        raise HubError(f"no Hub repo {repo_id} (or it is private: set HF_TOKEN); or {_fallback(repo_id)}") from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id} has no revision {revision!r}; or {_fallback(repo_id)}") from None
    except LocalEntryNotFoundError:
        raise HubError(
            f"the Hugging Face Hub is unreachable and {repo_id}'s {filename} is not in the hub cache "
            f"(offline); {_fallback(repo_id)}"
        ) from None


def read_repo(repo_id: str, *, revision: str | None = None, token: str | bool | None = None) -> RepoModel:
    """config.json and the safetensors index's total_size of ``repo_id`` (HubError when it cannot)."""
    from huggingface_hub.errors import EntryNotFoundError

    check_repo_id(repo_id)
    try:
        config_path = _download(repo_id, "config.json", revision, token)
    except EntryNotFoundError:
        raise HubError(f"{repo_id} has no config.json (not a Transformers model?); {_fallback(repo_id)}") from None
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise HubError(f"{repo_id}'s config.json is not JSON ({exc}); {_fallback(repo_id)}") from None
    total = None
    try:
        with open(_download(repo_id, INDEX_FILE, revision, token), encoding="utf-8") as f:
            total = json.load(f).get("metadata", {}).get("total_size")
    except (EntryNotFoundError, HubError, OSError, ValueError, AttributeError):
        total = None  # single-file checkpoint (or no index in the cache): count from the config
    if isinstance(total, bool) or not isinstance(total, int) or total <= 0:
        total = None
    return RepoModel(repo_id, config, total)
