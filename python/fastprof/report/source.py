"""Where the views get their data: a live profiler's call tree (when its core records one),
and a saved profile's pstats file with the call tree saved beside it (``FILE.tree.json``)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Tuple

from ..tree import CallTree, FuncKey, tree_path
from .display import is_runner_frame
from .escape import printable

__all__ = ["tree_of", "load_profile", "totals_of"]


def tree_of(prof: Any) -> Optional[CallTree]:
    """The call tree a profiler recorded, or None when its core keeps none (no ``_raw_tree``)
    or the tree was switched off (``tree_nodes=0``: no node and nothing merged)."""
    if not hasattr(prof, "_raw_tree"):
        return None
    tree = prof.tree() if hasattr(prof, "tree") else CallTree.from_profile(prof)
    if not tree.threads and not tree.merged:
        return None
    return tree


def load_profile(path: str) -> Tuple[Any, Optional[CallTree]]:
    """The ``fastprof.Stats`` of a saved profile and its call tree (None when no
    FILE.tree.json is beside it, or when the tree's functions are not the profile's: the
    pstats file was rewritten since, by cProfile say; one line on stderr says so).
    OSError/ValueError naming the file otherwise."""
    from ..stats import Stats

    st = Stats.load(path)
    where = tree_path(path)
    if not os.path.exists(where):
        return st, None
    tree = CallTree.load(where)
    if not tree.describes({r.key: r.ncalls for r in st.rows}, {r.key: r.tottime for r in st.rows}):
        print(
            f"fastprof: {printable(where)} is not the call tree of {printable(path)} (their "
            f"functions, call counts or own times differ: the profile was rewritten since?); the tree is "
            f"not used",
            file=sys.stderr,
        )
        return Stats(st.to_dict()), None  # nor by its per-thread tables
    return st, tree


def totals_of(stats: Any) -> Dict[FuncKey, Tuple[int, float, float]]:
    """{key: (ncalls, tottime, cumtime)} of a ``fastprof.Stats``, without the profiler's own
    top-level ``disable`` call."""
    out: Dict[FuncKey, Tuple[int, float, float]] = {}
    for r in stats.rows:
        if is_runner_frame(r.key) and not r.callers:
            continue
        out[r.key] = (r.ncalls, r.tottime, r.cumtime)
    return out
