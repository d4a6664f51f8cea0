"""What an upload to /gradio_api/upload holds, as Gradio will read it: parsed by python-multipart, as Gradio does.

Gradio 6.31's upload route (gradio.route_utils.GradioMultiPartParser) feeds the body
to ``python_multipart.MultipartParser``, takes each part's last Content-Disposition
header, reads its parameters with ``python_multipart.multipart.parse_options_header``
and stores a file for every part whose parameters hold ``filename``, under
``strip_invalid_filename_characters(Path(filename).name)``. ``parts`` runs the same
parser with the same callbacks on the body the guard has already read, so the
guard's checks (how many files, a document's extension, few parts) hold for exactly what
Gradio would store: ``filename ="x"``, a repeated ``filename``, an RFC 2231/5987
``filename*=`` (which python-multipart ignores) or a hundred parts are judged as the
parser sees them, never by a pattern over the raw bytes.

``Held`` bounds what each client keeps stored: uploaded documents not yet read (a chat or a matrix deletes its
upload once converted), in number and bytes (FINSPACE_UPLOAD_CLIENT_FILES, FINSPACE_UPLOAD_CLIENT_MIB). One
client stored 180 MiB in 2.2 s, three uploads of 20 x 3 MiB that only Gradio's 10-minute sweep removed.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

MAX_FIELDS = 7  # plain form fields beside an upload's files, at most
OWN = "finspace-own"  # each upload's own folder inside the upload folder: <OWN>/<random>/<name>


class BadUpload(ValueError):
    """The body is not multipart/form-data the parser can read; the message names the fix."""


class TooLarge(BadUpload):
    """A file in the upload is over the document size limit (413)."""


@dataclass
class Part:
    name: str | None  # the form field's name
    filename: str | None  # None: a plain field, not a file
    size: int = 0  # bytes of its content


def _decode(value: bytes, charset: str) -> str:
    try:
        return value.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return value.decode("latin-1")


def parts(body: bytes, content_type: str, max_parts: int = 1 + MAX_FIELDS) -> list[Part]:
    """Every part of a multipart body, in order, as Gradio's parser sees them (BadUpload if it cannot, or past
    ``max_parts``)."""
    from python_multipart.exceptions import MultipartParseError
    from python_multipart.multipart import MultipartParser, parse_options_header

    kind, params = parse_options_header(content_type or "")
    boundary = params.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise BadUpload("send the document as multipart/form-data with a boundary (gradio_client's handle_file does)")
    charset = _decode(params.get(b"charset", b"utf-8"), "latin-1")
    found: list[Part] = []
    current = {"field": b"", "value": b"", "disposition": b""}

    def header_field(data, start, end):
        current["field"] += data[start:end]

    def header_value(data, start, end):
        current["value"] += data[start:end]

    def header_end():
        if current["field"].lower() == b"content-disposition":
            current["disposition"] = current["value"]  # the last one wins, as in Gradio's parser
        current["field"], current["value"] = b"", b""

    def part_data(data, start, end):
        if found:
            found[-1].size += end - start

    def headers_finished():
        _, options = parse_options_header(current["disposition"])
        name, filename = options.get(b"name"), options.get(b"filename")
        found.append(
            Part(
                None if name is None else _decode(name, charset),
                None if filename is None else _decode(filename, charset),
            )
        )
        current["disposition"] = b""
        if len(found) > max_parts:
            raise BadUpload(
                f"this upload has more than {max_parts} parts; send at most {max_parts - MAX_FIELDS} "
                f"document{'s' if max_parts - MAX_FIELDS > 1 else ''} per upload"
            )

    parser = MultipartParser(
        boundary,
        {
            "on_header_field": header_field,
            "on_header_value": header_value,
            "on_header_end": header_end,
            "on_headers_finished": headers_finished,
            "on_part_data": part_data,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError:
        raise BadUpload(
            "the body is not valid multipart/form-data; send the document as gradio_client's handle_file does"
        ) from None
    return found


def stored_name(filename: str) -> str:
    """The name Gradio stores an uploaded file under (gradio.route_utils: the last path part, stripped)."""
    from gradio_client.utils import strip_invalid_filename_characters

    return strip_invalid_filename_characters(Path(filename).name)


def check(
    body: bytes, content_type: str, types: tuple[str, ...], max_files: int = 1, max_file_bytes: int | None = None
) -> list[str]:
    """The documents' stored names (``check_parts``)."""
    return [name for name, _size in check_parts(body, content_type, types, max_files, max_file_bytes)]


def check_parts(
    body: bytes, content_type: str, types: tuple[str, ...], max_files: int = 1, max_file_bytes: int | None = None
) -> list[tuple[str, int]]:
    """The documents' (stored name, bytes), or BadUpload naming the fix: 1 to ``max_files`` file parts (the chat takes
    one document; the Matrix tab sends its filings in one upload), each with a document's extension and at most
    ``max_file_bytes`` (TooLarge), and at most MAX_FIELDS other parts."""
    files = [p for p in parts(body, content_type, max_files + MAX_FIELDS) if p.filename is not None]
    if len(files) > max_files:
        raise BadUpload(
            "send one document per upload"
            if max_files == 1
            else f"{len(files)} files in one upload; send at most {max_files} documents"
        )
    if not files:
        raise BadUpload(
            "the upload holds no file; send the document as a file part named with filename=\"...\" "
            "(gradio_client's handle_file does)"
        )
    names = [stored_name(f.filename or "") for f in files]
    for name, f in zip(names, files, strict=True):
        if not name.lower().endswith(types):
            raise BadUpload(f"{name[-60:]!r} is not a document this app takes; upload {', '.join(types)}")
        if max_file_bytes is not None and f.size > max_file_bytes:
            raise TooLarge(
                f"{name[-60:]!r} is {f.size / (1 << 20):.1f} MiB: a document may be "
                f"{max_file_bytes >> 20} MiB at most (FINSPACE_DOCUMENT_MAX_MIB)"
            )
    return [(name, f.size) for name, f in zip(names, files, strict=True)]


class Held:
    """Uploaded files each client holds in the upload folder, bounded in number and bytes. ``admit`` reserves
    an upload's place before Gradio stores it (so simultaneous uploads see each other), ``settle`` swaps the
    reservation for the paths Gradio answered with; a path that is gone (read and deleted, or swept) no longer
    counts."""

    def __init__(self, max_files: int, max_bytes: int):
        self.max_files, self.max_bytes = max_files, max_bytes
        self._held: dict[str, dict[object, tuple[str | None, int]]] = {}  # client -> key -> (path, bytes)
        self._keys = itertools.count()

    def _live(self, client: str) -> dict[object, tuple[str | None, int]]:
        held = self._held.get(client, {})
        for key, (path, _size) in list(held.items()):
            if path is not None and not os.path.exists(path):
                del held[key]
        if not held:
            self._held.pop(client, None)
        return held

    def admit(self, client: str, sizes: list[int]) -> tuple[list[object], str | None]:
        """(a reservation, None), or (None, the refusal naming the bound) when these files would pass it."""
        held = self._live(client)
        files, size = len(held) + len(sizes), sum(s for _p, s in held.values()) + sum(sizes)
        if files > self.max_files:
            return [], (
                f"you hold {len(held)} uploaded document(s) not yet used; a client may hold "
                f"{self.max_files} (FINSPACE_UPLOAD_CLIENT_FILES): use them in a chat or a matrix, or "
                "wait for them to be removed"
            )
        if size > self.max_bytes:
            return [], (
                f"your uploaded documents not yet used would take {size / (1 << 20):.1f} MiB; a client may "
                f"hold {self.max_bytes >> 20} MiB (FINSPACE_UPLOAD_CLIENT_MIB): use them in a chat or a "
                "matrix first, or upload fewer"
            )
        keys = [next(self._keys) for _ in sizes]
        self._held.setdefault(client, {}).update({k: (None, s) for k, s in zip(keys, sizes)})
        return keys, None

    def settle(self, client: str, reservation: list[object], answer: bytes | None) -> None:
        """Replace the reservation by the stored paths Gradio answered (``answer`` None: it failed)."""
        held = self._held.get(client, {})
        sizes = [held.pop(k, (None, 0))[1] for k in reservation]
        try:
            paths = json.loads(answer) if answer else []
        except ValueError:
            paths = []
        if isinstance(paths, list):
            for path, size in zip(paths, sizes):
                if isinstance(path, str):
                    held[next(self._keys)] = (path, size)
        if held:
            self._held[client] = held
        else:
            self._held.pop(client, None)

    def owns(self, client: str | None, path: str) -> bool:
        """Whether ``client``'s upload is the file at ``path`` (its real path), still stored."""
        real = os.path.realpath(path)
        return client is not None and any(
            p is not None and os.path.realpath(p) == real for p, _size in self._live(client).values()
        )


class Carried:
    """The bytes of the MCP bodies each client's running calls carry, bounded as its uploads are: a base64 body
    costs the app about 3.7 times its size while the call runs (three 76 MB bodies at once: +765 MiB)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._bytes: dict[str, int] = {}

    def admit(self, client: str, size: int) -> str | None:
        """None, with ``size`` counted for ``client`` (``release`` it after), or the refusal naming the bound."""
        now = self._bytes.get(client, 0)
        if now and now + size > self.max_bytes:
            return (
                f"your MCP calls running now carry {now / (1 << 20):.1f} MiB; a client's calls together carry "
                f"{self.max_bytes >> 20} MiB at most, as its uploads (FINSPACE_UPLOAD_CLIENT_MIB): wait for "
                "them, or send documents by url"
            )
        self._bytes[client] = now + size
        return None

    def release(self, client: str, size: int) -> None:
        left = self._bytes.pop(client, 0) - size
        if left > 0:
            self._bytes[client] = left


def owned_copies(answer: bytes, upload_dir: str) -> bytes:
    """Gradio's upload answer (a JSON list of stored paths) with each file moved to a folder of its own (a hard
    link, then the original unlinked): Gradio names a stored file by a hash of its bytes, so two clients uploading
    the same 10-K shared one file, and one's use deleted the other's. A path that cannot be moved stays."""
    try:
        paths = json.loads(answer)
    except ValueError:
        return answer
    if not isinstance(paths, list):
        return answer
    root = os.path.realpath(upload_dir)
    out: list = []
    moved: dict[str, Path] = {}  # the same bytes twice in one upload: Gradio answers one path twice
    for path in paths:
        if not isinstance(path, str) or not os.path.realpath(path).startswith(root + os.sep):
            out.append(path)
            continue
        target = Path(upload_dir) / OWN / uuid.uuid4().hex / Path(path).name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(moved.get(path, path), target)
            moved.setdefault(path, target)
        except OSError:  # another upload of the same bytes moved it just now: this one stays as Gradio stored it
            with contextlib.suppress(OSError):
                target.parent.rmdir()
            out.append(path)
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))  # Gradio's one-file folder, when empty
        out.append(str(target))
    return json.dumps(out).encode()
