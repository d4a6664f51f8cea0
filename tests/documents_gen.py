"""Documents the tests generate: PDFs with known text on known pages (fpdf2), DOCX (python-docx), XLSX (openpyxl),
HTML with scripts, and damaged or disguised files."""

from __future__ import annotations

from pathlib import Path

FILLER = (
    "The company reviewed its operations, its markets and its outlook for the coming year in the usual "
    "way, with attention to costs, customers and the pace of orders across its regions."
)


def page_fact(n: int) -> str:
    """The one fact only page ``n`` states."""
    return f"Fact {n}: the widget backlog of division {n} was {1000 + n * 7} units."


def pdf(
    path: Path,
    pages: int = 3,
    *,
    facts: dict[int, str] | None = None,
    filler: int = 2,
    text: bool = True,
    password: str | None = None,
) -> Path:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("Helvetica", size=11)
    if password is not None:
        doc.set_encryption(owner_password="owner-" + password, user_password=password)
    for n in range(1, pages + 1):
        doc.add_page()
        if text:
            body = [f"Page {n} of the annual report.", (facts or {}).get(n, page_fact(n)), *[FILLER] * filler]
            doc.multi_cell(0, 6, "\n".join(body))
        else:
            doc.rect(20, 20, 100, 60, style="F")  # a drawing, no text: as a scan has none
    doc.output(str(path))
    return path


def docx(path: Path) -> Path:
    import docx as python_docx

    d = python_docx.Document()
    d.add_heading("Quarterly review", 1)
    d.add_paragraph("Revenue rose on strong bond trading.")
    t = d.add_table(rows=2, cols=2)
    for (r, c), v in {(0, 0): "Item", (0, 1): "USD m", (1, 0): "Revenue", (1, 1): "420"}.items():
        t.cell(r, c).text = v
    d.add_paragraph("Outlook: stable.")
    d.save(str(path))
    return path


def xlsx(path: Path, rows: int = 3, cols: int = 3) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Income"
    ws.append(["Item", "2024", "2025"][:cols] + [f"c{i}" for i in range(3, cols)])
    for r in range(1, rows):
        ws.append([f"Line {r}"] + [r * 10 + c for c in range(1, cols)])
    wb.save(str(path))
    return path


HTML = (
    "<html><head><script>alert('owned')</script><style>p{color:red}</style></head><body>"
    "<h1>10-K</h1><p>Net income was 42 million.</p><script>document.write('secret-script')</script>"
    "<table><tr><th>Year</th><th>Income</th></tr><tr><td>2025</td><td>42</td></tr></table></body></html>"
)


def zip_bomb(path: Path, member: str = "xl/workbook.xml", unpacked_mib: int = 64) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, b"<x/>")
        z.writestr("xl/big.xml", b"\x00" * (unpacked_mib << 20))
    return path
