"""A local stand-in for SEC's two hosts (www.sec.gov, data.sec.gov), answering from ../shared/edgar and
../shared/filings at the paths SEC serves them at, with ETags (304 to a matching If-None-Match).

Run: ``python tests/support/sec_server.py`` prints its port on the first line. ``GET /_log`` gives every request
it answered ([time, path, status]); ``GET /_fault?status=503&delay=0.5&garbage=1&times=2`` makes the next
``times`` requests (all, without it) fail that way; ``/_fault`` alone clears it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import os

SHARED = Path(os.environ.get("FINSPACE_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
EDGAR, FILINGS = SHARED / "edgar", SHARED / "filings"
ARCHIVE = {  # SEC's archive path -> the file in ../shared/filings (SOURCES.md's table)
    "/Archives/edgar/data/320193/000032019324000123/aapl-20240928.htm": "aapl-10-k-2024-11-01.html",
    "/Archives/edgar/data/320193/000032019325000073/aapl-20250628.htm": "aapl-10-q-2025-08-01.html",
    "/Archives/edgar/data/1045810/000104581025000023/nvda-20250126.htm": "nvda-10-k-2025-02-26.html",
    "/Archives/edgar/data/1318605/000162828025035806/tsla-20250630.htm": "tsla-10-q-2025-07-24.html",
}
LOG: list = []
FAULT: dict = {}
LOCK = threading.Lock()


def resolve(path: str) -> Path | None:
    if path == "/files/company_tickers.json":
        return EDGAR / "company_tickers.json"
    if path.startswith(("/submissions/", "/api/xbrl/companyfacts/")) and ".." not in path:
        return EDGAR / path.lstrip("/")
    if path in ARCHIVE:
        return FILINGS / ARCHIVE[path]
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        arrived = time.time()
        url = urlsplit(self.path)
        if url.path == "/_log":
            with LOCK:
                return self._send(200, json.dumps(LOG).encode(), {"Content-Type": "application/json"})
        if url.path == "/_fault":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with LOCK:
                FAULT.clear()
                FAULT.update(q)
                LOG.clear()
            return self._send(200, b"ok")
        with LOCK:
            fault = dict(FAULT)
            if "times" in FAULT:
                FAULT["times"] = str(int(FAULT["times"]) - 1)
                if int(FAULT["times"]) <= 0:
                    FAULT.clear()
        if fault.get("delay"):
            time.sleep(float(fault["delay"]))
        status = self._answer(url.path, fault)
        with LOCK:
            LOG.append([arrived, url.path, status, self.headers.get("User-Agent", "")])

    def _answer(self, path: str, fault: dict) -> int:
        if not self.headers.get("User-Agent", "").strip():
            self._send(403, b"Your Request Originates from an Undeclared Automated Tool")
            return 403
        if fault.get("status"):
            status = int(fault["status"])
            self._send(status, b"fault", {"Retry-After": "0"})
            return status
        if fault.get("garbage"):
            self._send(200, b"<html>not json{{{", {"Content-Type": "application/json"})
            return 200
        file = resolve(path)
        if file is None or not file.is_file():
            self._send(404, b"Not Found")
            return 404
        body = file.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            self._send(304, b"", {"ETag": etag})
            return 304
        ctype = "application/json" if path.endswith(".json") else "text/html"
        self._send(200, body, {"ETag": etag, "Content-Type": ctype})
        return 200


@contextlib.contextmanager
def serving(shared: Path):
    """This server in a child process (its own process group) on 127.0.0.1: its base URL; stopped after."""
    proc = subprocess.Popen(
        [sys.executable, __file__],
        stdout=subprocess.PIPE,
        process_group=0,
        env={**os.environ, "FINSPACE_SHARED_DIR": str(shared)},
    )
    try:
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
