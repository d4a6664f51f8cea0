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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_FIELDS = 7  # plain form fields beside an upload's files, at most


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
        raise BadUpload("send the document as multipart/form-data with a boundary (gradio_client's handle_file "
                        "does)")
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
        found.append(Part(None if name is None else _decode(name, charset),
                          None if filename is None else _decode(filename, charset)))
        current["disposition"] = b""
        if len(found) > max_parts:
            raise BadUpload(f"this upload has more than {max_parts} parts; send at most {max_parts - MAX_FIELDS} "
                            f"document{'s' if max_parts - MAX_FIELDS > 1 else ''} per upload")

    parser = MultipartParser(boundary, {"on_header_field": header_field, "on_header_value": header_value,
                                        "on_header_end": header_end, "on_headers_finished": headers_finished,
                                        "on_part_data": part_data})
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError:
        raise BadUpload("the body is not valid multipart/form-data; send the document as gradio_client's "
                        "handle_file does") from None
    return found


def stored_name(filename: str) -> str:
    """The name Gradio stores an uploaded file under (gradio.route_utils: the last path part, stripped)."""
    from gradio_client.utils import strip_invalid_filename_characters

    return strip_invalid_filename_characters(Path(filename).name)


def check(body: bytes, content_type: str, types: tuple[str, ...], max_files: int = 1,
          max_file_bytes: int | None = None) -> list[str]:
    """The documents' stored names, or BadUpload naming the fix: 1 to ``max_files`` file parts (the chat takes
    one document; the Matrix tab sends its filings in one upload), each with a document's extension and at most
    ``max_file_bytes`` (TooLarge), and at most MAX_FIELDS other parts."""
    files = [p for p in parts(body, content_type, max_files + MAX_FIELDS) if p.filename is not None]
    if len(files) > max_files:
        raise BadUpload("send one document per upload" if max_files == 1 else
                        f"{len(files)} files in one upload; send at most {max_files} documents")
    if not files:
        raise BadUpload("the upload holds no file; send the document as a file part named with filename=\"...\" "
                        "(gradio_client's handle_file does)")
    names = [stored_name(f.filename or "") for f in files]
    for name, f in zip(names, files, strict=True):
        if not name.lower().endswith(types):
            raise BadUpload(f"{name[-60:]!r} is not a document this app takes; upload {', '.join(types)}")
        if max_file_bytes is not None and f.size > max_file_bytes:
            raise TooLarge(f"{name[-60:]!r} is {f.size / (1 << 20):.1f} MiB: a document may be "
                           f"{max_file_bytes >> 20} MiB at most (FINSPACE_DOCUMENT_MAX_MIB)")
    return names
