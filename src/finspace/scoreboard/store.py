"""Scoreboard results on disk: one JSON file per run in ``<data folder>/scores/``, beside the load ledger.

Each file says what it scored: the model (key, repo, revision, quantization, dtype, max_model_len, the load's
record id), the set and its version, the prompt format, n, the score, refusals, errors, tokens/s, the date, and
every item's id, answer, extracted value and marks. Files are written atomically (a temporary file renamed into
place), answers are cut to a bound, and the folder keeps at most ``max_results`` files (the oldest go first).
Reading skips a file that is not a result (corrupt, cut short, edited) with a note naming it: the board
never breaks on one bad file. Summaries are cached per file (its size and mtime), so the board reads each once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("finspace.scoreboard")

FOLDER = "scores"
SCHEMA = 1
MAX_FILE_BYTES = 8 << 20  # a file over this is not read (a result of 500 items of 2,000 characters is ~1.5 MiB)
# What the board shows of each result, and what a stored file must carry to be one.
SUMMARY_FIELDS = (
    "file",
    "model_key",
    "model_label",
    "repo",
    "revision",
    "quantization",
    "dtype",
    "max_model_len",
    "load_id",
    "set",
    "set_version",
    "prompt_format",
    "n",
    "total",
    "score",
    "f1",
    "refusals",
    "errors",
    "tokens_per_s",
    "date",
    "partial",
)
REQUIRED = {"model_key": str, "set": str, "n": int, "score": (int, float), "date": str, "items": list}
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*\.json")


def slug(text: Any) -> str:
    return _SAFE.sub("_", str(text))[:60].strip("._") or "x"


def file_name(result: dict) -> str:
    """``<UTC timestamp>-<model>-<set>.json``: sorted by name is sorted by date."""
    at = result.get("at") or time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(at))
    return f"{stamp}.{int(at % 1 * 1000):03d}Z-{slug(result.get('model_key'))}-{slug(result.get('set'))}.json"


def problem(data: Any) -> str | None:
    """Why ``data`` is not a stored result (None: it is one)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for name, kind in REQUIRED.items():
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, kind):
            return f"{name!r} is missing or not a {getattr(kind, '__name__', 'number')}"
    if not (isinstance(data["score"], (int, float)) and math.isfinite(data["score"]) and 0 <= data["score"] <= 1):
        return "'score' is not in [0, 1]"
    return None


class ScoreStore:
    """The results folder. Thread-safe; call it from a worker thread (file I/O)."""

    def __init__(self, folder: Path | str, max_results: int = 200):
        self.folder = Path(folder)
        self.max_results = max(1, int(max_results))
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int], dict | str]] = {}
        self.writes = 0  # results written by this process (the board's cue to read again)

    def write(self, result: dict) -> Path:
        """Store ``result`` atomically; the oldest files past ``max_results`` are removed. Returns its path."""
        text = json.dumps(result, ensure_ascii=False, allow_nan=False, indent=1)
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / file_name(result)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self._prune()
            self.writes += 1
        return path

    def _files(self) -> list[Path]:
        try:
            return sorted(p for p in self.folder.glob("*.json") if p.is_file() and not p.name.startswith("."))
        except OSError:
            return []

    def _prune(self) -> None:
        files = self._files()
        for old in files[: max(0, len(files) - self.max_results)]:
            with contextlib.suppress(OSError):
                old.unlink()
            self._cache.pop(old.name, None)

    def _read_one(self, path: Path) -> dict | str:
        """The file's summary, or why it was skipped."""
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
            cached = self._cache.get(path.name)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            if st.st_size > MAX_FILE_BYTES:
                out: dict | str = f"{path.name}: skipped, {st.st_size:,} bytes is over the {MAX_FILE_BYTES:,} bound"
            else:
                out = self._summary(path)
        except OSError as exc:
            return f"{path.name}: skipped, cannot be read ({type(exc).__name__})"
        self._cache[path.name] = (stamp, out)
        return out

    @staticmethod
    def _summary(path: Path) -> dict | str:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return f"{path.name}: skipped, not valid JSON ({type(exc).__name__}); remove or restore the file"
        why = problem(data)
        if why is not None:
            return f"{path.name}: skipped, not a scoreboard result ({why}); remove or restore the file"
        out = {k: data.get(k) for k in SUMMARY_FIELDS}
        out["file"] = path.name
        return out

    def results(self) -> tuple[list[dict], list[str]]:
        """Every stored result's summary (oldest first) and a note for each file skipped."""
        with self._lock:
            found, notes = [], []
            files = self._files()
            for name in set(self._cache) - {p.name for p in files}:
                self._cache.pop(name, None)
            for path in files:
                one = self._read_one(path)
                (found if isinstance(one, dict) else notes).append(one)
        for note in notes:
            log.warning("scoreboard: %s", note)
        return found, notes

    def load(self, name: str) -> dict:
        """One stored result in full, by its file name (as the board lists it)."""
        from finspace.errors import BadInput

        if not isinstance(name, str) or len(name) > 200 or not _NAME.fullmatch(name):
            raise BadInput("give a result's file name as /scores lists it (e.g. 20261201T120000.000Z-demo-finqa.json)")
        path = self.folder / name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInput(f"no stored result named {name}; /scores lists them") from None
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise BadInput(f"the stored result {name} cannot be read ({type(exc).__name__}); remove it") from None
        if problem(data) is not None:
            raise BadInput(f"the stored result {name} is not a scoreboard result ({problem(data)}); remove it")
        return data
