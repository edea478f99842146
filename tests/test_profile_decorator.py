"""@fastprof.profile (bare and with arguments) and ``with fastprof.profile(...)``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any, AsyncIterator, Iterator

import pytest

import fastprof
from fastprof.profile import ProfileSession

HERE = __file__


def helper(n: int) -> int:
    return sum(range(n))


def test_bare_decorator_accumulates_across_calls() -> None:
    @fastprof.profile
    def work(n: int) -> int:
        return helper(n) + helper(n)

    session = work.session
    session.when = "never"  # keep the test quiet at exit
    assert work(10) == 90
    assert work(4) == 12
    assert work.__name__ == "work"
    st = work.session.stats()
    assert st.row("work").ncalls == 2
    assert st.row("helper").ncalls == 4
    assert st.row("helper").callers[0].name == "work"
    assert not work.profiler.enabled


def test_decorator_with_arguments_prints_on_every_call(capsys: Any) -> None:
    @fastprof.profile(report="call", top_n=1, sort_by="calls", builtins=False)
    def work() -> int:
        return helper(3) + helper(5)

    work()
    out = capsys.readouterr().out
    assert "1 of 2" in out and "sorted by calls" in out
    assert "(helper)" in out
    assert "builtins" not in out
    work()
    out = capsys.readouterr().out
    assert "(helper)" in out
    assert work.session.stats().row("helper").ncalls == 4


def test_decorator_output_file(tmp_path: Any, capsys: Any) -> None:
    path = tmp_path / "deco.prof"

    @fastprof.profile(output=path, report="never")
    def work() -> int:
        return helper(2)

    work()
    assert not path.exists()
    work.session.report()
    assert path.exists()
    assert fastprof.Stats(str(path)).row("helper").ncalls == 1
    assert "(helper)" in capsys.readouterr().out


def test_recursive_decorated_function_counted_once_per_call() -> None:
    @fastprof.profile(report="never")
    def countdown(n: int) -> int:
        return 0 if n == 0 else 1 + countdown(n - 1)

    assert countdown(5) == 5
    row = countdown.session.stats().row("countdown")
    assert (row.ncalls, row.primcalls) == (6, 1)
    assert not countdown.profiler.enabled


def test_decorator_keeps_exceptions_and_disables() -> None:
    @fastprof.profile(report="never")
    def boom() -> None:
        helper(1)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        boom()
    assert not boom.profiler.enabled
    assert boom.session.stats().row("helper").ncalls == 1


def test_decorator_from_threads() -> None:
    @fastprof.profile(report="never")
    def work() -> int:
        return helper(100)

    # one thread after the other: each call enables the profiler in its own thread
    for _ in range(3):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert work.session.stats().row("work").ncalls == 3
    # at the same time: nothing breaks and the profiler ends disabled
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not work.profiler.enabled
    assert work.session.stats().row("work").ncalls >= 4


def test_context_manager_prints_at_block_end(capsys: Any) -> None:
    with fastprof.profile(top_n=5) as p:
        helper(10)
        helper(20)
    assert isinstance(p, fastprof.Profile)
    assert not p.enabled
    out = capsys.readouterr().out
    assert "(helper)" in out
    p.create_stats()
    assert any(k[2] == "helper" and v[1] == 2 for k, v in p.stats.items())


def test_context_manager_quiet_and_reusable(capsys: Any) -> None:
    session = fastprof.profile(report="never")
    with session:
        helper(1)
    with session as p:
        helper(1)
    assert capsys.readouterr().out == ""
    assert session.stats().row("helper").ncalls == 2
    assert p is session.profiler


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="top_n"):
        fastprof.profile(top_n=0)
    with pytest.raises(ValueError, match="report"):
        fastprof.profile(report="sometimes")
    with pytest.raises(TypeError, match="sort_by"):
        fastprof.profile(sort_by=3)
    with pytest.raises(TypeError, match="callable"):
        fastprof.profile(42)
    with pytest.raises(TypeError):
        fastprof.profile(colour="red")
    with pytest.raises(TypeError, match="callable"):
        ProfileSession()(42)


def test_report_at_program_exit(tmp_path: Any) -> None:
    script = tmp_path / "deco.py"
    script.write_text(
        textwrap.dedent("""
        import fastprof

        def helper(n):
            return sum(range(n)) + abs(n)

        @fastprof.profile(sort_by="calls", top_n=3)
        def work():
            return helper(10) + helper(10)

        for _ in range(3):
            work()
        print("program done")
    """)
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    done = r.stdout.index("program done")
    table = r.stdout[done:]
    # helper, sum and abs (6 calls each) before work (3): top_n=3 cuts work
    assert "(helper)" in table and "(work)" not in table
    assert "3 of 4" in table


def test_an_output_that_cannot_be_written_keeps_the_table(tmp_path: Any, capsys: Any) -> None:
    """A missing directory in output= (found only when the report is written, as with
    cProfile's -o): the table is printed all the same, then an OSError naming output= is
    raised; at program exit it is one line on stderr, not a traceback."""
    missing = tmp_path / "no-such-dir" / "p.prof"

    @fastprof.profile(output=missing, report="call")
    def work() -> int:
        return sum(range(5))

    with pytest.raises(FileNotFoundError, match="output=.*no-such-dir.*could not be written"):
        work()
    assert "builtins.sum" in capsys.readouterr().out
    script = tmp_path / "deco.py"
    script.write_text(
        "import fastprof\n"
        f"@fastprof.profile(output={str(missing)!r})\n"
        "def work():\n    return sum(range(5))\n"
        "work()\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "builtins.sum" in r.stdout
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("fastprof: [Errno 2] output=")


def test_lines_true_uses_the_line_profiler(fake_lines: list, tmp_path: Any, capsys: Any) -> None:
    out = tmp_path / "l.lprof"

    @fastprof.profile(lines=True, report="call", output=out)
    def work() -> int:
        return helper(3)

    assert work() == 3
    (lp,) = fake_lines
    assert lp.funcs == [work.__wrapped__]
    assert lp.events == ["enable", "disable"]
    assert "LINE STATS work" in capsys.readouterr().out
    assert out.read_text() == "work"
    with pytest.raises(TypeError, match="lines=True"):
        work.session.stats()


def test_async_function_profiled_to_its_end() -> None:
    import asyncio

    async def step(n: int) -> int:
        await asyncio.sleep(0)
        return helper(n)

    @fastprof.profile(report="never")
    async def pipeline() -> int:
        return await step(3) + await step(4)

    assert asyncio.iscoroutinefunction(pipeline)
    assert asyncio.run(pipeline()) == 9
    st = pipeline.session.stats()
    assert st.row("helper").ncalls == 2
    assert st.row("step").ncalls >= 2
    assert not pipeline.profiler.enabled


def test_enable_failure_leaves_session_usable(monkeypatch: Any) -> None:
    @fastprof.profile(report="never")
    def work() -> int:
        return helper(2)

    real_enable = type(work.profiler).enable
    monkeypatch.setattr(
        type(work.profiler),
        "enable",
        lambda self, *a, **k: (_ for _ in ()).throw(RuntimeError("hook held")),
    )
    with pytest.raises(RuntimeError, match="hook held"):
        work()
    monkeypatch.setattr(type(work.profiler), "enable", real_enable)
    assert work() == 1
    assert work.session.stats().row("work").ncalls == 1
    assert not work.profiler.enabled


def test_last_call_to_return_disables_even_from_another_thread() -> None:
    """The main thread's call enables; a thread's call that outlives it disables."""
    inside, release = threading.Event(), threading.Event()

    @fastprof.profile(report="never")
    def work(spawn: bool) -> Any:
        if spawn:
            t = threading.Thread(target=work, args=(False,))
            t.start()
            assert inside.wait(30)
            return t
        inside.set()
        assert release.wait(30)
        return 1

    t = work(True)
    assert work.profiler.enabled  # the thread's call is still running
    release.set()
    t.join()
    assert not work.profiler.enabled
    assert sys.getprofile() is None  # no hook left in this thread
    helper(1)
    st = work.session.stats()
    assert st.row("work").ncalls == 2
    assert all(r.name != "helper" for r in st.rows)  # nothing recorded after the disable


def _leaf(n: int) -> int:
    return sum(range(n))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ sessions nest (test_monitoring)")
def test_nested_session_below_312_warns_and_records_nothing() -> None:
    # one profile hook per thread below 3.12: the inner session stays off, with a warning,
    # instead of raising inside the user's call
    inner = fastprof.profile(report="never")(_leaf)

    @fastprof.profile(report="never")
    def outer() -> int:
        return inner(10) + inner(5)

    with pytest.warns(RuntimeWarning, match="sessions nest on Python 3.12"):
        assert outer() == 55
    assert fastprof.Stats(outer.profiler).row("_leaf").ncalls == 2
    assert not inner.profiler.enabled and not fastprof.Stats(inner.profiler).rows
    assert sys.getprofile() is None
    assert inner(3) == 3  # alone, it profiles
    assert fastprof.Stats(inner.profiler).row("_leaf").ncalls == 1
    with pytest.warns(RuntimeWarning, match="sessions nest"):
        with fastprof.profile(report="never") as p_out:
            with fastprof.profile(report="never") as p_in:
                _leaf(2)
    assert fastprof.Stats(p_out).row("_leaf").ncalls == 1 and not fastprof.Stats(p_in).rows
    assert sys.getprofile() is None


def test_a_session_under_cprofile_never_breaks_the_users_call() -> None:
    """IPython's %prun (cProfile) around a decorated function: the call returns its value, and
    cProfile's table still has it.  3.12+ both record it; below, one profile hook per thread
    is cProfile's, so the session warns and records nothing, as under an outer fastprof
    profiler."""
    import cProfile

    deco = fastprof.profile(report="never")(_leaf)
    outer = cProfile.Profile()
    if sys.version_info >= (3, 12):
        assert outer.runcall(deco, 10) == 45
        assert fastprof.Stats(deco.profiler).row("_leaf").ncalls == 1
    else:
        with pytest.warns(RuntimeWarning, match="held by <cProfile.Profile object"):
            assert outer.runcall(deco, 10) == 45
        assert not deco.profiler.enabled and not fastprof.Stats(deco.profiler).rows
    outer.create_stats()
    assert [v[1] for k, v in outer.stats.items() if k[2] == "_leaf"] == [1]
    assert sys.getprofile() is None
    if sys.version_info < (3, 12):
        outer.enable()  # a plain Profile (not a session) still refuses, as cProfile's does
        try:
            with pytest.raises(ValueError, match="Another profiling tool is already active"):
                fastprof.Profile().enable()
        finally:
            outer.disable()
    assert sys.getprofile() is None


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sessions nest on 3.12+")
def test_nested_session_shows_none_of_its_own_frames_in_the_outer_table() -> None:
    inner = fastprof.profile(report="never")(_leaf)

    @fastprof.profile(report="never")
    def outer() -> int:
        return inner(3) + inner(4)

    assert outer() == 9
    names = {r.name: r.ncalls for r in fastprof.Stats(outer.profiler).rows}
    assert names == {"outer": 1, "_leaf": 2, "<built-in method builtins.sum>": 2}
    assert {r.name for r in fastprof.Stats(inner.profiler).rows} == {
        "_leaf",
        "<built-in method builtins.sum>",
    }


def test_a_decorated_class_stays_the_class_and_its_methods_are_profiled() -> None:
    """As line_profiler's @profile on a class: the functions of its own body are wrapped in
    place (isinstance and subclassing keep working), inherited ones are left alone."""

    class Base:
        def inherited(self) -> int:
            return 0

    @fastprof.profile(report="never")
    class K(Base):
        def __init__(self, n: int) -> None:
            self.n = n

        def m(self) -> int:
            return _leaf(self.n)

        @staticmethod
        def s() -> int:
            return _leaf(2)

        @classmethod
        def c(cls) -> int:
            return _leaf(3)

        @property
        def p(self) -> int:
            return _leaf(4)

        helper = staticmethod(_leaf)  # not of its own body: left as it is

    k = K(5)
    assert isinstance(k, K) and isinstance(k, Base)

    class Sub(K):
        pass

    assert Sub(1).m() == 0
    assert (k.m(), K.s(), K.c(), k.p, k.inherited(), K.helper(3)) == (10, 1, 3, 6, 0, 3)
    assert K.helper is _leaf and Base.inherited is vars(Base)["inherited"]
    rows = {r.name: r.ncalls for r in fastprof.Stats(K.m.profiler).rows}
    assert rows["__init__"] == 2 and rows["m"] == 2 and rows["s"] == 1 and rows["c"] == 1
    assert rows["p"] == 1 and rows["_leaf"] == 5  # K.helper(3) ran outside the profile
    assert "inherited" not in rows


@pytest.mark.skipif(sys.version_info < (3, 10), reason="inspect reads real functions only on 3.9")
def test_a_decorated_generator_function_is_still_one() -> None:
    import inspect

    def gen(n: int) -> Iterator[int]:
        yield from range(n)

    async def agen() -> AsyncIterator[int]:
        yield 1

    g = fastprof.profile(report="never")(gen)
    assert inspect.isgeneratorfunction(g) and list(g(3)) == [0, 1, 2]
    assert inspect.isasyncgenfunction(fastprof.profile(report="never")(agen))
    assert not inspect.isgeneratorfunction(fastprof.profile(report="never")(_leaf))


def test_options_checked_at_decoration_paths_of_every_kind_and_titled_reports(
    tmp_path: Any,
) -> None:
    """output may be str, bytes or os.PathLike (bytes made a file named "b'...'"); a stream
    without write() or a non-path output raises when decorating, not at exit; each report
    names the functions it profiled; pstats' legacy int sort keys are taken."""
    import io

    with pytest.raises(TypeError, match="stream must have a write"):
        fastprof.profile(stream=42)
    with pytest.raises(TypeError, match="output must be a path"):
        fastprof.profile(output=3)
    with pytest.raises(ValueError, match="lines=True"):
        fastprof.profile(lines=True, clock="cpu")
    out = io.StringIO()
    target = os.fsencode(str(tmp_path / "b.prof"))

    @fastprof.profile(output=target, stream=out, report="call", sort_by=-1, top_n=3)
    def parse(n: int) -> int:
        return sum(range(n))

    parse(5)
    assert (tmp_path / "b.prof").exists() and not list(tmp_path.glob("b'*"))
    text = out.getvalue()
    assert text.startswith("@fastprof.profile: test_options_checked_at_decoration_")
    assert "<locals>.parse (test_profile_decorator.py:" in text.splitlines()[0]
    assert "sorted by stdname" in text


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sessions nest on 3.12+: no warning")
def test_the_nesting_warning_below_3_12_is_not_in_the_outer_profile() -> None:
    """Below 3.12 an inner session warns that it records nothing; the warnings module's
    Python code that prints it was recorded by the outer session, which holds the hook."""

    def leaf() -> int:
        return 1

    @fastprof.profile(report="never")
    def inner() -> int:
        return leaf()

    @fastprof.profile(report="never")
    def outer() -> int:
        inner()
        return leaf()

    with pytest.warns(RuntimeWarning, match="nest on Python 3.12"):
        outer()
    files = {os.path.basename(r.file) for r in outer.session.stats().rows}
    assert files == {"test_profile_decorator.py"}
