"""The calling-context tree the core keeps per thread: on every zoo workload its function totals
and its derived edges equal the pstats records to the tick (under a counting clock), known
programs give the tree written by hand, and the node cap merges calls, counts them and keeps
pstats exact."""

from __future__ import annotations

import cProfile
import functools
import sys
import threading
from typing import Any, Callable, Dict, List, Set, Tuple

import pytest

import fastprof
import test_profile_zoo as zoo
from fastprof.keys import label
from fastprof.tree import CallTree, Node
from profile_helpers import comparable

HERE = __file__
Raw = List[Tuple[int, int, int, int, int, int]]


def run_zoo(name: str, **options: Any) -> fastprof.Profile:
    prof = fastprof.Profile(zoo.clock, 1, **options)
    zoo.drive(prof, zoo.CASES[name])
    return prof


def nested_pair(nodes: Raw, ni: int, g: int, f: int) -> bool:
    """Whether a proper ancestor M of node ni (with a parent) is a call of f from g."""
    m = nodes[ni][0]
    while m >= 0 and nodes[m][0] >= 0:
        if nodes[m][1] == f and nodes[nodes[m][0]][1] == g:
            return True
        m = nodes[m][0]
    return False


def edges_of(nodes: Raw) -> Dict[Tuple[int, int], List[int]]:
    """The caller -> callee records (ncalls, nrec, tt, it) that the contract derives from the
    raw nodes, computed here independently of the core."""
    out: Dict[Tuple[int, int], List[int]] = {}
    for ni, (parent, func, _, ncalls, tt, it) in enumerate(nodes):
        if parent < 0:
            continue
        acc = out.setdefault((nodes[parent][1], func), [0, 0, 0, 0])
        acc[0] += ncalls
        acc[3] += it
        if nested_pair(nodes, ni, nodes[parent][1], func):
            acc[1] += ncalls
        else:
            acc[2] += tt
    return out


def func_totals(nodes: Raw) -> Dict[int, List[int]]:
    """Per function index: (ncalls, tt, it) from the raw nodes (tt over nodes with no ancestor
    of the same function)."""
    out: Dict[int, List[int]] = {}
    for parent, func, _, ncalls, tt, it in nodes:
        acc = out.setdefault(func, [0, 0, 0])
        acc[0] += ncalls
        acc[2] += it
        m = parent
        while m >= 0 and nodes[m][1] != func:
            m = nodes[m][0]
        if m < 0:
            acc[1] += tt
    return out


@pytest.mark.parametrize("name", sorted(zoo.CASES))
def test_tree_totals_and_edges_equal_the_records_on_the_zoo(name: str) -> None:
    prof = run_zoo(name)
    spt, funcs, edges = prof._raw()
    tspt, nodes, threads, merged = prof._raw_tree()
    assert (tspt, merged) == (spt, 0)
    assert len(threads) == 1 and nodes
    # every function: its nodes' calls and own time are its record's, its outermost nodes'
    # total time its cumulative time, to the tick
    totals = func_totals(nodes)
    for fi, (_, ncalls, _nrec, tt, it) in enumerate(funcs):
        assert totals.get(fi, [0, 0, 0]) == [ncalls, tt, it], label(funcs[fi][0])
    # every edge the core reports is the one the nodes give
    derived = edges_of(nodes)
    assert {(c, f): list(rest) for c, f, *rest in edges} == derived
    # the Python form agrees with the pstats view (seconds are ticks here: timeunit 1)
    prof.create_stats()
    view = {k: (nc, tt, ct) for k, (cc, nc, tt, ct, _) in prof.stats.items()}
    assert prof.tree().function_totals() == view
    assert any(v[2] > 0 for v in view.values())  # the clock moved


@pytest.mark.parametrize("cap", [0, 1, 7, 40])
@pytest.mark.parametrize("name", sorted(zoo.CASES))
def test_pstats_stay_exact_past_the_node_cap(name: str, cap: int) -> None:
    fn = zoo.CASES[name]
    keep = zoo.this_file_or_builtin
    ref = comparable(zoo.drive(cProfile.Profile(zoo.clock, 1), fn), keep, times=True)
    prof = fastprof.Profile(zoo.clock, 1, tree_nodes=cap)
    got = comparable(zoo.drive(prof, fn), keep, times=True)
    assert got == ref
    _, nodes, _, merged = prof._raw_tree()
    assert len(nodes) <= cap
    if cap == 0:
        assert (nodes, merged) == ([], 0)  # no tree kept, nothing counted as merged
    else:
        calls = sum(r[1] for r in prof._raw()[1])
        assert sum(n[3] for n in nodes) + merged == calls  # each call has a node or merged
        assert merged == 0 or len(nodes) == cap  # merging only once the cap is reached
        assert merged > 0 or cap == 40  # the small caps are reached on every workload
        # a merged call's time is its caller's own time: each node's total is its own time
        # and its children's totals, to the tick
        for n in CallTree.from_profile(prof, ticks=True).nodes():
            assert n.cumtime == n.tottime + sum(c.cumtime for c in n.children), n.key


# -- known programs, trees written by hand ---------------------------------------------------


def leaf(x: int) -> int:
    return x + 1


def gen3() -> Any:
    yield 1
    yield 2


def use_gen() -> int:
    return sum(leaf(x) for x in gen3())


def boom() -> None:
    raise ValueError("boom")


def catcher() -> int:
    try:
        boom()
    except ValueError:
        pass
    return leaf(1)


def uses_builtins() -> int:
    return len([1, 2]) + len("ab") + max(1, 2)


def paths(tree: CallTree, keep: Callable[[Node], bool] = lambda n: True) -> Dict[Any, int]:
    """Every node of the tree's one thread whose path is all kept: path of names -> ncalls."""
    (root,) = tree.threads.values()
    out: Dict[Any, int] = {}
    stack = [(c, (c.key[2],)) for c in root.children if keep(c)]
    while stack:
        n, path = stack.pop()
        assert path not in out  # a path is one node
        out[path] = n.ncalls
        stack.extend((c, path + (c.key[2],)) for c in n.children if keep(c))
    return out


def mine(n: Node) -> bool:
    return n.key is not None and n.key[0] in (HERE, zoo.HERE)


def profiled(fn: Callable[[], Any], **options: Any) -> CallTree:
    prof = fastprof.Profile(builtins=False, **options)
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    return prof.tree()


def test_recursion_is_a_path_per_depth() -> None:
    tree = profiled(functools.partial(zoo.fib, 4))
    # fib(4) -> 3, 2 -> 2, 1, 1, 0 -> 1, 0
    assert paths(tree, mine) == {("fib",): 1, ("fib",) * 2: 2, ("fib",) * 3: 4, ("fib",) * 4: 2}


def test_mutual_recursion() -> None:
    tree = profiled(functools.partial(zoo.is_even, 3))
    assert paths(tree, mine) == {
        ("is_even",): 1,
        ("is_even", "is_odd"): 1,
        ("is_even", "is_odd", "is_even"): 1,
        ("is_even", "is_odd", "is_even", "is_odd"): 1,
    }


def test_generators_count_each_resume() -> None:
    tree = profiled(use_gen)
    assert paths(tree, mine) == {
        ("use_gen",): 1,
        ("use_gen", "<genexpr>"): 3,  # two items, then the end
        ("use_gen", "<genexpr>", "leaf"): 2,
        ("use_gen", "<genexpr>", "gen3"): 3,  # two yields and the end
    }


def test_exceptions_leave_their_frames() -> None:
    tree = profiled(catcher)
    assert paths(tree, mine) == {("catcher",): 1, ("catcher", "boom"): 1, ("catcher", "leaf"): 1}


def test_builtins_are_nodes() -> None:
    prof = fastprof.Profile()
    prof.enable()
    uses_builtins()
    prof.disable()
    got = paths(prof.tree(), lambda n: n.key[0] in (HERE, "~") and "disable" not in n.key[2])
    assert got == {
        ("uses_builtins",): 1,
        ("uses_builtins", "<built-in method builtins.len>"): 2,
        ("uses_builtins", "<built-in method builtins.max>"): 1,
    }


def test_enable_and_disable_mid_call() -> None:
    prof = fastprof.Profile(builtins=False)
    zoo.enabled_mid_call(prof)  # enabled inside start_here, disabled inside stop_deeper.deeper
    fib3 = {("fib",): 1, ("fib", "fib"): 2, ("fib", "fib", "fib"): 2}
    sd = ("stop_deeper", "deeper")
    assert paths(prof.tree(), mine) == {
        # start_here's fib(2): a top-level frame (start_here was entered before)
        ("fib",): 1,
        ("fib", "fib"): 2,
        # is_even(4) -> odd(3) -> even(2) -> odd(1) -> even(0)
        ("is_even",): 1,
        ("is_even", "is_odd"): 1,
        ("is_even", "is_odd", "is_even"): 1,
        ("is_even", "is_odd", "is_even", "is_odd"): 1,
        ("is_even", "is_odd", "is_even", "is_odd", "is_even"): 1,
        # fib(3) under the frames the disable closes
        ("stop_deeper",): 1,
        sd: 1,
        **{sd + k: v for k, v in fib3.items()},
    }


def test_threads_have_a_root_each() -> None:
    both = threading.Barrier(2)  # both alive at once: two idents

    def work(n: int) -> None:
        both.wait()
        zoo.t_work(n)

    def threaded() -> None:
        ts = [threading.Thread(target=work, args=(5 + k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    prof = fastprof.Profile(builtins=False)
    prof.enable()
    threaded()
    prof.disable()
    tree = prof.tree()
    main = threading.get_ident()
    assert list(tree.threads)[0] == main and len(tree.threads) == 3
    leaves: Set[int] = set()
    for ident, root in tree.threads.items():
        works = [n for n in root.walk() if n.key is not None and n.key[2] == "t_work"]
        if ident == main:
            assert works == []
            continue
        (w,) = works  # one t_work call in each worker thread
        assert w.ncalls == 1
        got = {tuple(k[2] for k in n.path()[n.path().index(w.key) :]): n.ncalls for n in w.walk()}
        n = got[("t_work", "<genexpr>", "t_leaf")]
        leaves.add(n)
        assert got == {
            ("t_work",): 1,
            ("t_work", "<genexpr>"): n + 1,
            ("t_work", "<genexpr>", "t_leaf"): n,
        }
    assert leaves == {5, 6}


# -- the node cap -----------------------------------------------------------------------------


def test_the_cap_merges_and_counts() -> None:
    prof = fastprof.Profile(zoo.clock, 1, builtins=False, tree_nodes=3)
    ref = cProfile.Profile(zoo.clock, 1, builtins=False)
    for p in (prof, ref):
        zoo.drive(p, functools.partial(zoo.fib, 6))
    _, nodes, _, merged = prof._raw_tree()
    # fib(6) makes 1, 2, 4, 8, 8, 2 calls at depths 0 to 5: three depths get nodes
    assert [(n[0], n[3]) for n in nodes] == [(-1, 1), (0, 2), (1, 4)]
    assert merged == 8 + 8 + 2
    assert comparable(prof.stats, zoo.in_this_file, True) == comparable(
        ref.stats, zoo.in_this_file, True
    )


def test_a_new_top_level_call_past_the_cap_is_merged() -> None:
    prof = fastprof.Profile(builtins=False, tree_nodes=1)
    prof.enable()
    leaf(1)
    leaf(2)  # the same path: its node
    zoo.fib(1)  # a new path: merged
    prof.disable()
    _, nodes, _, merged = prof._raw_tree()
    assert [(n[0], n[3]) for n in nodes] == [(-1, 2)]
    assert merged == 1
    assert prof.tree().merged == 1


_WIDE = 320
_SRC = "".join(f"def a{i}(f):\n    return f()\n" for i in range(_WIDE))
_SRC += "".join(f"def b{j}():\n    return {j}\n" for j in range(_WIDE))
_NS: Dict[str, Any] = {}
exec(compile(_SRC, "<wide paths>", "exec"), _NS)
A = [_NS[f"a{i}"] for i in range(_WIDE)]
B = [_NS[f"b{j}"] for j in range(_WIDE)]


def many_paths() -> None:
    for a in A:
        for b in B:
            a(b)


def test_memory_is_bounded_by_the_cap() -> None:
    prof = fastprof.Profile(builtins=False, tree_nodes=1000)
    zoo.drive(prof, many_paths)  # 102,720 distinct paths
    _, nodes, _, merged = prof._raw_tree()
    assert len(nodes) == 1000
    calls = 1 + 2 * _WIDE * _WIDE
    assert sum(n[3] for n in nodes) + merged == calls
    stats = prof.stats
    for j in (0, 17, _WIDE - 1):
        cc, nc, _, _, callers = stats[("<wide paths>", 2 * _WIDE + 2 * j + 1, f"b{j}")]
        assert (cc, nc) == (_WIDE, _WIDE)
        assert all(v[:2] == (1, 1) for v in callers.values()) and len(callers) == _WIDE


# -- options ---------------------------------------------------------------------------------


def test_tree_nodes_is_checked() -> None:
    with pytest.raises(TypeError, match="tree_nodes must be an int"):
        fastprof.Profile(tree_nodes="10")
    with pytest.raises(TypeError, match="tree_nodes must be an int"):
        fastprof.Profile(tree_nodes=True)
    with pytest.raises(ValueError, match="tree_nodes must be between 0 and"):
        fastprof.Profile(tree_nodes=-1)
    with pytest.raises(ValueError, match="tree_nodes must be between 0 and"):
        fastprof.Profile(tree_nodes=1 << 40)
    assert fastprof.Profile().tree_nodes == 1_000_000
    assert fastprof.Profile(tree_nodes=5).tree_nodes == 5


def test_subcalls_false_keeps_no_tree() -> None:
    prof = fastprof.Profile(builtins=False, subcalls=False)
    zoo.drive(prof, functools.partial(zoo.fib, 3))
    assert prof._raw_tree()[1:] == ([], [], 0)
    assert len(prof.tree()) == 0


def test_clear_empties_the_tree() -> None:
    prof = fastprof.Profile(builtins=False)
    zoo.drive(prof, functools.partial(zoo.fib, 3))
    assert prof._raw_tree()[1]
    prof.clear()
    assert prof._raw_tree()[1:] == ([], [], 0)
    zoo.drive(prof, functools.partial(zoo.fib, 2))
    assert paths(prof.tree(), mine) == {("fib",): 1, ("fib", "fib"): 2}


def test_a_reused_thread_ident_shares_its_root() -> None:
    idents: List[int] = []

    def work() -> None:
        idents.append(threading.get_ident())
        zoo.t_work(3)

    prof = fastprof.Profile(builtins=False)
    prof.enable()
    for _ in range(2):  # one after the other: the second often gets the first's ident
        t = threading.Thread(target=work)
        t.start()
        t.join()
    prof.disable()
    tree = prof.tree()
    for ident in set(idents):
        paths_here: Dict[Any, int] = {}
        for n in tree.threads[ident].walk():
            if n.key is not None and n.key[2] == "t_work":
                key = tuple(k[2] for k in n.path())
                assert key not in paths_here  # one node per path under each ident
                paths_here[key] = n.ncalls
        assert sum(paths_here.values()) == idents.count(ident)
    assert len(tree.threads) == 1 + len(set(idents))


def _tree_leaf() -> int:
    return 1


def test_tree_of_an_enabled_profiler() -> None:
    # the read itself is recorded while enabled: it adds functions the tree must name
    p = fastprof.Profile()
    p.enable()
    _tree_leaf()
    tree = p.tree()
    p.disable()
    assert any(n.key is not None and n.key[2] == "_tree_leaf" for n in tree.nodes())


class _Finalized:
    """Garbage in a cycle whose finalizer runs action (a collection frees it)."""

    def __init__(self, action: Callable[[], Any]) -> None:
        self.me = self
        self.action = action

    def __del__(self) -> None:
        self.action()


def _new_path(n: List[int]) -> None:
    """Calls a function of a new code object: a new function, node and edge in a profile."""
    exec(compile("def g():\n    return 1\ng()\n", f"<fin{len(n)}>", "exec"), {})
    n.append(1)


@pytest.mark.parametrize("read", ["_raw", "_raw_tree", "_raw_thread_names", "_tree_snapshot"])
def test_a_read_while_finalizers_add_records_reads_the_records_of_its_start(read: str) -> None:
    """Reading the records of an enabled profiler (not through quiet) makes objects, which can
    run a collection (at once below 3.12) whose finalizers call Python code that the profiler
    records: the read keeps to the records there when it began (it once wrote past its list:
    the sanitizer build checks it reads and writes no further)."""
    import gc

    ran: List[int] = []
    # thousands of records: the rows outnumber the free lists' tuples, whose reuse runs no
    # collection
    many = compile("".join(f"def f{i}():\n    pass\nf{i}()\n" for i in range(3000)), "m", "exec")
    prof = fastprof.Profile()
    thresholds = gc.get_threshold()
    prof.enable()
    try:
        exec(many, {})
        reader = getattr(prof, read)  # made now: making it later would run the collection
        gc.disable()  # the garbage waits for the read
        for _ in range(200):
            _Finalized(lambda: _new_path(ran))
        gc.set_threshold(1)
        gc.enable()
        got = reader()
        during = len(ran)
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)
        prof.disable()
        gc.collect()
    assert got
    if read == "_raw":
        _, funcs, edges = got
        assert all(0 <= c < len(funcs) and 0 <= f < len(funcs) for c, f, *_ in edges)
        assert len(funcs) < len(prof._raw()[1]) or during == 0
    if read == "_raw_tree":
        _, nodes, threads, _ = got
        for i, (parent, _func, thread, *_rest) in enumerate(nodes):
            assert -1 <= parent < i and 0 <= thread < len(threads)
    if sys.version_info < (3, 12) and read in ("_raw", "_raw_tree"):
        assert during > 0  # the collection ran inside the read (3.12+ runs it later)


@pytest.mark.parametrize("read", ["_raw", "_raw_tree", "_raw_thread_names"])
def test_a_profiler_cleared_by_a_finalizer_during_a_read_says_so(read: str) -> None:
    import gc

    prof = fastprof.Profile()
    thresholds = gc.get_threshold()
    prof.enable()
    try:
        exec(
            compile("".join(f"def f{i}():\n    pass\nf{i}()\n" for i in range(3000)), "m", "exec"),
            {},
        )
        reader = getattr(prof, read)
        gc.disable()
        for _ in range(50):
            _Finalized(prof.clear)
        gc.set_threshold(1)
        gc.enable()
        try:
            got = reader()
        except RuntimeError as e:
            assert "cleared while it was being read" in str(e)
        else:
            # cleared before or after the rows were made: a run of the collection at once
            # (below 3.12) clears the tables under the rows of these two
            assert sys.version_info >= (3, 12) or read == "_raw_thread_names"
            assert got is not None
    finally:
        gc.enable()
        gc.set_threshold(*thresholds)
        prof.disable()
        gc.collect()
