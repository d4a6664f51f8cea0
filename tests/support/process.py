"""A server in its own process group, for tests and benchmarks: started, waited for, stopped by its group's id.

The server runs in the caller's session, not a new one: with the kernel's scheduler autogroups (one per
session), a process in another session than its clients was starved of CPU for whole streams while vLLM
generated (a 20 ms computation took 8 s). ``stop()`` asks the server alone to shut down (SIGTERM: it stops its
own engine, which removes its shared memory), then SIGKILLs whatever is left in its group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LIVE: list["ServerProcess"] = []
_LIVE_LOCK = threading.Lock()


class ServerProcess:
    """A server in its own process group; ``stop()`` SIGTERMs, then SIGKILLs that group by id."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict | None = None,
        cwd: Path,
        log_path: Path,
        port: int,
        ready_path: str,
        inherit_env: bool = True,
    ):
        self.name, self.port, self.ready_path = name, port, ready_path
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        full_env = {**os.environ, **(env or {})} if inherit_env else dict(env or {})
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            process_group=0,
        )
        self.pgid = self.proc.pid
        self._stopped = False
        with _LIVE_LOCK:
            _LIVE.append(self)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def wait_ready(self, timeout: float = 240.0, statuses: tuple[int, ...] = (200,)) -> float:
        """Poll ``ready_path`` until it answers one of ``statuses``; seconds waited. Raises if the server exits, or
        after ``timeout`` seconds in which its log did not grow (a server still writing is starting, however busy
        the machine: a start here took 3.5 to over 7 minutes with 8 test runs beside it), at the latest after
        3 x ``timeout``."""
        t0 = time.monotonic()
        progress, offset = t0, 0
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=5).status_code in statuses:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            now = time.monotonic()
            offset, news = self.log_news(offset)
            if news:
                progress = now
            if now - progress > timeout or now - t0 > 3 * timeout:
                raise TimeoutError(
                    f"{self.name} was not ready after {now - t0:.0f} s ({now - progress:.0f} s "
                    f"without a line in its log):\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_news(self, offset: int) -> tuple[int, bool]:
        """(the log's new end, whether it grew since ``offset`` by a line other than /health-style polls of
        ``ready_path``): a server still writing is still working."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
        except OSError:
            return offset, False
        poll = f"GET {self.ready_path} ".encode()
        return offset + len(chunk), any(line.strip() and poll not in line for line in chunk.splitlines())

    def pids(self) -> list[int]:
        """The server and its descendants (vLLM's engine core), for CPU accounting and profiling."""
        import psutil

        try:
            p = psutil.Process(self.proc.pid)
            return [p.pid] + [c.pid for c in p.children(recursive=True)]
        except psutil.Error:
            return []

    def stop(self, grace: float = 20.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            # the server alone first: it stops its own engine, which then removes its shared memory. SIGTERM to
            # the whole group reached vLLM's engine processes directly, and each run left ~400 MiB in /dev/shm
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.pgid, signal.SIGKILL)  # whatever is left in its group (the engine core)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while _group_alive(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._log.close()
        with _LIVE_LOCK:
            if self in _LIVE:
                _LIVE.remove(self)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for s in live:
        try:
            s.stop(grace=5.0)
        except Exception:  # noqa: BLE001 - cleanup must reach every server
            pass


def install_cleanup() -> None:
    """Stop every server on exit and on SIGTERM/SIGINT/SIGHUP (then exit with 128+signal)."""
    import atexit

    atexit.register(stop_all)

    def handler(signum, _frame):
        stop_all()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)
