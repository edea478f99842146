"""Below 3.12 the line profiler switches line events off (f_trace_lines) in the frames of code
it does not time.  Those frames must not stay so once fastprof's trace function is no longer
the thread's: a debugger (pdb, any bdb.Bdb) or a plain sys.settrace tracer started later, or
taking over while the profiler is on, stops at the next line as without fastprof, and a
generator advanced while profiling shows its later lines to coverage tools.  On 3.12+ nothing
is muted and every test here holds as well."""

from __future__ import annotations

import bdb
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest

import fastprof
from fastprof import LineProfiler

LEGACY = sys.version_info < (3, 12)
legacy_only = pytest.mark.skipif(not LEGACY, reason="the trace-function path runs below 3.12")


def work(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def gen() -> Iterator[int]:
    yield 1
    a = 2
    yield a
    b = 3
    yield b


GEN_FIRST = gen.__code__.co_firstlineno


class Recorder(bdb.Bdb):
    """A debugger in step mode that records (function, line) where it stops, without a prompt;
    it continues (and, with no breakpoint, leaves) after `limit` stops when one is given."""

    def __init__(self, limit: Optional[int] = None, names: Tuple[str, ...] = ()) -> None:
        super().__init__()
        self.limit = limit
        self.names = names
        self.stops: List[Tuple[str, int]] = []

    def user_line(self, frame: FrameType) -> None:
        if self.names and frame.f_code.co_name not in self.names:
            return
        self.stops.append((frame.f_code.co_name, frame.f_lineno))
        if self.limit is not None and len(self.stops) >= self.limit:
            self.set_continue()


def _line_tracer(code: Any, seen: List[Tuple[str, int]]) -> Callable[..., Any]:
    """A plain trace function (it never touches f_trace_lines) recording the events of code."""

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is code:
            seen.append((event, frame.f_lineno))
        return tracer

    return tracer


def _stop_tracing(frame: FrameType) -> None:
    sys.settrace(None)
    frame.f_trace = None


def _disable_quietly(lp: LineProfiler) -> None:
    # below 3.12 disable() warns that the trace hook was taken by the debugger: expected here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lp.disable()


def _profile_a_while() -> LineProfiler:
    lp = LineProfiler(work)
    lp.enable()
    return lp


# --- (a) after disable() -------------------------------------------------------------------


def test_disable_turns_line_events_back_on_in_the_running_frame() -> None:
    lp = LineProfiler(work)
    lp.enable()
    work(3)
    assert work(2) == 1
    lp.disable()
    assert sys._getframe().f_trace_lines is True


def test_debugger_started_after_disable_stops_at_the_next_line() -> None:
    lp = _profile_a_while()
    work(3)  # this frame's line events are muted from here on (below 3.12)
    lp.disable()
    frame = sys._getframe()
    dbg = Recorder(limit=1)
    try:
        here = frame.f_lineno
        dbg.set_trace()
        x = 1
    finally:
        _stop_tracing(frame)
    assert x == 1
    assert dbg.stops == [("test_debugger_started_after_disable_stops_at_the_next_line", here + 2)]


def test_settrace_after_disable_sees_the_running_frames_lines() -> None:
    lp = _profile_a_while()
    work(3)
    lp.disable()
    frame = sys._getframe()
    seen: List[Tuple[str, int]] = []
    tracer = _line_tracer(frame.f_code, seen)
    try:
        here = frame.f_lineno  # (3.9 reads a stale one once f_trace is set)
        frame.f_trace = tracer
        sys.settrace(tracer)
        x = 1
        x += 1
    finally:
        _stop_tracing(frame)
    assert x == 2
    assert seen[:2] == [("line", here + 3), ("line", here + 4)]


def test_disable_unmutes_the_stacks_of_other_threads() -> None:
    ready, go = threading.Event(), threading.Event()
    result: List[bool] = []

    def body() -> None:
        frame = sys._getframe()
        ready.set()
        go.wait()  # muted here (below 3.12), while the main thread disables
        result.append(frame.f_trace_lines)

    lp = LineProfiler(work)
    lp.enable()
    thread = threading.Thread(target=body)
    thread.start()
    try:
        assert ready.wait(10)
        lp.disable()
    finally:
        go.set()
        thread.join(10)
    assert result == [True]


# --- (b) another tracer takes over while the profiler is on ------------------------------


def test_debugger_started_while_profiling_stops_at_the_next_line() -> None:
    lp = LineProfiler(work)
    frame = sys._getframe()
    dbg = Recorder(limit=1)
    lp.enable()
    try:
        work(3)
        here = frame.f_lineno
        dbg.set_trace()
        x = 1
    finally:
        _stop_tracing(frame)
        _disable_quietly(lp)
    assert x == 1
    # not the first line of fastprof's disable(): that is where it stopped before
    assert dbg.stops == [("test_debugger_started_while_profiling_stops_at_the_next_line", here + 2)]


def test_settrace_while_profiling_sees_the_running_frames_lines() -> None:
    lp = LineProfiler(work)
    frame = sys._getframe()
    seen: List[Tuple[str, int]] = []
    tracer = _line_tracer(frame.f_code, seen)
    lp.enable()
    try:
        work(3)
        here = frame.f_lineno  # (3.9 reads a stale one once f_trace is set)
        frame.f_trace = tracer
        sys.settrace(tracer)
        x = 1
        x += 1
    finally:
        _stop_tracing(frame)
        _disable_quietly(lp)
    assert x == 2
    assert seen[:2] == [("line", here + 3), ("line", here + 4)]


def test_settrace_in_another_thread_while_profiling_sees_its_lines() -> None:
    seen: List[Tuple[str, int]] = []
    lines: List[int] = []

    def body() -> None:
        frame = sys._getframe()
        work(2)  # muted from here on (below 3.12): the thread was started while profiling
        tracer = _line_tracer(frame.f_code, seen)
        lines.append(frame.f_lineno)
        frame.f_trace = tracer
        sys.settrace(tracer)
        x = 1
        _stop_tracing(frame)
        lines.append(x)

    lp = LineProfiler(work)
    lp.enable()
    try:
        thread = threading.Thread(target=body)
        thread.start()
        thread.join(10)
    finally:
        _disable_quietly(lp)
    here = lines[0]
    assert seen[:2] == [("line", here + 3), ("line", here + 4)]
    assert lines[1] == 1


def test_tracer_handed_back_through_settrace_leaves_no_frame_muted() -> None:
    # doctest and benchmark fixtures hand sys.gettrace() back to sys.settrace: below 3.12 the
    # tracer then runs as a Python trace function, and drops itself at its first event off
    lp = LineProfiler(work)
    with lp:
        sys.settrace(sys.gettrace())
        assert work(3) == 3
    assert sys.gettrace() is None
    assert sys._getframe().f_trace_lines is True
    assert lp.get_stats().timings


def test_sys_settrace_is_put_back_at_disable() -> None:
    builtin = sys.settrace
    lp = LineProfiler(work)
    lp.enable()
    try:
        # below 3.12 a sys.settrace that unmutes the calling thread stands in meanwhile
        assert (sys.settrace is not builtin) == LEGACY
        assert sys.settrace.__name__ == "settrace"
    finally:
        lp.disable()
    assert sys.settrace is builtin


@legacy_only
def test_sys_settrace_replaced_while_profiling_stays() -> None:
    builtin = sys.settrace
    lp = LineProfiler(work)
    lp.enable()
    try:
        mine = sys.settrace

        def replaced(function: Any) -> None:
            mine(function)

        sys.settrace = replaced
        lp.disable()
        assert sys.settrace is replaced
    finally:
        sys.settrace = builtin
        lp.disable()


@legacy_only
def test_the_chained_threads_frames_are_left_alone() -> None:
    # the thread whose own trace function fastprof chains to is never muted, nor unmuted
    seen: List[Tuple[str, int]] = []
    frame = sys._getframe()
    tracer = _line_tracer(frame.f_code, seen)
    sys.settrace(tracer)
    try:
        lp = LineProfiler(work)
        lp.enable()
        frame.f_trace_lines = False
        work(2)
        sys.settrace(tracer)  # fastprof's sys.settrace: not its thread, nothing to unmute
        assert frame.f_trace_lines is False
        _disable_quietly(lp)
        assert frame.f_trace_lines is False
    finally:
        frame.f_trace_lines = True
        _stop_tracing(frame)


# --- (c) a generator advanced while profiling ------------------------------------------------


def _advanced_while_profiling(keep_on: bool = False) -> Tuple[Iterator[int], LineProfiler]:
    g = gen()
    lp = LineProfiler(work)
    lp.enable()
    assert next(g) == 1  # runs, and is suspended, under the profiler
    if not keep_on:
        lp.disable()
    return g, lp


def _gen_lines(seen: List[Tuple[str, int]]) -> List[Tuple[str, int]]:
    return [(event, line - GEN_FIRST) for event, line in seen]


def test_generator_suspended_while_profiling_shows_its_lines_to_settrace() -> None:
    g, _lp = _advanced_while_profiling()
    seen: List[Tuple[str, int]] = []
    sys.settrace(_line_tracer(gen.__code__, seen))
    try:
        assert next(g) == 2
        assert next(g) == 3
    finally:
        _stop_tracing(sys._getframe())
    assert _gen_lines(seen) == [
        ("call", 1),
        ("line", 2),
        ("line", 3),
        ("return", 3),
        ("call", 3),
        ("line", 4),
        ("line", 5),
        ("return", 5),
    ]


def test_generator_suspended_while_profiling_shows_its_lines_to_a_debugger() -> None:
    g, _lp = _advanced_while_profiling()
    frame = sys._getframe()
    dbg = Recorder(names=("gen",))
    try:
        dbg.set_trace()
        next(g)
        next(g)
    finally:
        _stop_tracing(frame)
    assert [(name, line - GEN_FIRST) for name, line in dbg.stops] == [
        ("gen", 2),
        ("gen", 3),
        ("gen", 4),
        ("gen", 5),
    ]


def test_generator_seen_by_a_tracer_that_takes_over_while_profiling() -> None:
    g, lp = _advanced_while_profiling(keep_on=True)
    frame = sys._getframe()
    seen: List[Tuple[str, int]] = []
    sys.settrace(_line_tracer(gen.__code__, seen))
    try:
        assert next(g) == 2
    finally:
        _stop_tracing(frame)
        _disable_quietly(lp)
    assert _gen_lines(seen) == [("call", 1), ("line", 2), ("line", 3), ("return", 3)]


class _Suspend:
    def __await__(self) -> Iterator[None]:
        yield None


async def coro() -> int:
    await _Suspend()
    a = 2
    await _Suspend()
    return a


def _coro_lines_after_first_step(profiled: bool) -> List[Tuple[str, int]]:
    c = coro()
    lp = LineProfiler(work)
    if profiled:
        lp.enable()
    c.send(None)  # suspended in its first await, under the profiler when profiled
    lp.disable()
    seen: List[Tuple[str, int]] = []
    sys.settrace(_line_tracer(coro.__code__, seen))
    try:
        c.send(None)
    finally:
        _stop_tracing(sys._getframe())
    c.close()
    # (3.9 gives an 'exception' event the line the frame last reported, which differs)
    return [(event, line) for event, line in seen if event != "exception"]


def test_coroutine_suspended_while_profiling_shows_its_lines_to_settrace() -> None:
    expected = _coro_lines_after_first_step(profiled=False)
    assert ("line", coro.__code__.co_firstlineno + 2) in expected
    assert _coro_lines_after_first_step(profiled=True) == expected


# --- the same with pdb itself, driven through stdin ----------------------------------------

_HEAD = """\
import fastprof, pdb, sys
def registered():
    return 1
def gen():
    yield 1
    a = 2
    yield a
lp = fastprof.LineProfiler(registered)
"""

PDB_SCRIPTS = {
    # (a) the frame that ran the profiler, after disable()
    "after_disable": """\
def main():
    lp.enable()
    registered()
    lp.disable()
    pdb.set_trace()
    x = 1
    print("x is", x)
main()
""",
    # (b) pdb.set_trace() while the profiler is on
    "while_on": """\
lp.enable()
registered()
pdb.set_trace()
x = 1
print("x is", x)
lp.disable()
""",
    # (c) a generator advanced while the profiler was on, stepped into later
    "generator": """\
g = gen()
lp.enable()
next(g)
lp.disable()
pdb.set_trace()
next(g)
print("x is", 1)
""",
}


# pdb.set_trace() stops at its own line first on 3.13+ (at the next line below): one "n"
# more there, and that stop left out, make the runs read alike
_STOPS_AT_THE_CALL = sys.version_info >= (3, 13)


def _run_pdb(tmp_path: Path, body: str, commands: str) -> str:
    if _STOPS_AT_THE_CALL:
        commands = "n\n" + commands
    script = tmp_path / "script.py"
    script.write_text(_HEAD + body)
    package_root = str(Path(fastprof.__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=package_root, HOME=str(tmp_path))
    env.pop("PYTHONBREAKPOINT", None)
    proc = subprocess.run(
        [sys.executable, "-u", str(script)],
        input=commands,
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _stops(out: str) -> List[str]:
    """The source lines pdb stopped at, in order (without the stop at pdb.set_trace() itself
    that 3.13+ makes)."""
    stops = [line[3:].strip() for line in out.splitlines() if line.startswith("-> ")]
    if _STOPS_AT_THE_CALL and stops[:1] == ["pdb.set_trace()"]:
        stops = stops[1:]
    return stops


def test_pdb_after_disable_stops_at_the_next_line(tmp_path: Path) -> None:
    out = _run_pdb(tmp_path, PDB_SCRIPTS["after_disable"], "n\nc\n")
    assert _stops(out)[:2] == ["x = 1", 'print("x is", x)']
    assert "x is 1" in out


def test_pdb_while_profiling_stops_at_the_next_line(tmp_path: Path) -> None:
    out = _run_pdb(tmp_path, PDB_SCRIPTS["while_on"], "n\nc\n")
    assert _stops(out)[:2] == ["x = 1", 'print("x is", x)']
    assert "disable()" not in out.split("x is 1")[0]


def test_pdb_steps_into_a_generator_suspended_while_profiling(tmp_path: Path) -> None:
    out = _run_pdb(tmp_path, PDB_SCRIPTS["generator"], "s\ns\ns\nc\n")
    # the call into the generator, then its line after the first yield
    assert _stops(out)[:3] == ["next(g)", "yield 1", "a = 2"]
