"""`python -m finspace serve`: run the Space locally (the same as `python app.py`)."""

from __future__ import annotations

import argparse
import os
import sys


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; give e.g. 7860") from None
    if not 0 < v < 65536:
        raise argparse.ArgumentTypeError(f"{v} is not a port number (1-65535); give e.g. 7860")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the chat UI and the REST API (as the Space does)")
    p.add_argument("--host", default=None, help="address to listen on (default $FINSPACE_HOST or 0.0.0.0)")
    p.add_argument("--port", type=_port, default=None, help="port (default $PORT or 7860)")
    p.add_argument(
        "--model",
        default=None,
        help="catalogue key to load at start (default $FINSPACE_MODEL or the catalogue's default for this hardware)",
    )
    p.add_argument("--catalog", default=None, help="models.yaml (default $FINSPACE_CATALOG or the repo's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from finspace.errors import FinspaceError
    from finspace.web.server import run as serve
    from finspace.settings import Settings

    try:
        settings = Settings.from_env(os.environ)
    except FinspaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    given = {"host": args.host, "port": args.port, "model": args.model, "catalog_path": args.catalog}
    return serve(replace(settings, **{k: v for k, v in given.items() if v is not None}))
