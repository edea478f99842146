"""A process's call tree as a job's run directory holds it: the tree summed over the
process's threads path by path, as flat records whose numbers are already JSON text, so that
the runner, after the job, writes the merged tree file by joining text instead of building,
walking and encoding tens of thousands of nodes.

A process writes ``PID.tree.marshal`` with ``encode`` (in the process, at its exit: its own
share of the work, done in parallel with the job's other processes); ``decode`` reads it back
(``check=True`` for a file that may come from anyone: every field is checked, and the text is
matched against JSON's number grammar before it is ever copied into a file); ``tree_json``
writes the run's tree file (what ``CallTree.save`` writes for one root per process) and
``to_call_tree`` builds the ``CallTree`` a view needs.

This module imports only what an interpreter has loaded at start (a child's start and write
must stay cheap); the tree and JSON modules are imported by the functions that read.
"""

from __future__ import annotations

import sys
from array import array
from itertools import chain
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["ProcTree", "TAG", "encode", "decode", "from_root", "tree_json", "to_call_tree"]

TAG = "fastprof-proc-tree"  # the first item of an encoded tree (older files hold raw records)
VERSION = 1

FuncKey = Tuple[str, int, str]


class ProcTree:
    """One process's tree summed over its threads: node i has parent ``parents[i]`` (-1: a
    top-level call; a parent precedes its children) and function ``keys[funcs[i]]``; a node's
    children are the nodes naming it, in node order.  ``template`` is the nodes as the tree
    file's records, ``[parent,%s,ncalls,tottime,cumtime]`` joined by commas, times in seconds
    as JSON numbers of 17 significant digits (each reads back as the same float), with ``%s`` where the function's index in the file's key list goes
    (``template % kids`` fills them all in one call)."""

    __slots__ = ("keys", "parents", "funcs", "template")

    def __init__(
        self, keys: List[FuncKey], parents: List[int], funcs: List[int], template: str
    ) -> None:
        self.keys = keys
        self.parents = parents
        self.funcs = funcs
        self.template = template

    def __len__(self) -> int:
        return len(self.parents)


def _unique(keys: Sequence[FuncKey]) -> Tuple[List[FuncKey], List[int]]:
    """(the keys without repeats, each key's index among them)."""
    ukeys: List[FuncKey] = []
    seen: Dict[FuncKey, int] = {}
    kid: List[int] = []
    for k in keys:
        i = seen.get(k)
        if i is None:
            i = seen[k] = len(ukeys)
            ukeys.append(k)
        kid.append(i)
    return ukeys, kid


def _paths(
    parents: List[int], funcs: List[int], order: Any
) -> Tuple[List[int], List[int], List[Tuple[int, int]]]:
    """Sums records by path: record i (taken in ``order``, a parent before its children) has
    parent ``parents[i]`` (-1: none) and key ``funcs[i]``.  Returns (each summed node's
    parent, the record it was first made from, (record, node) for every other record added
    to a node)."""
    index: Dict[int, int] = {}
    where = [0] * len(parents)
    ups: List[int] = []
    first: List[int] = []
    more: List[Tuple[int, int]] = []
    span = max(funcs, default=0) + 1  # (node, key) as one int: hashed faster than a tuple
    for i in order:
        p = parents[i]
        up = where[p] if p >= 0 else -1
        j = index.setdefault(up * span + funcs[i], len(first))
        if j == len(first):
            first.append(i)
            ups.append(up)
        else:
            more.append((i, j))
        where[i] = j
    return ups, first, more


def _texts(values: List[float]) -> List[str]:
    """Each float as JSON text that reads back as the same float (17 significant digits)."""
    if not values:
        return []
    return (("%.17g," * len(values)) % tuple(values)).split(",")[:-1]


def _template(parents: List[int], ncalls: List[int], own: List[str], total: List[str]) -> str:
    """The records as text (times already as text), in one formatting pass (C's loop, not
    Python's)."""
    if not parents:
        return ""
    text = ("[%d,%%s,%d,%s,%s]," * len(parents)) % tuple(
        chain.from_iterable(zip(parents, ncalls, own, total))
    )
    return text[:-1]


def _int64_bytes(values: List[int]) -> bytes:
    a = array("q", values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def _int64_list(data: bytes) -> List[int]:
    a = array("q")
    a.frombytes(data)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tolist()


def encode(
    tspt: float,
    keys: Sequence[FuncKey],
    nodes: Sequence[Tuple[int, int, int, int, int, int]],
    nthreads: int,
) -> Tuple[Any, ...]:
    """What ``PID.tree.marshal`` holds for the core's tree records ``nodes`` ((parent, func,
    thread, ncalls, total ticks, own ticks), ticks of ``tspt`` seconds; ``keys[func]`` each
    function's pstats key), summed over threads by path of keys, threads in order (a node's
    children: the first thread's, then new ones of the next): (TAG, VERSION, keys, parents
    and funcs as little-endian int64 bytes, the template).  Run in each process at its exit,
    so kept to loops in C where it can (one Python loop, over the records' parents)."""
    ukeys, kid = _unique(keys)
    if not nodes:
        return (TAG, VERSION, ukeys, b"", b"", "")
    parents, raw_funcs, threads, ncalls, total, own = map(list, zip(*nodes))
    funcs = list(map(kid.__getitem__, raw_funcs))
    order: Any = range(len(parents))
    if nthreads > 1:
        order = sorted(order, key=threads.__getitem__)
    ups, first, more = _paths(parents, funcs, order)
    # A float's text costs thousands of instructions (Python's exact conversion), and most
    # nodes' times are one of far fewer tick counts: each count is converted once, with 17
    # significant digits (read back as the same float; cheaper than repr's shortest text).
    own_t = list(map(own.__getitem__, first))
    total_t = list(map(total.__getitem__, first))
    ticks = list(set(own_t).union(total_t))
    text = dict(zip(ticks, _texts(list(map(float(tspt).__mul__, ticks)))))
    n_out = list(map(ncalls.__getitem__, first))
    own_out = list(map(text.__getitem__, own_t))
    total_out = list(map(text.__getitem__, total_t))
    if more:  # seconds summed in the order merged_threads sums them
        sums: Dict[int, List[float]] = {}
        for i, j in more:
            acc = sums.get(j)
            if acc is None:
                acc = sums[j] = [own_t[j] * tspt, total_t[j] * tspt]
            n_out[j] += ncalls[i]
            acc[0] += own[i] * tspt
            acc[1] += total[i] * tspt
        for j, (o, t) in sums.items():
            own_out[j], total_out[j] = _texts([o, t])
    funcs_out = list(map(funcs.__getitem__, first))
    template = _template(ups, n_out, own_out, total_out)
    return (TAG, VERSION, ukeys, _int64_bytes(ups), _int64_bytes(funcs_out), template)


# JSON's grammar of an integer that is not negative, and of a number (what repr writes for a
# finite float)
_INT = r"(?:0|[1-9][0-9]*)"
_NUM = rf"-?{_INT}(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_RECORD = rf"\[(-1|{_INT}),%s,{_INT},{_NUM},{_NUM}\]"
_RX: Any = None


def _parents_in(template: str) -> Optional[List[int]]:
    """The parents of template's records when it is records as encode writes them, else
    None."""
    global _RX
    import re

    if _RX is None:
        _RX = (
            re.compile(rf"(?:{_RECORD},)*{_RECORD}", re.ASCII),
            re.compile(r"\[(-1|[0-9]+),%s,", re.ASCII),
        )
    whole, parent = _RX
    if whole.fullmatch(template) is None:
        return None
    return [int(p) for p in parent.findall(template)]


def _is_key(k: Any) -> bool:
    return (
        isinstance(k, (tuple, list))
        and len(k) == 3
        and isinstance(k[0], str)
        and type(k[1]) is int
        and isinstance(k[2], str)
    )


def decode(data: Any, *, check: bool) -> ProcTree:
    """The tree ``encode`` wrote (data as marshal read it).  With check, ValueError unless
    every field is what encode writes (keys of (str, int, str), parents before children,
    known functions, records of JSON numbers that agree with the parents); without, only the
    layout is checked (for files the reader's own processes wrote into a folder no one else
    can write to)."""
    if not isinstance(data, tuple) or len(data) != 6 or data[0] != TAG:
        raise ValueError("not a fastprof process tree")
    _, version, keys, parents_b, funcs_b, template = data
    if version != VERSION:
        raise ValueError(f"process tree version {version!r} (this version reads {VERSION})")
    if not isinstance(keys, list) or not isinstance(template, str):
        raise ValueError("malformed process tree")
    if not isinstance(parents_b, bytes) or not isinstance(funcs_b, bytes):
        raise ValueError("malformed node records")
    if len(parents_b) % 8 or len(parents_b) != len(funcs_b):
        raise ValueError("malformed node records")
    parents = _int64_list(parents_b)
    funcs = _int64_list(funcs_b)
    if check:
        if not all(_is_key(k) for k in keys):
            raise ValueError("malformed function keys")
        if any(not -1 <= p < i for i, p in enumerate(parents)):
            raise ValueError("a node's parent does not precede it")
        if funcs and not 0 <= min(funcs) <= max(funcs) < len(keys):
            raise ValueError("a node names no known function")
        if (_parents_in(template) if parents else ([] if not template else None)) != parents:
            raise ValueError("malformed node numbers")
    elif template.count("%s") != len(parents):
        raise ValueError("node records and their numbers differ in count")
    if check:
        keys = [(k[0], k[1], k[2]) for k in keys]
    return ProcTree(keys, parents, funcs, template)


def from_root(root: Any) -> ProcTree:
    """The records of a ``tree.Node`` root's tree (a tree already summed over threads)."""
    keys: List[FuncKey] = []
    seen: Dict[FuncKey, int] = {}
    parents: List[int] = []
    funcs: List[int] = []
    nums: List[List[Any]] = []
    index: Dict[int, int] = {id(root): -1}
    for n in root.walk():
        if n.key is None:
            continue
        k = seen.get(n.key)
        if k is None:
            k = seen[n.key] = len(keys)
            keys.append(n.key)
        index[id(n)] = len(parents)
        parents.append(index[id(n.parent)])
        funcs.append(k)
        nums.append([int(n.ncalls), float(n.tottime), float(n.cumtime)])
    ncalls = [n[0] for n in nums]
    own = _texts([n[1] for n in nums])
    total = _texts([n[2] for n in nums])
    return ProcTree(keys, parents, funcs, _template(parents, ncalls, own, total))


def _filled(trees: Sequence[Tuple[int, ProcTree]]) -> Tuple[List[List[Any]], List[str]]:
    """The file's shared key list, and each tree's records with their keys' indices in it."""
    keys: List[List[Any]] = []
    seen: Dict[FuncKey, str] = {}
    bodies = []
    for _, t in trees:
        kmap = []
        for k in t.keys:
            g = seen.get(k)
            if g is None:
                g = seen[k] = str(len(keys))
                keys.append(list(k))
            kmap.append(g)
        bodies.append(t.template % tuple(map(kmap.__getitem__, t.funcs)))
    return keys, bodies


def tree_json(trees: Sequence[Tuple[int, ProcTree]]) -> str:
    """The text ``CallTree.save`` writes for a job's tree with one root per process (ident,
    tree): the functions' keys shared, each root's nodes as flat records."""
    import json

    from .tree import _TREE_VERSION, TREE_FORMAT

    keys, bodies = _filled(trees)
    threads = ",".join(
        f'{{"ident":{int(ident)},"nodes":[{body}]}}' for (ident, _), body in zip(trees, bodies)
    )
    head = json.dumps(
        {
            "format": TREE_FORMAT,
            "version": _TREE_VERSION,
            "merged": 0,
            "node_cap": None,
            "roots": "processes",
        },
        separators=(",", ":"),
    )
    keys_text = json.dumps(keys, separators=(",", ":"))
    return f'{head[:-1]},"keys":{keys_text},"threads":[{threads}]}}'


def to_call_tree(trees: Sequence[Tuple[int, ProcTree]]) -> Any:
    """The ``CallTree`` with one root per (ident, tree): read back from the text tree_json
    writes (one pass of the C decoder, then the tree's own reader)."""
    import json

    from .tree import CallTree

    return CallTree.from_dict(json.loads(tree_json(trees)))
