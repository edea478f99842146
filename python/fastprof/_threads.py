"""The names of the threads ``threading`` knows, for the per-thread views (a module of its own:
the profiler reads them at ``enable()`` without loading the tree or the views)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:
    import threading

__all__ = ["known_threads", "thread_names", "profiled_thread_names"]


def known_threads() -> List[threading.Thread]:
    """The threads ``threading`` knows now: the finished ones whose Thread object is still
    alive, then the running ones (a thread may be in both); none while the program has not
    loaded ``threading`` (fastprof does not load it first: the program's own import of it
    shows in its profile, as without fastprof)."""
    threading = sys.modules.get("threading")
    if threading is None:
        return []
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


def _joined(groups: Dict[int, List[str]]) -> Dict[int, str]:
    """{key: "a, b"} of each key's names, in the order first given."""
    return {k: ", ".join(v) for k, v in groups.items() if v}


def profiled_thread_names(prof: Any, by: str = "ident") -> Dict[int, str]:
    """{ident (or, with ``by="native"``, native id): name} of the threads profiler ``prof``
    recorded: the name each had when the core first saw it named (a finished thread whose
    Thread object is gone included), or, for a thread ``threading`` still knows (running, or
    finished with its Thread object alive), the name it has now (it may have been renamed).
    A thread the core saw no name for takes the one ``threading`` gives its ident now or gave
    it at ``enable()``.  Threads that share an ident (one after another) list all their
    names."""
    # a running thread last: it wins an (ident, native id) pair a finished one had
    live = {(t.ident, getattr(t, "native_id", None)): t.name for t in known_threads()}
    groups: Dict[int, List[str]] = {}
    raw = getattr(prof, "_raw_thread_names", None)
    for ident, native, name in raw() if raw is not None else []:
        name = live.get((ident, native), name)
        names = groups.setdefault(native if by == "native" else ident, [])
        if name is not None and name not in names:
            names.append(name)
    out = _joined(groups)
    if by == "ident":
        for ident, name in {**getattr(prof, "_thread_names", {}), **thread_names()}.items():
            out.setdefault(ident, name)
    return out
