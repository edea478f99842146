"""The call tree file written from the core's records (fastprof._tree_file) is the file the
built tree saves: the same threads, names, nodes in the same order, counts and times."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest

import fastprof
from fastprof._runstats import own_tree
from fastprof._tree_file import tree_text
from fastprof.tree import CallTree


def _rec(n: int) -> int:
    return 0 if n == 0 else _rec(n - 1) + 1


def _work() -> None:
    for i in range(40):
        _rec(i % 6)
        sorted([3, 1, 2])


def _profile(threads: int) -> Any:
    p = fastprof.Profile()
    p.enable()
    ts = [threading.Thread(target=_work, name=f"w{i}") for i in range(threads)]
    for t in ts:
        t.start()
    _work()
    for t in ts:
        t.join()
    _rec(200)
    p.disable()
    return p


@pytest.mark.parametrize("threads", [0, 3])
@pytest.mark.parametrize("drop", [False, True])
def test_the_file_reads_back_as_the_built_tree(threads: int, drop: bool) -> None:
    p = _profile(threads)
    built = p.tree()
    if drop:
        own_tree(built)
    built.wall = 2.5
    text = tree_text(p, wall=2.5, drop_disable=drop)
    assert text is not None
    read = CallTree.from_dict(json.loads(text.text))
    assert read.to_dict() == built.to_dict()
    names = [t.get("name") for t in read.to_dict()["threads"]]
    assert threading.current_thread().name in names
    disables = [n for n in read.nodes() if "disable" in n.key[2]]
    assert (not disables) == drop  # the runner's own call of disable, dropped on request


def test_no_tree_no_file() -> None:
    p = fastprof.Profile(tree_nodes=0)
    p.enable()
    _rec(3)
    p.disable()
    assert tree_text(p) is None
    assert tree_text(object()) is None  # a profiler without the core's records


def test_calls_merged_past_the_node_cap_are_counted_in_the_file() -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
    p = fastprof.Profile(tree_nodes=5)
    p.enable()
    _rec(50)
    p.disable()
    built = p.tree()
    data = json.loads(tree_text(p).text)
    assert data["merged"] == built.merged > 0 and data["node_cap"] == 5
    assert CallTree.from_dict(data).to_dict() == built.to_dict()


def _one_after_another(n: int) -> None:
    for i in range(n):  # each thread ends before the next starts: idents are reused
        t = threading.Thread(target=_work, name=f"seq{i}")
        t.start()
        t.join()


@pytest.mark.parametrize("cap", [None, 12])
def test_threads_one_after_another_and_the_node_cap(cap: Any) -> None:
    """Threads whose idents repeat are one thread of the file, as of the built tree; past the
    node cap a node's own time is its total less its children's."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
    p = fastprof.Profile() if cap is None else fastprof.Profile(tree_nodes=cap)
    p.enable()
    _one_after_another(4)
    _rec(30)
    p.disable()
    built = p.tree()
    own_tree(built)
    text = tree_text(p, drop_disable=True)
    assert text is not None
    assert CallTree.from_dict(json.loads(text.text)).to_dict() == built.to_dict()


def test_each_time_is_written_as_17_significant_digits() -> None:
    """The core writes each time as Python's "%.17g" does (it reads back as the same float),
    the same text for the same number of ticks."""
    import re

    p = _profile(2)
    data = tree_text(p)
    assert data is not None
    records = re.findall(r"\[(-?\d+),(\d+),(\d+),([^,\]]+),([^,\]]+)\]", data.text)
    assert len(records) == sum(len(t["nodes"]) for t in json.loads(data.text)["threads"])
    for *_, own, total in records:
        for word in (own, total):
            assert word == "%.17g" % float(word), word


def test_the_core_refuses_keys_and_flags_that_do_not_fit() -> None:
    p = _profile(0)
    _, funcs, _ = p._raw()
    n = len(funcs)

    class Index(int):
        pass

    with pytest.raises(TypeError, match="keys must hold ints"):
        p._tree_json([Index(0)] * n, bytes(n))  # an int subclass could run Python code
    with pytest.raises(ValueError, match=f"keys must be a list of {n} ints"):
        p._tree_json([0] * (n + 1), bytes(n))
    with pytest.raises(ValueError, match=f"keys must be a list of {n} ints"):
        p._tree_json(tuple([0] * n), bytes(n))
    with pytest.raises(ValueError, match=f"drop must be {n} bytes"):
        p._tree_json([0] * n, b"")
    with pytest.raises(ValueError, match="keys must hold ints from 0"):
        p._tree_json([-1] * n, bytes(n))
