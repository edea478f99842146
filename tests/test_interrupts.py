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


def _run_child(script: str) -> str:
    """script's stdout, run in a child (a regression here hangs: the child is killed)."""
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("lines", [False, True])
def test_a_decorated_function_called_back_from_inside_its_own_switch(lines: bool) -> None:
    """A signal handler (or a finalizer) that calls the decorated function while its session
    is inside enable(): it runs (no wait for the lock this thread holds), nothing is left on,
    and the outer call is profiled."""
    out = _run_child(
        f"""
import sys, fastprof
LINES = {lines!r}
@fastprof.profile(report="never", lines=LINES)
def work(x):
    return x + 1
session = work.session
prof = session.profiler
real = type(prof).enable
def enable(self, *a, **k):
    type(prof).enable = real
    work(41)  # what a handler running at this moment does
    return real(self, *a, **k)
type(prof).enable = enable
print(work(1))
print(prof.enabled if not LINES else prof.enabled)
if sys.version_info >= (3, 12):
    print([sys.monitoring.get_tool(i) for i in range(6)].count(None))
else:
    print(6 if sys.getprofile() is None and sys.gettrace() is None else 0)
"""
    )
    assert out.split() == ["2", "False", "6"]


def test_a_line_profiler_called_back_inside_its_switch_only_counts() -> None:
    """lp's decorated function called from inside lp.enable() (a signal handler there): the
    nested call neither switches in the middle of the switch (below 3.12 that left
    sys.settrace wrapped; on 3.12+ a second tool id claimed) nor leaves a count behind."""
    lp = fastprof.LineProfiler()
    hot = lp(f)
    name = "_enable_monitoring" if MONITORING else "_enable_legacy"
    original = getattr(lines_mod.LineProfiler, name)

    def switching(self: Any) -> None:
        setattr(lines_mod.LineProfiler, name, original)
        assert hot(10) == 11  # nested: runs, switches nothing
        with pytest.raises(RuntimeError, match="inside another's enable"):
            self.disable()
        original(self)

    setattr(lines_mod.LineProfiler, name, switching)
    try:
        assert hot(1) == 2
    finally:
        setattr(lines_mod.LineProfiler, name, original)
    assert lp.enable_count == 0 and not lp.enabled
    assert _hits(lp) == [1]  # the outer call; the nested one ran before the hooks were on
    if MONITORING:
        assert "fastprof-lines" not in _tools()
    else:
        assert sys.gettrace() is None and lines_mod._LEGACY.driver is None


@pytest.mark.skipif(not MONITORING, reason="the tool-id release is 3.12+")
def test_an_interrupt_inside_the_line_profilers_release_still_frees_the_id(monkeypatch):
    before = _tools()
    real = lines_mod.LineProfiler._monitoring_events
    for _ in range(7):
        lp = fastprof.LineProfiler(f)
        lp.enable()

        def events(calls: List[int] = []) -> int:  # noqa: B006 - one list per loop turn
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return real()

        monkeypatch.setattr(lines_mod.LineProfiler, "_monitoring_events", staticmethod(events))
        with pytest.raises(KeyboardInterrupt):
            lp.disable()
        monkeypatch.setattr(lines_mod.LineProfiler, "_monitoring_events", staticmethod(real))
        assert _tools() == before


@pytest.mark.skipif(MONITORING, reason="the threading.settrace hook is below 3.12's")
def test_an_interrupt_while_disable_restores_threadings_hook(monkeypatch):
    real = threading.settrace

    def settrace(func: Any) -> None:
        monkeypatch.setattr(threading, "settrace", real)
        raise KeyboardInterrupt

    lp = fastprof.LineProfiler(f)
    lp.enable()
    f(1)
    monkeypatch.setattr(threading, "settrace", settrace)
    with pytest.raises(KeyboardInterrupt):
        lp.disable()
    getter = getattr(threading, "gettrace", lambda: threading._trace_hook)  # type: ignore[attr-defined]
    assert getter() is None and sys.gettrace() is None
    assert lines_mod._LEGACY.settrace_hook is None


@pytest.mark.skipif(MONITORING, reason="3.11 and below refuse concurrent sys.settrace")
def test_threads_starting_while_the_line_profiler_switches_under_an_audit_hook() -> None:
    """With an audit hook on (Python code, so other threads run inside sys.settrace), 3.11
    refuses a thread's sys.settrace while another thread installs a trace function: threads
    started then died before their target, and the switch walked a thread list whose
    entries could end meanwhile (a crash).  Every thread runs its target and nothing is left
    installed.  (A thread whose trace function Python refused there runs untraced for a
    while: the counts can fall short, never over.)"""
    out = _run_child(
        """
import sys, threading
sys.addaudithook(lambda event, args: None)
sys.setswitchinterval(1e-6)
from fastprof import LineProfiler
lp = LineProfiler()
def f(n):
    return n + 1
hot = lp(f)
done = []
def loop():
    for _ in range(200):
        hot(1)
    done.append(1)
for rep in range(15):
    threads = [threading.Thread(target=loop) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(len(done), sum(h for r in lp.get_stats().timings.values() for _, h, _ in r))
print(sys.gettrace() is None)
"""
    )
    done, hits, left = out.split()
    assert done == "60" and left == "True"
    assert 0 < int(hits) <= 60 * 200
