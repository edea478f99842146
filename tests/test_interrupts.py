"""Ctrl-C between two steps of turning a profiler on or off.  A signal handler runs at the
next bytecode the interpreter checks for it: inside any Python function fastprof calls
(threading.settrace, threading.getprofile) or right after a C call returns.  These tests raise
KeyboardInterrupt at exactly those points (by wrapping the step) and check what a user sees:
the interrupt propagates, nothing is left installed, and later profilers count."""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, List

import pytest

import fastprof
import fastprof.lines as lines_mod
import fastprof.timeline as timeline_mod

MONITORING = sys.version_info >= (3, 12)


def f(x: int) -> int:
    return x + 1


def _then_interrupt(real: Callable[..., Any]) -> Callable[..., Any]:
    """real, which raises KeyboardInterrupt once it has done its work (a signal handled at
    the check after it returns)."""

    def step(*args: Any) -> Any:
        real(*args)
        raise KeyboardInterrupt

    return step


def _tools() -> List[Any]:
    return [sys.monitoring.get_tool(i) for i in range(6)] if MONITORING else []


def _hits(lp: Any) -> List[int]:
    return [h for rows in lp.get_stats().timings.values() for _, h, _ in rows]


@pytest.mark.skipif(not MONITORING, reason="the tool-id claim is 3.12+")
def test_an_interrupt_after_the_line_profilers_claim_gives_the_id_back(monkeypatch):
    before = _tools()
    real_mod = lines_mod._fastprof

    class Core:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_mod, name)

        _monitoring_claim = staticmethod(_then_interrupt(real_mod._monitoring_claim))

    for _ in range(7):  # more than there are ids: a leak would use them all up
        lp = fastprof.LineProfiler(f)
        monkeypatch.setattr(lines_mod, "_fastprof", Core())
        with pytest.raises(KeyboardInterrupt):
            with lp:
                f(1)
        monkeypatch.setattr(lines_mod, "_fastprof", real_mod)
        lp.disable()
        assert _tools() == before
    lp = fastprof.LineProfiler(f)
    with lp:
        f(1)
    assert _hits(lp) == [1]


@pytest.mark.skipif(MONITORING, reason="the trace-function driver is below 3.12's")
def test_an_interrupt_inside_threading_settrace_leaves_no_dead_driver(monkeypatch):
    real = threading.settrace
    calls = []

    def settrace(func: Any) -> None:
        calls.append(func)
        monkeypatch.setattr(threading, "settrace", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading, "settrace", settrace)
    lp = fastprof.LineProfiler(f)
    with pytest.raises(KeyboardInterrupt):
        with lp:
            f(1)
    assert calls and not lp.enabled and sys.gettrace() is None
    assert lines_mod._LEGACY.driver is None
    lp2 = fastprof.LineProfiler(f)
    with lp2:
        for i in range(10):
            f(i)
    assert _hits(lp2) == [10]


@pytest.mark.skipif(MONITORING, reason="threading.getprofile runs on the legacy hook's path")
def test_an_interrupt_while_disable_reads_threadings_hook_propagates(monkeypatch):
    def user_hook(frame: Any, event: str, arg: Any) -> None:
        return None

    real = getattr(threading, "getprofile", None)
    if real is None:
        pytest.skip("3.9's threading has no getprofile to run Python code in")
    old = real()
    threading.setprofile(user_hook)
    try:
        p = fastprof.Profile()
        p.enable()

        def getprofile() -> Any:
            monkeypatch.setattr(threading, "getprofile", real)
            raise KeyboardInterrupt

        monkeypatch.setattr(threading, "getprofile", getprofile)
        with pytest.raises(KeyboardInterrupt):
            p.disable()
        assert not p.enabled
        assert threading.getprofile() is user_hook  # put back all the same
        assert sys.getprofile() is None
    finally:
        threading.setprofile(old)


def test_an_interrupt_right_after_trace_starts_leaves_nothing_on(monkeypatch):
    monkeypatch.setattr(
        timeline_mod.Timeline, "_start", _then_interrupt(timeline_mod.Timeline._start)
    )
    before = _tools()
    with pytest.raises(KeyboardInterrupt):
        with fastprof.trace():
            f(1)
    monkeypatch.undo()
    assert sys.getprofile() is None and _tools() == before
    with fastprof.trace() as tr:
        f(1)
    assert tr.call_counts()[(__file__, f.__code__.co_firstlineno, "f")] == 1
    p = fastprof.Profile()
    p.enable()
    p.disable()
