"""``quiet``: fastprof's readers of a live profiler run with the calling thread's profiling
and tracing suspended (``_fastprof._Quiet``), so that reading an enabled profiler
(``Profile.getstats()``, ``fastprof.Stats(profile)``, ``profile.tree()``, a session's
``stats()``) does not record the reader's own calls into the profile it reads."""

from __future__ import annotations

from typing import Any, Callable, TypeVar, cast

from . import _fastprof

__all__ = ["quiet"]

_F = TypeVar("_F", bound="Callable[..., Any]")


def quiet(func: _F) -> _F:
    """func, run with this thread's hooks suspended (a method when a class attribute)."""
    return cast(_F, _fastprof._Quiet(func))
