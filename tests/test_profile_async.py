"""None of fastprof's own frames in a report: ``@fastprof.profile`` on an ``async def`` (its
calls step the user's coroutine from C, so no wrapper coroutine shows once per resume), the
decorator and ``with fastprof.profile()`` on plain functions, and what ``Profile.runcall``,
``with Profile()``, ``fastprof.run`` and ``fastprof.runctx`` show of the profiler itself
(cProfile's own rows, no more).  The user's functions get cProfile's counts throughout."""

from __future__ import annotations

import asyncio
import cProfile
import inspect
import marshal
import os
import sys
import types
import warnings
from typing import Any, Dict, List, Tuple

import pytest

import fastprof

HERE = __file__
PKG = os.path.dirname(os.path.abspath(fastprof.__file__))
CPROFILE = os.path.abspath(cProfile.__file__)


async def a_leaf(i: int) -> int:
    await asyncio.sleep(0)
    return i


async def a_work(n: int) -> int:
    total = 0
    for i in range(n):
        total += await a_leaf(i)
        await asyncio.sleep(0)
    return total


@types.coroutine
def suspend() -> Any:
    """Suspends the awaiting coroutine once, with no event loop."""
    yield


def s_leaf(x: int) -> int:
    return abs(x)


def s_work(n: int) -> int:
    return sum(s_leaf(i) for i in range(n))


def own_keys(stats: Dict[Any, Any]) -> List[Any]:
    """The rows of the profiler's own code: fastprof's package and its builtins."""
    return sorted(
        k for k in stats if "fastprof" in k[2] or os.path.abspath(k[0]).startswith(PKG + os.sep)
    )


def counts(stats: Dict[Any, Any]) -> Dict[Tuple[int, str], Tuple[int, int]]:
    """(calls, primitive calls) of this file's functions."""
    return {(k[1], k[2]): (v[1], v[0]) for k, v in stats.items() if k[0] == HERE}


def cprofile_of(fn: Any, *args: Any) -> Dict[Any, Any]:
    prof = cProfile.Profile()
    prof.enable()
    try:
        fn(*args)
    finally:
        prof.disable()
    prof.create_stats()
    return prof.stats


def test_async_decorator_shows_the_coroutine_only() -> None:
    profiled = fastprof.profile(report="never")(a_work)
    assert asyncio.run(profiled(3)) == 3
    got = profiled.session.stats().to_dict()
    assert own_keys(got) == []
    assert not [k for k in got if k[2] == "wrapper"]
    ref = counts(cprofile_of(asyncio.run, a_work(3)))
    assert counts(got) == ref
    # each resume is a call, as cProfile counts it: 1 + 2 awaits that suspend per round
    assert ref[(a_work.__code__.co_firstlineno, "a_work")] == (7, 7)
    assert not profiled.profiler.enabled


def test_async_decorator_accumulates_and_nests_with_tasks() -> None:
    profiled = fastprof.profile(report="never")(a_work)

    async def main() -> List[int]:
        return list(await asyncio.gather(profiled(2), profiled(3), a_work(1)))

    assert asyncio.run(main()) == [1, 3, 0]
    st = profiled.session.stats()
    assert own_keys(st.to_dict()) == []
    # the third task ran while the first two kept the profiler on: counted too
    assert st.row("a_work").ncalls == 5 + 7 + 3
    assert profiled.session._active == 0 and not profiled.profiler.enabled


def test_async_decorator_is_still_a_coroutine_function() -> None:
    profiled = fastprof.profile(report="never")(a_work)
    # inspect accepts only real functions before 3.10 (docs/profiling.md says so)
    assert inspect.iscoroutinefunction(profiled) == (sys.version_info >= (3, 10))
    assert asyncio.iscoroutinefunction(profiled)
    assert profiled.__wrapped__ is a_work and profiled.__name__ == "a_work"
    assert inspect.signature(profiled) == inspect.signature(a_work)
    call = profiled(1)
    assert asyncio.iscoroutine(call) and inspect.isawaitable(call)
    assert "a_work" in repr(call) and call.__qualname__ == "a_work"
    assert asyncio.run(call) == 0
    with pytest.raises(RuntimeError, match="already awaited"):
        call.send(None)


def test_async_decorator_exceptions_cancel_and_close() -> None:
    session = fastprof.profile(report="never")

    @session
    async def fails() -> None:
        await asyncio.sleep(0)
        raise KeyError("boom")

    @session
    async def sleeps() -> None:
        await asyncio.sleep(60)

    @session
    async def pauses() -> None:
        await suspend()
        await suspend()

    with pytest.raises(KeyError, match="boom"):
        asyncio.run(fails())
    assert session._active == 0 and not session.profiler.enabled

    async def cancel() -> None:
        task = asyncio.ensure_future(sleeps())
        await asyncio.sleep(0)
        assert session.profiler.enabled  # its first step ran
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert session._active == 0 and not session.profiler.enabled

    # closed or dropped half way: counted off; never started: the session never turned on
    c = pauses()
    c.send(None)
    assert session.profiler.enabled
    c.close()
    assert session._active == 0 and not session.profiler.enabled
    c = pauses()
    c.send(None)
    del c
    assert session._active == 0 and not session.profiler.enabled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "never awaited", as for any coroutine
        c = pauses()
        c.close()
        del c
    assert session._active == 0
    # a throw before the first step raises there, running none of it; one at a suspension
    # raises at the await, and the coroutine's end turns the session off
    c = pauses()
    with pytest.raises(ValueError):
        c.throw(ValueError("early"))
    assert session._active == 0
    c = pauses()
    c.send(None)
    with pytest.raises(ValueError, match="late"):
        c.throw(ValueError("late"))
    assert session._active == 0 and not session.profiler.enabled
    # stepped by hand to its end: StopIteration, then the session is off
    c = pauses()
    assert c.send(None) is None and next(c) is None
    with pytest.raises(StopIteration):
        c.send(None)
    assert session._active == 0 and not session.profiler.enabled
    assert own_keys(session.stats().to_dict()) == []


def test_async_decorator_returns_values_that_look_like_stop_arguments() -> None:
    @fastprof.profile(report="never")
    async def gives(x: Any) -> Any:
        await asyncio.sleep(0)
        return x

    for value in [(1, 2), (), None, 0, StopIteration("x"), KeyError("k")]:
        assert asyncio.run(gives(value)) is value


def test_async_decorator_bad_call_raises_at_the_call() -> None:
    profiled = fastprof.profile(report="never")(a_work)
    with pytest.raises(TypeError):
        profiled(1, 2, 3)
    assert profiled.session._active == 0


def test_async_decorator_report_after_each_call(capsys: Any) -> None:
    profiled = fastprof.profile(report="call", top_n=50)(a_work)
    asyncio.run(profiled(2))
    out = capsys.readouterr().out
    assert "(a_work)" in out and "(a_leaf)" in out
    title, rows = out.split("\n", 1)  # the title names the decorated function
    assert title.startswith("@fastprof.profile: a_work (test_profile_async.py:")
    assert "wrapper" not in rows and "fastprof" not in rows and "profile.py" not in rows


def test_sync_decorator_and_session_block_show_no_profiler_frame() -> None:
    profiled = fastprof.profile(report="never")(s_work)
    profiled(4)
    with fastprof.profile(report="never") as prof:
        s_work(4)
    ref = counts(cprofile_of(s_work, 4))
    for stats in (profiled.session.stats().to_dict(), fastprof.Stats(prof).to_dict()):
        assert own_keys(stats) == []
        assert counts(stats) == ref


def _only_disable(stats: Dict[Any, Any], theirs: Dict[Any, Any]) -> None:
    """The profiler's own rows: one call of disable() (cProfile shows its own, named as long),
    and __exit__ where cProfile shows its __exit__ too; the user's counts are cProfile's."""
    mine = own_keys(stats)
    assert ("~", 0, "<method 'disable' of 'fastprof.Profile' objects>") in mine
    expected = {
        k[2] for k in theirs if k[0] == CPROFILE or "_lsprof.Profiler" in k[2] and k[0] == "~"
    }
    assert {k[2] for k in mine} == {
        "__exit__" if n == "__exit__" else n.replace("_lsprof.Profiler", "fastprof.Profile")
        for n in expected
    }
    assert all(stats[k][1] == 1 for k in mine)
    assert counts(stats) == counts(theirs)


def test_runcall_context_manager_run_and_runctx_show_cprofiles_own_rows(
    tmp_path: Any, monkeypatch: Any
) -> None:
    import __main__

    monkeypatch.setattr(__main__, "s_work", s_work, raising=False)  # run() runs in __main__
    results = {}
    for name, cls in (("fp", fastprof.Profile), ("cp", cProfile.Profile)):
        p = cls()
        p.runcall(s_work, 3)
        p.create_stats()
        q = cls()
        with q:
            s_work(3)
        q.create_stats()
        r = cls()
        r.runctx("s_work(3)", {"s_work": s_work}, {})
        r.create_stats()
        results[name] = (p.stats, q.stats, r.stats)
    for mine, theirs in zip(results["fp"], results["cp"]):
        _only_disable(mine, theirs)
    for fn, ref in ((fastprof.run, cProfile.run), (fastprof.runctx, cProfile.runctx)):
        out, ref_out = tmp_path / "fp.prof", tmp_path / "cp.prof"
        args: Tuple[Any, ...] = ("s_work(3)",)
        if fn is fastprof.runctx:
            args += ({"s_work": s_work}, {})
        fn(*args, str(out))  # type: ignore[operator]
        ref(*args, str(ref_out))  # type: ignore[operator]
        with open(out, "rb") as f, open(ref_out, "rb") as g:
            _only_disable(marshal.load(f), marshal.load(g))


def test_async_decorator_refuses_a_step_from_inside_its_own_step() -> None:
    """A coroutine that sends to or closes its own awaitable gets ValueError, as a coroutine
    does ("already executing"), and nothing is freed under it."""
    me: List[Any] = []

    @fastprof.profile(report="never")
    async def reentrant() -> str:
        await suspend()
        for step in (lambda: me[0].send(None), lambda: me[0].close()):
            with pytest.raises(ValueError, match="already executing"):
                step()
        return "done"

    me.append(reentrant())
    assert me[0].send(None) is None
    with pytest.raises(StopIteration) as stop:
        me[0].send(None)
    assert stop.value.value == "done"
    assert reentrant.session._active == 0 and not reentrant.profiler.enabled


async def in_task() -> str:
    """Suspends once; returns the names of the tasks its two steps ran in."""
    first = asyncio.current_task().get_name()  # type: ignore[union-attr]
    await asyncio.sleep(0)
    return first + "," + asyncio.current_task().get_name()  # type: ignore[union-attr]


def _outcome(x: Any) -> Any:
    return (type(x), str(x)) if isinstance(x, BaseException) else x


def _awaited_twice(make: Any) -> Dict[str, Any]:
    """What two tasks awaiting one call get, what awaiting it once finished gets, and what a
    task stepping the call directly and a coroutine awaiting it meanwhile get."""
    out: Dict[str, Any] = {}

    async def main() -> None:
        call = make()

        async def waiter() -> Any:
            return await call

        tasks = [asyncio.create_task(waiter(), name=n) for n in "AB"]
        out["tasks"] = [_outcome(x) for x in await asyncio.gather(*tasks, return_exceptions=True)]
        try:
            await call
        except RuntimeError as e:
            out["finished"] = _outcome(e)
        closed = make()
        closed.close()
        try:
            await closed
        except RuntimeError as e:
            out["closed"] = _outcome(e)
        task = asyncio.create_task(make(), name="T")
        await asyncio.sleep(0)  # its first step ran: suspended at the sleep
        try:
            await task.get_coro()  # type: ignore[misc]
        except RuntimeError as e:
            out["task"] = _outcome(e)
        out["task result"] = await task

    asyncio.run(main())
    return out


def test_async_decorator_second_await_raises_as_cpython_does() -> None:
    """A second await of one call while the first is pending raises CPython's RuntimeError
    in the second awaiter, the first await going on in its own task; a finished (or closed)
    call raises what a finished coroutine raises."""
    profiled = fastprof.profile(report="never")(in_task)
    mine, ref = _awaited_twice(profiled), _awaited_twice(in_task)
    assert mine == ref
    assert ref["tasks"] == ["A,A", (RuntimeError, "coroutine is being awaited already")]
    assert ref["finished"] == ref["closed"]
    assert ref["finished"] == (RuntimeError, "cannot reuse already awaited coroutine")
    assert ref["task"] == ref["tasks"][1] and ref["task result"] == "T,T"
    assert profiled.session._active == 0 and not profiled.profiler.enabled
    # two complete calls (two steps each) and one closed before it ran, as cProfile counts
    assert profiled.session.stats().row("in_task").ncalls == 4


def _coroutine_view(make: Any) -> Dict[str, Any]:
    """What asyncio and inspect see of a call: its states before, during and after a task
    runs it, the task's stack and repr while it is suspended and once it is done."""
    out: Dict[str, Any] = {}

    async def main() -> None:
        call = make()
        out["states"] = [inspect.getcoroutinestate(call)]
        task = asyncio.create_task(call)
        await asyncio.sleep(0)
        out["states"].append(inspect.getcoroutinestate(call))
        out["stack"] = [(f.f_code, f.f_lineno) for f in task.get_stack()]
        out["repr"] = repr(task).split(" coro=<")[1].split(">")[0]
        await task
        out["states"].append(inspect.getcoroutinestate(call))
        out["done"] = repr(task).split(" coro=<")[1].split(">")[0]
        out["code"] = call.cr_code
        out["names"] = (call.__name__, call.__qualname__)
        out["after"] = (call.cr_frame, call.cr_await, call.cr_running)

    asyncio.run(main())
    return out


def test_async_decorator_call_shows_the_coroutine_to_asyncio_and_inspect() -> None:
    """A task's get_stack() and repr, and inspect.getcoroutinestate(), see the decorated
    call as they see the undecorated coroutine."""
    profiled = fastprof.profile(report="never")(in_task)
    mine, ref = _coroutine_view(profiled), _coroutine_view(in_task)
    assert mine == ref
    assert ref["states"] == [inspect.CORO_CREATED, inspect.CORO_SUSPENDED, inspect.CORO_CLOSED]
    assert ref["stack"] == [(in_task.__code__, in_task.__code__.co_firstlineno + 3)]
    assert ref["repr"] == f"in_task() running at {HERE}:{in_task.__code__.co_firstlineno + 3}"
    assert ref["done"] == f"in_task() done, defined at {HERE}:{in_task.__code__.co_firstlineno}"
    assert ref["code"] is in_task.__code__ and ref["after"] == (None, None, False)
    assert profiled.session._active == 0 and not profiled.profiler.enabled


def test_async_decorator_call_coroutine_attributes() -> None:
    """cr_await, cr_running, cr_suspended (3.11+) and cr_origin are the coroutine's, the
    names are its own (a method's __name__ is not its __qualname__), and all are read-only."""

    class Holder:
        @fastprof.profile(report="never")
        async def method(self) -> None:
            await suspend()

    depth = sys.get_coroutine_origin_tracking_depth()
    sys.set_coroutine_origin_tracking_depth(1)
    try:
        call = Holder().method()
    finally:
        sys.set_coroutine_origin_tracking_depth(depth)
    assert call.__name__ == "method"
    assert call.__qualname__.endswith("Holder.method")
    assert call.cr_origin[0][2] == "test_async_decorator_call_coroutine_attributes"
    assert call.cr_await is None and call.cr_running is False
    assert call.send(None) is None
    assert call.cr_await is not None and call.cr_frame.f_code is call.cr_code
    if sys.version_info >= (3, 11):
        assert call.cr_suspended is True
    for name in ("cr_frame", "cr_await", "cr_code", "cr_origin", "cr_running", "__name__"):
        with pytest.raises(AttributeError):
            setattr(call, name, None)
    with pytest.raises(StopIteration):
        call.send(None)
    assert call.cr_frame is None and call.cr_await is None and call.cr_origin is not None
    assert Holder.method.session._active == 0
