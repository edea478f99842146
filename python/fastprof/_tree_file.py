"""The call tree file (``FILE.tree.json``, what ``CallTree.save`` writes) straight from a
profiler's records, without building the tree.

``fastprof run -o`` and ``Profile.dump_stats`` save the tree beside the pstats file.  Built
as a ``CallTree`` first, a run of a few hundred thousand call paths spends seconds making,
walking and encoding node objects, and as long again collecting them, where cProfile's ``-o``
writes its file at once.  Here the core's flat records become the file's flat records in one
Python pass (each node's parent renumbered within its thread) and one formatting pass in C;
a time's text is made once per distinct tick count (fastprof._proc_tree's way).  The file
reads back as the same tree: the same nodes, counts and times (each time written with 17
significant digits, which read back as the same float).
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Dict, List, Optional

from ._proc_tree import _texts, _unique
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
    if not hasattr(prof, "_raw_tree"):
        return None
    tspt, nodes, threads, merged = prof._raw_tree()
    if not threads and not merged:
        return None
    _, funcs, _ = prof._raw()
    ukeys, kid = _unique([label(f[0]) for f in funcs])
    n = len(nodes)
    if n:
        parents, raw_funcs, thread_of, ncalls, total, _ = map(list, zip(*nodes))
        from .tree import own_ticks

        own = own_ticks(nodes, merged)
    else:
        parents = raw_funcs = thread_of = ncalls = total = own = []
    keep = [True] * n
    if drop_disable:
        has_kids = bytearray(n)
        for p in parents:
            if p >= 0:
                has_kids[p] = 1
        for i in range(n):
            if parents[i] < 0 and not has_kids[i] and is_disable(ukeys[kid[raw_funcs[i]]]):
                keep[i] = False
    # each thread's records (in the core's order), their parents renumbered within the thread
    per: List[List[int]] = [[] for _ in threads]
    up: List[int]
    if len(threads) == 1 and all(keep) and all(t == 0 for t in thread_of):
        per[0] = list(range(n))  # one thread, nothing left out: the core's numbering
        up = parents
        if any(p >= i for i, p in enumerate(parents)):
            raise ValueError("malformed tree records: a parent must precede its children")
    else:
        local = [0] * n
        up = [0] * n
        count = [0] * len(threads)
        for i in range(n):
            if not keep[i]:
                continue
            parent, thread = parents[i], thread_of[i]
            if parent >= i or not 0 <= thread < len(threads):
                raise ValueError(
                    f"malformed tree record {i}: a parent must precede its children and name "
                    f"a known thread"
                )
            local[i] = count[thread]
            count[thread] += 1
            per[thread].append(i)
            up[i] = -1 if parent < 0 else local[parent]
    ticks = list(set(total).union(own))
    text = dict(zip(ticks, _texts([t * tspt for t in ticks])))
    known = profiled_thread_names(prof)
    entries = []
    for t, ident in enumerate(threads):
        idx = per[t]
        # the records in one formatting pass (C's loop): [parent,key,ncalls,tottime,cumtime]
        body = ("[%d,%d,%d,%s,%s]," * len(idx))[:-1] % tuple(
            chain.from_iterable(
                zip(
                    map(up.__getitem__, idx),
                    (kid[raw_funcs[i]] for i in idx),
                    map(ncalls.__getitem__, idx),
                    (text[own[i]] for i in idx),
                    (text[total[i]] for i in idx),
                )
            )
        )
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
