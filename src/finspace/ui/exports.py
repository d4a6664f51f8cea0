"""Where an export (a conversation's Markdown + JSON, a matrix's CSV + XLSX + JSON) is written, and how much of it
stays on disk.

Exports go to one folder of this app inside Gradio's upload folder (its file cache:
GRADIO_TEMP_DIR, else <tmp>/gradio), so Gradio serves them without a second copy
and its delete_cache removes them with the rest. On top of that, bounded here:

- per client (the caller's address): at most ``per_client`` exports; a new one
  removes that client's oldest;
- per export: at most ``max_bytes`` (both files), refused with a message naming the bound;
- in time: exports older than ``max_age_s`` go on the next export; the whole folder
  goes when the app stops (``clear``).

So N exports from one client leave at most ``per_client`` x ``max_bytes`` on disk.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import time
import uuid
from pathlib import Path

from finspace.errors import BadInput

EXPORTS_FOLDER = "finspace-exports"
PER_CLIENT = 3
MAX_BYTES = 8 << 20
MAX_AGE_S = 600.0


class Exports:
    """One app's export folder: ``<upload folder>/finspace-exports/<app id>/<client>/<export>/``."""

    def __init__(
        self,
        upload_folder: str | Path,
        *,
        per_client: int = PER_CLIENT,
        max_bytes: int = MAX_BYTES,
        max_age_s: float = MAX_AGE_S,
    ):
        self.root = Path(upload_folder) / EXPORTS_FOLDER / uuid.uuid4().hex
        self.per_client, self.max_bytes, self.max_age_s = per_client, max_bytes, max_age_s
        self._lock = threading.Lock()  # handlers run in worker threads

    def write(self, client: str | None, doc: dict, markdown: str) -> list[str]:
        """A conversation's export (Markdown, JSON) for ``client``: ``write_files``' bounds and errors."""
        stem = re.sub(r"[^A-Za-z0-9-]+", "-", doc["title"])[:40].strip("-") or "conversation"
        text = json.dumps(doc, indent=1, ensure_ascii=False)
        files = {f"{stem}.md": markdown.encode("utf-8"), f"{stem}.json": text.encode("utf-8")}
        return self.write_files(client, files, "start a new conversation for the rest")

    def write_files(self, client: str | None, files: dict[str, bytes], fix: str) -> list[str]:
        """``files`` (name -> bytes) written as one export for ``client``; its oldest exports past the bound and
        every export older than ``max_age_s`` removed. BadInput naming ``fix`` when they are over ``max_bytes``."""
        size = sum(len(b) for b in files.values())
        if size > self.max_bytes:
            raise BadInput(
                f"this export would be {size / (1 << 20):.1f} MiB; the limit is "
                f"{self.max_bytes / (1 << 20):g} MiB per export: {fix}"
            )
        with self._lock:
            self._sweep()
            mine = self.root / _client_key(client)
            folder = mine / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"  # names sort oldest first
            folder.mkdir(parents=True)
            for name, data in files.items():
                (folder / name).write_bytes(data)
            for old in sorted(p for p in mine.iterdir() if p.is_dir())[: -self.per_client]:
                shutil.rmtree(old, ignore_errors=True)
        return [str(folder / name) for name in files]

    def _sweep(self) -> None:
        """Remove exports older than ``max_age_s``, and client folders left empty."""
        if not self.root.is_dir():
            return
        cutoff = time.time() - self.max_age_s
        for mine in self.root.iterdir():
            for folder in list(mine.iterdir()) if mine.is_dir() else ():
                try:
                    if folder.stat().st_mtime < cutoff:
                        shutil.rmtree(folder, ignore_errors=True)
                except OSError:
                    continue
            try:
                mine.rmdir()  # only when empty
            except OSError:
                pass

    def clear(self) -> None:
        """Remove every export of this app (the app stops)."""
        shutil.rmtree(self.root, ignore_errors=True)


def _client_key(client: str | None) -> str:
    """A folder name for a client address (no address in a path on disk)."""
    return hashlib.sha256((client or "local").encode("utf-8", "surrogatepass")).hexdigest()[:16]
