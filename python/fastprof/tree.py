"""The calling-context tree: one node per distinct path of functions from a thread's root, with
exact calls, own time and total time per node.

The C core records the tree as flat records (see ``CallTree.from_raw``); this module gives it a
shape to walk, merge, save and derive from.  A node is a path, and a path is never active twice at
once in a thread, so a node's total time never double-counts.  The tree is not folded: a recursive
path is as deep as the stack was (the interpreter's recursion limit bounds it), and the node cap
bounds the whole tree; views fold recursion when they draw it.
"""

from __future__ import annotations

import _thread
import json
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _fastprof
from ._quiet import quiet
from ._threads import profiled_thread_names, thread_names
from .keys import is_disable, label

__all__ = ["CallTree", "Node", "FuncKey", "TREE_FORMAT", "save_tree", "thread_names", "tree_path"]

FuncKey = Tuple[str, int, str]
"""A pstats function key: (filename, first line, name), or ('~', 0, label) for builtins."""

EdgeStats = Tuple[int, int, float, float]
"""A caller's calls of a function, as pstats holds them: (calls, primitive calls, tottime,
cumtime)."""

PstatsEntry = Tuple[int, int, float, float, Dict[FuncKey, EdgeStats]]
"""One function in pstats' dictionary: (primitive calls, calls, tottime, cumtime, callers)."""

TREE_FORMAT = "fastprof-tree"
_TREE_VERSION = 1


class Node:
    """One path of the tree: the function at its end (``key``), the completed calls made along
    exactly this path (``ncalls``), their own time (``tottime``) and total time (``cumtime``),
    in seconds.  A thread's root has ``key`` None and sums its children."""

    # _snap and _slot: where a node made from the core's snapshot finds its children until
    # it has them (see _LazyNode); it becomes a plain Node then
    __slots__ = (
        "key", "ncalls", "tottime", "cumtime", "children", "parent", "func", "_snap", "_slot"
    )  # fmt: skip
    _snap: Optional["_Snapshot"]
    _slot: int

    def __init__(
        self,
        key: Optional[FuncKey],
        ncalls: int = 0,
        tottime: float = 0.0,
        cumtime: float = 0.0,
        parent: Optional["Node"] = None,
        func: int = -1,
    ) -> None:
        self.key = key
        self.ncalls = ncalls
        self.tottime = tottime
        self.cumtime = cumtime
        self.children: List[Node] = []
        self.parent = parent
        self.func = func  # the core's function index (-1: none); tells apart equal keys

    def __repr__(self) -> str:
        name = "<root>" if self.key is None else self.key[2]
        return (
            f"Node({name!r}, ncalls={self.ncalls}, tottime={self.tottime:.6g}, "
            f"cumtime={self.cumtime:.6g}, children={len(self.children)})"
        )

    @property
    def is_root(self) -> bool:
        """True for a thread's root."""
        return self.key is None

    def path(self) -> List[FuncKey]:
        """The function keys from the thread's root (excluded) down to this node."""
        out: List[FuncKey] = []
        n: Optional[Node] = self
        while n is not None and n.key is not None:
            out.append(n.key)
            n = n.parent
        out.reverse()
        return out

    def walk(self) -> Iterator["Node"]:
        """This node and every node below it, parents before children (iterative: deep
        recursion makes deep trees)."""
        stack = [self]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def child(self, key: FuncKey) -> Optional["Node"]:
        """The child whose function is ``key``, or None."""
        for c in self.children:
            if c.key == key:
                return c
        return None


_NODE_CHILDREN = Node.__dict__["children"]  # the slot, under _LazyNode's property


class _Snapshot:
    """The core's tree as ``Profiler._tree_snapshot()`` gives it, made into nodes a node's
    children at a time: each record (slot of the parent, func, ncalls, tt, own) in ticks of
    ``spt`` seconds; slot s's children are ``kids[first[s]:first[s + 1]]``, the slot of thread
    t's root ``n + t``.  Once ``LAZY`` nodes are made one parent at a time (a reader walking
    the whole tree), the rest are made in one pass, which costs less a node.  Threads reading
    one tree at once make each node's children once (``lock``)."""

    LAZY = 4096

    __slots__ = (
        "keys", "spt", "recs", "first", "kids", "n", "made", "count", "done", "lock", "block",
        "threads", "libs",
    )  # fmt: skip

    def __init__(self, keys: List[FuncKey], spt: float, block: bytes, threads: int) -> None:
        words = memoryview(block).cast("q")
        n = (len(words) - threads - 1) // 7
        self.keys, self.spt, self.n = keys, spt, n
        self.block, self.threads = block, threads
        self.libs = bytearray(len(keys))  # _fastprof._tree_fold's cache: 1 user code, 2 library
        self.recs = words[: 5 * n]
        self.first = words[5 * n : 6 * n + threads + 1]
        self.kids = words[6 * n + threads + 1 :]
        self.made: List[Optional[Node]] = [None] * n  # by index, once made
        self.count = 0  # nodes made one parent at a time
        self.done = False  # every node made
        self.lock = _thread.RLock()

    def children(self, parent: Node, slot: int) -> List[Node]:
        """New nodes for the records below slot (parent's), in the order the core first met
        them, each a _LazyNode."""
        recs, keys, spt, made = self.recs, self.keys, self.spt, self.made
        out: List[Node] = []
        for j in range(self.first[slot], self.first[slot + 1]):
            k = self.kids[j]
            b = 5 * k
            func = recs[b + 1]
            node = _LazyNode(keys[func], recs[b + 2], recs[b + 4] * spt, recs[b + 3] * spt)
            node.parent, node.func, node._snap, node._slot = parent, func, self, k
            out.append(node)
            made[k] = node
        self.count += len(out)
        return out

    def record(self, k: int) -> Tuple[FuncKey, int, float, float]:
        """Record k's key, calls, own and total time (seconds), as its node would hold them."""
        b = 5 * k
        recs = self.recs
        return self.keys[recs[b + 1]], recs[b + 2], recs[b + 4] * self.spt, recs[b + 3] * self.spt

    def fold(
        self,
        slot: int,
        level: int,
        row: Any,
        recursion: bool,
        libraries: bool,
        is_lib: Callable[[FuncKey], bool],
    ) -> List[int]:
        """Folds the records below slot into row (a view's Row: its calls, own time, levels and
        hidden frames updated) as display_tree folds nodes, without making them; returns the
        records that make rows of their own, in order (see _fastprof._tree_fold)."""
        row.ncalls, row.tottime, row.levels, row.hidden, made = _fastprof._tree_fold(
            self.block, self.threads, slot, level, self.keys, self.libs, is_lib, row.key,
            recursion, libraries, self.spt, row.ncalls, row.tottime, row.levels, row.hidden,
        )  # fmt: skip
        return made

    def columns(
        self, slot: int, row: int, level: int, keymap: Any, number: Any, cols: Sequence[List[Any]]
    ) -> None:
        """Appends to the HTML report's columns cols (parent, key, calls, own, total, levels)
        the rows below row (the node of record slot, at recursion level), as
        report.html._tree_threads makes them, without making nodes; key indices come from
        number(key), cached in keymap (see _fastprof._tree_columns).  Returns None."""
        _fastprof._tree_columns(
            self.block, self.threads, slot, row, level, self.keys, keymap, number, self.spt, *cols
        )

    def fill(self, node: Node) -> None:
        """Gives node (a _LazyNode) its children and makes it a plain Node (past ``LAZY`` made,
        every node gets its own).  Returns None."""
        with self.lock:
            if type(node) is not _LazyNode:
                return  # another thread did meanwhile
            if not self.done and self.count >= self.LAZY:
                self._complete()
            if type(node) is _LazyNode:  # the pass gave it none: it has none
                _NODE_CHILDREN.__set__(node, [] if self.done else self.children(node, node._slot))
                _plain(node)

    def _complete(self) -> None:
        """Makes every node not made yet, in index order (a parent before its children, each
        parent's children in their order), as plain Nodes.  Returns None."""
        recs, keys, spt, made = self.recs, self.keys, self.spt, self.made
        get = _NODE_CHILDREN.__get__
        # the children of the nodes other threads can see (made before), given them at the
        # end: a reader never sees a list being filled
        lists: Dict[int, Tuple[Node, List[Node]]] = {}
        for k in range(self.n):
            if made[k] is not None:
                continue
            b = 5 * k
            parent = made[recs[b]]  # made: a root's children all are, and parents come first
            assert parent is not None
            func = recs[b + 1]
            node = Node(keys[func], recs[b + 2], recs[b + 4] * spt, recs[b + 3] * spt, parent, func)
            if type(parent) is _LazyNode:  # made before, without children yet
                lists.setdefault(id(parent), (parent, []))[1].append(node)
            else:  # made in this pass, seen by no other thread yet
                get(parent).append(node)
            made[k] = node
        for parent, kids in lists.values():
            _NODE_CHILDREN.__set__(parent, kids)
            _plain(parent)
        self.done = True


def unread(node: Node) -> Optional[Tuple[_Snapshot, int]]:
    """(snapshot, record) of a node of a live profiler's tree whose children were never read
    (the views walk the records below it in C, making no node), else None.  The node is read
    once: another thread may fill it meanwhile."""
    snap = node._snap if type(node) is _LazyNode else None
    return None if snap is None else (snap, node._slot)


def _plain(node: Node) -> None:
    """Makes a _LazyNode whose children are set a plain Node.  Returns None."""
    node._snap = None
    node.__class__ = Node


def _children_get(node: Node) -> List[Node]:
    """A _LazyNode's children, made first (quietly: reading the tree of an enabled profiler
    records none of it, as Profile.tree() records nothing)."""
    snap = node._snap
    if snap is not None:
        snap.fill(node)
    return _NODE_CHILDREN.__get__(node)


def _children_set(node: Node, value: List[Node]) -> None:
    """Sets a _LazyNode's children (made first, so that no later pass adds them to value)."""
    snap = node._snap
    if snap is not None:
        snap.fill(node)
    _NODE_CHILDREN.__set__(node, value)
    if type(node) is _LazyNode:  # an unpickled one: no snapshot
        _plain(node)


class _LazyNode(Node):
    """A node whose children are made from the core's snapshot when first read (views read the
    paths above their threshold, not every path of a wide program); it is a plain Node from
    then on.  ``children`` can be assigned and changed as a Node's."""

    __slots__ = ()

    def __init__(self, key: FuncKey, ncalls: int, tottime: float, cumtime: float) -> None:
        # parent, func, _snap and _slot are set by the maker (_Snapshot.children)
        self.key, self.ncalls, self.tottime, self.cumtime = key, ncalls, tottime, cumtime

    children = property(quiet(_children_get), quiet(_children_set))

    def __reduce_ex__(self, protocol: Any) -> Any:
        """A plain Node's (copy and pickle read the slots; the snapshot is no data of it)."""
        if self._snap is not None:
            self._snap.fill(self)
        return object.__reduce_ex__(self, protocol)  # of the Node it now is


def own_ticks(nodes: Sequence[Tuple[int, int, int, int, int, int]], merged: int) -> List[int]:
    """Each node's own time in the tree, in ticks, from the core's records ``nodes``
    (parent, func, thread, ncalls, tt, it), a parent before its children: its ``it``, or past
    the node cap (``merged`` calls without a node) its total less its children's totals, so
    that the merged calls' time is their caller's own time (as the views show it)."""
    if not merged:
        return [n[5] for n in nodes]
    below = [0] * len(nodes)
    for parent, _, _, _, tt, _ in nodes:
        if 0 <= parent < len(below):
            below[parent] += tt
    return [n[4] - b for n, b in zip(nodes, below)]


class CallTree:
    """Per-thread calling-context trees of one profile.

    ``threads`` maps each thread's ident to its root; ``merged`` counts the calls that got no
    node of their own because the node cap was reached (their time is in the pstats view, and
    their parent node's total time).  ``names`` maps idents to thread names where they were
    known when the tree was read; ``wall`` is the wall time of the run in seconds when the
    runner measured it (``fastprof run``), else None.  ``processes`` is True for the merged
    tree of a job (``run --subprocesses``, ``merge``), whose roots are its processes, keyed
    by pid, instead of threads.
    """

    def __init__(
        self,
        threads: Optional[Dict[int, Node]] = None,
        merged: int = 0,
        node_cap: Optional[int] = None,
        names: Optional[Dict[int, str]] = None,
        wall: Optional[float] = None,
        processes: bool = False,
    ) -> None:
        self.threads: Dict[int, Node] = dict(threads or {})
        self.merged = merged
        self.node_cap = node_cap
        self.names: Dict[int, str] = dict(names or {})
        self.wall = wall
        self.processes = processes

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_raw(
        cls,
        spt: float,
        keys: Sequence[FuncKey],
        nodes: Sequence[Tuple[int, int, int, int, int, int]],
        threads: Sequence[int],
        merged: int = 0,
        node_cap: Optional[int] = None,
    ) -> "CallTree":
        """The tree from the core's records: ``nodes`` as (parent, func, thread, ncalls, tt,
        it) in ticks of ``spt`` seconds, a parent before its children (-1: a top-level frame
        of thread ``threads[thread]``); ``keys[func]`` is each function's pstats key.  Past
        the node cap (``merged`` calls without a node), a node's own time is its total less
        its children's totals: the merged calls' time is their caller's own time, as in
        pyinstrument's and speedscope's views, and every node's total is its own time and its
        children's."""
        roots = [Node(None) for _ in threads]
        made: List[Node] = []
        owns = own_ticks(nodes, merged)
        for (parent, func, thread, ncalls, tt, _), own in zip(nodes, owns):
            if parent >= len(made) or not 0 <= thread < len(roots):
                raise ValueError(
                    f"malformed tree record {(parent, func, thread)!r}: a parent "
                    f"must precede its children and name a known thread"
                )
            up = roots[thread] if parent < 0 else made[parent]
            n = Node(keys[func], ncalls, own * spt, tt * spt, up, func)
            up.children.append(n)
            made.append(n)
        for r in roots:
            r.cumtime = sum(c.cumtime for c in r.children)
        return cls(dict(zip(threads, roots)), merged, node_cap)

    @classmethod
    def from_profile(cls, prof: Any, *, ticks: bool = False) -> "CallTree":
        """The tree a ``fastprof.Profile`` (or its core) has recorded so far, with the names of
        its threads where known: those running when it was enabled, and those ``threading``
        still knows (running, or their Thread object still alive).  With ``ticks=True`` the times are the
        core's integer ticks (as floats, exact) rather than seconds.  A node's children are made
        when first read, from a copy of the core's records taken now (a view that reads the
        paths above its threshold makes no object for the paths below it)."""
        # the tree first: an enabled profiler records these reads too, and its functions
        # only grow, so every function the tree names is in the list read after it
        tspt, threads, merged, block = prof._tree_snapshot()
        spt, funcs, _ = prof._raw()
        snap = _Snapshot([label(f[0]) for f in funcs], 1.0 if ticks else tspt, block, len(threads))
        roots: Dict[int, Node] = {}
        for t, ident in enumerate(threads):
            root = roots[ident] = Node(None)
            root.children = snap.children(root, snap.n + t)
            root.cumtime = sum(c.cumtime for c in root.children)
        tree = cls(roots, merged, getattr(prof, "tree_nodes", None))
        known = profiled_thread_names(prof)
        tree.names = {i: known[i] for i in tree.threads if i in known}
        return tree

    # -- reading ----------------------------------------------------------------------------

    def roots(self) -> List[Node]:
        """The threads' roots, in first-seen order."""
        return list(self.threads.values())

    def nodes(self) -> Iterator[Node]:
        """Every node of every thread (roots excluded), parents before children."""
        for r in self.threads.values():
            for n in r.walk():
                if n.key is not None:
                    yield n

    def __len__(self) -> int:
        return sum(1 for _ in self.nodes())

    @property
    def total_time(self) -> float:
        """The summed total time of the threads' top-level calls, in seconds."""
        return sum(r.cumtime for r in self.threads.values())

    def describes(
        self, calls: Mapping[FuncKey, int], tottimes: Optional[Mapping[FuncKey, float]] = None
    ) -> bool:
        """Whether this tree can be the call tree of the pstats profile whose functions and
        call counts are ``calls`` (and own times ``tottimes``, when given): the same functions
        with the same counts and, to a millionth, the same own times (the runner's own
        ``disable`` aside, which files of earlier versions kept in the tree alone), or fewer
        functions and calls when the node cap merged calls (``merged``).  A pstats file
        rewritten since fails it: by cProfile, say, by ``pstats.Stats.add`` of another run of
        the same script (the same functions, more calls), or by a dump of another run with
        the same calls (other times)."""
        totals = self.function_totals()
        mine = {k: v[0] for k, v in totals.items() if not is_disable(k)}
        theirs = {k: n for k, n in calls.items() if not is_disable(k)}
        if self.merged:
            return all(k in theirs and n <= theirs[k] for k, n in mine.items())
        if mine != theirs:
            return False
        if tottimes is None:
            return True
        return all(
            abs(totals[k][1] - tottimes[k]) <= 1e-6 * abs(tottimes[k]) + 1e-9
            for k in mine
            if k in tottimes
        )

    def merged_threads(self) -> Node:
        """One root that sums every thread's tree path by path."""
        out = Node(None)
        for r in self.threads.values():
            _merge_into(out, r)
        out.cumtime = sum(c.cumtime for c in out.children)
        return out

    def function_totals(self) -> Dict[FuncKey, Tuple[int, float, float]]:
        """Per function, (ncalls, tottime, cumtime) derived from the tree: calls and own time
        summed over its nodes, total time over its nodes that have no ancestor of the same
        function (the outermost calls, as pstats counts cumtime)."""
        out: Dict[FuncKey, List[Any]] = {}
        for root in self.threads.values():
            # depth-first with the functions open on the path counted
            open_funcs: Dict[Any, int] = {}
            stack: List[Tuple[Node, bool]] = [(c, False) for c in reversed(root.children)]
            while stack:
                n, leaving = stack.pop()
                ident = n.func if n.func >= 0 else n.key
                if leaving:
                    open_funcs[ident] -= 1
                    continue
                assert n.key is not None
                acc = out.setdefault(n.key, [0, 0.0, 0.0])
                acc[0] += n.ncalls
                acc[1] += n.tottime
                if not open_funcs.get(ident):
                    acc[2] += n.cumtime
                open_funcs[ident] = open_funcs.get(ident, 0) + 1
                stack.append((n, True))
                stack.extend((c, False) for c in reversed(n.children))
        return {k: (v[0], v[1], v[2]) for k, v in out.items()}

    def thread_pstats(self, ident: int) -> Dict[FuncKey, PstatsEntry]:
        """pstats' dictionary {key: (primitive calls, calls, tottime, cumtime, callers)} of
        thread ``ident`` alone, derived from its nodes as pstats counts: calls and own time
        summed over the function's nodes; a call is primitive, and its total time counted,
        when no ancestor node is a call of the same function (the outermost activation); a
        caller's calls likewise, recursive when an ancestor is a call along the same edge.
        Summed over the threads it equals the profile's pstats dictionary exactly, unless the
        node cap merged calls (``merged``), which no thread's nodes hold.  KeyError for an
        unknown ident."""
        return pstats_of(self.threads[ident])

    # -- saving -----------------------------------------------------------------------------

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-safe form: flat node records (no nesting, so any depth saves)."""
        key_ids: Dict[FuncKey, int] = {}
        keys: List[List[Any]] = []
        threads: List[Dict[str, Any]] = []
        records: List[List[Any]] = []
        for ident, root in self.threads.items():
            first = len(records)
            index: Dict[int, int] = {id(root): -1}
            for n in root.walk():
                if n.key is None:
                    continue
                kid = key_ids.get(n.key)
                if kid is None:
                    kid = key_ids[n.key] = len(keys)
                    keys.append(list(n.key))
                assert n.parent is not None
                index[id(n)] = len(records) - first
                records.append([index[id(n.parent)], kid, n.ncalls, n.tottime, n.cumtime])
            entry: Dict[str, Any] = {"ident": ident, "nodes": records[first:]}
            if ident in self.names:
                entry["name"] = self.names[ident]
            threads.append(entry)
        out = {
            "format": TREE_FORMAT,
            "version": _TREE_VERSION,
            "merged": self.merged,
            "node_cap": self.node_cap,
            "keys": keys,
            "threads": threads,
        }
        if self.wall is not None:
            out["wall"] = self.wall
        if self.processes:
            out["roots"] = "processes"
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "CallTree":
        """The tree ``to_dict`` wrote; ValueError naming what is wrong otherwise."""
        if not isinstance(data, dict) or data.get("format") != TREE_FORMAT:
            raise ValueError(f"not a fastprof call tree (expected format {TREE_FORMAT!r})")
        if data.get("version") != _TREE_VERSION:
            raise ValueError(
                f"call tree version {data.get('version')!r} is not supported "
                f"(this fastprof reads version {_TREE_VERSION})"
            )
        try:
            keys = [_as_key(k) for k in data["keys"]]
            merged = int(data.get("merged", 0))
            cap = data.get("node_cap")
            wall = data.get("wall")
            roots = data.get("roots", "threads")
            if roots not in ("threads", "processes"):
                raise ValueError(f"roots {roots!r} is not 'threads' or 'processes'")
            if wall is not None and (type(wall) not in (int, float) or not 0 <= wall < 1e300):
                raise ValueError(f"wall time {wall!r} is not a non-negative number of seconds")
            if cap is not None and (type(cap) is not int or cap < 0):
                raise ValueError(f"malformed call tree: node cap {cap!r} is not a count >= 0")
            out: Dict[int, Node] = {}
            names: Dict[int, str] = {}
            for t in data["threads"]:
                if isinstance(t.get("name"), str):
                    names[int(t["ident"])] = t["name"]
                root = Node(None)
                made: List[Node] = []
                for parent, kid, ncalls, tottime, cumtime in t["nodes"]:
                    if not -1 <= parent < len(made) or isinstance(parent, bool):
                        raise ValueError(f"node {len(made)} names parent {parent!r}")
                    up = root if parent < 0 else made[parent]
                    n = Node(keys[kid], int(ncalls), float(tottime), float(cumtime), up)
                    up.children.append(n)
                    made.append(n)
                root.cumtime = sum(c.cumtime for c in root.children)
                out[int(t["ident"])] = root
        except (KeyError, TypeError, IndexError, AttributeError, OverflowError) as e:
            raise ValueError(f"malformed call tree: {type(e).__name__}: {e}") from None
        return cls(
            out,
            merged,
            cap,
            names,
            None if wall is None else wall,
            processes=roots == "processes",
        )

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the tree as JSON to ``path``."""
        text = json.dumps(self.to_dict(), separators=(",", ":"))  # one pass of the C encoder
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "CallTree":
        """Reads a tree ``save`` wrote; ValueError naming the file when it is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return cls.from_dict(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise ValueError(f"{os.fspath(path)}: {e}") from None


def pstats_of(root: Node) -> Dict[FuncKey, PstatsEntry]:
    """pstats' dictionary of the tree below ``root`` (see ``CallTree.thread_pstats``);
    iterative, as deep trees are."""
    funcs: Dict[FuncKey, List[Any]] = {}
    open_funcs: Dict[Any, int] = {}
    open_edges: Dict[Tuple[Any, Any], int] = {}
    stack: List[Tuple[Node, bool]] = [(c, False) for c in reversed(root.children)]
    while stack:
        n, leaving = stack.pop()
        assert n.key is not None and n.parent is not None
        up = n.parent
        fid = n.func if n.func >= 0 else n.key
        edge = None if up.key is None else (up.func if up.func >= 0 else up.key, fid)
        if leaving:
            open_funcs[fid] -= 1
            if edge is not None:
                open_edges[edge] -= 1
            continue
        acc = funcs.get(n.key)
        if acc is None:
            acc = funcs[n.key] = [0, 0, 0.0, 0.0, {}]
        acc[1] += n.ncalls
        acc[2] += n.tottime
        if not open_funcs.get(fid):
            acc[0] += n.ncalls
            acc[3] += n.cumtime
        open_funcs[fid] = open_funcs.get(fid, 0) + 1
        if edge is not None:
            e = acc[4].get(up.key)
            if e is None:
                e = acc[4][up.key] = [0, 0, 0.0, 0.0]
            e[0] += n.ncalls
            e[2] += n.tottime
            if not open_edges.get(edge):
                e[1] += n.ncalls
                e[3] += n.cumtime
            open_edges[edge] = open_edges.get(edge, 0) + 1
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(n.children))
    return {
        k: (v[0], v[1], v[2], v[3], {ck: (e[0], e[1], e[2], e[3]) for ck, e in v[4].items()})
        for k, v in funcs.items()
    }


def tree_path(profile_path: Union[str, "os.PathLike[str]"]) -> str:
    """Where the call tree of the pstats file ``profile_path`` is saved beside it: FILE.tree.json,
    or, when that name would pass the 255-byte limit of a file name (pytest-profiling names
    files after long test ids), FILE cut short and a digest of its whole name."""
    path = os.fspath(profile_path)
    head, name = os.path.split(path)
    suffix = ".tree.json"
    raw = os.fsencode(name)
    if len(raw) + len(suffix) <= 255:
        return path + suffix
    import hashlib

    digest = hashlib.sha1(raw).hexdigest()[:16]
    keep = raw[: 255 - len(suffix) - len(digest) - 1]
    # never a part of a UTF-8 character: the last multi-byte one goes whole
    while keep and keep[-1] & 0xC0 == 0x80:
        keep = keep[:-1]
    if keep and keep[-1] >= 0xC0:
        keep = keep[:-1]
    return os.path.join(head, os.fsdecode(keep) + "." + digest + suffix)


def save_tree(profile_path: Any, tree: Optional[Any]) -> Optional[str]:
    """Writes ``tree`` (a ``CallTree``, or a ``fastprof._tree_file.TreeText``: the file's text
    made from a profiler's records) beside the pstats file ``profile_path`` (a str, bytes or
    os.PathLike; as FILE.tree.json) and returns where; removes a stale tree file there and returns None
    when ``tree`` is None.  Writes nothing beside what is not a regular file of its own (a
    pipe, /dev/null, a link such as /dev/stdout or /proc/self/fd/N: no "beside" to write to),
    and warns (RuntimeWarning) instead of raising where the tree cannot be written: the
    pstats file, which cProfile's users read, is written already."""
    if isinstance(profile_path, int):  # a file descriptor, as open() takes: no name to go by
        return None
    path = os.fsdecode(profile_path)
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    where = tree_path(path)
    if tree is None:
        try:
            os.unlink(where)
        except OSError:
            pass
        return None
    try:
        tree.save(where)
    except OSError as exc:
        import warnings

        warnings.warn(f"the call tree was not saved beside {path}: {exc}", RuntimeWarning, 3)
        return None
    return where


def _as_key(k: Any) -> FuncKey:
    if not (
        isinstance(k, list)
        and len(k) == 3
        and isinstance(k[0], str)
        and isinstance(k[1], int)
        and isinstance(k[2], str)
    ):
        raise ValueError(f"malformed function key {k!r}")
    return (k[0], k[1], k[2])


def _merge_into(dst: Node, src: Node) -> None:
    """Adds src's children (and below) to dst's, path by path (iterative)."""
    work = [(dst, src)]
    while work:
        d, s = work.pop()
        index = {c.key: c for c in d.children}
        for c in s.children:
            m = index.get(c.key)
            if m is None:
                m = Node(c.key, 0, 0.0, 0.0, d, c.func)
                d.children.append(m)
                index[c.key] = m
            m.ncalls += c.ncalls
            m.tottime += c.tottime
            m.cumtime += c.cumtime
            work.append((m, c))
