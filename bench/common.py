"""Shared pieces of the serving benchmark: the model and catalogue, server processes, statistics.

Nothing here starts anything on import. ``ServerProcess`` runs a server in its
own session (process group) and stops it by that group's id, whatever happens:
``stop()`` is idempotent and every instance is also stopped by ``stop_all()``,
which bench/serving.py wires to atexit and to SIGTERM/SIGINT/SIGHUP.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

MODEL_KEY = "demo"

# Eight finance questions; request i of a run asks PROMPTS[i % 8] numbered i, so no two requests in a run share
# a whole prompt (each one is prefilled) while all three servers get exactly the same list.
PROMPTS = [
    "Summarise the company's free cash flow trend and what drives it.",
    "What does a widening credit spread tell us about default risk?",
    "Explain duration and convexity for a bond portfolio manager.",
    "How would you value a bank with a dividend discount model?",
    "Walk me through net debt to EBITDA and when it misleads.",
    "Why might operating margin narrow while revenue grows twelve percent?",
    "Compare a discounted cash flow valuation with trading multiples.",
    "What happens to bond prices when the central bank raises rates?",
]


def prompt_for(run: str, i: int) -> str:
    return f"Question {run}-{i}: {PROMPTS[i % len(PROMPTS)]}"


# ------------------------------------------------------------------ model and catalogue
def demo_catalog_entry() -> dict:
    """The repo catalogue's `demo` entry (bench-llama), as written in models.yaml."""
    doc = yaml.safe_load((ROOT / "models.yaml").read_text())
    return dict(doc["models"][MODEL_KEY])


def prepare_model(workdir: Path, model_dir: Path | None = None) -> tuple[Path, Path, dict]:
    """Generate (or reuse) the demo checkpoint; write a one-entry models.yaml for the app.

    Returns (model path, catalogue path, entry).
    """
    sys.path.insert(0, str(ROOT / "src"))
    from finspace.demo import ensure_demo_model

    entry = demo_catalog_entry()
    model_path = Path(model_dir or workdir / "models" / MODEL_KEY).resolve()
    ensure_demo_model(model_path, entry["generate"])
    entry["path"] = str(model_path)
    cat_dir = workdir / "catalog"
    cat_dir.mkdir(parents=True, exist_ok=True)
    cat = cat_dir / "models.yaml"
    cat.write_text(yaml.safe_dump({"defaults": {"gpu": MODEL_KEY, "cpu": MODEL_KEY},
                                   "models": {MODEL_KEY: entry}}, sort_keys=False))
    if not (cat_dir / "configs").exists():
        shutil.copytree(ROOT / "configs", cat_dir / "configs")
    return model_path, cat, entry


def chat_messages(entry: dict, prompt: str) -> list[dict]:
    """What finspace's engine sends through the chat template for system_prompt "": the catalogue's system
    prompt, then the user's message. (b) and (c) get these same messages."""
    system = entry.get("system_prompt") or ""
    return ([{"role": "system", "content": system}] if system.strip() else []) + [{"role": "user", "content": prompt}]


# ------------------------------------------------------------------ processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LIVE: list["ServerProcess"] = []
_LIVE_LOCK = threading.Lock()


class ServerProcess:
    """A server in its own process group; ``stop()`` SIGTERMs, then SIGKILLs that group by id."""

    def __init__(self, name: str, argv: list[str], *, env: dict | None = None, cwd: Path, log_path: Path,
                 port: int, ready_path: str):
        self.name, self.port, self.ready_path = name, port, ready_path
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **(env or {})}, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0)
        # Its own process group (stopped by id), but the benchmark's session: on this machine's kernel
        # (6.18, scheduler autogroups) a process in another session was starved of CPU for whole streams
        # while vLLM generated, so a server started with start_new_session slowed its own clients.
        self.pgid = self.proc.pid
        self._stopped = False
        with _LIVE_LOCK:
            _LIVE.append(self)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def wait_ready(self, timeout: float = 240.0) -> float:
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=5).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{self.name} was not ready in {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.5)

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


# ------------------------------------------------------------------ CPU accounting
class CpuMeter:
    """CPU seconds of the whole machine, of the server's process tree and of this process, over a phase:
    what's left is other people's load (this machine is shared). ``front_s``: CPU seconds of the server's
    own process (HTTP, Gradio, vLLM's frontend: tokenizing, detokenizing), not of its engine processes."""

    def __init__(self, server: ServerProcess | None):
        import psutil

        self.psutil, self.server = psutil, server
        self.t0 = time.monotonic()
        self.sys0 = self._busy()
        self.srv0 = self._tree()
        self.me0 = self._me()

    def _busy(self) -> float:
        t = self.psutil.cpu_times()
        return t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)

    def _tree(self) -> dict[int, float]:
        out = {}
        for pid in (self.server.pids() if self.server else []):
            try:
                c = self.psutil.Process(pid).cpu_times()
                out[pid] = c.user + c.system
            except self.psutil.Error:
                pass
        return out

    def _me(self) -> float:
        c = self.psutil.Process().cpu_times()
        return c.user + c.system

    def read(self) -> dict:
        wall = max(1e-9, time.monotonic() - self.t0)
        total = self._busy() - self.sys0
        srv1 = self._tree()
        server = sum(v - self.srv0.get(pid, 0.0) for pid, v in srv1.items())
        root = self.server.proc.pid if self.server else None
        front = srv1.get(root, 0.0) - self.srv0.get(root, 0.0)
        client = self._me() - self.me0
        return {"wall": wall, "server": server / wall, "client": client / wall, "front_s": front,
                "other": max(0.0, total - server - client) / wall}


# ------------------------------------------------------------------ statistics
async def sse_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of a server-sent event stream (httpx's aiter_bytes), split at LF (CR LF) only, as the SSE
    format does. httpx's aiter_lines splits as str.splitlines does, also at U+0085, U+2028 and the like, which
    a model's reply can hold unescaped in the JSON: an event would arrive cut in two."""
    buf = b""
    async for chunk in chunks:
        *lines, buf = (buf + chunk).split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default); nan for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class RequestResult:
    ttft: float  # s from sending the request to the first non-empty text received
    e2e: float  # s from sending to the last byte
    tokens: int  # output tokens (reported by the server, or max_tokens where it reports none)
    gaps: list[float] = field(default_factory=list)  # s between successive updates that carried text
    text: str = ""

    @property
    def tpot(self) -> float:
        """Decode time per output token after the first: (e2e - ttft) / (tokens - 1)."""
        return (self.e2e - self.ttft) / max(1, self.tokens - 1)


@dataclass
class LevelResult:
    concurrency: int
    wall: float
    requests: list[RequestResult]
    cpu: dict

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.requests)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall
