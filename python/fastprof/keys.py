"""pstats function keys: what the call profiler's records and the calling-context tree are keyed
by (a module of its own, so that both read it without importing each other)."""

from __future__ import annotations

from types import CodeType
from typing import TYPE_CHECKING, Optional, Tuple, Union

__all__ = ["FuncKey", "is_disable", "label"]

if TYPE_CHECKING:
    FuncKey = Tuple[str, int, str]
    """A pstats function key: (filename, first line, name), or ('~', 0, label) for builtins."""
else:
    # At run time the plain type: fastprof run loads this module before the script, and a
    # subscript here would fill typing's caches, hiding the script's own first use of the
    # same types from its profile (as cProfile shows it).
    FuncKey = tuple


def label(code: Union[CodeType, str]) -> FuncKey:
    """The pstats key of a code object or of a builtin's label string (as cProfile names it)."""
    if isinstance(code, str):
        return ("~", 0, code)
    return (code.co_filename, code.co_firstlineno, code.co_name)


def is_disable(key: Optional[FuncKey]) -> bool:
    """Whether ``key`` is a fastprof profiler's ``disable`` method (a builtin's key), which a
    runner's profile records when the runner turns it off (None, a tree's root: False)."""
    return (
        key is not None and key[0] == "~" and key[2].startswith("<method 'disable' of 'fastprof.")
    )
