"""Shared test helpers: damaged copies of checkpoints; catalogues come from support.catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.catalog import REPO, demo_entry, write_catalog  # noqa: F401 - the tests' names for them


def corrupt_copy(src: Path, dst: Path) -> Path:
    """A copy of a checkpoint whose safetensors file is truncated halfway."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    weights = next(dst.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return dst


def mismatched_copy(src: Path, dst: Path) -> Path:
    """A copy whose config no longer matches its weights: passes every file check, fails in vLLM's loader."""
    import json

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["intermediate_size"] = cfg["intermediate_size"] * 2
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst
