"""What a set of processes holds on the machine, read from /proc: the /dev/shm names they map or keep open, and
the socket folders vLLM's processes were started with (``VLLM_RPC_BASE_PATH`` in their environment).

Tests that check an engine leaves nothing behind count only what their own engines held, never the machine's
totals: another app on the same machine (a second test run, another worker) starts and stops its own."""

from __future__ import annotations

import os
from pathlib import Path


def shm_held(pids) -> set[str]:
    """/dev/shm names mapped (/proc/<pid>/maps) or open (/proc/<pid>/fd) by ``pids`` now."""
    names = set()
    for pid in pids:
        paths = []
        try:
            paths += [
                line.split(maxsplit=5)[5]
                for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                if len(line.split(maxsplit=5)) == 6
            ]
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                except OSError:
                    pass
        except OSError:
            continue
        names.update(Path(p.removesuffix(" (deleted)")).name for p in paths if p.startswith("/dev/shm/"))
    return names


def socket_dirs(pids) -> set[Path]:
    """The socket folders (VLLM_RPC_BASE_PATH) that ``pids`` were started with."""
    dirs = set()
    for pid in pids:
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for var in env:
            if var.startswith(b"VLLM_RPC_BASE_PATH="):
                dirs.add(Path(var.split(b"=", 1)[1].decode()))
    return dirs
