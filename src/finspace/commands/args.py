"""Argument types shared by the commands: each rejects bad input with a message that names a good value."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive_int(example: str) -> Callable[[str], int]:
    """An argparse type for a whole number > 0; ``example`` is shown in the error."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give e.g. {example}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be positive; give e.g. {example}")
        return v

    parse.__name__ = "positive whole number"
    return parse
