"""Line profiler: hit counts against the truth, exact times under a fake timer, the hooks'
bookkeeping, results API, text table and dump/load."""

import asyncio
import io
import re
import sys
import textwrap
import threading
import types
from typing import Any, Dict

import pytest

import test_lines_targets as T
from fastprof import LineProfiler
from fastprof.lines import LineStats, code_key, load_stats
from profile_helpers import ThreadWatch, audit_refusing

MONITORING = sys.version_info >= (3, 12)

with open(T.__file__) as _f:
    _MARKS = {
        m.group(1): i for i, line in enumerate(_f, 1) for m in [re.search(r"# L:(\w+)", line)] if m
    }


def L(name):
    """Line number of the line marked `# L:name` in test_lines_targets."""
    return _MARKS[name]


def lines_of(stats, func_or_code, field=1):
    """{lineno: hits} (field=1) or {lineno: time} (field=2) of one function."""
    code = getattr(func_or_code, "__code__", func_or_code)
    return {row[0]: row[field] for row in stats.timings.get(code_key(code), [])}


def fake_profiler(*funcs):
    T.CLOCK[0] = 0
    return LineProfiler(*funcs, _timer=T.fake_timer, _timer_unit=1.0)


# --- hit counts against the truth ---------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7])
def test_loop_hits(n):
    lp = LineProfiler(T.loop)
    with lp:
        assert T.loop(n) == sum(range(n))
    hits = lines_of(lp.get_stats(), T.loop)
    assert hits == {L("init"): 1, L("for"): n + 1, L("ret"): 1, **({L("body"): n} if n else {})}


def test_repeated_calls_add_up():
    lp = LineProfiler(T.loop)
    with lp:
        for _ in range(5):
            T.loop(3)
    hits = lines_of(lp.get_stats(), T.loop)
    assert hits[L("init")] == 5 and hits[L("body")] == 15 and hits[L("for")] == 20


def _fib_calls(n):
    return 1 if n < 2 else 1 + _fib_calls(n - 1) + _fib_calls(n - 2)


def test_recursion_hits():
    lp = LineProfiler(T.fib)
    with lp:
        assert T.fib(12) == 144
    hits = lines_of(lp.get_stats(), T.fib)
    calls = _fib_calls(12)
    leaves = (calls + 1) // 2
    assert hits == {L("test"): calls, L("base"): leaves, L("rec"): calls - leaves}


def test_exceptions_hits():
    lp = LineProfiler(T.catcher, T.raiser)
    with lp:
        assert T.catcher(6) == 5
    st = lp.get_stats()
    assert lines_of(st, T.raiser) == {L("rtest"): 6, L("raise"): 5, L("rret"): 1}
    c = lines_of(st, T.catcher)
    assert c[L("cinit")] == 1 and c[L("cfor")] == 7 and c[L("call")] == 6
    assert c[L("except")] == 5 and c[L("caught")] == 5 and c[L("cret")] == 1


def test_exception_escaping_registered_frames_keeps_stack_sane():
    lp = fake_profiler(T.raiser, T.timed)
    with lp:
        for _ in range(50):
            with pytest.raises(ValueError):
                T.raiser(1)
        T.timed(2)
    st = lp.get_stats()
    assert lines_of(st, T.raiser)[L("raise")] == 50
    # the frames of raiser were popped: timed's lines get exactly their own time
    assert lines_of(st, T.timed, 2) == {L("a3"): 3, L("tfor"): 0, L("a5"): 10, L("tret"): 0}


def test_return_inside_try_finally():
    lp = LineProfiler(T.finally_return)
    with lp:
        for i in range(4):
            assert T.finally_return(i) == i
    hits = lines_of(lp.get_stats(), T.finally_return)
    assert hits[L("ftry")] == 4 and hits[L("fbody")] == 4
    # 3.9 reports the return line again after the finally block (line_profiler counts the
    # same); from 3.10 on it is reported once per execution.
    assert hits[L("fret")] == (8 if sys.version_info < (3, 10) else 4)


def test_threads_hits():
    lp = LineProfiler(T.threaded_work)
    barrier = threading.Barrier(4)

    def run():
        barrier.wait()
        for _ in range(20):
            T.threaded_work(50)

    with lp:
        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    hits = lines_of(lp.get_stats(), T.threaded_work)
    assert hits == {L("twinit"): 80, L("twfor"): 80 * 51, L("twbody"): 80 * 50, L("twret"): 80}


# --- exact times under a fake timer -------------------------------------------------------


def test_times_exact_with_fake_timer():
    lp = fake_profiler(T.timed)
    with lp:
        T.timed(4)
    st = lp.get_stats()
    times = lines_of(st, T.timed, 2)
    assert times == {L("a3"): 3, L("tfor"): 0, L("a5"): 20, L("tret"): 0}
    assert st.unit == 1.0


def test_line_times_sum_to_call_time():
    """The sum of a function's line times is its call time (start to return)."""
    calls = []

    def caller():
        start = T.CLOCK[0]
        T.timed(6)
        calls.append(T.CLOCK[0] - start)

    lp = fake_profiler(T.timed)
    with lp:
        caller()
        caller()
    total = sum(lines_of(lp.get_stats(), T.timed, 2).values())
    assert total == sum(calls) == 2 * (3 + 6 * 5)


def test_registered_callee_time_is_included_in_callers_line():
    lp = fake_profiler(T.timed, T.outer)

    def work():
        T.timed(2)  # 3 + 10

    lp.add_function(work)
    with lp:
        work()
    times = lines_of(lp.get_stats(), work, 2)
    assert list(times.values()) == [13]


def test_generator_suspension_not_charged():
    lp = fake_profiler(T.gen)
    with lp:
        g = T.gen(3)
        for _ in g:
            T.advance(100)  # the consumer's time, while gen is suspended
    st = lp.get_stats()
    times = lines_of(st, T.gen, 2)
    hits = lines_of(st, T.gen)
    assert hits == {L("gfor"): 4, L("gwork"): 3, L("gyield"): 3, L("gend"): 1}
    assert times[L("gwork")] == 6 and times[L("gend")] == 1
    assert times[L("gyield")] == 0 and times[L("gfor")] == 0
    assert sum(times.values()) == 7


def test_coroutine_suspension_not_charged():
    lp = fake_profiler(T.coro)
    with lp:
        c = T.coro(3)
        try:
            while True:
                c.send(None)
                T.advance(50)
        except StopIteration as stop:
            assert stop.value == 3
    st = lp.get_stats()
    assert lines_of(st, T.coro) == {
        L("coinit"): 1,
        L("cofor"): 4,
        L("coawait"): 3,
        L("coadd"): 3,
        L("coret"): 1,
    }
    assert sum(lines_of(st, T.coro, 2).values()) == 0


def test_async_def_under_asyncio():
    lp = LineProfiler(T.coro)

    async def main():
        return await T.coro(5)

    with lp:
        assert asyncio.run(main()) == 10
    assert lines_of(lp.get_stats(), T.coro)[L("coadd")] == 5


def test_generator_throw_and_close():
    lp = LineProfiler(T.gen)
    with lp:
        g = T.gen(5)
        next(g)
        with pytest.raises(KeyError):
            g.throw(KeyError("x"))
        g2 = T.gen(5)
        next(g2)
        g2.close()
    hits = lines_of(lp.get_stats(), T.gen)
    assert hits[L("gwork")] == 2 and hits[L("gyield")] == 2 and L("gend") not in hits


def test_throw_into_a_generator_before_its_first_step():
    """A generator (or a coroutine: a task cancelled before it ran) thrown into before its
    first step runs none of its lines: no line of it is hit or charged, the def line
    included, as line_profiler reports it (on 3.12+ the throw's offset maps to the def)."""
    reads = iter(range(10**9))
    lp = LineProfiler(T.gen, _timer=lambda: next(reads), _timer_unit=1.0)  # moves every read
    with lp:
        for _ in range(2):
            g = T.gen(5)
            with pytest.raises(KeyError):
                g.throw(KeyError("x"))
        assert list(T.gen(1)) == [0]
    rows = lines_of(lp.get_stats(), T.gen)
    assert rows == {L("gfor"): 2, L("gwork"): 1, L("gyield"): 1, L("gend"): 1}


# --- what trips peers ---------------------------------------------------------------------


def test_one_line_function_and_lambda():
    lp = LineProfiler(T.one_liner, T.square)
    with lp:
        for i in range(5):
            T.one_liner(i)
            T.square(i)
    st = lp.get_stats()
    assert lines_of(st, T.one_liner) == {L("one"): 5}
    assert lines_of(st, T.square) == {L("lam"): 5}


def test_nested_function_is_registered_with_its_outer():
    lp = LineProfiler(T.outer)
    with lp:
        assert T.outer(4) == 12
    st = lp.get_stats()
    o = lines_of(st, T.outer)
    assert o[L("def_inner")] == 1 and o[L("ocall")] == 4 and o[L("ofor")] == 5
    inner = next(c for c in T.outer.__code__.co_consts if isinstance(c, types.CodeType))
    assert lines_of(st, inner) == {L("inner_body"): 4}


def test_comprehension_line_is_charged_to_its_function():
    lp = fake_profiler(T.comprehension)
    with lp:
        assert T.comprehension(5) == 30
    st = lp.get_stats()
    hits = lines_of(st, T.comprehension)
    assert set(hits) == {L("comp"), L("cmpret")}
    assert hits[L("cmpret")] == 1 and hits[L("comp")] >= 1
    assert len(st.timings) == 1  # no separate <listcomp> entry


def test_decorated_function_profiles_what_the_user_wrote():
    lp = LineProfiler(T.decorated)
    with lp:
        assert T.decorated(3) == 3
    st = lp.get_stats()
    inner = T.decorated.__wrapped__
    assert lines_of(st, inner) == {L("dinit"): 1, L("dfor"): 4, L("dbody"): 3, L("dret"): 1}
    assert lines_of(st, T.decorated) == {}  # the wrapper is not registered


def test_methods_classmethods_staticmethods_properties():
    lp = LineProfiler()
    lp.add_function(T.Shape.__init__)
    lp.add_function(T.Shape.area)
    lp.add_function(T.Shape.__dict__["unit"])
    lp.add_function(T.Shape.double)
    lp.add_function(T.Shape.__dict__["perimeter"])
    with lp:
        s = T.Shape.unit()
        s.area()
        T.Shape.double(3)
        _ = s.perimeter
        _ = s.perimeter
    st = lp.get_stats()
    assert lines_of(st, T.Shape.__init__) == {L("init_body"): 1}
    assert lines_of(st, T.Shape.area) == {L("area"): 1}
    assert lines_of(st, T.Shape.unit.__func__) == {L("unit"): 1}
    assert lines_of(st, T.Shape.double) == {L("double"): 1}
    assert lines_of(st, T.Shape.perimeter.fget) == {L("perim"): 2}


def test_bound_method_is_unwrapped():
    lp = LineProfiler(T.Shape(2).area)
    with lp:
        T.Shape(3).area()
    assert lines_of(lp.get_stats(), T.Shape.area) == {L("area"): 1}


# --- only registered code pays; the hooks are put back ------------------------------------


def test_unregistered_code_not_recorded():
    lp = LineProfiler(T.loop)
    with lp:
        T.threaded_work(5)
        T.loop(2)
    assert set(lp.get_stats().timings) == {
        (T.loop.__code__.co_filename, T.loop.__code__.co_firstlineno, "loop")
    }


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_tool_id_preference_and_release():
    """3, 4, 5 first, then the profiler's id (2), then 0 and 1; the id given back."""
    mon = sys.monitoring
    lp = LineProfiler(T.loop)
    assert all(mon.get_tool(i) is None for i in range(6))
    with lp:
        assert mon.get_tool(3) == "fastprof-lines" and mon.get_tool(2) is None
        T.loop(1)
    assert mon.get_tool(3) is None
    busy = [3, 4, 5]
    for i in busy:  # with 3-5 busy, 2 is next
        mon.use_tool_id(i, "someone")
    try:
        with lp:
            assert mon.get_tool(2) == "fastprof-lines"
        assert mon.get_tool(2) is None
    finally:
        for i in busy:
            mon.free_tool_id(i)


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_beside_cprofile_and_line_profiler_which_want_the_profilers_id():
    """cProfile insists on id 2 and line_profiler takes over whatever tool holds it: the
    line profiler leaves it to them, and counts every line while they are on."""
    import cProfile

    lp = LineProfiler(T.loop)
    cp = cProfile.Profile()
    with lp:
        cp.enable()  # would raise "Another profiling tool is already active" on id 2
        try:
            T.loop(3)
        finally:
            cp.disable()
    ((_, rows),) = lp.get_stats().timings.items()
    assert max(h for _, h, _ in rows) == 3 + 1  # the loop's header: 3 turns and the exit
    calls = {k[2]: v[0] for k, v in _pstats_of(cp).items()}
    assert calls["loop"] == 1


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_beside_a_line_profiler_one_enabled_after_it():
    line_profiler = pytest.importorskip("line_profiler", reason="line_profiler 5.1 needs 3.10+")
    lp = LineProfiler(T.loop)
    theirs = line_profiler.LineProfiler(T.timed)
    with lp:
        theirs.enable()
        try:
            T.loop(2)
            T.timed(1)
        finally:
            theirs.disable()
    ((_, rows),) = lp.get_stats().timings.items()
    assert sorted(h for _, h, _ in rows) == [1, 1, 2, 3]
    ((_, their_rows),) = theirs.get_stats().timings.items()
    assert sorted(h for _, h, _ in their_rows) == [1, 1, 1, 2]


def test_code_replaced_by_another_line_profiler_is_followed_or_reported():
    """line_profiler's add_function puts a copy of a function's code in its place: enable()
    times the new code too, and a swap while on is reported, not silently lost."""

    def victim(n):
        return [i for i in range(n)]

    lp = LineProfiler(victim)
    original = victim.__code__
    victim.__code__ = original.replace()  # what line_profiler 5 does
    with lp:
        victim(2)
    victim.__code__ = victim.__code__.replace(co_name="victim")
    lp.enable()
    victim(2)
    victim.__code__ = original.replace()
    with pytest.warns(RuntimeWarning, match="code of .*victim was replaced"):
        lp.disable()
    ((_, rows),) = lp.get_stats().timings.items()
    assert {h for _, h, _ in rows} == {2}  # both runs counted, as one function


def _pstats_of(cp):
    import pstats

    return pstats.Stats(cp).stats


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_tool_released_when_enable_fails_midway(monkeypatch):
    mon = sys.monitoring
    before = [mon.get_tool(i) for i in range(6)]
    lp = LineProfiler(T.loop)

    def boom(*a):
        raise RuntimeError("boom")

    monkeypatch.setattr(mon, "set_events", boom)
    with pytest.raises(RuntimeError, match="boom"):
        lp.enable()
    monkeypatch.undo()
    assert [mon.get_tool(i) for i in range(6)] == before
    assert not lp.enabled


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_no_tool_id_left_is_a_clear_error():
    mon = sys.monitoring
    mine = [i for i in range(6) if mon.get_tool(i) is None]
    for i in mine:
        mon.use_tool_id(i, "filler")
    try:
        with pytest.raises(RuntimeError, match="tool id"):
            LineProfiler(T.loop).enable()
    finally:
        for i in mine:
            mon.free_tool_id(i)


def test_two_profilers_at_once():
    a, b = LineProfiler(T.loop), LineProfiler(T.loop, T.fib)
    with a:
        with b:
            T.loop(3)
            T.fib(3)
        T.loop(1)
    assert lines_of(a.get_stats(), T.loop)[L("init")] == 2
    assert lines_of(b.get_stats(), T.loop)[L("init")] == 1
    assert lines_of(b.get_stats(), T.fib)[L("test")] == 5


@pytest.mark.skipif(MONITORING, reason="below 3.12 only")
def test_legacy_trace_restored():
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(tracer)
    try:
        lp = LineProfiler(T.loop)
        with lp:
            T.loop(2)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)


def test_overlapping_profilers_in_any_order():
    a, b = LineProfiler(T.loop), LineProfiler(T.loop, T.fib)
    a.enable()
    T.loop(1)
    b.enable()
    T.loop(2)
    a.disable()  # b goes on counting
    T.loop(3)
    T.fib(2)
    b.disable()
    T.loop(4)  # nobody counts
    a.enable()  # the first one again, alone
    T.loop(5)
    a.disable()
    assert lines_of(a.get_stats(), T.loop)[L("body")] == 1 + 2 + 5
    assert lines_of(b.get_stats(), T.loop)[L("body")] == 2 + 3
    assert lines_of(b.get_stats(), T.fib)[L("test")] == 3
    assert not a.enabled and not b.enabled
    if not MONITORING:
        assert sys.gettrace() is None


def test_registering_while_enabled():
    lp = LineProfiler()
    with lp:
        T.loop(1)
        lp.add_function(T.loop)
        T.loop(2)
    assert lines_of(lp.get_stats(), T.loop)[L("body")] == 2


def test_enable_inside_a_running_registered_frame():
    lp = LineProfiler()

    def body():
        lp.enable()
        x = 1
        y = x + 1
        lp.disable()
        return y

    lp.add_function(body)
    assert body() == 2
    hits = lines_of(lp.get_stats(), body)
    first = body.__code__.co_firstlineno
    assert hits[first + 2] == 1 and hits[first + 3] == 1


def test_failing_timer_reported_at_disable():
    calls = [0]

    def bad_timer():
        calls[0] += 1
        if calls[0] > 3:
            raise OSError("no clock")
        return calls[0]

    lp = LineProfiler(T.loop, _timer=bad_timer)
    lp.enable()
    T.loop(3)
    with pytest.raises(RuntimeError, match="timer"):
        lp.disable()
    assert not lp.enabled


def test_failing_timer_error_is_the_reports_cause():
    # The line profiler reports a hook's error as the call profiler does: a RuntimeError
    # raised from what failed, here the timer's own error; counting went on meanwhile.
    calls = [0]

    def bad_timer():
        calls[0] += 1
        if calls[0] == 4:
            raise OSError("no clock")
        return calls[0]

    lp = LineProfiler(T.loop, _timer=bad_timer)
    lp.enable()
    T.loop(3)
    with pytest.raises(RuntimeError, match="the timer raised") as info:
        lp.disable()
    cause = info.value.__cause__
    assert isinstance(cause, RuntimeError) and "timer" in str(cause)
    assert isinstance(cause.__cause__, OSError) and str(cause.__cause__) == "no clock"
    assert calls[0] > 4  # the hooks went on reading the timer after its failure
    lp.enable()  # the next run starts without the error
    T.loop(1)
    lp.disable()


def test_decorator_and_runcall_and_reset():
    lp = LineProfiler()
    wrapped = lp(T.loop)
    assert wrapped(3) == 3 and wrapped.__wrapped__ is T.loop
    assert not lp.enabled
    assert lp.runcall(T.loop, 2) == 1
    assert lines_of(lp.get_stats(), T.loop)[L("init")] == 2
    lp.reset()
    assert lines_of(lp.get_stats(), T.loop) == {}


def test_decorator_on_async_def():
    lp = LineProfiler()
    wrapped = lp(T.coro)

    async def main():
        return await wrapped(2)

    assert asyncio.run(main()) == 1
    assert lines_of(lp.get_stats(), T.coro)[L("coadd")] == 2


def test_add_module_registers_functions_and_methods():
    lp = LineProfiler()
    added = lp.add_module(T)
    assert added >= 10
    names = {f.__qualname__ for f in lp.functions}
    assert {
        "loop",
        "fib",
        "Shape.area",
        "Shape.unit",
        "Shape.perimeter",
        "decorated",
        "<lambda>",
        "advance",
    } <= names


@pytest.mark.parametrize("bad", [42, "loop", None])  # len: warns (test_lines_parity)
def test_add_function_rejects_non_functions(bad):
    with pytest.raises(TypeError, match="func must be a Python function"):
        LineProfiler().add_function(bad)


def test_bad_timer_and_module_arguments():
    with pytest.raises(TypeError, match="_timer"):
        LineProfiler(_timer=3)
    with pytest.raises(TypeError, match="module must be a module"):
        LineProfiler().add_module("test_lines_targets")


# --- results: shape, table, dump/load -----------------------------------------------------


def test_stats_shape_like_line_profiler():
    lp = LineProfiler(T.loop)
    with lp:
        T.loop(3)
    st = lp.get_stats()
    assert isinstance(st.unit, float) and 0 < st.unit < 1e-3
    ((key, rows),) = st.timings.items()
    assert key == (T.loop.__code__.co_filename, T.loop.__code__.co_firstlineno, "loop")
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert all(isinstance(v, int) for r in rows for v in r)
    assert all(r[2] >= 0 for r in rows)


def test_print_stats_table():
    lp = fake_profiler(T.timed, T.fib)
    with lp:
        T.timed(2)
    out = io.StringIO()
    lp.print_stats(stream=out, output_unit=1.0)
    text = out.getvalue()
    assert text.startswith("Timer unit: 1 s\n\n")
    assert "Total time: 13 s\n" in text
    assert f"File: {T.__file__}" in text
    assert f"Function: timed at line {T.timed.__code__.co_firstlineno}" in text
    assert "Line #      Hits         Time  Per Hit   % Time  Line Contents" in text
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\s*(\d+) .*$", text, re.M)}
    a5 = rows[L("a5")].split()
    assert a5[:5] == [str(L("a5")), "2", "10.0", "5.0", "76.9"]
    assert "advance(5)" in rows[L("a5")]
    assert "Function: fib" in text  # registered, never run: empty block
    out2 = io.StringIO()
    lp.print_stats(stream=out2, output_unit=1.0, stripzeros=True)
    assert "Function: fib" not in out2.getvalue() and "Function: timed" in out2.getvalue()


def test_print_stats_default_unit_is_microseconds():
    lp = LineProfiler(T.loop)
    with lp:
        T.loop(2)
    out = io.StringIO()
    lp.print_stats(stream=out)
    assert out.getvalue().startswith("Timer unit: 1e-06 s")


def test_dump_load_round_trip(tmp_path):
    lp = fake_profiler(T.timed)
    with lp:
        T.timed(3)
    path = tmp_path / "out.lprof"
    lp.dump_stats(str(path))
    back = load_stats(path)
    assert isinstance(back, LineStats) and back == lp.get_stats()
    (path2 := tmp_path / "junk.pkl").write_bytes(b"\x80\x04N.")
    with pytest.raises(ValueError, match="line timings"):
        load_stats(path2)


# --- against line_profiler, where it is installed -------------------------------------------

LP_CASES = {
    "loop": (lambda: T.loop, lambda: T.loop(5)),
    "fib": (lambda: T.fib, lambda: T.fib(7)),
    "catcher": (lambda: T.catcher, lambda: T.catcher(4)),
    "finally_return": (lambda: T.finally_return, lambda: [T.finally_return(i) for i in range(3)]),
    "gen": (lambda: T.gen, lambda: list(T.gen(3))),
    "comprehension": (lambda: T.comprehension, lambda: T.comprehension(4)),
    "outer": (lambda: T.outer, lambda: T.outer(3)),
    "one_liner": (lambda: T.one_liner, lambda: T.one_liner(1)),
}


@pytest.mark.parametrize("case", sorted(LP_CASES))
def test_hits_match_line_profiler(case):
    line_profiler = pytest.importorskip("line_profiler")
    get, run = LP_CASES[case]
    func = get()
    theirs = line_profiler.LineProfiler(func)
    theirs.enable_by_count()
    try:
        run()
    finally:
        theirs.disable_by_count()
    ours = LineProfiler(func)
    with ours:
        run()
    expected = lines_of(theirs.get_stats(), func)
    if case == "one_liner" and not expected:
        pytest.skip("this line_profiler misses one-line functions (the truth is tested above)")
    assert lines_of(ours.get_stats(), func) == expected


@pytest.mark.skipif(MONITORING, reason="below 3.12 only")
def test_legacy_line_events_switched_off_in_unregistered_frames():
    seen = {}

    def unregistered():
        seen["flag"] = sys._getframe().f_trace_lines

    def registered():
        seen["reg"] = sys._getframe().f_trace_lines
        unregistered()

    lp = LineProfiler(registered)
    with lp:
        registered()
    assert seen == {"reg": True, "flag": False}


def test_yield_from_delegation():
    lp = fake_profiler(T.delegator, T.gen)
    with lp:
        for _ in T.delegator(2):
            T.advance(1000)  # consumer time: charged to no line
    st = lp.get_stats()
    d = lines_of(st, T.delegator)
    assert d[L("dg_first")] == 1 and d[L("dg_end")] == 1 and d[L("dg_from")] >= 1
    times = lines_of(st, T.delegator, 2)
    assert times[L("dg_end")] == 4
    # the delegating line carries the inner generator's own work (2 per item, 1 at the end)
    assert times[L("dg_from")] == 2 * 2 + 1
    assert sum(lines_of(st, T.gen, 2).values()) == 2 * 2 + 1
    assert lines_of(st, T.gen)[L("gyield")] == 2


def test_exception_thrown_into_generator_and_handled():
    lp = LineProfiler(T.catching_gen)
    with lp:
        g = T.catching_gen()
        assert next(g) == 0
        assert g.throw(KeyError()) == 1
        with pytest.raises(StopIteration):
            g.throw(KeyError())
    hits = lines_of(lp.get_stats(), T.catching_gen)
    assert hits[L("cg_init")] == 1 and hits[L("cg_caught")] == 2
    assert hits[L("cg_except")] == 2 and hits[L("cg_ret")] == 1


def test_async_generator():
    lp = LineProfiler(T.agen)

    async def main():
        return [x async for x in T.agen(3)]

    with lp:
        assert asyncio.run(main()) == [0, 1, 2]
    hits = lines_of(lp.get_stats(), T.agen)
    assert hits[L("ag_await")] == 3 and hits[L("ag_yield")] == 3 and hits[L("ag_for")] == 4


def test_decorator_on_generator_function_profiles_each_step():
    lp = fake_profiler()
    wrapped = lp(T.gen)
    out = []
    for item in wrapped(3):
        out.append(item)
        T.advance(100)
    assert out == [0, 1, 2] and not lp.enabled
    st = lp.get_stats()
    assert lines_of(st, T.gen) == {L("gfor"): 4, L("gwork"): 3, L("gyield"): 3, L("gend"): 1}
    assert sum(lines_of(st, T.gen, 2).values()) == 7
    g = wrapped(5)
    next(g)
    g.close()
    assert not lp.enabled


def test_decorated_generator_passes_sent_values_and_thrown_exceptions_through():
    lp = fake_profiler()
    wrapped = lp(T.catching_gen)
    g = wrapped()
    assert next(g) == 0
    assert g.throw(KeyError()) == 1
    with pytest.raises(StopIteration) as stop:
        g.throw(KeyError())
    assert stop.value.value == 2 and not lp.enabled
    hits = lines_of(lp.get_stats(), T.catching_gen)
    assert hits[L("cg_init")] == 1 and hits[L("cg_caught")] == 2 and hits[L("cg_ret")] == 1

    def doubler():
        got = yield 0
        while True:
            got = yield 2 * got

    d = lp(doubler)()
    assert next(d) == 0 and d.send(3) == 6 and d.send(-4) == -8
    with pytest.raises(ValueError):
        d.throw(ValueError("into the generator"))
    assert not lp.enabled


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_only_registered_code_has_local_events():
    mon = sys.monitoring
    lp = LineProfiler(T.loop)
    with lp:
        tool = next(i for i in range(6) if mon.get_tool(i) == "fastprof-lines")
        E = mon.events
        assert mon.get_local_events(tool, T.loop.__code__) == (
            E.LINE | E.PY_START | E.PY_RESUME | E.PY_RETURN | E.PY_YIELD
        )
        assert mon.get_local_events(tool, T.fib.__code__) == 0
        assert mon.get_events(tool) == E.PY_UNWIND | E.PY_THROW
    assert mon.get_tool(tool) is None


def test_print_stats_without_source():
    ns = {}
    exec(compile("def f(n):\n    return n + 1\n", "<generated>", "exec"), ns)
    lp = LineProfiler(ns["f"])
    with lp:
        ns["f"](1)
    out = io.StringIO()
    lp.print_stats(stream=out)
    text = out.getvalue()
    assert "Could not find file <generated>" in text
    assert re.search(r"^\s+2\s+1\s", text, re.M)


def test_class_and_lru_cache_wrapped_functions():
    import functools

    @functools.lru_cache(maxsize=None)
    def cached(n):
        return n * 3

    lp = LineProfiler(T.Shape, cached)
    with lp:
        T.Shape(2).area()
        cached(1)
        cached(1)  # from the cache: the function does not run
    st = lp.get_stats()
    assert lines_of(st, T.Shape.area) == {L("area"): 1}
    assert lines_of(st, T.Shape.__init__) == {L("init_body"): 1}
    assert lines_of(st, cached.__wrapped__) == {cached.__wrapped__.__code__.co_firstlineno + 2: 1}
    assert {f.__name__ for f in lp.functions} >= {"area", "unit", "double", "perimeter", "cached"}


@pytest.mark.skipif(not MONITORING, reason="sys.monitoring is 3.12+")
def test_dropping_an_enabled_profiler_frees_its_tool_id():
    import gc

    mon = sys.monitoring
    before = [mon.get_tool(i) for i in range(6)]
    lp = LineProfiler(T.loop)
    lp.enable()
    assert [mon.get_tool(i) for i in range(6)] != before
    del lp
    gc.collect()
    assert [mon.get_tool(i) for i in range(6)] == before
    T.loop(2)  # no callback left behind


def test_dump_readable_by_line_profiler(tmp_path):
    line_profiler = pytest.importorskip("line_profiler")
    lp = LineProfiler(T.loop)
    with lp:
        T.loop(3)
    path = tmp_path / "out.lprof"
    lp.dump_stats(path)
    theirs = line_profiler.load_stats(str(path))
    assert theirs.timings == lp.get_stats().timings and theirs.unit == lp.get_stats().unit
    out = io.StringIO()
    line_profiler.show_text(theirs.timings, theirs.unit, stream=out)
    assert "Function: loop" in out.getvalue()


def test_thread_started_before_enable_is_counted():
    go, done = threading.Event(), threading.Event()

    def run():
        go.wait(10)
        T.threaded_work(10)
        done.set()

    t = threading.Thread(target=run)
    t.start()
    lp = LineProfiler(T.threaded_work)
    with lp:
        go.set()
        assert done.wait(10)
    t.join()
    assert lines_of(lp.get_stats(), T.threaded_work)[L("twbody")] == 10


@pytest.mark.skipif(
    MONITORING, reason="3.12+ traces through sys.monitoring, not per-thread trace functions"
)
def test_running_threads_get_the_trace_only_when_they_have_none_and_lose_it_after():
    enabled, disabled = threading.Event(), threading.Event()
    seen = {}

    def own_trace(frame, event, arg):
        return None

    def run(name, own):
        if own:
            sys.settrace(own_trace)
        seen[name, "before"] = sys.gettrace()
        assert enabled.wait(10)
        seen[name, "during"] = sys.gettrace()
        assert disabled.wait(10)
        seen[name, "after"] = sys.gettrace()
        sys.settrace(None)

    threads = [
        threading.Thread(target=run, args=(name, own))
        for name, own in (("plain", False), ("traced", True))
    ]
    for t in threads:
        t.start()
    lp = LineProfiler(T.threaded_work)
    lp.enable()
    try:
        enabled.set()
        for _ in range(200):
            if len(seen) >= 4:
                break
            threading.Event().wait(0.01)
    finally:
        lp.disable()
    disabled.set()
    for t in threads:
        t.join()
    assert seen["plain", "before"] is None
    assert seen["plain", "during"] is lp._tracer
    assert seen["plain", "after"] is None
    assert seen["traced", "during"] is own_trace
    assert seen["traced", "after"] is own_trace


@pytest.mark.skipif(
    MONITORING, reason="3.12+ traces through sys.monitoring, not per-thread trace functions"
)
def test_enable_refused_by_an_audit_hook_leaves_no_trace_anywhere():
    watch = ThreadWatch(sys.gettrace)
    lp = LineProfiler(T.threaded_work)
    try:
        with audit_refusing("sys.settrace"), pytest.raises(RuntimeError, match="refused"):
            lp.enable()
    finally:
        seen = watch.finish()
    assert not lp._tracer.enabled
    assert sys.gettrace() is None and threading._trace_hook is None and seen == [None]
    with lp:
        T.threaded_work(2)
    assert lines_of(lp.get_stats(), T.threaded_work)[L("twbody")] == 2


def test_reinitialising_an_enabled_profiler_is_refused() -> None:
    # as Profile.__init__: a new tracer would leave the enabled one's hooks behind
    lp = LineProfiler(T.loop)
    lp.enable()
    try:
        with pytest.raises(RuntimeError, match="cannot re-initialise an enabled LineProfiler"):
            lp.__init__()  # type: ignore[misc]
    finally:
        lp.disable()
    assert sys.gettrace() is None
    if sys.version_info >= (3, 12):
        assert "fastprof-lines" not in [sys.monitoring.get_tool(i) for i in range(6)]
    lp.__init__()  # type: ignore[misc]
    assert lp.functions == []


@pytest.mark.parametrize("unit", [0.0, -1.0, float("nan"), float("inf")])
def test_timer_unit_must_be_positive_seconds(unit: float) -> None:
    with pytest.raises(ValueError, match="_timer_unit must be a positive number"):
        LineProfiler(_timer=T.fake_timer, _timer_unit=unit)


def test_a_line_begun_before_profiling_is_left_out_as_line_profiler_leaves_it():
    """A generator suspended at its yield before enable(), finished inside: the yield line
    has time after the resume but never began while on; no row with 0 hits (line_profiler's
    readers divide by the hits)."""

    def gen():
        yield 1
        x = 2
        return x

    g = gen()
    next(g)  # suspended at the yield, before profiling
    lp = LineProfiler(gen)
    with lp:
        with pytest.raises(StopIteration):
            next(g)
    ((key, rows),) = lp.get_stats().timings.items()
    assert {ln - key[1]: h for ln, h, _ in rows} == {2: 1, 3: 1}
    out = io.StringIO()
    lp.print_stats(stream=out)
    assert "x = 2" in out.getvalue()


def test_runcall_passes_func_as_a_keyword_and_timer_unit_names_the_unit():
    lp = LineProfiler(T.loop)

    def apply(func, x):
        return func(x)

    assert lp.runcall(apply, func=abs, x=-3) == 3
    assert lp.runcall(T.loop, 3) == 3
    assert lp.timer_unit == lp.get_stats().unit > 0


def test_a_suspended_decorated_generator_at_exit_prints_nothing(tmp_path):
    import subprocess

    script = tmp_path / "s.py"
    script.write_text(
        "from fastprof import LineProfiler\n"
        "lp = LineProfiler()\n"
        "@lp\n"
        "def gen():\n"
        "    yield 1\n"
        "    yield 2\n"
        "g = gen()\n"
        "next(g)\n"
    )
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_class_whose_module_was_reassigned_keeps_its_own_functions():
    """pandas sets DataFrame.__module__ = "pandas" (its methods are pandas.core.frame's):
    add_class, add_callable and @lp judge what the class body defined by its qualified names
    and its package, as add_function does; a function assigned into the class from elsewhere
    is left out, and so are a namedtuple's methods (collections' code, named as the class's)."""
    import collections

    names: Dict[str, Any] = {"__name__": "mypkg.core.frame"}
    exec(
        textwrap.dedent("""
            def elsewhere(self):
                return 0

            class Frame:
                def total(self):
                    s = 0
                    for i in range(3):
                        s += i
                    return s

                borrowed = elsewhere
        """),
        names,
    )
    Frame = names["Frame"]
    Frame.__module__ = "mypkg"
    for how in ("add_class", "add_callable", "decorate"):
        lp = LineProfiler()
        if how == "decorate":
            lp(Frame)
        else:
            assert getattr(lp, how)(Frame) == 1
        assert [f.__name__ for f in lp.functions] == ["total"]
        with lp:
            Frame().total()
        ((_, rows),) = lp.get_stats().timings.items()
        assert sum(h for _, h, _ in rows) == 1 + 4 + 3 + 1
    Point = collections.namedtuple("Point", "x y")
    lp = LineProfiler()
    assert lp.add_class(Point) == 0 and lp.functions == []
    lp = LineProfiler()
    import difflib

    lp.add_module(difflib)
    assert not [f for f in lp.functions if f.__module__ == "collections"]
    with lp:
        repr(Point(1, 2))  # another namedtuple: nothing of it timed
    assert not lp.get_stats().timings or all(
        key[0] != collections.__file__ for key in lp.get_stats().timings
    )
