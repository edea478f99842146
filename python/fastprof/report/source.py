"""Where the views get their data: a live profiler's call tree (when its core records one),
and a saved profile's pstats file with the call tree saved beside it (``FILE.tree.json``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from ..tree import CallTree, FuncKey, tree_path
from .display import is_runner_frame

__all__ = ["tree_of", "load_profile", "save_tree", "totals_of"]


def tree_of(prof: Any) -> Optional[CallTree]:
    """The call tree a profiler recorded, or None when its core keeps none (no ``_raw_tree``)
    or the tree was switched off (``tree_nodes=0``: no node and nothing merged)."""
    if not hasattr(prof, "_raw_tree"):
        return None
    tree = prof.tree() if hasattr(prof, "tree") else CallTree.from_profile(prof)
    if not tree.threads and not tree.merged:
        return None
    return tree


def save_tree(profile_path: str, tree: Optional[CallTree]) -> Optional[str]:
    """Writes ``tree`` beside the pstats file ``profile_path`` (as FILE.tree.json) and
    returns where; removes a stale tree file there and returns None when ``tree`` is None."""
    where = tree_path(profile_path)
    if tree is None:
        try:
            os.unlink(where)
        except OSError:
            pass
        return None
    tree.save(where)
    return where


def load_profile(path: str) -> Tuple[Any, Optional[CallTree]]:
    """The ``fastprof.Stats`` of a saved profile and its call tree (None when no
    FILE.tree.json is beside it).  OSError/ValueError naming the file otherwise."""
    from ..stats import Stats

    st = Stats.load(path)
    where = tree_path(path)
    tree = CallTree.load(where) if os.path.exists(where) else None
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
