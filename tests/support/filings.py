"""The real filings in ``shared/filings/`` beside the repository (SOURCES.md there says where each comes from).

CI and the development machines have that folder; a clone without it skips every test that needs it, with a
message naming the folder. ``FINSPACE_SHARED_DIR`` points elsewhere (a git worktree of the repository, say).
The files are read in place, never copied into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    return Path(os.environ.get("FINSPACE_SHARED_DIR") or REPO.parent / "shared")


def filings_dir() -> Path:
    return shared_dir() / "filings"


def filing(name: str) -> Path:
    """The path of one real filing, or the test is skipped naming the folder it looked in."""
    path = filings_dir() / name
    if not path.is_file():
        pytest.skip(f"needs the real filings in {filings_dir()} ({name} is not there): see shared/filings/SOURCES.md")
    return path
