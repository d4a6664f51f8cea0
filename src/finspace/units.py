"""Byte units, and the one way a size in bytes is written for people.

Sizes travel in integer bytes (the unit in the name: ``weights_bytes``); GiB
and MiB appear only at the edges: text (``fmt_size``), JSON figures
(``in_gib``) and sizes people type (``gib_to_bytes``).
"""

from __future__ import annotations

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

_UNITS = {"KiB": KIB, "MiB": MIB, "GiB": GIB}


def fmt_size(n_bytes: int | float, unit: str = "GiB", places: int = 2, *, with_unit: bool = False) -> str:
    """``n_bytes`` in ``unit`` (KiB, MiB, GiB, or "auto": GiB from 1 GiB up, else MiB) with ``places`` decimals.

    fmt_size(3 << 29) == "1.50"; fmt_size(3 << 29, places=1) == "1.5";
    fmt_size(5 << 20, "auto", 1, with_unit=True) == "5.0 MiB".
    """
    if unit == "auto":
        unit = "GiB" if n_bytes >= GIB else "MiB"
    text = f"{n_bytes / _UNITS[unit]:.{places}f}"
    return f"{text} {unit}" if with_unit else text


def in_gib(n_bytes: int | float, places: int = 2) -> float:
    """A JSON figure: GiB rounded to ``places`` decimals."""
    return round(n_bytes / GIB, places)


def gib_to_bytes(gib: float) -> int:
    """A size given in GiB (a log's "79.19 GiB") as the nearest whole byte."""
    return int(round(gib * GIB))
