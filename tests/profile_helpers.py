"""Helpers of the profiler tests: ``comparable`` normalises profile dictionaries so that
fastprof's and cProfile's can be compared; ``audit_refusing`` and ``ThreadWatch`` check what an
enable() refused by an audit hook leaves behind; ``env_with_package`` is the environment of a
child ``python -m fastprof`` that imports this checkout's package.  (A module of its own: tests/gpu has a
conftest.py too, so ``from conftest import`` would be ambiguous.)"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

# Entries of the profiler's own enable/disable calls, which differ by name between tools.
_PROFILER_METHOD = re.compile(r"'(enable|disable)' of '[\w.]*Profiler?' objects")


def comparable(
    stats: Dict[Any, Any], keep: Optional[Callable[[Any], bool]] = None, times: bool = False
) -> Dict[Any, Any]:
    """A pstats dict reduced to what two profilers must agree on: for every function kept,
    (primitive calls, calls[, tottime, cumtime]) and its callers' (calls, primitive calls
    [, tottime, cumtime]).  Drops the profilers' own enable/disable entries."""

    def ok(key: Any) -> bool:
        if key[0] == "~" and _PROFILER_METHOD.search(key[2]):
            return False
        return keep is None or keep(key)

    n = 4 if times else 2
    out = {}
    for key, (cc, nc, tt, ct, callers) in stats.items():
        if not ok(key):
            continue
        mine = (cc, nc, tt, ct)[:n]
        cl = {ck: tuple(cv)[:n] for ck, cv in callers.items() if ok(ck)}
        out[key] = (mine, cl)
    return out


_REFUSED: Set[str] = set()
_AUDIT_HOOK_ADDED = [False]


def _refusing_audit_hook(event: str, args: Any) -> None:
    if event in _REFUSED:
        raise RuntimeError(f"{event} refused by an audit hook")


@contextlib.contextmanager
def audit_refusing(event: str) -> Iterator[None]:
    """Within the block, the audit event ``event`` raises RuntimeError.  (Audit hooks cannot
    be removed: the one hook stays for the process, refusing only what a block names.)"""
    if not _AUDIT_HOOK_ADDED[0]:
        sys.addaudithook(_refusing_audit_hook)
        _AUDIT_HOOK_ADDED[0] = True
    _REFUSED.add(event)
    try:
        yield
    finally:
        _REFUSED.discard(event)


class ThreadWatch:
    """A thread, running from construction, that waits for ``finish()`` and then records what
    ``probe()`` (say sys.gettrace) returns in it."""

    def __init__(self, probe: Callable[[], Any]) -> None:
        self.seen: List[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(probe,))
        self._thread.start()

    def _run(self, probe: Callable[[], Any]) -> None:
        self._stop.wait(10)
        self.seen.append(probe())

    def finish(self) -> List[Any]:
        """Lets the thread record and end; returns what it recorded."""
        self._stop.set()
        self._thread.join()
        return self.seen


def env_with_package() -> Dict[str, str]:
    """os.environ with the folder holding the fastprof package under test first on
    PYTHONPATH, for a child Python."""
    import fastprof

    env = dict(os.environ)
    src = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env
