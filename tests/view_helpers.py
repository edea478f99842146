"""Call trees for the view tests, made without the core: a small hand-written profile (user
code, a library, builtins, direct recursion, two files named __init__.py, two threads) and
generated trees of any size."""

from __future__ import annotations

import random
from typing import Any, Dict, List, Tuple

from fastprof.tree import CallTree, FuncKey

SPT = 0.001  # one tick is a millisecond: the hand-written figures read as milliseconds

APP = "/home/user/proj/app.py"
NUMPY_FROM = "/opt/venv/lib/python3.11/site-packages/numpy/_core/fromnumeric.py"
NUMPY_METH = "/opt/venv/lib/python3.11/site-packages/numpy/_core/_methods.py"

KEYS: List[FuncKey] = [
    (APP, 1, "<module>"),  # 0
    (APP, 10, "main"),  # 1
    (APP, 20, "fib"),  # 2
    (NUMPY_FROM, 3500, "mean"),  # 3
    (NUMPY_METH, 115, "_mean"),  # 4
    ("~", 0, "<method 'reduce' of 'numpy.ufunc' objects>"),  # 5
    ("/home/user/proj/a/__init__.py", 1, "helper"),  # 6
    ("/home/user/proj/b/__init__.py", 1, "helper"),  # 7
    ("~", 0, "<built-in method builtins.len>"),  # 8
    (APP, 40, "worker"),  # 9
    (APP, 50, "callback"),  # 10
]

# (parent, func, thread, ncalls, tt, it) in ticks, as Profile._raw_tree() gives them
NODES: List[Tuple[int, int, int, int, int, int]] = [
    (-1, 0, 0, 1, 1000, 10),  # 0 <module>
    (0, 1, 0, 1, 990, 25),  # 1   main
    (1, 2, 0, 1, 300, 10),  # 2     fib
    (2, 2, 0, 2, 290, 20),  # 3       fib
    (3, 2, 0, 4, 270, 270),  # 4         fib
    (1, 3, 0, 100, 500, 50),  # 5     mean (numpy)
    (5, 4, 0, 100, 450, 190),  # 6       _mean (numpy)
    (6, 5, 0, 100, 250, 250),  # 7         reduce (builtin)
    (6, 10, 0, 10, 10, 10),  # 8         callback (user code called back)
    (1, 6, 0, 5, 100, 100),  # 9     a/__init__.py helper
    (1, 7, 0, 5, 60, 60),  # 10    b/__init__.py helper
    (1, 8, 0, 1000, 5, 5),  # 11    len
    (-1, 9, 1, 1, 400, 100),  # 12 worker (second thread)
    (12, 6, 1, 3, 300, 300),  # 13   a/__init__.py helper
]
THREADS = [1001, 2002]


def sample_tree() -> CallTree:
    return CallTree.from_raw(SPT, KEYS, NODES, THREADS, 0, None)


def sample_stats() -> Dict[FuncKey, Any]:
    """The pstats dictionary the sample tree derives (as the core would write it)."""
    tree = sample_tree()
    totals = tree.function_totals()
    stats: Dict[FuncKey, Any] = {}
    for k, (nc, tt, ct) in totals.items():
        stats[k] = [nc, nc, tt, ct, {}]
    for n in tree.nodes():
        if n.parent is not None and n.parent.key is not None:
            callers = stats[n.key][4]
            prev = callers.get(n.parent.key, (0, 0, 0.0, 0.0))
            callers[n.parent.key] = (
                prev[0] + n.ncalls,
                prev[1] + n.ncalls,
                prev[2] + n.tottime,
                prev[3] + n.cumtime,
            )
    # fib calls itself: primitive calls are the outermost ones
    stats[KEYS[2]][0] = 1
    return {k: tuple(v) for k, v in stats.items()}


def big_tree(n: int, seed: int = 1, funcs: int = 2000, threads: int = 1) -> CallTree:
    """A random tree of ``n`` nodes over ``funcs`` functions in a few files, with totals that
    add up (a node's total time is its own time plus its children's)."""
    rnd = random.Random(seed)
    keys = [
        (f"/home/user/proj/pkg{i % 37}/mod{i % 11}.py", 10 + i, f"func_{i}") for i in range(funcs)
    ]
    parent: List[int] = []
    depth: List[int] = []
    for i in range(n):
        if i < threads or rnd.random() < 0.002:
            parent.append(-1)
            depth.append(0)
        else:
            # mostly near the end, so paths go deep
            p = max(0, i - 1 - int(rnd.expovariate(0.05)))
            parent.append(p)
            depth.append(depth[p] + 1)
    own = [rnd.randint(1, 1000) for _ in range(n)]
    total = own[:]
    for i in range(n - 1, -1, -1):
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    thread_of = [0] * n
    for i in range(n):
        thread_of[i] = i % threads if parent[i] < 0 else thread_of[parent[i]]
    nodes = [
        (parent[i], rnd.randrange(funcs), thread_of[i], rnd.randint(1, 50), total[i], own[i])
        for i in range(n)
    ]
    return CallTree.from_raw(1e-6, keys, nodes, [1000 + t for t in range(threads)], 0, None)
