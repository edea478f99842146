"""A decorated function switches the line profiler on at each outermost call and off when it
returns.  The per-code work of that switch (the check for swapped code, and on 3.12+ the local
events of every registered code) runs in C loops; these tests hold those loops to what the
Python they replaced did: every code visited, failures reported, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any, Callable, Dict, List

import pytest

import fastprof.lines
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


def _no_hooks_left() -> None:
    if MONITORING:
        assert [sys.monitoring.get_tool(i) for i in range(6)].count("fastprof-lines") == 0
    else:
        assert sys.gettrace() is None
        assert sys.settrace is _SETTRACE
        assert getattr(threading, "_trace_hook", None) is None


_SETTRACE = sys.settrace


def test_a_decorated_function_called_from_threads_at_once_counts_exactly():
    """The switch is one at a time: two threads must not both switch on (3.12+: two tool ids
    feeding one tracer, one never given back) nor interleave the trace-hook bookkeeping
    (below 3.12: sys.settrace left wrapped, or None).  In a child: the suite's audit hook
    (profile_helpers) would add 3.11's own refusals of concurrent sys.settrace, which
    test_interrupts covers."""
    script = textwrap.dedent(
        """
        import sys, threading
        from fastprof import LineProfiler
        settrace = sys.settrace
        def f(n):
            s = 0
            for i in range(n):
                s += i
            return s
        lp = LineProfiler()
        hot = lp(f)
        errors = []
        def loop():
            try:
                for _ in range(1500):
                    hot(3)
            except BaseException as exc:
                errors.append(exc)
        sys.setswitchinterval(1e-6)
        threads = [threading.Thread(target=loop) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ((_, rows),) = lp.get_stats().timings.items()
        first = f.__code__.co_firstlineno
        print(errors, sorted((line - first, h) for line, h, _ in rows))
        print(lp.enable_count, lp.enabled)
        if sys.version_info >= (3, 12):
            print([sys.monitoring.get_tool(i) for i in range(6)].count("fastprof-lines"))
        else:
            print(sys.gettrace() is None and sys.settrace is settrace
                  and getattr(threading, "_trace_hook", None) is None)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    counts, state, left = r.stdout.splitlines()
    assert counts == "[] [(1, 6000), (2, 24000), (3, 18000), (4, 6000)]"
    assert state == "0 False"
    assert left == ("0" if MONITORING else "True")


def test_a_reload_of_fastprof_lines_keeps_what_disable_must_take_out():
    """importlib.reload(fastprof.lines) while a profiler is on (in a child: a reload changes
    the module's classes for everything after it)."""
    script = textwrap.dedent(
        """
        import importlib, sys, threading
        import fastprof.lines
        from fastprof import LineProfiler
        settrace = sys.settrace
        def work():
            return sum(range(3))
        lp = LineProfiler(work)
        lp.enable()
        importlib.reload(fastprof.lines)
        work()
        lp.disable()
        if sys.version_info >= (3, 12):
            print([sys.monitoring.get_tool(i) for i in range(6)].count("fastprof-lines"))
        else:
            print(sys.gettrace(), sys.settrace is settrace, threading._trace_hook)
        ((_, rows),) = lp.get_stats().timings.items()
        print([h for _, h, _ in rows])
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    left, hits = r.stdout.splitlines()
    assert left == ("0" if MONITORING else "None True None")
    assert hits == "[1]"


@pytest.mark.skipif(MONITORING, reason="the sys.settrace wrapper is the trace-function path's")
def test_a_tracer_installed_while_on_sees_no_frame_of_fastprof():
    """sys.settrace while the line profiler is on unmutes the thread in C: the stdlib trace
    module or coverage, installed then, counts no line of fastprof's."""
    events: List[Any] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        events.append((frame.f_code.co_filename, frame.f_code.co_name, event))
        return tracer

    def work() -> int:
        return sum(range(3))

    lp = LineProfiler(work)
    lp.enable()
    sys.settrace(tracer)
    work()
    sys.settrace(None)
    with pytest.warns(RuntimeWarning, match="trace hook of this thread was removed"):
        lp.disable()
    assert [e for e in events if "fastprof" in e[0]] == []
    assert ("work", "call") in [(name, ev) for _, name, ev in events]
    _no_hooks_left()


def test_a_timer_failure_leaves_no_negative_time_and_the_file_reads_back(tmp_path: Any):
    ticks = iter(range(0, 10**6, 5))
    calls = [0]

    def timer() -> int:
        calls[0] += 1
        if calls[0] == 6:
            raise OSError("clock gone")
        return next(ticks)

    def work() -> int:
        total = 0
        for i in range(4):
            total += i
        return total

    lp = LineProfiler(work, _timer=timer)
    lp.enable()
    work()
    with pytest.raises(RuntimeError, match="the timer raised"):
        lp.disable()
    ((_, rows),) = lp.get_stats().timings.items()
    assert all(t >= 0 for _, _, t in rows), rows
    path = tmp_path / "t.lprof"
    lp.dump_stats(path)
    assert fastprof.lines.load_stats(path).timings == lp.get_stats().timings
