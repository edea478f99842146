"""The HTML report of a live profiler's tree makes the rows below a node whose children were
never read from the core's records in C (``_fastprof._tree_columns``, report.html's
``_tree_threads``): its data is, value for value and in order, the data of the tree built at
once, whatever was read before, with no node made for those rows; and its JSON text is
``json.dumps``'s."""

from __future__ import annotations

import array
import json
import math
import random
import struct
from typing import Any, List

import pytest

from fastprof import _fastprof
from fastprof import tree as tree_mod
from fastprof.report import html as html_mod
from fastprof.stats import Stats
from fastprof.tree import CallTree, Node
from test_tree_lazy import (
    LIBRARY,
    built_at_once,
    library_profile,
    profiled,
    touch_at_random,
)


def page_json(prof: Any, tree: CallTree) -> str:
    return json.dumps(html_mod.report_data(Stats(prof), tree), allow_nan=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda: profiled(threads=3, seed=4),
        lambda: profiled(cap=300, threads=2, seed=5),  # past the node cap
        lambda: profiled(depth=6, functions=200, seed=6),
        lambda: library_profile(1),
        lambda: library_profile(2),
    ],
)
def test_the_page_of_a_tree_read_in_any_order_is_the_page_of_the_tree_built_at_once(
    monkeypatch: Any, make: Any
) -> None:
    prof = make()
    whole = built_at_once(prof)
    live = CallTree.from_profile(prof)
    whole.names, whole.node_cap = live.names, live.node_cap  # known to the profile alone
    want = page_json(prof, whole)
    rng = random.Random(7)
    for lazy in (4096, 30):
        monkeypatch.setattr(tree_mod._Snapshot, "LAZY", lazy)
        for walks in (0, 5, 60):
            tree = CallTree.from_profile(prof)
            touch_at_random(tree, rng, walks)  # some nodes made, the rest records only
            assert page_json(prof, tree) == want, (lazy, walks)


def test_the_rows_below_unread_nodes_make_no_node() -> None:
    prof = library_profile(3)
    tree = CallTree.from_profile(prof)
    snap = tree.roots()[0].children[0]._snap
    assert snap is not None and snap.n > 1000
    data = html_mod.report_data(Stats(prof), tree)
    made = sum(m is not None for m in snap.made)
    assert made == sum(len(r.children) for r in tree.roots())  # the top level alone
    rows = sum(len(t["parent"]) for t in data["threads"])
    assert rows > 100 and any(t.get("levels") for t in data["threads"])  # recursion folded
    assert LIBRARY in [k[0] for k in data["keys"]]


def test_nodes_a_reader_changed_are_shown_as_changed() -> None:
    prof = profiled(seed=8)
    tree = CallTree.from_profile(prof)
    top = tree.roots()[0].children[0].children[0]  # exec's <module>
    while len(top.children) < 2:
        top = top.children[0]
    mid = top.children[0]  # made: its children are records until read
    assert type(mid) is tree_mod._LazyNode
    mid.ncalls = 10**6
    top.children.remove(top.children[1])  # a reader pruning a path
    t = html_mod.report_data(None, tree)["threads"][0]
    keys = html_mod.report_data(None, tree)["keys"]
    row = next(i for i, c in enumerate(t["calls"]) if c == 10**6)
    assert tuple(keys[t["key"][row]][:3]) == (mid.key[0], mid.key[1], mid.key[2])
    whole = built_at_once(prof)
    assert len(t["parent"]) < len(html_mod.report_data(None, whole)["threads"][0]["parent"])


# -- the C walker's arguments ------------------------------------------------------------


def columns(row: int = 0, n: int = 1) -> List[List[Any]]:
    """Six column lists of n rows, row 0 of key 0."""
    return [[-1] * n, [0] * n, [1] * n, [1.0] * n, [1.0] * n, [1] * n]


# one record (parent slot 1: thread 0's root, func 0) and one thread: 7 * 1 + 1 + 1 words;
# record 1 (func 1) below record 0 in the two-record block
ONE = struct.pack("=5q", 1, 0, 3, 5, 4) + struct.pack("=3q", 0, 0, 1) + struct.pack("=q", 0)
TWO = (
    struct.pack("=5q", 2, 0, 3, 9, 4)
    + struct.pack("=5q", 0, 1, 2, 5, 5)
    + struct.pack("=4q", 0, 1, 1, 2)
    + struct.pack("=2q", 1, 0)
)
KEYS = [("a.py", 1, "f"), ("a.py", 2, "g")]


def walk(block: Any, slot: int, cols: List[List[Any]], number: Any = None, **kw: Any) -> Any:
    """_tree_columns over block below slot into cols (row 0, level 1, KEYS unless kw says)."""
    keys = kw.get("keys", KEYS)
    keymap = kw.get("keymap", array.array("q", [0]) * len(keys))
    return _fastprof._tree_columns(
        block, kw.get("threads", 1), slot, kw.get("row", 0), kw.get("level", 1), keys, keymap,
        number or KEYS.index, 1.0, *cols,
    )  # fmt: skip


def test_the_walker_makes_rows_and_folds_recursion() -> None:
    cols = columns()
    assert walk(TWO, 0, cols) is None  # record 1 (g) below row 0 (f): a row
    assert cols == [[-1, 0], [0, 1], [1, 2], [1.0, 5.0], [1.0, 5.0], [1, 1]]
    cols = columns()
    walk(ONE, 0, cols)  # no record below record 0
    assert cols == columns()
    cols = columns()
    walk(ONE, 1, cols, level=2)  # record 0 (f) below row 0 (f): folded, a level deeper
    assert cols == [[-1], [0], [4], [5.0], [1.0], [3]]


def test_the_walker_refuses_what_is_no_snapshot_or_no_column() -> None:
    cases = [
        (dict(block=ONE[:-1]), ValueError, "not a call tree snapshot"),
        (dict(block=ONE, slot=2), ValueError, "slot out of"),
        (dict(block=memoryview(b"\0" + ONE)[1:]), ValueError, "multiple of 8"),
        (dict(block=ONE, row=1), ValueError, "row must be"),
        (dict(block=ONE, level=0), ValueError, "level between"),
        (dict(block=ONE, cols=[[-1], [0], [1], [1.0], [1.0], []]), ValueError, "one length"),
        (dict(block=ONE, keymap=bytearray(3)), ValueError, "keymap must be"),
        (dict(block=ONE, keys=[]), ValueError, "names no key"),
        (dict(block=ONE, number=lambda k: -1), ValueError, "int >= 0"),
        (dict(block=ONE, number=lambda k: "0"), ValueError, "int >= 0"),
        (dict(block=ONE, number=lambda k: 1 / 0), ZeroDivisionError, "division"),
    ]
    for kw, error, why in cases:
        cols = kw.pop("cols", columns())
        before = [list(c) for c in cols]
        with pytest.raises(error, match=why):
            walk(kw.pop("block"), kw.pop("slot", 1), cols, **kw)
        assert cols == before, kw  # nothing half made
    # record 0 its own child: a cycle
    cycle = struct.pack("=5q", 0, 0, 1, 1, 1) + struct.pack("=3q", 0, 1, 1) + struct.pack("=q", 0)
    with pytest.raises(ValueError, match="not a call tree snapshot"):
        walk(cycle, 0, columns())
    cols = columns()

    def meddling(key: Any) -> int:
        cols[0].append(99)  # the columns changed under the walk
        return 1

    with pytest.raises(RuntimeError, match="columns changed"):
        walk(TWO, 0, cols, number=meddling)


# -- the page's JSON ---------------------------------------------------------------------


def test_the_page_json_is_json_dumps_for_any_times() -> None:
    rng = random.Random(3)
    floats = [rng.choice([0.0, -0.0, 1e-9, 2.5, 1 / 3, 1e300, 5e-324]) for _ in range(200)]
    floats += [rng.random() * 10.0 ** rng.randrange(-12, 3) for _ in range(200)]
    for values in (floats, [1, 2.0, True, 3], [], [0.0, -0.0, -0.0, 0.0]):
        data = {"title": "t", "threads": [{"ident": 1, "self": values, "total": values[::-1]}]}
        want = json.dumps(data, separators=(",", ":"), allow_nan=False)
        assert html_mod._data_json(data) == want
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="JSON compliant"):
            html_mod._data_json({"threads": [{"self": [1.0, bad]}]})


def test_a_node_tree_s_page_is_unchanged() -> None:
    root = Node(None)
    f = Node(("a.py", 1, "f"), 2, 0.5, 1.0, root)
    g = Node(("a.py", 2, "g"), 1, 0.5, 0.5, f)
    f.children = [g]
    root.children = [f]
    t = html_mod.report_data(None, CallTree({1: root}))["threads"][0]
    assert (t["parent"], t["calls"], t["self"], t["total"]) == (
        [-1, 0],
        [2, 1],
        [0.5, 0.5],
        [1.0, 0.5],
    )
