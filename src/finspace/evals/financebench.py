"""FinanceBench's open set, fetched on demand and cached in the data folder; never shipped with finspace.

FinanceBench (patronus-ai/financebench) is CC BY-NC 4.0: non-commercial. finspace does not redistribute it;
a run downloads the published JSONL from GitHub once into <data folder>/evals/ (or reads a copy the user
names with FINSPACE_FINANCEBENCH_FILE / path=). With no network it fails at once with the fix.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from finspace.errors import DataUnavailable

FILENAME = "financebench_open_source.jsonl"
URL = "https://raw.githubusercontent.com/patronus-ai/financebench/main/data/" + FILENAME
SOURCE = "patronus-ai/financebench data/" + FILENAME
LICENSE = "CC BY-NC 4.0 (non-commercial; fetched on demand, not redistributed)"
MAX_BYTES = 32 << 20  # the published file is about 1 MB
FIX = (f"download {FILENAME} from https://github.com/patronus-ai/financebench (data/) and set "
       f"FINSPACE_FINANCEBENCH_FILE to it (or pass its path), or run where GitHub can be reached")


def cached_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / "evals" / FILENAME


def fetch(data_dir: str | Path, *, url: str = URL, timeout_s: float = 10.0) -> Path:
    """The cached copy, downloaded first when absent. DataUnavailable (naming the fix) when it can't be had;
    a partial download never takes the cached name."""
    dest = cached_path(data_dir)
    if dest.is_file():
        return dest
    try:
        body = _download(url, timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err.__class__.__name__
        raise DataUnavailable(f"FinanceBench could not be fetched ({reason}); {FIX}") from None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + f".part{os.getpid()}")
        part.write_bytes(body)
        os.replace(part, dest)
    except OSError as err:
        raise DataUnavailable(f"FinanceBench was fetched but could not be cached in the data folder "
                              f"({err.strerror or err.__class__.__name__}); {FIX}") from None
    return dest


def _download(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "finspace-evals"})
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 - a fixed https URL
        body = reply.read(MAX_BYTES + 1)
    if len(body) > MAX_BYTES:
        raise ValueError(f"over {MAX_BYTES >> 20} MiB")
    return body
