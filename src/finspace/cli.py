"""`python -m finspace ...`: a thin shell over the library.

Each subcommand lives in ``finspace.commands.<name>`` and exposes
``register(subparsers)``; its handler returns an exit code. Domain errors are
printed and exit 2, like argparse's own usage errors.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from finspace.errors import FinspaceError

COMMANDS = ("fit", "demo_model", "serve", "loads", "doctor", "eval")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m finspace", description="finspace: finance LLMs on vLLM")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"finspace.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"finspace.commands.{name}":
                continue  # not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FinspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
