"""A small PDF that is slow to read: every page draws one shared content stream of many text operators, so the
reader parses the whole stream again for each page (issue 33, finding 4: 220 pages of 800 operators, about 45 KB,
took pypdf tens of seconds on a 2-core machine; PDFium, issue 40, reads that in about a second, so the default is
4,000 operators: 60 pages take PDFium about 2 s of CPU)."""

from __future__ import annotations

from pathlib import Path


def slow_pdf(path: Path, pages: int = 220, operators: int = 4000) -> Path:
    ops = [f"BT /F1 9 Tf {36 + (i % 5) * 100} {760 - (i // 5) * 14 % 720} Td (Net sales {i:04d} 1,234) Tj ET"
           for i in range(operators // 4)]
    stream = "\n".join(ops).encode()
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + b" ".join(f"{5 + k} 0 R".encode() for k in range(pages))
            + f"] /Count {pages} >>".encode(),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"]
    objs += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
             b"/Contents 4 0 R >>"] * pages
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path
