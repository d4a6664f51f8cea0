"""Hand-built PDFs that attack a reader (issue 40's bad input): a writer of numbered objects with a correct
cross-reference table, and the files themselves. Each is small on disk; what it costs is in what it makes the
reader do."""

from __future__ import annotations

import zlib
from pathlib import Path

FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def write(path: Path, objs: list[bytes], root: int = 1) -> Path:
    """``objs`` as objects 1..N (``stream`` bodies included as given), with an xref table and a trailer."""
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def stream(data: bytes, compress: bool = False) -> bytes:
    if compress:
        data = zlib.compress(data, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def _page(contents: int, font: int = 3, parent: int = 2) -> bytes:
    return (
        f"<< /Type /Page /Parent {parent} 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R "
        f">> >> /Contents {contents} 0 R >>"
    ).encode()


def simple(path: Path, content: bytes, font: bytes = FONT, compress: bool = False) -> Path:
    """One page drawing ``content`` with font F1 (``font``)."""
    return write(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
            font,
            stream(content, compress),
            _page(4),
        ],
    )


def many_pages(path: Path, pages: int) -> Path:
    """``pages`` pages, all one page object's text (a few KB on disk)."""
    kids = b" ".join(b"5 0 R" for _ in range(pages))
    return write(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            FONT,
            stream(b"BT /F1 12 Tf 72 700 Td (Net sales 1,234) Tj ET"),
            _page(4),
        ],
    )


def huge_stream(path: Path, mib: int = 100) -> Path:
    """A page whose content stream inflates to ``mib`` MiB of path operators (about 100 KB compressed)."""
    return simple(
        path,
        b"BT /F1 12 Tf 72 700 Td (Net sales 1,234) Tj ET\n" + b"1 1 m 2 2 l S\n" * (mib * (1 << 20) // 14),
        compress=True,
    )


def loop(path: Path) -> Path:
    """A page tree whose Kids hold their own parent (object 2 inside object 2), and a page whose Parent is it."""
    return write(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [2 0 R 5 0 R] /Count 2 >>",
            FONT,
            stream(b"BT /F1 12 Tf 72 700 Td (Net sales 1,234) Tj ET"),
            _page(4),
        ],
    )


def deep(path: Path, levels: int = 10_000) -> Path:
    """A page tree ``levels`` deep: each Pages node has one kid, the next node; the last holds the page."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    first = 2
    for k in range(levels):
        n = first + k
        kid = n + 1 if k + 1 < levels else first + levels + 2
        objs.append(f"<< /Type /Pages /Kids [{kid} 0 R] /Count 1{f' /Parent {n - 1} 0 R' if k else ''} >>".encode())
    objs.append(FONT)  # first + levels
    objs.append(stream(b"BT /F1 12 Tf 72 700 Td (Net sales 1,234) Tj ET"))  # first + levels + 1
    objs.append(_page(first + levels + 1, font=first + levels, parent=first + levels - 1))
    return write(path, objs)


def dense(path: Path, chars: int = 1_000_000) -> Path:
    """One page of ``chars`` characters (1-point text, a grid of 'x')."""
    line = b"(" + b"x" * 1000 + b") Tj T*\n"
    return simple(path, b"BT /F1 1 Tf 1 TL 0 790 Td\n" + line * (chars // 1000) + b"ET", compress=True)


def absurd(path: Path) -> Path:
    """Words placed at negative, enormous and off-page positions, beside one placed on the page."""
    return simple(
        path,
        b"BT /F1 12 Tf 72 700 Td (Revenue on the page 1,234) Tj ET\n"
        b"BT /F1 12 Tf -90000 -90000 Td (far below and left) Tj ET\n"
        b"BT /F1 12 Tf 1e30 1e30 Td (beyond any page) Tj ET\n"
        b"BT /F1 12 Tf 1 0 0 1 99999999 400 Tm (off to the right) Tj ET\n"
        b"BT /F1 12 Tf 0 0 0 0 300 300 Tm (a zero matrix) Tj ET",
    )


def no_unicode(path: Path) -> Path:
    """Text in a Type3 font whose glyph names mean nothing and that has no ToUnicode map: its codes map to no
    character (a subset font exported without its Unicode map)."""
    procs = b"<< /g1 6 0 R /g2 6 0 R >>"
    font = (
        b"<< /Type /Font /Subtype /Type3 /FontBBox [0 0 750 750] /FontMatrix [0.001 0 0 0.001 0 0] "
        b"/CharProcs " + procs + b" /Encoding << /Type /Encoding /Differences [1 /g1 /g2] >> "
        b"/FirstChar 1 /LastChar 2 /Widths [600 600] >>"
    )
    text = b"BT /F1 12 Tf 72 700 Td <" + b"0102" * 200 + b"> Tj ET\n"
    return write(
        path,
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
            font,
            stream(text * 10),
            _page(4),
            stream(b"600 0 0 0 750 750 d1 0 0 750 750 re f"),
        ],
    )
