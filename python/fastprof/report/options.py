"""The choices and defaults of the view options, in a module of their own so that the
command-line parsers can name them without loading the views."""

from __future__ import annotations

import argparse

__all__ = ["FORMATS", "COLOR_CHOICES", "DEFAULT_MIN_PERCENT", "positive_int"]

FORMATS = ("text", "pstats", "speedscope", "collapsed", "callgrind")
COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_MIN_PERCENT = 1.0


def positive_int(text: str) -> int:
    """An argparse type: the positive integer text names, else an ArgumentTypeError."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n
