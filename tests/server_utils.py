"""Start the real app (`python app.py`) on 127.0.0.1 and a free port, for end-to-end tests.

The server runs as a subprocess in its own process group (vLLM's engine core is
its child) but in the tests' session: with the kernel's scheduler autogroups (one
per session), a test process in another session than the server was starved of
CPU for as long as vLLM generated (a 20 ms computation took 8 s). ``stop()``
asks it to shut down (SIGTERM: the lifespan closes the engine) and kills that
process group by id if it does not exit in time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx

from support.catalog import REPO, demo_entry, write_catalog
from support.process import ServerProcess, free_port  # noqa: F401 - free_port: the tests' name for it

ADMIN_TOKEN = "test-admin-token-1234"
# CPU KV space for the test servers: "a" (tiny-llama, 512 tokens, ~1 MiB) and "b" fit; "big" (2,048
# tokens of tiny-llama: 2 layers x K,V x 2 heads x 64 x 4 bytes = 2 KiB/token -> 4 MiB) does not.
CPU_KV_MIB = 3


def make_catalog(folder: Path, model_dir: Path, *, max_tokens: int = 32) -> Path:
    """Two tiny models that fit the test KV space, and one that the planner must refuse on CPU."""
    models = {
        "a": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama", max_tokens=max_tokens),
        "b": demo_entry(model_dir / "tiny-qwen3", "tiny-qwen3", label="Tiny Qwen3", max_tokens=max_tokens),
        "big": demo_entry(model_dir / "tiny-llama", "tiny-llama", label="Tiny Llama long context", max_model_len=2048),
    }
    return write_catalog(folder, models, default="a")


class Server(ServerProcess):
    """The real app on 127.0.0.1: the shared harness (support.process) with the app's environment."""

    def __init__(self, workdir: Path, catalog: Path, *, admin_token: str | None = ADMIN_TOKEN, env: dict | None = None):
        self.workdir = workdir
        self.admin_token = admin_token
        port = free_port()
        full_env = {
            **os.environ,
            "PORT": str(port),
            "FINSPACE_HOST": "127.0.0.1",
            "FINSPACE_CATALOG": str(catalog),
            "FINSPACE_DATA_DIR": str(workdir / "data"),
            "FINSPACE_CPU_KV_CACHE_MIB": str(CPU_KV_MIB),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            # the suites send many wrong tokens on purpose; the throttle has its own test (test_surface_policy)
            "FINSPACE_TOKEN_FAILURES": "100000",
            **(env or {}),
        }
        full_env.pop("FINSPACE_MODEL", None)
        if admin_token:
            full_env["FINSPACE_ADMIN_TOKEN"] = admin_token
        else:
            full_env.pop("FINSPACE_ADMIN_TOKEN", None)
        if env and "FINSPACE_MODEL" in env:
            full_env["FINSPACE_MODEL"] = env["FINSPACE_MODEL"]
        super().__init__(
            "finspace",
            [sys.executable, str(REPO / "app.py")],
            env=full_env,
            inherit_env=False,
            cwd=workdir,
            log_path=workdir / "server.log",
            port=port,
            ready_path="/health",
        )

    def log_tail(self, n: int = 60) -> str:
        return super().log_tail(n)

    def wait(self, *, ready: bool = True, timeout: float = 400.0) -> float:
        """Wait until the page answers (and, with ready, until /health says 200). Returns seconds waited."""
        return self.wait_ready(timeout, statuses=(200,) if ready else (200, 503))

    def auth(self, token: str | None = None) -> dict:
        return {"Authorization": f"Bearer {token or self.admin_token}"}

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=10).json()

    def wait_model(self, key: str, timeout: float = 400.0) -> dict:
        """Wait until ``key`` is loaded and ready; raises after ``timeout`` seconds without a new line in the
        server's log (a load still writing is still going, however busy the machine), at most 3 x ``timeout``."""
        t0 = progress = time.monotonic()
        offset = 0
        while True:
            r = httpx.get(self.url + "/health", timeout=10)
            body = r.json()
            if r.status_code == 200 and body["model"] == key:
                return body
            now = time.monotonic()
            offset, news = self.log_news(offset)
            if news:
                progress = now
            if now - progress > timeout or now - t0 > 3 * timeout:
                raise TimeoutError(f"model {key} not ready after {now - t0:.0f} s: {body}\n{self.log_tail()}")
            time.sleep(0.3)

    def ensure_model(self, key: str = "a", timeout: float = 400.0) -> dict:
        """``key`` loaded and ready, switching to it if another model is (a shared server, handed from one module
        to the next, starts each module in the state the module expects). Returns /health's body."""
        self.wait(ready=True, timeout=timeout)
        if self.health()["model"] != key:
            r = httpx.post(self.url + "/load-model", json={"model": key}, headers=self.auth(), timeout=30)
            assert r.status_code == 202, r.text
        return self.wait_model(key, timeout)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, then SIGKILL to the server's process group (its engine core included), by id."""
        super().stop(grace=timeout)
