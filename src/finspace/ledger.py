"""The load ledger: one JSON line per load attempt, the plan beside what vLLM did.

The engine hands every load attempt to ``Ledger.append`` (its ``on_load``
callback). Each line holds when, which model and revision, the hardware, the
engine settings, the planner's prediction and what vLLM actually did (KV blocks,
block size, the tokens that fit, time per stage, memory in use), or, for a
failure, the stage, the exception type and vLLM's message. ``kv_tokens_error_pct``
is the planner's error on the KV tokens: ``(planned - actual) / actual * 100``,
both counted as the engine counts them (KV blocks x block size; see
``_planned_pool_tokens``).

Writes are atomic per line: one ``os.write`` of the whole line on an
``O_APPEND`` descriptor (the kernel appends it in one piece, so processes never
interleave), under a process-local lock for threads and an advisory ``flock``
between processes (closing the descriptor releases it). Reading skips a corrupt or
truncated line with a warning; the ledger never stops a load or the app.

``status_for`` turns the ledger into the model picker's feedback: verified on
this GPU (with the measured KV tokens and context), or the reason it failed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from finspace.errors import FinspaceError
from finspace.ledger_line import failure_reason, int_or_none, normalize, record_id, settings_of

log = logging.getLogger("finspace.ledger")

FILENAME = "loads.jsonl"
DEFAULT_MAX_BYTES = 4 << 20  # FINSPACE_LEDGER_MAX_MIB; a record is 1-3 KB: over a thousand loads
SPACE_DATA_DIR = Path("/data")  # a Space's persistent storage, when attached

# Failures before vLLM was configured (planner refusal, download) say nothing about the hardware.
_NO_VLLM_STAGES = ("plan", "fetch")

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class LedgerError(FinspaceError):
    """The ledger file cannot be read (permissions, a folder in its place)."""

    http_status = 500


def default_data_dir() -> Path:
    """$FINSPACE_DATA_DIR, else /data on a Space with persistent storage, else ./data."""
    env = os.environ.get("FINSPACE_DATA_DIR", "").strip()
    if env:
        return Path(env).expanduser()
    if SPACE_DATA_DIR.is_dir() and os.access(SPACE_DATA_DIR, os.W_OK | os.X_OK):
        return SPACE_DATA_DIR
    return Path.cwd() / "data"


@dataclass(frozen=True)
class LedgerStatus:
    """What the ledger says about one model on one GPU: the picker's badge."""

    verified: bool  # a load succeeded on this GPU
    kv_cache_tokens: int | None  # measured (verified) or None
    max_model_len: int | None  # the context vLLM started with (verified) or the one that failed
    reason: str | None  # why it failed (not verified); None when verified
    at: float  # when that load ran (epoch seconds)

    def as_dict(self) -> dict:
        return asdict(self)


def _lock_for(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.Lock()
        return lock


def _gpu_key(record: dict) -> str | None:
    hw = record.get("hardware")
    return hw.get("gpu_key") if isinstance(hw, dict) else None


class Ledger:
    """The JSON Lines file of load records (``<data dir>/loads.jsonl``), capped at ``max_bytes``.

    When a line would take the file past the cap, the file becomes ``loads.jsonl.1`` (replacing the one before)
    and a new one starts: the ledger holds between one and two caps of the newest records, never more. Reading
    the last N records reads from the end of the file, not the whole of it.
    """

    def __init__(self, path: Path | str | None = None, max_bytes: int = DEFAULT_MAX_BYTES):
        self.path = Path(path) if path is not None else default_data_dir() / FILENAME
        self.max_bytes = max(4096, int(max_bytes))
        self._lock = _lock_for(self.path)

    @property
    def rotated_path(self) -> Path:
        return self.path.with_name(self.path.name + ".1")

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # ----------------------------------------------------------------- write
    def __call__(self, record: Any) -> dict:
        """So a ledger can be passed as the engine's ``on_load`` directly."""
        return self.append(record)

    def append(self, record: Any) -> dict:
        """Write one record as one line; returns the dict written. Never raises on I/O trouble."""
        try:
            data = normalize(record)
        except Exception:
            log.exception("a load record could not be read; it is not in the ledger")
            return {}
        try:
            line = (json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()
        except (TypeError, ValueError) as exc:  # pragma: no cover - normalize keeps it JSON-able
            log.error("load record for %s could not be serialised: %s", data.get("model_key"), exc)
            return data
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    # Writers take turns (best effort: some network filesystems have no locks) so the
                    # check below never sees another writer's line half-copied.
                    with contextlib.suppress(OSError):
                        fcntl.flock(fd, fcntl.LOCK_EX)
                    size = os.fstat(fd).st_size
                    if size and size + len(line) > self.max_bytes:
                        os.replace(self.path, self.rotated_path)  # under the lock: writers take turns
                        os.close(fd)
                        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                        with contextlib.suppress(OSError):
                            fcntl.flock(fd, fcntl.LOCK_EX)
                        size = 0
                    # A line cut short by a crash would swallow this one: start on a fresh line.
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        line = b"\n" + line
                    written = os.write(fd, line)
                finally:
                    os.close(fd)
                if written != len(line):
                    log.error(
                        "load ledger %s: only %d of %d bytes written (disk full?); the line is cut short",
                        self.path,
                        written,
                        len(line),
                    )
            except OSError as exc:
                log.error("cannot append to the load ledger %s: %s; the load itself is unaffected", self.path, exc)
        return data

    # ------------------------------------------------------------------ read
    def records(self, limit: int | None = None) -> list[dict]:
        """The records, oldest first (newest last); the last ``limit`` when given. Bad lines are skipped."""
        if limit is not None and limit <= 0:
            return []
        out = self._parse(self.path, self._read(self.path, limit))
        if limit is None or len(out) < limit:
            older = self._parse(
                self.rotated_path, self._read(self.rotated_path, None if limit is None else limit - len(out))
            )
            out = older + out
        return out[-limit:] if limit else out

    def _read(self, path: Path, limit: int | None) -> bytes:
        """The whole file, or (with ``limit``) enough of its end to hold the last ``limit`` lines."""
        try:
            with open(path, "rb") as f:
                with contextlib.suppress(OSError):
                    fcntl.flock(f.fileno(), fcntl.LOCK_SH)  # not mid-way through a writer's line
                if limit is None:
                    return f.read()
                end = f.seek(0, os.SEEK_END)
                pos, data = end, b""
                while pos > 0 and data.count(b"\n") <= limit:
                    step = min(pos, 64 << 10)
                    pos -= step
                    f.seek(pos)
                    data = f.read(step) + data
                if pos > 0:  # the first line may be cut: start after the first newline
                    data = data[data.index(b"\n") + 1 :]
                return data
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise LedgerError(
                f"cannot read the load ledger {path}: {exc.strerror or exc}; "
                f"check FINSPACE_DATA_DIR and the folder's permissions"
            ) from None

    def _parse(self, path: Path, raw: bytes) -> list[dict]:
        lines = raw.split(b"\n")
        last = len(lines) - 1
        out: list[dict] = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise ValueError(f"a JSON {type(rec).__name__}, not an object")
            except (ValueError, UnicodeDecodeError) as exc:
                what = "truncated last line" if i == last else "corrupt line"
                log.warning("load ledger %s: skipping %s %d (%s)", path, what, i + 1, str(exc)[:120])
                continue
            out.append(rec)
        return out

    def last_load_id(self, model_key: str) -> str | None:
        """The id of the newest successful load of ``model_key`` among the last 50 records (None when there is
        none, or the ledger cannot be read: a record without the id beats none)."""
        try:
            for rec in reversed(self.records(50)):
                if rec.get("model_key") == model_key and rec.get("outcome") == "ok":
                    return record_id(rec.get("id"), rec.get("at"), model_key)
        except LedgerError as exc:
            log.error("reading the load ledger for a load's id failed: %s", exc)
        return None

    # -------------------------------------------------------------- feedback
    def status_for(self, model_key: str, gpu_key: str, settings: dict | None = None) -> LedgerStatus | None:
        """The latest relevant record for ``model_key`` on ``gpu_key``, as the picker's badge.

        A successful load (any settings) -> verified, with the measured KV tokens and
        the context vLLM started with. A failure -> its reason, when ``settings`` is
        None or equals the settings it failed with (engine kwargs; "model" and
        "tokenizer" are ignored). Failures before vLLM was configured (the planner's
        refusal, a download) are not hardware evidence and are skipped. None when
        no record applies: the planner's prediction stays the default.
        """
        return self._status(self.records(), model_key, gpu_key, settings)

    def statuses(self, gpu_key: str) -> dict[str, LedgerStatus]:
        """``status_for`` of every model with a record on ``gpu_key``, reading the file once."""
        recs = self.records()
        keys = {r.get("model_key") for r in recs if _gpu_key(r) == gpu_key and isinstance(r.get("model_key"), str)}
        out = {}
        for key in sorted(keys):
            st = self._status(recs, key, gpu_key, None)
            if st is not None:
                out[key] = st
        return out

    @staticmethod
    def _status(recs: list[dict], model_key: str, gpu_key: str, settings: dict | None) -> LedgerStatus | None:
        wanted = settings_of(settings) if settings is not None else None
        for rec in reversed(recs):
            if rec.get("model_key") != model_key or _gpu_key(rec) != gpu_key:
                continue
            at = rec.get("at") if isinstance(rec.get("at"), (int, float)) else 0.0
            if rec.get("outcome") == "ok":
                max_len = int_or_none(rec.get("max_model_len"))
                if max_len is None and isinstance(rec.get("settings"), dict):
                    max_len = int_or_none(rec["settings"].get("max_model_len"))
                return LedgerStatus(True, int_or_none(rec.get("kv_cache_tokens")), max_len, None, float(at))
            if rec.get("error_stage") in _NO_VLLM_STAGES or not rec.get("settings"):
                continue
            if wanted is not None and settings_of(rec.get("settings")) != wanted:
                continue
            return LedgerStatus(
                False, None, int_or_none(rec["settings"].get("max_model_len")), failure_reason(rec), float(at)
            )
        return None
