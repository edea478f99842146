"""The C collector, fastprof._fastprof.Profiler, on both hook paths (sys.monitoring on 3.12+,
PyEval_SetProfile below): exact counts and times under an injected counting timer, compared
with the truth and with cProfile run under the same timer; threads, generators, errors, hooks
never left behind."""

from __future__ import annotations

import cProfile
import gc
import sys
import threading
from typing import Any

import pytest

import fastprof
from fastprof import _fastprof

PY312 = sys.version_info >= (3, 12)


class Counter:
    """A timer that advances by one tick per read: each profiler event reads it once."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1
        return self.now


def label(key) -> tuple:
    if isinstance(key, str):
        return ("~", 0, key)
    return (key.co_filename, key.co_firstlineno, key.co_name)


def table(p) -> dict:
    """{label: (ncalls, primitive, tottime, cumtime, {caller: (ncalls, primitive, tt, ct)})} in
    the profiler's time unit."""
    unit, funcs, edges = p._raw()
    out = {}
    for key, nc, nrec, tt, it in funcs:
        out[label(key)] = [nc, nc - nrec, it, tt, {}]
    for caller, callee, nc, nrec, tt, it in edges:
        out[label(funcs[callee][0])][4][label(funcs[caller][0])] = (nc, nc - nrec, it, tt)
    return out


def cprofile_table(p: cProfile.Profile) -> dict:
    p.create_stats()
    return {
        k: [nc, cc, tt, ct, {c: (v[0], v[1], v[2], v[3]) for c, v in callers.items()}]
        for k, (cc, nc, tt, ct, callers) in p.stats.items()
    }


def by_name(tab: dict, name: str) -> list:
    hits = [v for k, v in tab.items() if k[2] == name]
    assert len(hits) == 1, (name, list(tab))
    return hits[0]


def no_hook_left() -> bool:
    if PY312:
        return all(sys.monitoring.get_tool(i) != "fastprof" for i in range(6))
    return sys.getprofile() is None


def leaf() -> None:
    pass


def parent() -> None:
    leaf()
    leaf()


def test_exact_times_with_counting_timer() -> None:
    p = _fastprof.Profiler(Counter(), 1.0, builtins=False)
    p.enable()
    parent()
    p.disable()
    tab = table(p)
    # reads: parent in 1, leaf in 2, out 3, in 4, out 5, parent out 6
    nc, cc, tt, ct, callers = by_name(tab, "leaf")
    assert (nc, cc, tt, ct) == (2, 2, 2, 2)
    assert list(callers.values()) == [(2, 2, 2, 2)]
    assert by_name(tab, "parent")[:4] == [1, 1, 3, 5]
    assert no_hook_left()


def test_builtin_times_and_unit() -> None:
    data = [1, 2, 3]

    def uses_len() -> int:
        return len(data)

    p = _fastprof.Profiler(Counter(), 0.5)
    p.enable()
    uses_len()
    p.disable()
    unit, funcs, _ = p._raw()
    assert unit == 0.5
    tab = table(p)
    assert by_name(tab, "<built-in method builtins.len>")[:4] == [1, 1, 1, 1]
    assert by_name(tab, "uses_len")[:4] == [1, 1, 2, 3]
    # disable() itself is a builtin call, flushed at disable like cProfile does
    assert any("disable" in k[2] for k in tab)


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def even(n: int) -> bool:
    return True if n == 0 else odd(n - 1)


def odd(n: int) -> bool:
    return False if n == 0 else even(n - 1)


def squares(n: int):
    for i in range(n):
        yield i * i


class Thing:
    def __init__(self) -> None:
        self.items: list = []

    @property
    def size(self) -> int:
        return len(self.items)

    def add(self, x: int) -> None:
        self.items.append(x)


def raiser(depth: int) -> None:
    if depth == 0:
        raise KeyError(depth)
    raiser(depth - 1)


def zoo() -> None:
    fib(8)
    even(7)
    sum(squares(5))
    for g in (squares(3), squares(2)):
        list(g)
    t = Thing()
    for i in range(4):
        t.add(i)
    assert t.size == 4
    for d in range(4):
        try:
            raiser(d)
        except KeyError:
            pass
    sorted([3, 1, 2], key=lambda v: -v)
    "-".join(str(i) for i in range(3))
    {}.get(1)


def run_under(prof, fn) -> None:
    prof.enable()
    fn()
    prof.disable()


@pytest.mark.parametrize("builtins", [True, False])
def test_zoo_equals_cprofile_under_the_same_timer(builtins: bool) -> None:
    zoo()  # warm up: imports and caches happen outside the comparison
    fp = _fastprof.Profiler(Counter(), 1.0, builtins=builtins, strict=True)
    cp = cProfile.Profile(Counter(), 1.0, builtins=builtins)
    run_under(fp, zoo)
    run_under(cp, zoo)
    a, b = table(fp), cprofile_table(cp)
    drop = [k for k in set(a) | set(b) if "able" in k[2]]  # enable/disable labels differ
    for k in drop:
        a.pop(k, None)
        b.pop(k, None)
    for v in list(a.values()) + list(b.values()):
        for k in drop:
            v[4].pop(k, None)
    assert a == b
    assert by_name(a, "fib")[:2] == [67, 1]
    assert by_name(a, "even")[:2] == [4, 1] and by_name(a, "odd")[:2] == [4, 1]


def test_default_mode_counts_match_cprofile_on_the_zoo() -> None:
    zoo()
    fp = _fastprof.Profiler(Counter(), 1.0)
    cp = cProfile.Profile(Counter(), 1.0)
    run_under(fp, zoo)
    run_under(cp, zoo)

    def counts(t):
        return {k: tuple(v[:2]) for k, v in t.items() if "able" not in k[2]}

    assert counts(table(fp)) == counts(cprofile_table(cp))


def test_mixed_call_site_is_exact_when_strict() -> None:
    def py(x):
        return x

    def site(fns, x):
        for f in fns:
            f(x)

    fns = [py, abs, py, abs, str, abs]
    p = _fastprof.Profiler(strict=True)
    cp = cProfile.Profile()
    run_under(p, lambda: site(fns, -3))
    run_under(cp, lambda: site(fns, -3))
    assert by_name(table(p), "<built-in method builtins.abs>")[:2] == [3, 3]
    assert by_name(cprofile_table(cp), "<built-in method builtins.abs>")[:2] == [3, 3]


def test_generator_time_while_suspended_is_not_charged() -> None:
    def consumer():
        g = squares(3)
        for _ in g:
            leaf()  # runs while the generator is suspended

    p = _fastprof.Profiler(Counter(), 1.0, builtins=False)
    run_under(p, consumer)
    tab = table(p)
    nc, cc, tt, ct, _ = by_name(tab, "squares")
    # 4 resumes (3 values, then exhaustion), each one read in and one read out
    assert nc == 4 and tt == 4 and ct == 4
    assert by_name(tab, "leaf")[0] == 3


def test_recursion_cumtime_counted_at_outermost_only() -> None:
    p = _fastprof.Profiler(Counter(), 1.0, builtins=False)
    run_under(p, lambda: fib(3))
    nc, cc, tt, ct, callers = by_name(table(p), "fib")
    # fib(3) -> fib(2) -> (fib(1), fib(0)); fib(1): 5 calls, 1 primitive
    assert (nc, cc) == (5, 1)
    assert ct == 9  # fib(3) spans reads 2..11 (the lambda took read 1)
    assert tt == 9
    self_edge = [v for k, v in callers.items() if k[2] == "fib"][0]
    # the edge's own recursion: fib(2)'s calls happen while the edge fib->fib is active
    assert self_edge[:2] == (4, 2)


def test_threads_started_while_profiling_are_profiled() -> None:
    def worker():
        for _ in range(3):
            leaf()

    def main():
        t = threading.Thread(target=worker)
        t.start()
        t.join()

    p = _fastprof.Profiler(builtins=False)
    run_under(p, main)
    assert by_name(table(p), "worker")[0] == 1
    assert by_name(table(p), "leaf")[0] == 3
    q = _fastprof.Profiler(builtins=False, threads=False)
    run_under(q, main)
    assert not [k for k in table(q) if k[2] in ("worker", "leaf")]
    assert no_hook_left()


def test_threads_keep_their_own_stacks() -> None:
    barrier = threading.Barrier(2)

    def rec(n: int) -> None:
        if n:
            barrier.wait() if n == 3 else None
            rec(n - 1)

    def main():
        ts = [threading.Thread(target=rec, args=(3,)) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    p = _fastprof.Profiler(builtins=False)
    run_under(p, main)
    nc, cc, *_ = by_name(table(p), "rec")
    assert (nc, cc) == (8, 2)  # two independent primitive activations


def _catch_unraisable(seen: list) -> Any:
    """Sets sys.unraisablehook to append to seen; returns the hook it replaced."""
    saved = sys.unraisablehook
    sys.unraisablehook = seen.append
    return saved


def test_timer_error_is_reported_as_unraisable_and_recording_goes_on() -> None:
    calls = {"n": 0}

    def bad_timer():
        calls["n"] += 1
        if calls["n"] > 3:
            raise ZeroDivisionError("timer broke")
        return calls["n"]

    seen: list = []
    saved = _catch_unraisable(seen)
    try:
        p = _fastprof.Profiler(bad_timer, 1.0)
        p.enable()
        parent()
        p.disable()  # as cProfile: the error went to sys.unraisablehook, disable() returns
    finally:
        sys.unraisablehook = saved
    assert seen and all(u.exc_type is ZeroDivisionError and u.object is bad_timer for u in seen)
    assert by_name(table(p), "leaf")[0] == 2  # every call still counted
    assert not p.enabled
    assert no_hook_left()
    p.disable()  # again: nothing to report


def test_clear_from_the_timer_is_refused_not_crashing() -> None:
    holder: dict = {}

    def timer():
        holder["p"].clear()
        return 0

    seen: list = []
    saved = _catch_unraisable(seen)
    try:
        p = _fastprof.Profiler(timer, 1.0)
        holder["p"] = p
        p.enable()
        leaf()
        p.disable()
    finally:
        sys.unraisablehook = saved
    assert seen and seen[0].exc_type is RuntimeError
    assert "inside its own timer" in str(seen[0].exc_value)
    assert by_name(table(p), "leaf")[0] == 1
    assert no_hook_left()


def test_enable_twice_disable_twice_and_clear_while_enabled() -> None:
    p = _fastprof.Profiler(builtins=False)
    p.disable()  # never enabled: no-op
    p.enable()
    p.enable()  # no-op
    leaf()
    p.clear()
    leaf()
    p.disable()
    p.disable()
    assert by_name(table(p), "leaf")[0] == 1
    assert no_hook_left()
    p.enable()
    leaf()
    p.disable()
    assert by_name(table(p), "leaf")[0] == 2  # stats accumulate across sessions


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="timer"):
        _fastprof.Profiler(42)
    with pytest.raises(TypeError, match="timeunit"):
        _fastprof.Profiler(Counter(), "fast")
    with pytest.raises(ValueError, match="timeunit"):
        _fastprof.Profiler(Counter(), -1.0)
    with pytest.raises(ValueError, match="clock"):
        _fastprof.Profiler(clock="sundial")
    with pytest.raises(ValueError, match="not both"):
        _fastprof.Profiler(Counter(), clock="cpu")
    with pytest.raises(TypeError, match="subcalls"):
        _fastprof.Profiler(subcalls="yes")
    with pytest.raises(TypeError, match="builtins"):
        _fastprof.Profiler().enable(builtins=[])


def test_subcalls_and_builtins_none_is_false_as_in_cprofile() -> None:
    """cProfile 3.12+ reads subcalls=None / builtins=None as false (its "p" format; 3.11's
    refuses None); a drop-in must not read them as the default."""

    def names(p: Any) -> set:
        p.create_stats()
        return {k[2] for k in p.stats}

    classes = [fastprof.Profile]
    if sys.version_info >= (3, 12):
        classes.append(cProfile.Profile)
    for cls in classes:
        p = cls(builtins=None)
        p.runcall(len, "ab")
        assert not any("len" in n for n in names(p)), cls
        q = cls()
        q.enable(builtins=None)
        len("ab")
        q.disable()
        assert not any("len" in n for n in names(q)), cls


def test_cpu_clocks_record_the_same_counts() -> None:
    for clock in ("cpu", "process_cpu"):
        p = _fastprof.Profiler(clock=clock, builtins=False)
        assert p.clock == clock
        run_under(p, parent)
        assert by_name(table(p), "leaf")[:2] == [2, 2]
        assert p._raw()[0] == 1e-9


def test_code_objects_freed_while_profiling() -> None:
    p = _fastprof.Profiler(builtins=False)
    p.enable()
    for i in range(50):
        ns: dict = {}
        exec(f"def made{i}():\n    return {i}\n", ns)
        ns[f"made{i}"]()
        del ns
        gc.collect()
    p.disable()
    names = sorted(k[2] for k in table(p) if k[2].startswith("made"))
    assert names == sorted(f"made{i}" for i in range(50))
    del p
    gc.collect()
    # ids of dead code objects are reused; a new profiler must not confuse them
    q = _fastprof.Profiler(builtins=False)
    q.enable()
    for i in range(5):
        ns = {}
        exec(f"def other{i}():\n    return {i}\n", ns)
        ns[f"other{i}"]()
    q.disable()
    assert sorted(k[2] for k in table(q) if k[2].startswith(("made", "other"))) == [
        f"other{i}" for i in range(5)
    ]


def test_builtin_labels_match_cprofile() -> None:
    import time

    def calls():
        len([1])
        [].append(1)
        {}.get(1)
        ",".join(["a"])
        time.perf_counter()
        isinstance(1, int)
        sys.getrecursionlimit()

    fp = _fastprof.Profiler()
    cp = cProfile.Profile()
    calls()
    run_under(fp, calls)
    run_under(cp, calls)
    mine = {k for k in table(fp) if k[0] == "~" and "able" not in k[2]}
    theirs = {k for k in cprofile_table(cp) if k[0] == "~" and "able" not in k[2]}
    assert mine == theirs
    assert ("~", 0, "<method 'append' of 'list' objects>") in mine


@pytest.mark.skipif(not PY312, reason="sys.monitoring tool ids exist on 3.12+")
def test_all_tool_ids_taken_names_the_holders() -> None:
    taken = []
    try:
        for i in range(6):
            if sys.monitoring.get_tool(i) is None:
                sys.monitoring.use_tool_id(i, f"busy{i}")
                taken.append(i)
        p = _fastprof.Profiler()
        with pytest.raises(RuntimeError, match="busy"):
            p.enable()
        assert not p.enabled
    finally:
        for i in taken:
            sys.monitoring.free_tool_id(i)
    assert no_hook_left()


@pytest.mark.skipif(not PY312, reason="sys.monitoring tool ids exist on 3.12+")
def test_runs_beside_cprofile_and_another_fastprof() -> None:
    cp = cProfile.Profile()
    a = _fastprof.Profiler(builtins=False)
    b = _fastprof.Profiler(builtins=False)
    cp.enable()
    a.enable()
    b.enable()
    assert a.tool_id != 2 and b.tool_id == a.tool_id  # fastprof shares one id
    parent()
    b.disable()
    a.disable()
    cp.disable()
    for p in (a, b):
        assert by_name(table(p), "leaf")[0] == 2
    assert by_name(cprofile_table(cp), "leaf")[0] == 2
    assert no_hook_left()


@pytest.mark.skipif(PY312, reason="the profile hook is per thread below 3.12")
def test_profile_hook_held_by_another_tool_is_named() -> None:
    def other(frame, event, arg):
        return None

    sys.setprofile(other)
    try:
        p = _fastprof.Profiler()
        with pytest.raises(ValueError, match="other"):
            p.enable()
        assert not p.enabled
    finally:
        sys.setprofile(None)
    a = _fastprof.Profiler()
    b = _fastprof.Profiler()
    a.enable()
    try:
        with pytest.raises(ValueError, match="another fastprof profiler"):
            b.enable()
    finally:
        a.disable()
    assert no_hook_left()


def test_call_site_pruning_is_given_back_to_the_next_user() -> None:
    def site(f):
        return f("ab")

    def py(x):
        return x

    p = _fastprof.Profiler(prune_call_sites=True)
    run_under(p, lambda: site(py))  # the site is pruned for fastprof's tool id ...
    cp = cProfile.Profile()
    run_under(cp, lambda: site(len))  # ... and must report len to cProfile afterwards
    assert by_name(cprofile_table(cp), "<built-in method builtins.len>")[0] == 1


def test_subclass_and_weakref() -> None:
    import weakref

    class Mine(_fastprof.Profiler):
        pass

    p = Mine(builtins=False)
    r = weakref.ref(p)
    run_under(p, parent)
    assert by_name(table(p), "leaf")[0] == 2
    del p
    gc.collect()
    assert r() is None


def test_enable_and_disable_in_the_middle_of_calls_match_cprofile() -> None:
    def gen():
        yield 1
        yield 2

    def inner(prof):
        leaf()
        prof.disable()  # disabled two frames below where it was enabled

    def outer(prof):
        prof.enable()
        g = gen()
        next(g)
        leaf()
        inner(prof)
        g.close()  # after disable: must not be seen

    def counts(t):
        return {k[2]: tuple(v[:2]) for k, v in t.items() if "able" not in k[2]}

    fp = _fastprof.Profiler(strict=True)
    cp = cProfile.Profile()
    outer(fp)
    outer(cp)
    assert counts(table(fp)) == counts(cprofile_table(cp))
    assert counts(table(fp))["leaf"] == (2, 2)
    assert "outer" not in counts(table(fp))
    assert no_hook_left()


def test_generator_closed_and_thrown_into_matches_cprofile() -> None:
    def gen():
        try:
            yield 1
            yield 2
        except ValueError:
            yield 3

    def work():
        g = gen()
        next(g)
        g.throw(ValueError)
        g.close()
        h = gen()
        next(h)
        del h

    work()
    fp = _fastprof.Profiler(Counter(), 1.0, strict=True)
    cp = cProfile.Profile(Counter(), 1.0)
    run_under(fp, work)
    run_under(cp, work)

    def pick(t):
        return {k[2]: v[:4] for k, v in t.items() if k[2] in ("gen", "work")}

    assert pick(table(fp)) == pick(cprofile_table(cp))


def test_threads_running_before_enable_are_profiled_and_released() -> None:
    go = threading.Event()
    done = threading.Event()
    seen: dict = {}

    def worker():
        go.wait()
        for _ in range(4):
            leaf()
        done.set()
        go2.wait()
        seen["hook"] = sys.getprofile()

    go2 = threading.Event()
    t = threading.Thread(target=worker)
    t.start()  # running before enable()
    p = _fastprof.Profiler(builtins=False)
    p.enable()
    go.set()
    done.wait(10)
    p.disable()
    go2.set()
    t.join(10)
    assert by_name(table(p), "leaf")[0] == 4
    assert seen["hook"] is None  # disable() took the hook out of that thread too
    assert no_hook_left()
