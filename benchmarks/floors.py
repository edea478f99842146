"""Floors for the call-profiler benchmarks on Python 3.12+: an empty C callback (called through
its own vectorcall, as fastprof's hooks are) registered for the sys.monitoring events a
profiler takes.  What it costs is the interpreter's delivery of those events, which no profiler
built on sys.monitoring can avoid; what a profiler costs above it is its own.

    with monitoring_floor(exact=True): ...   # the events of fastprof's exact default
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from fastprof import _fastprof

# The events of fastprof's call profiler (src/profile/hooks_monitoring.c): the Python ones,
# and with exact builtins CALL, C_RETURN and C_RAISE.
_PYTHON_EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND")
_BUILTIN_EVENTS = ("CALL", "C_RETURN", "C_RAISE")


@contextlib.contextmanager
def monitoring_floor(exact: bool = True) -> Iterator[None]:
    """Registers a _fastprof._EmptyCallback for the call profiler's events (with builtins when
    exact) on a tool id of its own for the block; gives everything back after it."""
    if sys.version_info < (3, 12):
        raise RuntimeError("the sys.monitoring floor needs Python 3.12+")
    mon = sys.monitoring  # type: ignore[attr-defined]
    names = _PYTHON_EVENTS + (_BUILTIN_EVENTS if exact else ())
    callback = _fastprof._EmptyCallback()
    tool = _fastprof._monitoring_claim("fastprof-floor")
    mask = 0
    try:
        for name in names:
            bit = getattr(mon.events, name)
            mon.register_callback(tool, bit, callback)
            mask |= bit
        mon.set_events(tool, mask)
        yield
    finally:
        _fastprof._monitoring_release(tool, mask, "fastprof-floor")
