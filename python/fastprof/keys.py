"""pstats function keys: what the call profiler's records and the calling-context tree are keyed
by (a module of its own, so that both read it without importing each other)."""

from __future__ import annotations

from types import CodeType
from typing import Tuple, Union

__all__ = ["FuncKey", "label"]

FuncKey = Tuple[str, int, str]
"""A pstats function key: (filename, first line, name), or ('~', 0, label) for builtins."""


def label(code: Union[CodeType, str]) -> FuncKey:
    """The pstats key of a code object or of a builtin's label string (as cProfile names it)."""
    if isinstance(code, str):
        return ("~", 0, code)
    return (code.co_filename, code.co_firstlineno, code.co_name)
