"""The profile of a run without the runner's own call of ``disable``: the pstats dictionary,
the call tree and the tree's core records, as ``fastprof run`` writes them for its process,
each process of a job for its own, and ``%fastprof`` returns them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .keys import is_disable

if TYPE_CHECKING:
    from .tree import CallTree

__all__ = ["is_disable", "own_records", "own_stats", "own_tree"]


def own_stats(prof: Any) -> Dict[Any, Any]:
    """The profile of the run as a pstats dictionary, without the runner's own call of
    ``disable`` (a call with no recorded caller); calls of it from the script are kept."""
    if getattr(prof, "_busy", False):  # see children.write_now: the tables as they stand
        prof.snapshot_stats()
    else:
        prof.create_stats()
    stats = dict(prof.stats)
    for key in [k for k in stats if is_disable(k)]:
        callers = stats[key][4]
        if not callers:
            del stats[key]
            continue
        sums = [sum(e[i] for e in callers.values()) for i in range(4)]
        stats[key] = (sums[1], sums[0], sums[2], sums[3], callers)
    return stats


def own_tree(tree: Optional["CallTree"]) -> Optional["CallTree"]:
    """``tree`` (changed in place) without the runner's own call of ``disable``: a top-level
    node of it with no children, in any thread; calls of it from the script are kept, as
    own_stats keeps them."""
    if tree is None:
        return None
    for root in tree.threads.values():
        kept = [c for c in root.children if not (is_disable(c.key) and not c.children)]
        if len(kept) != len(root.children):
            root.children = kept
            root.cumtime = sum(c.cumtime for c in kept)
    return tree


def own_records(keys: Sequence[Any], nodes: Sequence[Any]) -> Sequence[Any]:
    """The core's tree records ``nodes`` ((parent, func, ...), a parent before its children,
    -1 for a top-level call; ``keys[func]`` each function's pstats key) without the runner's
    own call of ``disable`` (as own_tree), the parents renumbered.  ``nodes`` itself when
    there is none (the common case costs one pass over the records)."""
    runner = {i for i, k in enumerate(keys) if is_disable(k)}
    if not runner:
        return nodes
    tops = [i for i, n in enumerate(nodes) if n[0] < 0 and n[1] in runner]
    if not tops:
        return nodes
    parents = {n[0] for n in nodes}
    drop = {i for i in tops if i not in parents}
    if not drop:
        return nodes
    if min(drop) == len(nodes) - len(drop):  # the last records (disable ends the run)
        return nodes[: min(drop)]
    index: List[int] = []
    out: List[Any] = []
    for i, n in enumerate(nodes):
        index.append(len(out))
        if i in drop:
            continue
        out.append(n if n[0] < 0 else (index[n[0]],) + tuple(n[1:]))
    return out
