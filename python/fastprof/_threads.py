"""The names of the threads ``threading`` knows, for the per-thread views (a module of its own:
the profiler reads them at ``enable()`` without loading the tree or the views)."""

from __future__ import annotations

import threading
from typing import Dict, List

__all__ = ["known_threads", "thread_names"]


def known_threads() -> List[threading.Thread]:
    """The threads ``threading`` knows now: the finished ones whose Thread object is still
    alive, then the running ones (a thread may be in both)."""
    try:
        return list(getattr(threading, "_dangling", ())) + threading.enumerate()
    except RuntimeError:  # a thread made another Thread meanwhile
        return threading.enumerate()


def thread_names() -> Dict[int, str]:
    """{ident: name} of the threads ``threading`` knows now: the running ones, and the finished
    ones whose Thread object is still alive (an ident a later thread reused names both)."""
    found: Dict[int, List[str]] = {}
    for t in known_threads():
        ident = t.ident
        if ident is None:
            continue
        names = found.setdefault(ident, [])
        if t.name not in names:
            names.append(t.name)
    return {i: ", ".join(n) for i, n in found.items()}
