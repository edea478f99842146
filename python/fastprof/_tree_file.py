"""The call tree file (``FILE.tree.json``, what ``CallTree.save`` writes) straight from a
profiler's records, without building the tree.

``fastprof run -o`` and ``Profile.dump_stats`` save the tree beside the pstats file.  Built
as a ``CallTree`` first, a run of a few hundred thousand call paths spends seconds making,
walking and encoding node objects, and as long again collecting them, where cProfile's ``-o``
writes its file at once.  Here the core writes the file's node records itself, thread by
thread, straight from its nodes (``_tree_json``, src/profile/tree_json.c: each node's parent
renumbered within its thread); Python adds the keys, the thread names and the head.  The file
reads back as the same tree: the same nodes, counts and times (each time written with 17
significant digits, which read back as the same float).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from ._proc_tree import _unique
from ._threads import profiled_thread_names
from .keys import is_disable, label

__all__ = ["TreeText", "tree_text"]


class TreeText:
    """A tree file's text, saved as ``CallTree.save`` saves a tree (fastprof.tree.save_tree
    takes either)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def save(self, path: Any) -> None:
        """Writes the text to path.  Returns nothing."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.text)


def tree_text(
    prof: Any, *, wall: Optional[float] = None, drop_disable: bool = False
) -> Optional[TreeText]:
    """The tree file of what prof (a fastprof profiler with the core's records) has recorded,
    as ``CallTree.from_profile(prof)`` would save it (with ``wall``, the run's wall time, when
    given); with ``drop_disable`` without the runner's own call of ``disable`` (a top-level
    node of it with no children, as fastprof._runstats.own_tree drops it).  None when the
    profiler keeps no tree (no records and nothing merged), as report.source.tree_of."""
    if not hasattr(prof, "_tree_json"):
        return None
    _, funcs, _ = prof._raw()
    ukeys, kid = _unique([label(f[0]) for f in funcs])
    if drop_disable:
        drop = bytes(is_disable(ukeys[k]) for k in kid)
    else:
        drop = bytes(len(kid))
    # each thread's records, formatted in C: [parent,key,ncalls,tottime,cumtime],...
    threads, merged = prof._tree_json(kid, drop)
    if not threads and not merged:
        return None
    known = profiled_thread_names(prof)
    entries = []
    for ident, body in threads:
        name = known.get(ident)
        named = "" if name is None else f',"name":{json.dumps(name)}'
        entries.append(f'{{"ident":{int(ident)},"nodes":[{body}]{named}}}')
    from .tree import _TREE_VERSION, TREE_FORMAT

    head: Dict[str, Any] = {
        "format": TREE_FORMAT,
        "version": _TREE_VERSION,
        "merged": int(merged),
        "node_cap": getattr(prof, "tree_nodes", None),
    }
    if wall is not None:
        head["wall"] = wall
    start = json.dumps(head, separators=(",", ":"))[:-1]
    keys = json.dumps([list(k) for k in ukeys], separators=(",", ":"))
    return TreeText(f'{start},"keys":{keys},"threads":[{",".join(entries)}]}}')
