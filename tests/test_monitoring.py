"""The call profiler's hold on the interpreter's hooks: exact counts at every call site by
default, one shared sys.monitoring tool id (3.12+) for any number of enabled profilers, the
same tool-id claim for the line profiler, and nothing left installed after any exit,
RecursionError included."""

from __future__ import annotations

import cProfile
import io
import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import fastprof

MONITORING = sys.version_info >= (3, 12)
needs_monitoring = pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
PACKAGE_DIR = os.path.dirname(fastprof.__file__)


def py_func(x: int) -> int:
    return x


def mixed_sites(n: int) -> None:
    for _ in range(n):
        for f in (py_func, len, py_func, abs):
            f([1]) if f is len else f(-1)
        g: Callable[..., Any] = py_func
        for _ in range(2):
            g(1)
            g = hex if g is py_func else py_func
        for f in (py_func, len):
            f("ab")


def counts(stats: Dict[Any, Any]) -> Dict[str, Tuple[int, int]]:
    """{name: (calls, primitive calls)} of the functions that mixed_sites involves."""
    keep = ("py_func", "mixed_sites", "len>", "abs>", "hex>")
    return {k[2]: (v[1], v[0]) for k, v in stats.items() if k[2].endswith(keep)}


def fastprof_stats(run: Callable[[], None], **options: Any) -> Dict[Any, Any]:
    p = fastprof.Profile(**options)
    p.enable()
    run()
    p.disable()
    p.create_stats()
    return p.stats


def cprofile_stats(run: Callable[[], None]) -> Dict[Any, Any]:
    p = cProfile.Profile()
    p.enable()
    run()
    p.disable()
    p.create_stats()
    return p.stats


def sharing(*args: Any, **options: Any) -> fastprof.Profile:
    """A profiler as ``@fastprof.profile`` sessions make them: it may be enabled while other
    fastprof profilers are (a plain ``Profile`` is refused then, as cProfile refuses)."""
    p = fastprof.Profile(*args, **options)
    p._nests = True
    return p


def monitoring_free() -> bool:
    """No sys.monitoring tool id held by fastprof (below 3.12: no profile hook set)."""
    if not MONITORING:
        return sys.getprofile() is None
    return all(not (sys.monitoring.get_tool(i) or "").startswith("fastprof") for i in range(6))


# -- 1. exact by default --------------------------------------------------------------------


def test_default_counts_builtins_at_sites_that_called_python_functions() -> None:
    mixed_sites(1)  # warm up: specialisation happens outside the comparison
    mine = counts(fastprof_stats(lambda: mixed_sites(5)))
    theirs = counts(cprofile_stats(lambda: mixed_sites(5)))
    assert mine == theirs
    assert mine["<built-in method builtins.len>"] == (10, 10)
    assert mine["<built-in method builtins.abs>"] == (5, 5)
    assert mine["<built-in method builtins.hex>"] == (5, 5)


def test_default_stays_exact_across_runs_of_the_same_sites() -> None:
    for _ in range(3):  # a pruned site would stay pruned for the next profiler
        mine = counts(fastprof_stats(lambda: mixed_sites(2)))
        assert mine["<built-in method builtins.len>"] == (4, 4)


@needs_monitoring
def test_pruning_is_an_opt_in_that_loses_builtins_at_mixed_sites() -> None:
    mixed_sites(1)
    pruned = counts(fastprof_stats(lambda: mixed_sites(5), prune_call_sites=True))
    # the documented loss: a site that once called a Python function reports no builtin
    assert pruned.get("<built-in method builtins.len>", (0, 0))[0] < 10
    assert pruned["py_func"] == counts(cprofile_stats(lambda: mixed_sites(5)))["py_func"]
    # ... and its pruning does not outlive it
    assert counts(fastprof_stats(lambda: mixed_sites(5)))["<built-in method builtins.len>"] == (
        10,
        10,
    )


def test_strict_keyword_is_still_accepted() -> None:
    exact = counts(fastprof_stats(lambda: mixed_sites(2), strict=True))
    assert exact["<built-in method builtins.len>"] == (4, 4)
    with pytest.raises(ValueError, match="prune_call_sites"):
        fastprof.Profile(strict=True, prune_call_sites=True)
    with pytest.raises(TypeError, match="prune_call_sites"):
        fastprof.Profile(prune_call_sites="yes")


# -- 2. one shared tool id ------------------------------------------------------------------


def leaf() -> int:
    return 1


def nested(depth: int, profilers: List[fastprof.Profile], calls: List[int]) -> None:
    """Enables profilers[depth], calls leaf() depth+1 times, goes one deeper, calls leaf()
    once more, then disables it."""
    if depth == len(profilers):
        return
    p = profilers[depth]
    p.enable()
    for _ in range(depth + 1):
        leaf()
    nested(depth + 1, profilers, calls)
    len(calls)
    leaf()
    p.disable()


@needs_monitoring  # below 3.12 one profiler per thread holds PyEval_SetProfile
@pytest.mark.parametrize("n", [8, 12])
def test_many_profilers_enabled_at_once_each_count_exactly(n: int) -> None:
    profilers = [sharing() for _ in range(n)]
    nested(0, profilers, [])
    assert monitoring_free()
    for d, p in enumerate(profilers):
        p.create_stats()
        by_name = {k[2]: v for k, v in p.stats.items()}
        # leaf: this level's depth+1 calls and the one after, plus those of every deeper level
        want_leaf = sum(k + 2 for k in range(d, n))
        assert by_name["leaf"][:2] == (want_leaf, want_leaf), d
        # nested: the deeper levels' n-d calls ran while p was on, the first one primitive
        assert by_name["nested"][:2] == (1, n - d), d
        # len: len(profilers) in each of those calls, len(calls) at each level from d
        assert by_name["<built-in method builtins.len>"][:2] == (2 * (n - d), 2 * (n - d)), d


@needs_monitoring
def test_profilers_share_one_tool_id_named_fastprof() -> None:
    profilers = [sharing() for _ in range(8)]
    try:
        for p in profilers:
            p.enable()
        ids = {p.tool_id for p in profilers}
        assert len(ids) == 1
        (tool,) = ids
        assert sys.monitoring.get_tool(tool) == "fastprof"
        held = [i for i in range(6) if sys.monitoring.get_tool(i) is not None]
        assert held == [tool]
    finally:
        for p in profilers:
            p.disable()
    assert monitoring_free()


@needs_monitoring
def test_nested_decorated_sessions_8_deep() -> None:
    sessions = [fastprof.profile(report="never") for _ in range(10)]

    def make(i: int) -> Callable[[], int]:
        def level() -> int:
            leaf()
            return 1 + (funcs[i + 1]() if i + 1 < len(funcs) else 0)

        name = f"level{i}"
        level.__code__ = level.__code__.replace(co_name=name, co_qualname=name)
        level.__name__ = level.__qualname__ = name
        return sessions[i](level)

    funcs = [make(i) for i in range(10)]
    assert funcs[0]() == 10
    assert funcs[0]() == 10
    assert monitoring_free()
    for i, s in enumerate(sessions):
        st = s.stats()
        assert st.row("leaf").ncalls == 2 * (10 - i)
        for j in range(i, 10):
            assert st.row(f"level{j}").ncalls == 2


@needs_monitoring
def test_profilers_with_different_options_share_the_id() -> None:
    counter = iter(range(10**6))
    a = sharing(builtins=False)
    b = sharing(lambda: next(counter), 1.0)  # a user timer: the general path
    c = sharing(prune_call_sites=True)
    a.enable()
    b.enable()
    c.enable()
    mixed_sites(2)
    c.disable()
    mixed_sites(1)
    b.disable()
    mixed_sites(1)
    a.disable()
    assert monitoring_free()
    truth = counts(cprofile_stats(lambda: mixed_sites(1)))
    for p, runs, builtins in ((a, 4, False), (b, 3, True), (c, 2, True)):
        p.create_stats()
        got = counts(p.stats)
        assert got["py_func"] == tuple(runs * v for v in truth["py_func"])
        for name in ("<built-in method builtins.len>", "<built-in method builtins.hex>"):
            # c prunes, but not while others share the id: exact too
            want = tuple(runs * v for v in truth[name]) if builtins else None
            assert got.get(name) == want, (p, name)


@needs_monitoring
def test_a_profiler_refused_while_joining_leaves_the_others_exact() -> None:
    from profile_helpers import audit_refusing

    a, b = sharing(), sharing()
    a.enable()
    try:
        with audit_refusing("sys.monitoring.register_callback"):
            with pytest.raises(RuntimeError, match="refused"):
                b.enable()
        assert not b.enabled and b.tool_id is None
        leaf()
        hex(7)
    finally:
        a.disable()
    assert monitoring_free()
    a.create_stats()
    by_name = {k[2]: v[:2] for k, v in a.stats.items()}
    assert by_name["leaf"] == (1, 1) and by_name["<built-in method builtins.hex>"] == (1, 1)
    b.enable()  # usable afterwards
    leaf()
    b.disable()
    assert monitoring_free()


@needs_monitoring
@pytest.mark.parametrize(
    "held,expected,lines",
    [((), 2, 3), ((2,), 3, 3), ((3, 4, 5), 2, 2), ((2, 3, 4, 5), 0, 0), ((0, 2, 3, 4, 5), 1, 1)],
)
def test_tool_id_order_keeps_debugger_and_coverage_ids_for_last(
    held: Tuple[int, ...], expected: int, lines: int
) -> None:
    """The call profiler takes the profiler's id (2) first, the line profiler 3, 4, 5 first
    (2 then, left to cProfile and line_profiler); both take 0 and 1 last."""
    for i in held:
        sys.monitoring.use_tool_id(i, "other tool")
    try:
        p = fastprof.Profile()
        p.enable()
        try:
            assert p.tool_id == expected
        finally:
            p.disable()
        lp = fastprof.LineProfiler(leaf)
        lp.enable()
        try:
            assert lp._tool == lines
        finally:
            lp.disable()
    finally:
        for i in held:
            sys.monitoring.free_tool_id(i)
    assert monitoring_free()


@needs_monitoring
def test_every_id_held_gives_one_message_for_both_profilers() -> None:
    held = [i for i in range(6) if sys.monitoring.get_tool(i) is None]
    for i in held:
        sys.monitoring.use_tool_id(i, "other tool")
    try:
        with pytest.raises(RuntimeError, match="every sys.monitoring tool id is held") as a:
            fastprof.Profile().enable()
        with pytest.raises(RuntimeError, match="every sys.monitoring tool id is held") as b:
            fastprof.LineProfiler(leaf).enable()
        assert str(a.value) == str(b.value)
        # the holders as a plain list: "0: 'other tool', 1: 'other tool', ..."
        listed = ", ".join(f"{i}: {sys.monitoring.get_tool(i)!r}" for i in range(6))
        assert f"({listed});" in str(a.value)
    finally:
        for i in held:
            sys.monitoring.free_tool_id(i)
    assert monitoring_free()


@needs_monitoring
def test_cprofile_refused_while_fastprof_holds_the_profiler_id() -> None:
    p = fastprof.Profile()
    p.enable()
    try:
        assert p.tool_id == sys.monitoring.PROFILER_ID
        with pytest.raises(ValueError):
            cProfile.Profile().enable()
        assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) == "fastprof"
    finally:
        p.disable()
    cp = cProfile.Profile()
    cp.enable()  # given back: cProfile runs again
    cp.disable()


@needs_monitoring
def test_line_and_call_profilers_together() -> None:
    lp = fastprof.LineProfiler(leaf)
    p = fastprof.Profile()
    with lp:
        p.enable()
        for _ in range(3):
            leaf()
        p.disable()
    assert monitoring_free()
    p.create_stats()
    assert {k[2]: v[1] for k, v in p.stats.items()}["leaf"] == 3
    hits = sum(h for _, h, _ in next(iter(lp.get_stats().timings.values())))
    assert hits == 3


# -- 4. no hook left behind -----------------------------------------------------------------


def at_depth(depth: int, fn: Callable[[], Any]) -> Any:
    if depth <= 0:
        return fn()
    return at_depth(depth - 1, fn)


def depths_near_the_limit() -> Iterator[int]:
    here = len_stack()
    limit = sys.getrecursionlimit()
    return iter(range(max(0, limit - here - 40), limit - here + 3))


def len_stack() -> int:
    f: Any = sys._getframe()
    n = 0
    while f is not None:
        n += 1
        f = f.f_back
    return n


def test_decorated_function_ending_in_recursion_error_disables_at_every_depth() -> None:
    @fastprof.profile(report="never")
    def work() -> int:
        return leaf()

    for depth in depths_near_the_limit():
        try:
            at_depth(depth, work)
        except RecursionError:
            pass
        assert not work.profiler.enabled, depth
        assert monitoring_free(), depth
    cp = cProfile.Profile()
    cp.enable()
    cp.disable()


def test_recursive_decorated_function_exhausting_the_stack_disables() -> None:
    @fastprof.profile(report="never")
    def down(n: int) -> int:
        return down(n + 1)

    limit = sys.getrecursionlimit()
    for depth in range(0, 60, 7):
        with pytest.raises(RecursionError):
            at_depth(depth, lambda: down(0))
        assert not down.profiler.enabled
        assert monitoring_free()
    assert down.session._active == 0
    # the headroom the exit path took is given back: the limit is where it was
    assert sys.getrecursionlimit() == limit
    with pytest.raises(RecursionError):
        at_depth(limit - len_stack() + 20, lambda: None)
    at_depth(limit - len_stack() - 20, lambda: None)


def test_context_manager_ending_in_recursion_error_disables_at_every_depth() -> None:
    session = fastprof.profile(report="never")

    def block() -> None:
        with session:
            leaf()

    for depth in depths_near_the_limit():
        try:
            at_depth(depth, block)
        except RecursionError:
            pass
        assert not session.profiler.enabled, depth
        assert monitoring_free(), depth


@pytest.mark.parametrize("how", ["runcall", "runctx", "with"])
def test_profile_runcall_runctx_with_disable_at_every_depth(how: str) -> None:
    p = fastprof.Profile()

    def go() -> None:
        if how == "runcall":
            p.runcall(leaf)
        elif how == "runctx":
            p.runctx("leaf()", {"leaf": leaf}, None)
        else:
            with p:
                leaf()

    for depth in depths_near_the_limit():
        try:
            at_depth(depth, go)
        except RecursionError:
            pass
        assert not p.enabled, depth
        assert monitoring_free(), depth


def test_decorated_function_keeps_what_a_function_has() -> None:
    class Box:
        def __init__(self) -> None:
            self.v = 3

        @fastprof.profile(report="never")
        def get(self, add: int = 0) -> int:
            """Docstring."""
            return self.v + add

    b = Box()
    assert b.get() == 3 and b.get(add=2) == 5 and Box.get(b, 1) == 4
    assert Box.get.__name__ == "get" and Box.get.__doc__ == "Docstring."
    assert Box.get.__wrapped__.__name__ == "get"
    import inspect

    assert list(inspect.signature(Box.get).parameters) == ["self", "add"]
    assert Box.get.session.stats().row("get").ncalls == 3


@fastprof.profile(report="never")
def module_level_work(x: int) -> int:
    return x + 1


def test_decorated_function_pickles_by_reference() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(module_level_work)) is module_level_work
    assert module_level_work(1) == 2
    assert "module_level_work" in repr(module_level_work)


# -- 5. options checked early, no fastprof frames in reports ---------------------------------


@pytest.mark.parametrize(
    "options,error",
    [
        ({"sort_by": "nope"}, ValueError),
        ({"sort_by": ("tottime", "nope")}, ValueError),
        ({"sort_by": 7}, TypeError),
        ({"top_n": 0}, ValueError),
        ({"top_n": "5"}, ValueError),
        ({"top_n": 2.5}, ValueError),
        ({"top_n": True}, ValueError),
    ],
)
def test_bad_options_raise_at_decoration_time(options: Dict[str, Any], error: type) -> None:
    with pytest.raises(error, match=next(iter(options))):
        fastprof.profile(**options)


def no_package_frames(stats: Dict[Any, Any]) -> List[Any]:
    found = []
    for key, value in stats.items():
        for k in [key, *value[4]]:
            if k[0].startswith(PACKAGE_DIR):
                found.append(k)
    return found


def test_no_fastprof_frames_in_a_decorated_function_stats() -> None:
    @fastprof.profile(report="never")
    def work() -> int:
        return leaf()

    work()
    work()
    assert (
        no_package_frames(
            work.profiler.stats if hasattr(work.profiler, "stats") else _snapshot(work.profiler)
        )
        == []
    )
    names = {r.name for r in work.session.stats().rows}
    assert names >= {"work", "leaf"}
    assert not any(n in names for n in ("_start", "_stop", "_after_call", "disable"))


def test_no_fastprof_frames_in_a_with_block_stats() -> None:
    out = io.StringIO()
    with fastprof.profile(stream=out) as p:
        leaf()
    stats = _snapshot(p)
    assert no_package_frames(stats) == []
    # nor the session's own builtins (the with statement calls __exit__ while it is on)
    assert [k[2] for k in stats] == ["leaf"]
    assert "_stop" not in out.getvalue() and "__exit__" not in out.getvalue()


def _snapshot(p: fastprof.Profile) -> Dict[Any, Any]:
    p.snapshot_stats()
    return p.stats
