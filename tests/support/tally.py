"""The reliability suite's summary line (tests/reliability/rel_utils.Tally), in one process or summed over the
lanes of a ``-n 2`` run (tests/conftest.py gathers each worker's counts)."""

from __future__ import annotations

KEY = "reliability_tally"  # the counts in a pytest-xdist worker's output


def line(counts: dict[str, int]) -> str:
    return "reliability: " + " ".join(f"{name}={n}" for name, n in counts.items())


def add(total: dict[str, int], counts: dict[str, int]) -> None:
    for name, n in counts.items():
        total[name] = total.get(name, 0) + int(n)
