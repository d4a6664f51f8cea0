"""`python -m finspace doctor`: is this machine ready to serve, and what to change if not.

One line per check (GPUs, driver, torch's CUDA build, the vLLM build, HF_TOKEN, the
Hub, the data directory, the default model), then the catalogue's fit table.
Exit 0 when the default model can start, 1 otherwise. The checks live in
finspace.fit.doctor; this only prints them.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the GPU, driver, torch, vLLM build, Hub access and data directory; exit 1 if the default "
        "model cannot start",
        description="Check this machine for serving: one line per check, with the fix when something is wrong, "
        "then the catalogue's fit table. Exit 0 when the default model can start, 1 otherwise.",
    )
    p.add_argument("--no-table", action="store_true", help="leave out the catalogue's fit table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from finspace import version
    from finspace.fit import doctor

    report = doctor.diagnose()
    print(f"finspace {version()}")
    for c in report.checks:
        print(c.line)
    if not args.no_table:
        print()
        print(report.fit_table)
    print()
    print(
        "ready: the default model can start"
        if report.ok
        else "NOT READY: fix the FAIL lines above (the default model cannot start)"
    )
    return 0 if report.ok else 1
