"""`python -m finspace demo-model PATH`: write a tiny random-weight checkpoint that vLLM can serve."""

from __future__ import annotations

import argparse

from finspace.errors import FinspaceError


def register(sub: argparse._SubParsersAction) -> None:
    from finspace.models.demo import PRESETS

    p = sub.add_parser("demo-model", help="write a tiny random-weight checkpoint (offline demo and tests)")
    p.add_argument("path", help="folder to write (replaced if it exists)")
    p.add_argument(
        "--preset",
        default="bench-llama",
        choices=sorted(PRESETS),
        help="architecture and size (default: bench-llama, the demo entry's)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from finspace.models.demo import write_demo_model

    try:
        path = write_demo_model(args.path, args.preset, seed=args.seed)
    except OSError as exc:
        raise FinspaceError(f"cannot write {args.path}: {exc.strerror}; choose a writable folder") from None
    print(f"wrote {args.preset} checkpoint to {path}")
    return 0
