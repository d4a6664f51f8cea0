"""SEC's responses on disk, each with its validators (ETag, Last-Modified) for a conditional request later.

One file per URL (named by its SHA-256): a JSON head line ({"url", "etag", "last_modified", "at"}), then the
body. Written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    body: bytes
    etag: str | None
    last_modified: str | None
    at: float  # when SEC last confirmed it (a 200 or a 304)

    def age(self) -> float:
        return time.time() - self.at


class DiskCache:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _path(self, url: str) -> Path:
        return self.folder / hashlib.sha256(url.encode()).hexdigest()

    def get(self, url: str) -> Entry | None:
        try:
            with open(self._path(url), "rb") as f:
                head = json.loads(f.readline())
                body = f.read()
        except (OSError, ValueError):
            return None
        if head.get("url") != url:
            return None
        return Entry(body, head.get("etag"), head.get("last_modified"), float(head.get("at", 0)))

    def put(self, url: str, body: bytes, etag: str | None, last_modified: str | None) -> Entry:
        entry = Entry(body, etag, last_modified, time.time())
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self._path(url)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            head = {"url": url, "etag": etag, "last_modified": last_modified, "at": entry.at}
            tmp.write_bytes(json.dumps(head).encode() + b"\n" + body)
            tmp.replace(path)
        return entry

    def touch(self, url: str, entry: Entry) -> Entry:
        """SEC said 304: the body stands, confirmed now."""
        return self.put(url, entry.body, entry.etag, entry.last_modified)
