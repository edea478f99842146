"""A decorated function switches the line profiler on at each outermost call and off when it
returns.  The per-code work of that switch (the check for swapped code, and on 3.12+ the local
events of every registered code) runs in C loops; these tests hold those loops to what the
Python they replaced did: every code visited, failures reported, nothing left behind."""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List

import pytest

from fastprof import LineProfiler

MONITORING = sys.version_info >= (3, 12)


def _functions(n: int) -> List[Callable[[int], int]]:
    out = []
    for k in range(n):
        ns: Dict[str, Any] = {}
        exec(f"def f{k}(x):\n    y = x + 1\n    return y\n", ns)
        out.append(ns[f"f{k}"])
    return out


def test_unregistered_lists_only_functions_whose_code_is_not_registered():
    fs = _functions(5)
    lp = LineProfiler(*fs[:4])
    t = lp._tracer
    assert t._unregistered(fs) == [fs[4]]  # never added
    old = fs[1].__code__
    fs[1].__code__ = old.replace()  # a reloader's swap: a new code object
    fs[3].__code__ = fs[2].__code__  # swapped for another registered code: still timed
    assert t._unregistered(fs) == [fs[1], fs[4]]
    assert t._unregistered((fs[1], len, "x", fs[0])) == [fs[1]]  # not functions: skipped
    with pytest.raises(TypeError, match="functions must be a sequence"):
        t._unregistered(42)


def test_decorated_calls_time_code_swapped_between_calls_as_the_same_function():
    """IPython's autoreload assigns a function's new __code__: the next outermost call of the
    decorated function times the new code (one C check per call, not a scan in Python)."""
    fs = _functions(50)
    lp = LineProfiler()
    wrapped = [lp(f) for f in fs]
    wrapped[7](1)
    fs[7].__code__ = fs[7].__code__.replace()
    wrapped[7](1)
    wrapped[7](1)
    stats = lp.get_stats().timings
    rows = [r for (_, _, name), r in stats.items() if name == "f7"]
    assert len(rows) == 1  # the two codes are one function
    assert sorted((line, hits) for line, hits, _ in rows[0]) == [(2, 3), (3, 3)]
    assert not lp.enabled


def test_set_local_events_visits_every_code_and_raises_the_first_failure():
    fs = _functions(6)
    lp = LineProfiler(*fs)
    seen: List[Any] = []

    def fake(tool: int, code: Any, events: int) -> None:
        seen.append((tool, code, events))
        if code in (fs[1].__code__, fs[4].__code__):
            raise ValueError(f"refused {code.co_name}")

    with pytest.raises(ValueError, match="refused f1"):
        lp._tracer._set_local_events(fake, 3, 0)
    assert [c for _, c, _ in seen] == [f.__code__ for f in fs]  # went on past the failures
    assert {(tool, events) for tool, _, events in seen} == {(3, 0)}
    with pytest.raises(TypeError, match="takes 3 arguments"):
        lp._tracer._set_local_events(fake, 3)


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_each_decorated_call_sets_and_clears_the_local_events_of_every_registered_code():
    mon = sys.monitoring
    fs = _functions(30)
    lp = LineProfiler()
    wrapped = [lp(f) for f in fs]
    during: Dict[str, Any] = {}

    def probe(x: int) -> int:
        tool = lp._tool
        during["tool"] = tool
        during["events"] = {mon.get_local_events(tool, f.__code__) for f in fs}
        return x

    outer = lp(lambda x: probe(wrapped[3](x)))
    assert outer(1) == 2
    tool = during["tool"]
    assert during["events"] == {lp._local_events()}
    assert mon.get_tool(tool) is None  # given back after the call
    for f in fs:
        assert mon.get_local_events(tool, f.__code__) == 0
    hits = {name: sum(h for _, h, _ in r) for (_, _, name), r in lp.get_stats().timings.items()}
    assert hits["f3"] == 2 and hits["f4"] == 0


@pytest.mark.skipif(MONITORING, reason="the sys.settrace wrapper is the trace-function path's")
def test_the_sys_settrace_wrapper_is_made_once_and_removed_after_each_call():
    original = sys.settrace
    lp = LineProfiler()
    seen = []

    @lp
    def f() -> None:
        seen.append(sys.settrace)

    f()
    assert sys.settrace is original
    f()
    assert sys.settrace is original
    assert seen[0] is seen[1] and seen[0] is not original
    assert seen[0].__name__ == original.__name__  # it still reads as sys.settrace
