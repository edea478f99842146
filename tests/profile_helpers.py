"""``comparable`` normalises profile dictionaries so that fastprof's and cProfile's can be
compared.  (A module of its own: tests/gpu has a conftest.py too, so ``from conftest import``
would be ambiguous.)"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional

# Entries of the profiler's own enable/disable calls, which differ by name between tools.
_PROFILER_METHOD = re.compile(r"'(enable|disable)' of '[\w.]*Profiler' objects")


def comparable(stats: Dict[Any, Any], keep: Optional[Callable[[Any], bool]] = None,
               times: bool = False) -> Dict[Any, Any]:
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


