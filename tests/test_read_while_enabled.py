"""Reading a profiler while it is enabled records nothing of the reading: fastprof's readers
(Profile.getstats, snapshot_stats, tree, fastprof.Stats(profile), a session's stats() and
report()) are Python code run through _fastprof._Quiet, with the calling thread's hooks
suspended, on every version (sys.monitoring and PyEval_SetProfile alike)."""

from __future__ import annotations

import gc
import io
import sys
from typing import Any, Dict, Tuple

import pytest

import fastprof
from fastprof import _fastprof
from fastprof._quiet import quiet


def work() -> None:
    for _ in range(20):
        len("x")


def counts(st: Any) -> Dict[Tuple[str, str], int]:
    return {(r.file, r.name): r.ncalls for r in st.rows}


def test_reading_an_enabled_profile_adds_nothing_to_it() -> None:
    quiet_run = fastprof.Profile()
    quiet_run.enable()
    work()
    work()
    quiet_run.disable()
    read = fastprof.Profile()
    read.enable()
    work()
    read.getstats()
    read.snapshot_stats()
    fastprof.Stats(read)
    read.tree()
    work()
    read.disable()
    want = counts(fastprof.Stats(quiet_run))
    assert counts(fastprof.Stats(read)) == want
    assert want[(__file__, "work")] == 2 and want[("~", "<built-in method builtins.len>")] == 40


def test_a_sessions_stats_and_report_read_inside_it_add_nothing() -> None:
    s = fastprof.profile(report="never", stream=io.StringIO())
    with s:
        work()
        s.stats()
        s.report()
        work()
    names = {r.name for r in s.stats().rows}
    assert names == {"work", "<built-in method builtins.len>"}, names


class Box:
    def __init__(self, n: int) -> None:
        self.n = n

    @quiet
    def add(self, k: int, *, times: int = 1) -> int:
        """Adds k times times."""
        return self.n + k * times


def test_the_wrapper_binds_as_a_method_and_shows_the_functions_attributes() -> None:
    b = Box(3)
    assert b.add(2, times=3) == 9 and Box.add(b, 1) == 4
    assert b.add.__self__ is b and Box.add.__self__ is None
    assert Box.add.__wrapped__.__name__ == "add" and Box.add.__name__ == "add"
    import inspect

    assert str(inspect.signature(Box.add)) == "(self, k: 'int', *, times: 'int' = 1) -> 'int'"
    assert str(inspect.signature(b.add)) == "(k: 'int', *, times: 'int' = 1) -> 'int'"
    assert b.add.__wrapped__.__self__ is b
    assert Box.add.__qualname__ == "Box.add" and Box.add.__doc__ == "Adds k times times."
    assert quiet(len)("abc") == 3
    many = quiet(lambda *a, **k: (a, k))
    assert many(*range(12), x=1) == (tuple(range(12)), {"x": 1})
    with pytest.raises(TypeError, match="wraps a callable, not int"):
        _fastprof._Quiet(3)
    with pytest.raises(TypeError, match="no keyword arguments"):
        _fastprof._Quiet(func=len)


def test_hooks_come_back_after_an_error_inside() -> None:
    def boom() -> None:
        raise KeyError("x")

    p = fastprof.Profile()
    p.enable()
    with pytest.raises(KeyError):
        quiet(boom)()
    work()
    p.disable()
    got = counts(fastprof.Stats(p))
    assert got[(__file__, "work")] == 1 and (__file__, "boom") not in got
    assert sys.getprofile() is None


def test_a_bound_wrapper_in_a_cycle_is_collected() -> None:
    import weakref

    b = Box(1)
    b.me = b.add  # b -> bound wrapper -> b
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is None
