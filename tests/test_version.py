"""finspace's version without `pip install` (how a Space runs it): from pyproject.toml beside the source."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import finspace

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

HIDE_DIST = """
import importlib.metadata as md
_version = md.version
def version(name):
    if name == "finspace":
        raise md.PackageNotFoundError(name)
    return _version(name)
md.version = version
import finspace
print(finspace.__version__)
"""


def _run(src: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(src)}
    r = subprocess.run([sys.executable, "-c", HIDE_DIST], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_version_from_pyproject_when_not_installed():
    assert _run(ROOT / "src") == PYPROJECT_VERSION


def test_unknown_without_pyproject_or_distribution(tmp_path):
    shutil.copytree(
        ROOT / "src" / "finspace", tmp_path / "src" / "finspace", ignore=shutil.ignore_patterns("__pycache__")
    )
    assert _run(tmp_path / "src") == "unknown"


def _missing(name):
    raise metadata.PackageNotFoundError(name)


@pytest.mark.parametrize(
    "pyproject, dist_version, expected",
    [
        ('[project]\nname = "finspace"\nversion = "9.8.7"\n', _missing, "9.8.7"),
        ('[project]\nname = "finspace"\nversion = "9.8.7"\n', lambda n: "1.0.0", "9.8.7"),  # the source's own first
        ('[project]\nname = "other"\nversion = "9.8.7"\n', lambda n: "1.0.0", "1.0.0"),
        ("not toml [", lambda n: "1.0.0", "1.0.0"),
        (None, _missing, "unknown"),
    ],
)
def test_version_sources(tmp_path, pyproject, dist_version, expected):
    path = tmp_path / "pyproject.toml"
    if pyproject is not None:
        path.write_text(pyproject)
    assert finspace.version(path, dist_version) == expected


def test_other_attributes_still_fail():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        finspace.nope  # noqa: B018
