"""Profiler lifetimes and hooks: a profiler freed while enabled, collected in a cycle, or
fed a bad timer never crashes the interpreter and never leaves a hook behind; another tool
taking the hook is reported; the line profiler lives beside coverage.py.

Whatever could crash runs in a child interpreter, so that a crash fails one test instead of
killing the run."""

from __future__ import annotations

import cProfile
import gc
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Any, Dict

import pytest

import fastprof

LEGACY = sys.version_info < (3, 12)
legacy_only = pytest.mark.skipif(
    not LEGACY, reason="the PyEval_SetProfile/SetTrace hooks are used below Python 3.12 only"
)
PYTHONPATH = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))


def run_child(source: str, tmp_path: Any = None) -> subprocess.CompletedProcess:
    """Runs source in a fresh interpreter with this fastprof importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHONPATH + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp_path) if tmp_path else None,
        timeout=120,
    )


def assert_clean_exit(r: subprocess.CompletedProcess) -> None:
    assert r.returncode == 0, f"child died with {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert "ok" in r.stdout.split(), r.stdout + r.stderr
    for bad in ("double free", "corruption", "Fatal Python error", "Segmentation"):
        assert bad not in r.stderr, r.stderr


# ---- 1. a profiler freed in any order --------------------------------------------------


def test_enabled_profile_read_then_interpreter_exits() -> None:
    # Stats read without disabling (the documented pattern), then a normal exit.
    assert_clean_exit(
        run_child("""
        import fastprof
        p = fastprof.Profile()
        p.enable()
        def f():
            return sum(range(10))
        f()
        st = fastprof.Stats(p)
        assert p.enabled
        print("ok")
    """)
    )


def test_enabled_profile_in_function_at_exit() -> None:
    assert_clean_exit(
        run_child("""
        import fastprof, threading
        def main():
            p = fastprof.Profile(threads=True)
            p.enable()
            t = threading.Thread(target=sum, args=(range(5),))
            t.start(); t.join()
            p.snapshot_stats()
        main()
        print("ok")
    """)
    )


def test_profile_in_cycle_collected_after_its_thread_ended() -> None:
    # GC's clear step drops the timer first; the free step must not call it.
    assert_clean_exit(
        run_child("""
        import gc, threading, time, fastprof
        def work():
            p = fastprof.Profile(timer=time.perf_counter, threads=False)
            p.cycle = p
            p.enable()
            sum(range(10))
        t = threading.Thread(target=work); t.start(); t.join()
        gc.collect()
        assert threading.current_thread() is threading.main_thread()
        print("ok")
    """)
    )


def test_profile_whose_timer_is_in_its_cycle() -> None:
    assert_clean_exit(
        run_child("""
        import gc, threading, fastprof
        class Clock:
            def __init__(self):
                self.n = 0
            def __call__(self):
                self.n += 1
                return self.n
        def work():
            clock = Clock()
            p = fastprof.Profile(timer=clock, timeunit=1e-6, threads=False)
            clock.p = p
            p.enable()
            sum(range(10))
        for _ in range(3):
            t = threading.Thread(target=work); t.start(); t.join()
        gc.collect()
        print("ok")
    """)
    )


def test_timer_raising_while_a_thread_exits() -> None:
    assert_clean_exit(
        run_child("""
        import threading, fastprof
        state = {"n": 0, "boom": False}
        def timer():
            if state["boom"]:
                raise ValueError("timer boom")
            state["n"] += 1
            return state["n"]
        def work():
            sum(range(10))
            state["boom"] = True
        p = fastprof.Profile(timer=timer, timeunit=1e-6)
        p.enable()
        t = threading.Thread(target=work); t.start(); t.join()
        print("ok")
    """)
    )


def test_timer_raising_at_interpreter_shutdown() -> None:
    # Module globals are torn down at shutdown: the timer raises then.
    assert_clean_exit(
        run_child("""
        import time, fastprof
        def timer():
            return time.perf_counter()
        p = fastprof.Profile(timer=timer)
        p.enable()
        sum(range(10))
        print("ok")
    """)
    )


@legacy_only
def test_profile_freed_while_enabled_with_a_raising_timer() -> None:
    r = run_child("""
        import gc, sys, fastprof
        seen = []
        sys.unraisablehook = seen.append
        def bad_timer():
            raise ValueError("bad timer")
        p = fastprof.Profile(timer=bad_timer)
        p.enable()
        len("x")  # the hook reads the timer: its error is reported, as cProfile reports it
        sys.setprofile(None)  # another tool drops fastprof's hook: p is left enabled
        del p
        gc.collect()
        assert sys.getprofile() is None
        assert seen, "the timer's error was not reported"
        for s in seen:  # only the timer's own errors, never against a dying profiler
            assert isinstance(s.exc_value, ValueError) and str(s.exc_value) == "bad timer"
            assert s.object is bad_timer, s.object
        print("ok")
    """)
    assert_clean_exit(r)


@legacy_only
def test_profile_freed_while_enabled_gives_threading_hook_back() -> None:
    r = run_child("""
        import gc, sys, threading, warnings, fastprof
        def user_hook(frame, event, arg):
            return None
        threading.setprofile(user_hook)
        p = fastprof.Profile()
        p.enable()
        sys.setprofile(None)  # the only strong reference left is this one
        del p
        gc.collect()
        assert threading._profile_hook is user_hook, threading._profile_hook
        print("ok")
    """)
    assert_clean_exit(r)


# ---- 2. a timer's value that no integer holds ----------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300])
@pytest.mark.parametrize("timeunit", [0.0, 1e-6])
def test_timer_value_out_of_range_is_an_error(value: float, timeunit: float) -> None:
    calls = [0]

    def timer() -> float:
        calls[0] += 1
        return 1.0 if calls[0] < 3 else value

    seen: list = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        p = fastprof.Profile(timer=timer, timeunit=timeunit)
        p.enable()
        sum(range(3))
        sum(range(3))
        p.disable()  # as cProfile: reported through sys.unraisablehook, recording goes on
    finally:
        sys.unraisablehook = old_hook
    assert not p.enabled
    assert seen and all(isinstance(s.exc_value, ValueError) for s in seen), seen
    assert all("timer returned" in str(s.exc_value) for s in seen)
    # the last good reading stands in: no time is negative or undefined
    assert all(e.totaltime >= 0 and e.inlinetime >= 0 for e in p.getstats())


# ---- 3. a line profiler dropped while enabled ---------------------------------------


def _target(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


@legacy_only
def test_line_profiler_dropped_while_enabled_removes_its_trace_everywhere() -> None:
    started = threading.Event()
    go = threading.Event()
    seen: Dict[str, Any] = {}

    def other() -> None:
        started.set()
        go.wait(10)
        seen["other"] = sys.gettrace()

    t = threading.Thread(target=other)
    t.start()
    started.wait(10)
    before = threading._trace_hook  # type: ignore[attr-defined]
    lp = fastprof.LineProfiler(_target)
    lp.enable()
    assert sys.gettrace() is not None
    _target(3)
    del lp
    gc.collect()
    assert sys.gettrace() is None
    go.set()
    t.join()
    assert seen["other"] is None
    assert threading._trace_hook is before  # type: ignore[attr-defined]


@legacy_only
def test_line_profiler_dropped_while_another_stays_enabled() -> None:
    first = fastprof.LineProfiler(_target)
    second = fastprof.LineProfiler(_target)
    first.enable()
    second.enable()
    del first  # the installed tracer feeds the second one still
    gc.collect()
    _target(4)
    assert sys.gettrace() is not None
    second.disable()
    assert sys.gettrace() is None
    hits = {
        ln: h
        for ln, h, _ in second.get_stats().timings[
            (_target.__code__.co_filename, _target.__code__.co_firstlineno, "_target")
        ]
    }
    first_line = _target.__code__.co_firstlineno
    assert hits[first_line + 3] == 4


def test_line_profiler_in_cycle_with_its_timer_at_exit() -> None:
    assert_clean_exit(
        run_child("""
        import gc, threading, fastprof
        def f(n):
            return sum(range(n))
        def work():
            state = {}
            def timer():
                state["lp"]
                return 0
            lp = fastprof.LineProfiler(f, _timer=timer)
            state["lp"] = lp
            lp.enable()
            f(3)
        t = threading.Thread(target=work); t.start(); t.join()
        gc.collect()
        print("ok")
    """)
    )


# ---- 4. another tool taking the profile hook ------------------------------------------


def _leaf() -> int:
    return 1


@legacy_only
def test_cprofile_taking_the_hook_is_reported_and_stats_kept() -> None:
    p = fastprof.Profile()
    p.enable()
    _leaf()
    other = cProfile.Profile()
    other.enable()  # takes this thread's profile hook from fastprof
    _leaf()
    try:
        with pytest.warns(RuntimeWarning, match=r"taken by <cProfile.Profile"):
            p.disable()
    finally:
        other.disable()
    key = (_leaf.__code__.co_filename, _leaf.__code__.co_firstlineno, "_leaf")
    p.snapshot_stats()
    assert p.stats[key][1] == 1  # the call made before the takeover is kept


@legacy_only
def test_setprofile_none_while_profiling_is_reported() -> None:
    p = fastprof.Profile()
    p.enable()
    _leaf()
    sys.setprofile(None)
    _leaf()
    with pytest.warns(RuntimeWarning, match="was removed while profiling"):
        p.snapshot_stats()  # read while enabled: said at report time
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.disable()  # said once
    key = (_leaf.__code__.co_filename, _leaf.__code__.co_firstlineno, "_leaf")
    assert p.stats[key][1] == 1


@legacy_only
def test_setprofile_function_taking_the_hook_is_named() -> None:
    def other_tool(frame: Any, event: str, arg: Any) -> None:
        return None

    p = fastprof.Profile()
    p.enable()
    sys.setprofile(other_tool)
    sys.setprofile(other_tool)
    try:
        with pytest.warns(RuntimeWarning, match="other_tool"):
            p.disable()
        assert sys.getprofile() is other_tool  # the other tool's hook is left alone
    finally:
        sys.setprofile(None)


def test_no_warning_when_the_hook_stays() -> None:
    p = fastprof.Profile()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.enable()
        _leaf()
        p.snapshot_stats()
        p.disable()


@legacy_only
def test_enable_disable_keep_a_users_threading_profile_hook() -> None:
    def user_hook(frame: Any, event: str, arg: Any) -> None:
        return None

    threading.setprofile(user_hook)
    try:
        p = fastprof.Profile()
        p.enable()
        ran = []
        t = threading.Thread(target=lambda: ran.append(_leaf()))
        t.start()
        t.join()
        p.disable()
        assert threading._profile_hook is user_hook  # type: ignore[attr-defined]
        if sys.version_info >= (3, 10):
            assert threading.getprofile() is user_hook
        key = (_leaf.__code__.co_filename, _leaf.__code__.co_firstlineno, "_leaf")
        p.snapshot_stats()
        assert p.stats[key][1] == 1  # the thread was profiled meanwhile
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]


@legacy_only
def test_threading_hook_set_while_profiling_stays() -> None:
    def later_hook(frame: Any, event: str, arg: Any) -> None:
        return None

    p = fastprof.Profile()
    p.enable()
    threading.setprofile(later_hook)
    try:
        p.disable()
        assert threading._profile_hook is later_hook  # type: ignore[attr-defined]
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]


# ---- 5. the line profiler under coverage.py ----------------------------------------------

COVERED = """\
def plain(n):
    total = 0
    for i in range(n):
        total += i
    return total


def registered(n):
    total = 0
    for i in range(n):
        total += plain(i)
    return total
"""

COVERAGE_RUN = """
import json, sys
import coverage
cov = coverage.Coverage(data_file=None)
cov.start()
import covered
lp = None
if sys.argv[1:] == ["lines"]:
    import fastprof
    lp = fastprof.LineProfiler(covered.registered)
    lp.enable()
covered.registered(3)
covered.plain(2)
timings = {}
if lp is not None:
    lp.disable()
    timings = {str(k[1]): v for k, v in lp.get_stats().timings.items()}
cov.stop()
print(json.dumps({"lines": sorted(cov.get_data().lines(covered.__file__)),
                  "timings": timings}))
"""


def _coverage_run(tmp_path: Any, lines: bool) -> Dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), PYTHONPATH, env.get("PYTHONPATH", "")])
    env.pop("COVERAGE_CORE", None)
    args = [sys.executable, "-c", COVERAGE_RUN] + (["lines"] if lines else [])
    r = subprocess.run(
        args, check=False, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def test_line_profiler_does_not_hide_lines_from_coverage(tmp_path: Any) -> None:
    pytest.importorskip("coverage")
    (tmp_path / "covered.py").write_text(COVERED)
    alone = _coverage_run(tmp_path, lines=False)
    both = _coverage_run(tmp_path, lines=True)
    assert alone["lines"] == [1, 2, 3, 4, 5, 8, 9, 10, 11, 12]
    assert both["lines"] == alone["lines"]
    # ... and the line profiler counts what it would alone.
    hits = {ln: h for ln, h, _ in both["timings"]["8"]}
    assert hits == {9: 1, 10: 4, 11: 3, 12: 1}
