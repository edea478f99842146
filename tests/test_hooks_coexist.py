"""fastprof beside the other tools that hook the interpreter, as line_profiler, cProfile and
threading leave them: code that saves sys.gettrace() and hands it back, threading.settrace
hooks of users and coverage tools, a sys.monitoring tool id freed (or taken) by another tool
while fastprof runs, and threads that reuse a finished thread's ident."""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any, Callable, List, Tuple

import pytest

import fastprof
from fastprof import LineProfiler

LEGACY = sys.version_info < (3, 12)
legacy_only = pytest.mark.skipif(not LEGACY, reason="the trace-function path runs below 3.12")
monitoring_only = pytest.mark.skipif(LEGACY, reason="sys.monitoring is 3.12+")


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def _hits(lp: LineProfiler, func: Any) -> List[Tuple[int, int]]:
    """(line offset from the def, hits) of func's lines in lp's stats."""
    first = func.__code__.co_firstlineno
    for (_file, line, _name), rows in lp.get_stats().timings.items():
        if line == first:
            return [(ln - first, hits) for ln, hits, _t in rows]
    return []


@legacy_only
def test_saved_trace_function_handed_back_keeps_counting() -> None:
    # doctest and benchmark fixtures do this: save sys.gettrace(), set their own, put it back
    lp = LineProfiler(work)
    with lp:
        saved = sys.gettrace()
        assert callable(saved)
        sys.settrace(None)
        work(2)  # not traced: the hook was off
        sys.settrace(saved)
        assert work(3) == 3
    assert sys.gettrace() is None
    assert _hits(lp, work) == [(1, 1), (2, 4), (3, 3), (4, 1)]


@legacy_only
def test_tracer_called_with_a_bad_event_names_it() -> None:
    lp = LineProfiler(work)
    with lp:
        tracer = sys.gettrace()
        with pytest.raises(ValueError, match="unknown trace event 'nope'"):
            tracer(sys._getframe(), "nope", None)
        with pytest.raises(TypeError):
            tracer("not a frame", "call", None)


@legacy_only
@pytest.mark.parametrize("taker", ["other", None])
def test_trace_hook_taken_or_removed_warns_at_disable(taker: Any) -> None:
    def other(frame: Any, event: str, arg: Any) -> None:
        return None

    lp = LineProfiler(work)
    lp.enable()
    work(1)
    sys.settrace(other if taker else None)
    work(1)  # not counted: the hook is gone
    what = "taken by <function" if taker else "removed"
    with pytest.warns(RuntimeWarning, match=f"trace hook of this thread was {what}"):
        lp.disable()
    assert sys.gettrace() is (other if taker else None)
    sys.settrace(None)
    assert _hits(lp, work)[0] == (1, 1)


@legacy_only
def test_threading_settrace_hook_becomes_the_new_threads_trace_function() -> None:
    seen: List[Tuple[str, str]] = []

    def hook(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code in (work.__code__, target.__code__):
            seen.append((event, frame.f_code.co_name))
        return hook

    def target() -> None:
        work(1)

    def run(profiled: bool) -> List[Tuple[str, str]]:
        seen.clear()
        threading.settrace(hook)
        try:
            lp = LineProfiler(work)
            if profiled:
                lp.enable()
            t = threading.Thread(target=target)
            t.start()
            t.join()
            lp.disable()
        finally:
            threading.settrace(None)  # type: ignore[arg-type]
        return list(seen)

    alone = run(False)
    assert alone[0] == ("call", "target") and ("line", "work") in alone
    # the hook is the new thread's trace function, as without fastprof
    assert run(True) == alone


@legacy_only
def test_threading_settrace_hook_set_while_on_stays_after_disable() -> None:
    def hook(frame: Any, event: str, arg: Any) -> None:
        return None

    lp = LineProfiler(work)
    lp.enable()
    threading.settrace(hook)
    try:
        lp.disable()
        assert threading._trace_hook is hook  # type: ignore[attr-defined]
    finally:
        threading.settrace(None)  # type: ignore[arg-type]


def _steal(tool: int) -> Any:
    """Frees tool (as another tool's stop does) and takes it under another name, with a
    callback; returns that callback."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    mon.free_tool_id(tool)
    mon.use_tool_id(tool, "other tool")

    def other(*args: Any) -> None:
        return None

    mon.register_callback(tool, mon.events.PY_START, other)
    return other


def _call_profiler() -> Tuple[Any, str, Callable[[], None]]:
    """An enabled Profile, its tool's name, and a check of what it kept."""
    p = fastprof.Profile()
    p.enable()
    work(3)

    def kept() -> None:
        assert fastprof.Stats(p).row("work").ncalls == 1

    return p, "fastprof", kept


def _line_profiler() -> Tuple[Any, str, Callable[[], None]]:
    """An enabled LineProfiler, its tool's name, and a check of what it kept."""
    lp = LineProfiler(work)
    lp.enable()
    work(2)

    def kept() -> None:
        assert _hits(lp, work)[0] == (1, 1)

    return lp, "fastprof-lines", kept


@monitoring_only
@pytest.mark.parametrize("start", [_call_profiler, _line_profiler])
def test_tool_id_taken_by_another_tool_is_left_to_it(start: Any) -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    prof, name, kept = start()
    tool = next(i for i in range(6) if mon.get_tool(i) == name)
    other = _steal(tool)
    try:
        with pytest.warns(RuntimeWarning, match=f"tool id {tool} was freed.*'other tool'"):
            prof.disable()
        assert mon.get_tool(tool) == "other tool"
        assert mon.register_callback(tool, mon.events.PY_START, None) is other
    finally:  # as the other tool's stop would: fastprof left its callbacks to it
        for name in dir(mon.events):
            event = getattr(mon.events, name)
            if isinstance(event, int) and event > 0 and event & (event - 1) == 0:
                mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)
    kept()


@monitoring_only
def test_tool_id_freed_while_tracing_keeps_the_timeline() -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    with pytest.warns(RuntimeWarning, match="was freed"):
        with fastprof.trace() as tr:
            work(3)
            tool = next(i for i in range(6) if mon.get_tool(i) == "fastprof")
            mon.free_tool_id(tool)
    assert [s for s in tr.spans if s.func[2] == "work"]
    _assert_cleared(tool)


def _assert_cleared(tool: int) -> None:
    """tool is free, with no events or callbacks of fastprof's left on it."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    assert mon.get_tool(tool) is None
    mon.use_tool_id(tool, "check")
    try:
        assert mon.get_events(tool) == 0
        for event in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.LINE):
            assert mon.register_callback(tool, event, None) is None
    finally:
        mon.free_tool_id(tool)


@monitoring_only
def test_line_profiler_tool_id_freed_is_cleared() -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    lp = LineProfiler(work)
    lp.enable()
    work(2)
    tool = next(i for i in range(6) if mon.get_tool(i) == "fastprof-lines")
    mon.free_tool_id(tool)
    with pytest.warns(RuntimeWarning, match=f"tool id {tool} was freed"):
        lp.disable()
    _assert_cleared(tool)
    assert mon.get_local_events(tool, work.__code__) == 0
    assert _hits(lp, work)[0] == (1, 1)


def test_threads_reusing_an_ident_are_separate_timeline_threads() -> None:
    natives: List[int] = []
    kept: List[threading.Thread] = []  # their Thread objects stay alive: names are known

    def target() -> None:
        natives.append(threading.get_native_id())
        work(2)

    with fastprof.trace() as tr:
        for i in range(4):  # one after the other: the OS hands out the same stack and ident
            t = threading.Thread(target=target, name=f"worker-{i}")
            t.start()
            t.join()
            kept.append(t)
    with_work = {tr.threads[s.thread] for s in tr.spans if s.func[2] == "work"}
    assert sorted(th.native_id for th in with_work) == sorted(natives)
    assert sorted(th.name for th in with_work) == [f"worker-{i}" for i in range(4)]
    for th in with_work:
        assert [s for s in tr.spans if s.func[2] == "work" and s.thread == th.order]


def test_threads_reusing_an_ident_share_the_profile_entry_by_ident() -> None:
    # the call profile keys threads by ident, as documented (profiling.md): one entry, all calls
    p = fastprof.Profile()
    p.enable()
    idents = []
    for _ in range(3):
        t = threading.Thread(target=work, args=(2,))
        t.start()
        t.join()
        idents.append(t.ident)
    p.disable()
    st = fastprof.Stats(p)
    assert st.row("work").ncalls == 3
    for ident in set(idents):
        assert st.for_thread(ident).row("work").ncalls == idents.count(ident)


def test_no_warning_while_the_hooks_stay_fastprofs() -> None:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        p = fastprof.Profile()
        p.enable()
        work(1)
        p.disable()
    assert not w
