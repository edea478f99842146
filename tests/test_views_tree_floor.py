"""The tree view works through only the rows it shows (display_tree's floor): its text is the
text of the whole display tree, on trees with recursion, library frames and ties."""

from __future__ import annotations

import random
from typing import Any

import pytest

from fastprof.report import display, tree_text
from fastprof.tree import CallTree, Node

KEYS = [("/usr/lib/python3.11/json/encoder.py", i, f"lib{i}") for i in range(5)]
KEYS += [("/home/u/app.py", i, f"f{i}") for i in range(8)]
KEYS += [("~", 0, "<built-in method builtins.len>")]


def _tree(seed: int) -> CallTree:
    rng = random.Random(seed)
    root = Node(None)

    def grow(n: Node, depth: int) -> None:
        if depth > 7:
            return
        for _ in range(rng.randint(0, 3)):
            same = rng.random() < 0.3 and n.key is not None
            k = n.key if same else rng.choice(KEYS)
            own = rng.random() * 1e-3 * rng.choice([1, 0.001, 100, 0])
            c = Node(k, rng.randint(1, 5), own, 0.0, n)
            n.children.append(c)
            grow(c, depth + 1)
            c.cumtime = c.tottime + sum(x.cumtime for x in c.children)

    grow(root, 0)
    root.cumtime = sum(c.cumtime for c in root.children)
    return CallTree({1: root})


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("min_percent", [0, 0.5, 1, 5])
@pytest.mark.parametrize("expand_libs", [False, True])
def test_the_view_reads_the_same_from_the_rows_it_works_through(
    monkeypatch: Any, seed: int, min_percent: float, expand_libs: bool
) -> None:
    tree = _tree(seed)
    shown = tree_text.format_tree_report(tree, min_percent=min_percent, expand_libs=expand_libs)
    whole = display.display_tree
    monkeypatch.setattr(tree_text, "display_tree", lambda root, floor=None, **kw: whole(root, **kw))
    assert (
        tree_text.format_tree_report(tree, min_percent=min_percent, expand_libs=expand_libs)
        == shown
    )


def test_rows_below_the_floor_keep_their_totals_and_make_no_children() -> None:
    tree = _tree(0)  # 168 rows
    (root,) = tree.threads.values()
    full = display.display_tree(root)
    floor = sorted(c.cumtime for c in full.walk())[-4]  # three rows above it
    cut = display.display_tree(root, floor=floor)
    assert [(c.key, c.cumtime, c.ncalls) for c in cut.children] == [
        (c.key, c.cumtime, c.ncalls) for c in full.children
    ]
    small = [c for c in cut.walk() if c.key is not None and c.cumtime < floor]
    assert small and all(not c.children for c in small)
