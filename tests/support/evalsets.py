"""The published TAT-QA dev file for the Scoreboard's tests, from a copy on this machine (no network needed):
evalsets/ or shared/evalsets/ beside src/ (where finspace.evals.sets looks), $FINSPACE_TEST_TATQA_FILE, or the
session's bare mirror of NExTplusplus/TAT-QA. Placed in an app's data folder as the cache the loader reads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from support.catalog import REPO

NAME = "tatqa_dataset_dev.json"
CACHED = "NExTplusplus__TAT-QA__" + NAME  # finspace.evals.fetched.cached_path's name
MIRROR = Path("/work/.mirror/NExTplusplus+TAT-QA/repo")
COMMIT = "870accc41953dcde885aabeb963d94aabdc0fbc3"


def tatqa_dev(dest: Path) -> Path | None:
    """A copy of TAT-QA's dev file at ``dest`` (None when there is none on this machine)."""
    given = os.environ.get("FINSPACE_TEST_TATQA_FILE")
    candidates = ([Path(given)] if given else []) + [REPO / d / "tatqa" / NAME for d in ("evalsets", "shared/evalsets")]
    for src in candidates:
        if src.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            return dest
    if MIRROR.is_dir():
        out = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{COMMIT}:dataset_raw/{NAME}"],
                             capture_output=True, timeout=60)
        if out.returncode == 0 and out.stdout:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(out.stdout)
            return dest
    return None


def place_in(data_dir: Path) -> Path | None:
    """TAT-QA's dev file as the loader's cache in ``data_dir`` (<data>/evals/), or None."""
    return tatqa_dev(data_dir / "evals" / CACHED)
