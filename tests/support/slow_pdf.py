"""A small PDF that is slow to read: every page draws one shared content stream of many text operators, so the
reader parses the whole stream again for each page (issue 33, finding 4: 220 pages of 800 operators, about 45 KB,
took pypdf tens of seconds on a 2-core machine; PDFium, issue 40, reads that in about a second, so the default is
4,000 operators: 60 pages take PDFium about 2 s of CPU)."""

from __future__ import annotations

from pathlib import Path

from support import hostile_pdf


def slow_pdf(path: Path, pages: int = 220, operators: int = 4000) -> Path:
    ops = [
        f"BT /F1 9 Tf {36 + (i % 5) * 100} {760 - (i // 5) * 14 % 720} Td (Net sales {i:04d} 1,234) Tj ET"
        for i in range(operators // 4)
    ]
    stream = "\n".join(ops).encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{5 + k} 0 R".encode() for k in range(pages))
        + f"] /Count {pages} >>".encode(),
        hostile_pdf.FONT,
        hostile_pdf.stream(stream),
    ]
    objs += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 4 0 R >>"
    ] * pages
    return hostile_pdf.write(path, objs)
