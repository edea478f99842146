"""os._exit while fastprof runs a program: the core's gate (src/profile/exit_gate.c), a
builtin that looks as os._exit does to a profiler.  It stops the profile from C, so that the
profile ends in the program's own call of os._exit and what runs next is not recorded in
it, runs a callable of fastprof's (a child writes its profile; ``fastprof run`` reports), then
ends the process with the real os._exit.  A program that ends through os._exit (to skip a
slow teardown, or a fork worker of multiprocessing) still gets its profile."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

__all__ = ["install", "restore"]

_real: Optional[Callable[..., Any]] = None  # os._exit before the first gate
_ours: Optional[Callable[..., Any]] = None  # the gate os._exit was last made


def install(stop: Optional[Callable[[], Any]], before: Optional[Callable[[], Any]]) -> bool:
    """Makes os._exit a gate that calls stop() from C (a profiler's ``disable``: a builtin, so
    that no profile records the call), then before(), then the real os._exit.  A gate of ours
    already in place is replaced; an os._exit the program put in place is left alone.  Returns
    whether the gate is in place."""
    global _real, _ours
    if _real is None:
        _real = os._exit
    elif os._exit is not _ours and os._exit is not _real:
        return False
    from . import _fastprof

    gate = _fastprof._exit_gate(stop, before, _real)
    _ours = gate
    os._exit = gate
    return True


def restore() -> None:
    """Puts the real os._exit back when a gate of ours is in place."""
    global _ours
    if _real is not None and _ours is not None and os._exit is _ours:
        os._exit = _real
    _ours = None
