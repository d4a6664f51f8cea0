"""Small text helpers the converters share: a file's short name, tidy lines, UTF-8 reading, the cell bound."""

from __future__ import annotations

import re
from pathlib import Path

from finspace.documents.limits import DocumentLimits
from finspace.errors import BadInput


_CURRENCY = re.compile(r"([$€£¥])[ \t]+(?=[(\d])")
_NEGATIVE = re.compile(r"\([ \t]*(\d[\d,]*(?:\.\d+)?)[ \t]*\)")
_GLUED = re.compile(r"(?<=[a-z])(?=\(?\d{1,3}(?:,\d{3})+(?:\.\d+)?\b)")


def fix_figures(text: str) -> str:
    """``$  1,234`` -> ``$1,234``; ``(1,886 )`` and ``( 25 )`` -> ``(1,886)``, ``(25)`` (negatives, as printed);
    ``net4,212`` -> ``net 4,212`` (a figure glued to its label)."""
    return _GLUED.sub(" ", _NEGATIVE.sub(r"(\1)", _CURRENCY.sub(r"\1", text)))


def short_name(name: str) -> str:
    name = Path(str(name)).name
    return name if len(name) <= 80 else name[:77] + "…"


def tidy(text: str) -> str:
    """Spaces collapsed within lines, runs of blank lines made one, the ends stripped."""
    lines = [" ".join(line.split()) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def read_text(path: Path, name: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"{short_name(name)} is not UTF-8 text; save it as UTF-8 and upload it again") from None


def check_cells(cells: int, name: str, limits: DocumentLimits) -> None:
    if cells > limits.max_cells:
        raise BadInput(
            f"{short_name(name)} expands past {limits.max_cells:,} table cells, the limit per document; "
            "upload the sheets or tables you need"
        )
