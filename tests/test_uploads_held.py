"""Uploaded documents a client holds on the server at once (finspace.wall.uploads.Held): bounded in number and bytes,
reserved before Gradio stores them, and no longer counted once read and deleted."""

from __future__ import annotations

import json

from finspace.wall.uploads import Held

MIB = 1 << 20


def test_files_and_bytes_are_bounded_per_client_and_free_once_deleted(tmp_path):
    held = Held(max_files=3, max_bytes=10 * MIB)
    paths = [tmp_path / f"d{i}.pdf" for i in range(3)]
    for p in paths:
        p.write_bytes(b"x")
    keys, refusal = held.admit("a", [3 * MIB, 3 * MIB])
    assert refusal is None
    _, refusal = held.admit("a", [5 * MIB])  # the reservation counts before Gradio answers
    assert "FINSPACE_UPLOAD_CLIENT_MIB" in refusal
    held.settle("a", keys, json.dumps([str(paths[0]), str(paths[1])]).encode())
    _, refusal = held.admit("a", [1, 1])
    assert "FINSPACE_UPLOAD_CLIENT_FILES" in refusal
    assert held.admit("b", [3 * MIB, 3 * MIB, 3 * MIB])[1] is None  # another client has its own bound
    paths[0].unlink()  # read by a chat and deleted: no longer held
    keys, refusal = held.admit("a", [4 * MIB])
    assert refusal is None
    held.settle("a", keys, None)  # Gradio refused it: the reservation goes
    assert held.admit("a", [7 * MIB])[1] is None
