"""Shared pieces of the serving benchmark: the model and catalogue, server processes, statistics.

Nothing here starts anything on import. ``ServerProcess`` runs a server in its
own session (process group) and stops it by that group's id, whatever happens:
``stop()`` is idempotent and every instance is also stopped by ``stop_all()``,
which bench/serving.py wires to atexit and to SIGTERM/SIGINT/SIGHUP.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tests/support: the server harness, SSE lines, catalogues
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
    from finspace.models.demo import ensure_demo_model

    entry = demo_catalog_entry()
    model_path = Path(model_dir or workdir / "models" / MODEL_KEY).resolve()
    ensure_demo_model(model_path, entry["generate"])
    entry["path"] = str(model_path)
    cat = write_catalog(workdir / "catalog", {MODEL_KEY: entry}, default=MODEL_KEY)
    return model_path, cat, entry


def chat_messages(entry: dict, prompt: str) -> list[dict]:
    """What finspace's engine sends through the chat template for system_prompt "": the catalogue's system
    prompt, then the user's message. (b) and (c) get these same messages."""
    system = entry.get("system_prompt") or ""
    return ([{"role": "system", "content": system}] if system.strip() else []) + [{"role": "user", "content": prompt}]


# ------------------------------------------------------------------ processes (shared with the tests)
from support.catalog import write_catalog  # noqa: E402
from support.process import ServerProcess, free_port, install_cleanup, stop_all  # noqa: E402,F401


def start_pair_server(
    which: str,
    model_path: Path,
    catalog: Path,
    workdir: Path,
    kv_mib: int,
    context: int,
    *,
    finspace_env: dict | None = None,
    vllm_args: tuple[str, ...] = (),
) -> ServerProcess:
    """finspace (`app.py` on ``catalog``'s MODEL_KEY) or vLLM's OpenAI server on ``model_path``, started and ready:
    float32, ``context`` tokens, enforce_eager and the same ``kv_mib`` KV pool for both (the single-model benches:
    documents.py, matrix.py)."""
    port = free_port()
    env = {
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if which == "finspace":
        env.update(
            {
                "PORT": str(port),
                "FINSPACE_HOST": "127.0.0.1",
                "FINSPACE_CATALOG": str(catalog),
                "FINSPACE_MODEL": MODEL_KEY,
                "FINSPACE_DATA_DIR": str(workdir / "data"),
                "FINSPACE_CPU_KV_CACHE_MIB": str(kv_mib),
                "GRADIO_TEMP_DIR": str(workdir / "gradio"),
                **(finspace_env or {}),
            }
        )
        srv = ServerProcess(
            "finspace",
            [PYTHON, str(ROOT / "app.py")],
            env=env,
            cwd=workdir,
            log_path=workdir / "finspace.log",
            port=port,
            ready_path="/health",
        )
    else:
        argv = [
            PYTHON,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_path),
            "--served-model-name",
            MODEL_KEY,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--max-model-len",
            str(context),
            "--enforce-eager",
            "--kv-cache-memory-bytes",
            str(kv_mib << 20),
            *vllm_args,
        ]
        srv = ServerProcess(
            "vllm", argv, env=env, cwd=workdir, log_path=workdir / "vllm.log", port=port, ready_path="/health"
        )
    srv.wait_ready(400)
    return srv


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
        for pid in self.server.pids() if self.server else []:
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
        return {
            "wall": wall,
            "server": server / wall,
            "client": client / wall,
            "front_s": front,
            "other": max(0.0, total - server - client) / wall,
        }


# ------------------------------------------------------------------ statistics
from support.sse import asse_lines as sse_lines  # noqa: E402,F401 - the lines of an SSE stream


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
