"""The choices and defaults of the view options, in a module of their own so that the
command-line parsers can name them without loading the views."""

from __future__ import annotations

__all__ = ["FORMATS", "COLOR_CHOICES", "DEFAULT_MIN_PERCENT"]

FORMATS = ("text", "pstats", "speedscope", "collapsed", "callgrind")
COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_MIN_PERCENT = 1.0
