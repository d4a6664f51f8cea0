"""Published set files, fetched on demand from their GitHub repositories and cached in the data folder.

finspace ships none of the sets' data. A set's published file is downloaded once, from a URL pinned to a
commit where the repository has one, into <data folder>/evals/; or read from a copy the user names
(``path=``, FINSPACE_FINANCEBENCH_FILE), or from evalsets/ (or shared/evalsets/) beside src/ where one was
placed. With no network the fetch fails at once (a short timeout) with a message naming these fixes.
FinanceBench is CC BY-NC 4.0 (non-commercial): fetched for the user, never redistributed.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from finspace.errors import DataUnavailable

MAX_BYTES = 64 << 20  # the largest published file used (FinQA's test.json) is about 5 MB


@dataclass(frozen=True)
class Remote:
    """Where a set's published file lives: ``repo`` and ``file`` name it for people, ``url`` for the fetch."""

    repo: str
    commit: str  # what ``url`` is pinned to ("main" where the repository's file is read at its head)
    file: str  # the path in the repository
    url: str

    @property
    def filename(self) -> str:
        return self.file.rsplit("/", 1)[-1]

    def fix(self, env_hint: str = "") -> str:
        also = f" (or set {env_hint} to it)" if env_hint else ""
        return (
            f"download {self.file} from https://github.com/{self.repo} and give it in the Scoreboard tab's file "
            f"box, or place it as evalsets/<set>/{self.filename} beside src/ (docs/scoreboard.md){also}, "
            f"or run where GitHub can be reached once (it is then cached in the data folder's evals/)"
        )


def github(repo: str, commit: str, file: str) -> Remote:
    return Remote(repo, commit, file, f"https://raw.githubusercontent.com/{repo}/{commit}/{file}")


def mirrored(remote: Remote, base_url: str | None) -> Remote:
    """``remote`` read from ``base_url`` instead of GitHub (FINSPACE_FINANCEBENCH_BASE_URL: a mirror of the
    repository's files at the pinned commit, ``<base_url>/<file>``); ``remote`` itself without one."""
    if not base_url:
        return remote
    return Remote(remote.repo, remote.commit, remote.file, f"{base_url.rstrip('/')}/{remote.file}")


def cached_path(remote: Remote, data_dir: str | Path) -> Path:
    return Path(data_dir) / "evals" / f"{remote.repo.replace('/', '__')}__{remote.filename}"


def fetch(
    remote: Remote,
    data_dir: str | Path,
    *,
    timeout_s: float = 10.0,
    env_hint: str = "",
    dest: Path | None = None,
    max_bytes: int = MAX_BYTES,
    fix: str | None = None,
) -> Path:
    """The cached copy (``dest``, default ``cached_path``), downloaded first when absent, at most ``max_bytes``.
    DataUnavailable (naming the fix: ``fix``, else the Remote's) when it can't be had; a partial download never
    takes the cached name."""
    dest = dest or cached_path(remote, data_dir)
    if dest.is_file():
        return dest
    fix = fix or remote.fix(env_hint)
    try:
        body = _download(remote.url, timeout_s, max_bytes)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err.__class__.__name__
        if isinstance(err, urllib.error.HTTPError):
            reason = f"HTTP {err.code}: not at the pinned commit" if err.code == 404 else f"HTTP {err.code}"
        failed = DataUnavailable(f"{remote.filename} could not be fetched from GitHub ({reason}); {fix}")
        failed.unreachable = isinstance(err, urllib.error.URLError) and not isinstance(err, urllib.error.HTTPError)
        raise failed from None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + f".part{os.getpid()}")
        part.write_bytes(body)
        os.replace(part, dest)
    except OSError as err:
        raise DataUnavailable(
            f"{remote.filename} was fetched but could not be cached in the data folder "
            f"({err.strerror or err.__class__.__name__}); {fix}"
        ) from None
    return dest


def _download(url: str, timeout_s: float, max_bytes: int = MAX_BYTES) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "finspace-evals"})
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 - a pinned https URL
        body = reply.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise ValueError(f"over {max_bytes / (1 << 20):g} MiB")
    return body
