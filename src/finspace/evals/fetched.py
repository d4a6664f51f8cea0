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
        return (f"download {self.file} from https://github.com/{self.repo} and give it in the Scoreboard tab's file "
                f"box, or place it as evalsets/<set>/{self.filename} beside src/ (docs/scoreboard.md){also}, "
                f"or run where GitHub can be reached once (it is then cached in the data folder's evals/)")


def github(repo: str, commit: str, file: str) -> Remote:
    return Remote(repo, commit, file, f"https://raw.githubusercontent.com/{repo}/{commit}/{file}")


def cached_path(remote: Remote, data_dir: str | Path) -> Path:
    return Path(data_dir) / "evals" / f"{remote.repo.replace('/', '__')}__{remote.filename}"


def fetch(remote: Remote, data_dir: str | Path, *, timeout_s: float = 10.0, env_hint: str = "") -> Path:
    """The cached copy, downloaded first when absent. DataUnavailable (naming the fix) when it can't be had;
    a partial download never takes the cached name."""
    dest = cached_path(remote, data_dir)
    if dest.is_file():
        return dest
    try:
        body = _download(remote.url, timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err.__class__.__name__
        raise DataUnavailable(f"{remote.filename} could not be fetched from GitHub ({reason}); "
                              f"{remote.fix(env_hint)}") from None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + f".part{os.getpid()}")
        part.write_bytes(body)
        os.replace(part, dest)
    except OSError as err:
        raise DataUnavailable(f"{remote.filename} was fetched but could not be cached in the data folder "
                              f"({err.strerror or err.__class__.__name__}); {remote.fix(env_hint)}") from None
    return dest


def _download(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "finspace-evals"})
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 - a fixed https URL
        body = reply.read(MAX_BYTES + 1)
    if len(body) > MAX_BYTES:
        raise ValueError(f"over {MAX_BYTES >> 20} MiB")
    return body
