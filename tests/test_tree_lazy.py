"""A live profiler's call tree is made from a copy of the core's records a node's children at a
time (``Profiler._tree_snapshot``, fastprof.tree's _Snapshot): whatever order it is read in, in
part or in full, past the node cap and across threads, it is node for node the tree built from
``_raw_tree()``'s records at once; and the default view reads only the paths it shows."""

from __future__ import annotations

import copy
import pickle
import random
import struct
import sys
import textwrap
import threading
from typing import Any, Dict, List, Tuple

import pytest

import fastprof
from fastprof import tree as tree_mod
from fastprof._quiet import quiet
from fastprof.keys import label
from fastprof.report.source import totals_of
from fastprof.report.tree_text import format_tree_report
from fastprof.stats import Stats
from fastprof.tree import CallTree, Node


def wide_program(functions: int, seed: int, depth: int = 4) -> str:
    """Functions calling three later ones each, to depth + 1 levels: many distinct paths."""
    rng = random.Random(seed)
    out = []
    for i in range(functions):
        kids = rng.sample(range(i + 1, functions), k=min(3, functions - i - 1))
        body = "".join(f"    f{k}(d + 1)\n" for k in kids)
        out.append(f"def f{i}(d):\n    if d > {depth}:\n        return len('x')\n{body}")
    out.append("for i in range(12):\n    globals()['f%d' % i](0)\n")
    return "\n".join(out)


def profiled(
    cap: Any = None, threads: int = 1, seed: int = 0, depth: int = 4, functions: int = 60
) -> fastprof.Profile:
    """A profile of the wide program run in the main thread and threads - 1 others."""
    options = {} if cap is None else {"tree_nodes": cap}
    prof = fastprof.Profile(**options)
    code = compile(wide_program(functions, seed, depth), "wide.py", "exec")
    prof.enable()
    try:
        exec(code, {})
        for _ in range(threads - 1):
            t = threading.Thread(target=exec, args=(code, {}))
            t.start()
            t.join()
    finally:
        prof.disable()
    return prof


def built_at_once(prof: Any, ticks: bool = False) -> CallTree:
    """The tree from _raw_tree()'s records, every node made at once (CallTree.from_raw)."""
    tspt, nodes, threads, merged = prof._raw_tree()
    keys = [label(f[0]) for f in prof._raw()[1]]
    return CallTree.from_raw(1.0 if ticks else tspt, keys, nodes, threads, merged)


def shape(tree: CallTree) -> List[Any]:
    """Every root and node, parents first: what a reader can see of them."""
    out: List[Any] = []
    for ident, root in tree.threads.items():
        out.append((ident, root.key, root.cumtime, len(root.children)))
        for n in root.walk():
            if n.key is not None:
                up = n.parent
                out.append((n.key, n.func, n.ncalls, n.tottime, n.cumtime, len(n.children), up.key))
    return out


def touch_at_random(tree: CallTree, rng: random.Random, walks: int) -> None:
    """Reads the children along walks random paths from the roots."""
    roots = list(tree.threads.values())
    for _ in range(walks):
        n = rng.choice(roots)
        while n.children and rng.random() < 0.85:
            n = rng.choice(n.children)


@pytest.mark.parametrize("lazy", [4096, 50, 1])
@pytest.mark.parametrize("cap", [None, 300, 5])
def test_read_in_any_order_the_tree_is_the_one_built_at_once(
    monkeypatch: Any, cap: Any, lazy: int
) -> None:
    monkeypatch.setattr(tree_mod._Snapshot, "LAZY", lazy)
    prof = profiled(cap, threads=3, seed=cap or 1)
    want = shape(built_at_once(prof))
    assert len(want) > (cap or 1000)
    if cap is not None:
        assert prof._raw_tree()[3] > 0  # calls were merged: own times are totals less kids'
    rng = random.Random(lazy)
    for walks in (0, 10, 200):
        tree = CallTree.from_profile(prof)
        touch_at_random(tree, rng, walks)
        assert shape(tree) == want
    tree = CallTree.from_profile(prof)
    format_tree_report(tree, min_percent=0.5)  # the view's reads, then everything
    assert shape(tree) == want
    assert tree.function_totals() == built_at_once(prof).function_totals()
    ticks = shape(built_at_once(prof, ticks=True))
    assert shape(CallTree.from_profile(prof, ticks=True)) == ticks


def test_children_assigned_before_they_were_read_stay_as_assigned(monkeypatch: Any) -> None:
    monkeypatch.setattr(tree_mod._Snapshot, "LAZY", 20)
    prof = profiled()
    tree = CallTree.from_profile(prof)
    top = tree.roots()[0].children[0]
    mid = top.children[0]  # made, its children not yet
    mid.children = []  # a reader pruning the path
    walked = sum(1 for _ in tree.nodes())  # the walk makes the rest in one pass
    assert mid.children == [] and all(isinstance(n, Node) for n in tree.nodes())
    assert walked < sum(1 for _ in built_at_once(prof).nodes())
    mid.children.append(Node(("f", 1, "g"), 1, 0.0, 0.0, mid))
    assert [c.key for c in mid.children] == [("f", 1, "g")]


def test_the_default_view_makes_nodes_for_the_paths_it_shows_only(monkeypatch: Any) -> None:
    made: List[Any] = []
    init = tree_mod._Snapshot.__init__

    def spy(self: Any, *args: Any) -> None:
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(tree_mod._Snapshot, "__init__", spy)
    prof = profiled(depth=7, functions=300)
    tree = CallTree.from_profile(prof)
    totals = totals_of(Stats(prof))  # as `fastprof run` gives them: the table's own
    text = format_tree_report(tree, totals=totals)
    (snap,) = made
    total = snap.n
    assert total > 20000
    assert not snap.done and 0 < sum(m is not None for m in snap.made) < total // 20
    # and it reads what the tree built at once reads
    assert text == format_tree_report(built_at_once(prof), totals=totals)
    assert sum(1 for _ in tree.nodes()) == total


def test_the_snapshot_layout_is_the_raw_tree_s() -> None:
    prof = profiled(threads=2)
    tspt, nodes, threads, merged = prof._raw_tree()
    spt, idents, merged2, block = prof._tree_snapshot()
    assert (spt, idents, merged2) == (tspt, threads, merged)
    n, t = len(nodes), len(threads)
    words = list(struct.unpack(f"={len(block) // 8}q", block))
    assert len(words) == 7 * n + t + 1
    recs, first, kids = words[: 5 * n], words[5 * n : 6 * n + t + 1], words[6 * n + t + 1 :]
    children: Dict[int, List[int]] = {}
    for k, (parent, func, thread, ncalls, tt, it) in enumerate(nodes):
        slot = n + thread if parent < 0 else parent
        assert recs[5 * k : 5 * k + 5] == [slot, func, ncalls, tt, it]
        children.setdefault(slot, []).append(k)
    for s in range(n + t):
        assert kids[first[s] : first[s + 1]] == children.get(s, [])
    assert first[0] == 0 and first[-1] == n


def test_a_profile_without_a_tree_or_calls_gives_an_empty_snapshot() -> None:
    for prof in (fastprof.Profile(), fastprof.Profile(tree_nodes=0)):
        prof.enable()
        len("x")
        prof.disable()
        spt, threads, merged, block = prof._tree_snapshot()
        tree = CallTree.from_profile(prof)
        if prof.tree_nodes == 0:
            assert (threads, merged, block) == ([], 0, b"\0" * 8)
            assert tree.threads == {}
        else:
            names = [n.key[2] for n in tree.nodes()]
            assert names[0] == "<built-in method builtins.len>" and "disable" in names[1]
            assert len(names) == 2 and shape(tree) == shape(built_at_once(prof))


def test_a_tree_read_while_the_profiler_records_is_the_records_of_that_moment() -> None:
    prof = fastprof.Profile()
    code = compile(wide_program(30, 3), "wide.py", "exec")
    read = quiet(built_at_once)  # as prof.tree() reads: recording nothing of the read
    prof.enable()
    try:
        exec(code, {})
        tree = prof.tree()  # quiet: the read adds no node
        want: Tuple[Any, ...] = tuple(shape(read(prof)))
        exec(code, {})  # more calls on the same paths, and new paths
    finally:
        prof.disable()
    assert tuple(shape(tree)) == want


def test_a_tree_copied_or_pickled_before_it_was_read_is_the_whole_tree() -> None:
    prof = profiled(threads=2)
    want = shape(built_at_once(prof))
    copied = copy.deepcopy(CallTree.from_profile(prof))
    unpickled = pickle.loads(pickle.dumps(CallTree.from_profile(prof)))
    assert shape(copied) == want and shape(unpickled) == want


def test_threads_reading_one_tree_at_once_make_each_node_once(monkeypatch: Any) -> None:
    prof = profiled(depth=5)
    want = shape(built_at_once(prof))
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch in the middle of making a node's children
    try:
        for lazy in (4096, 50):
            monkeypatch.setattr(tree_mod._Snapshot, "LAZY", lazy)
            for _ in range(5):
                tree = prof.tree()
                seen: List[int] = []

                def read(tree: CallTree = tree, seen: List[int] = seen) -> None:
                    seen.append(sum(1 for _ in tree.nodes()))

                readers = [threading.Thread(target=read) for _ in range(4)]
                for t in readers:
                    t.start()
                for t in readers:
                    t.join()
                assert seen == [len(want) - 1] * 4
                assert shape(tree) == want
    finally:
        sys.setswitchinterval(switch)


def test_reading_the_tree_of_an_enabled_profiler_records_none_of_the_read() -> None:
    prof = fastprof.Profile()
    code = compile(wide_program(60, 4), "wide.py", "exec")
    prof.enable()
    try:
        exec(code, {})
        tree = prof.tree()
        walked = sum(1 for _ in tree.nodes())
        copy.deepcopy(tree.roots()[0].children[0])
    finally:
        prof.disable()
    assert walked > 1000
    read = {r.key[2] for r in Stats(prof).rows if r.key[0] == tree_mod.__file__}
    # the walk itself is the reader's own code; making the nodes is fastprof's
    assert read <= {"nodes", "walk", "roots"}, read


LIBRARY = "/opt/py/lib/python3/site-packages/widelib/core.py"


def library_program(seed: int) -> Tuple[Any, Any]:
    """A library (by its path, in site-packages) whose functions call each other and the
    user's callbacks, and user code recursing and calling into it: rows that fold library
    frames, hoist the callbacks below them, and fold recursion."""
    rng = random.Random(seed)
    lib = []
    for i in range(60):
        calls = "".join(
            "    cb(d + 1)\n"
            if rng.random() < 0.2
            else f"    l{min(60, i + rng.randrange(1, 4))}(d + 1, cb)\n"
            for _ in range(rng.randrange(2, 4))
        )
        lib.append(f"def l{i}(d, cb):\n    if d > 10:\n        return\n{calls}")
    lib.append("def l60(d, cb):\n    cb(d + 1)\n")
    user = textwrap.dedent("""
        def rec(n, d):
            if n:
                return rec(n - 1, d)
            if d < 4:
                l0(d + 1, leaf)
        def leaf(d):
            if d < 6:
                rec(2, d)
        for i in range(3):
            rec(3, 0)
            l5(0, leaf)
    """)
    return compile("\n".join(lib), LIBRARY, "exec"), compile(user, "user.py", "exec")


def library_profile(seed: int) -> fastprof.Profile:
    """A profile of the library program (library_program)."""
    lib_code, user_code = library_program(seed)
    prof = fastprof.Profile()
    names: Dict[str, Any] = {}
    prof.enable()
    try:
        exec(lib_code, names)
        exec(user_code, names)
    finally:
        prof.disable()
    return prof


def rows_of(row: Any) -> List[Any]:
    """Every row below a display_tree root, parents first, as tuples of what it holds."""
    return [
        (r.key, r.library, r.ncalls, r.tottime, r.cumtime, r.levels, r.hidden, len(r.children))
        for r in row.walk()
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_folded_from_the_records_are_the_rows_folded_from_nodes(seed: int) -> None:
    from fastprof.report.display import display_tree

    prof = library_profile(seed)
    whole = built_at_once(prof)
    assert any(n.key[0] == LIBRARY for n in whole.nodes())
    rng = random.Random(seed)
    for options in ({}, {"floor": 0.0}, {"expand_libs": True}, {"fold_recursion": False}):
        want = [rows_of(display_tree(r, **options)) for r in whole.roots()]
        assert any(r[6] > 0 for rows in want for r in rows) or options  # frames were folded
        for walks in (0, 30):
            tree = CallTree.from_profile(prof)
            touch_at_random(tree, rng, walks)  # some nodes made, some records only
            got = [rows_of(display_tree(r, **options)) for r in tree.roots()]
            assert got == want, (options, walks)
    tree = CallTree.from_profile(prof)
    made: List[Any] = []
    for root in tree.roots():
        made.extend(c._snap for c in root.children if c._snap is not None)
    text = format_tree_report(tree, totals=totals_of(Stats(prof)))
    # the rows were folded from the records: no node was made below the roots' own children
    snap = made[0]
    assert sum(m is not None for m in snap.made) == sum(len(r.children) for r in tree.roots())
    assert snap.n > 1000
    assert text == format_tree_report(whole, totals=totals_of(Stats(prof)))
    assert "widelib" in text and "frames" in text and "recursion" in text


def test_the_fold_refuses_a_block_that_is_no_snapshot() -> None:
    from fastprof import _fastprof

    def fold(block: Any, threads: int = 1, slot: int = 0, keys: Any = None) -> Any:
        keys = [("f", 1, "g")] if keys is None else keys
        return _fastprof._tree_fold(
            block, threads, slot, 1, keys, bytearray(len(keys)), lambda k: False, keys[0],
            True, True, 1.0, 0, 0.0, 1, 0,
        )  # fmt: skip

    # one node (parent slot 1: thread 0's root, func 0) and one thread: 7 * 1 + 1 + 1 words
    good = struct.pack("=5q", 1, 0, 3, 5, 5) + struct.pack("=3q", 0, 0, 1) + struct.pack("=q", 0)
    assert fold(good, slot=1)[4] == []  # the node's function is the row's: folded into it
    assert fold(good, slot=1)[:4] == (3, 5.0, 2, 0)
    for bad, why in (
        (good[:-1], "not a call tree snapshot"),
        (good[:-8], "not a call tree snapshot"),
        (struct.pack("=5q", 1, 0, 3, 5, 5) + struct.pack("=3q", 0, 0, 1) + struct.pack("=q", 9),
         "not a call tree snapshot"),
        (struct.pack("=5q", 1, 0, 3, 5, 5) + struct.pack("=3q", 0, 5, 1) + struct.pack("=q", 0),
         "not a call tree snapshot"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            fold(bad, slot=1)
    with pytest.raises(ValueError, match="slot out of"):
        fold(good, slot=2)
    with pytest.raises(ValueError, match="multiple of 8 bytes"):
        fold(memoryview(b"\0" + good)[1:], slot=1)
    with pytest.raises(ValueError, match="names no key"):
        fold(struct.pack("=5q", 1, 7, 3, 5, 5) + good[40:], slot=1)
    with pytest.raises(ValueError, match="one byte a key"):
        _fastprof._tree_fold(
            good, 1, 1, 1, [("f", 1, "g")], bytearray(3), bool, None, True, True, 1.0, 0, 0.0,
            1, 0,
        )  # fmt: skip
    with pytest.raises(TypeError):
        _fastprof._tree_fold(good, 1, 1, 1, ("not", "a list"), bytearray(2), bool, None,
                             True, True, 1.0, 0, 0.0, 1, 0)  # fmt: skip


def test_the_fold_survives_hostile_blocks_and_keys() -> None:
    """Blocks made by hand: a thread count past the block, children that are their own
    ancestors or listed twice, a key whose comparison empties the key list."""
    from fastprof import _fastprof

    def fold(block: bytes, threads: int, slot: int, keys: Any, row_key: Any, **kw: Any) -> Any:
        args = dict(level=1, rec=True, lib=True, is_lib=lambda k: True, hidden=0)
        args.update(kw)
        return _fastprof._tree_fold(
            block, threads, slot, args["level"], keys, bytearray(len(keys)), args["is_lib"],
            row_key, args["rec"], args["lib"], 1.0, 0, 0.0, 1, args["hidden"],
        )  # fmt: skip

    keys = [("f", 1, "g")]
    with pytest.raises(ValueError, match="not a call tree snapshot"):
        fold(b"\0" * 8, sys.maxsize, 0, keys, keys[0])
    # record 0 its own child: a cycle
    cycle = struct.pack("=5q", 0, 0, 1, 1, 1) + struct.pack("=3q", 0, 1, 1) + struct.pack("=q", 0)
    for rec, lib in ((True, False), (False, True)):
        with pytest.raises(ValueError, match="not a call tree snapshot"):
            fold(cycle, 1, 0, keys, keys[0], rec=rec, lib=lib)
    # each of records 0 to 9 lists the next one twice: 2**10 paths over 20 records, which a
    # snapshot (one parent a record) cannot have
    n = 20
    recs = b"".join(struct.pack("=5q", max(i - 1, 0), 0, 1, 1, 1) for i in range(n))
    first = [min(2 * s, n) for s in range(11)] + [n] * (n + 1 - 11)
    kids = [s // 2 + 1 for s in range(n)]
    doubling = recs + struct.pack(f"={n + 2}q", *first, n) + struct.pack(f"={n}q", *kids)
    with pytest.raises(ValueError, match="not a call tree snapshot"):
        fold(doubling, 1, 0, keys, keys[0])
    for bad in ({"level": 0}, {"level": 2**62}, {"hidden": -1}, {"hidden": 2**63 - 1}):
        with pytest.raises(ValueError, match="level must be"):
            fold(cycle, 1, 1, keys, keys[0], **bad)

    class Emptying:
        """A key whose comparison empties the list that held it."""

        def __init__(self, owner: List[Any]) -> None:
            self.owner = owner

        def __eq__(self, other: Any) -> Any:
            self.owner.clear()
            import gc

            gc.collect()
            return NotImplemented

        __hash__ = object.__hash__

    class Other:
        def __eq__(self, other: Any) -> Any:
            return NotImplemented

        __hash__ = object.__hash__

    one = struct.pack("=5q", 1, 0, 1, 1, 1) + struct.pack("=3q", 0, 0, 1) + struct.pack("=q", 0)
    owner: List[Any] = []
    owner.append(Emptying(owner))
    got = fold(one, 1, 1, owner, Other(), lib=False)
    assert got[4] == [0] and owner == []  # compared unequal: the record makes a row
