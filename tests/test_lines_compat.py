"""line_profiler's decorator semantics and public surface on fastprof's LineProfiler: a
wrapper of the same kind as what was decorated, exact hit counts through every kind, the
registration methods' return values, enable_count, C callables as no-ops."""

import asyncio
import functools
import inspect
import io
import types
import warnings

import pytest

import fastprof
from fastprof import LineProfiler
from fastprof.lines import code_key


def hits(lp, func):
    """{offset from func's def line: hits} of func's lines."""
    code = inspect.unwrap(func).__code__
    key = code_key(code)
    source, first = inspect.getsourcelines(code)
    def_line = first + next(
        i for i, text in enumerate(source) if text.lstrip().startswith(("def ", "async def "))
    )
    return {ln - def_line: h for ln, h, _ in lp.get_stats().timings.get(key, [])}


def gen(n):
    for i in range(n):
        yield i


async def coro(x):
    await asyncio.sleep(0)
    return x * 2


async def agen(n):
    for i in range(n):
        received = yield i
        if received is not None:
            yield received


def test_generator_function_stays_one():
    lp = LineProfiler()
    w = lp(gen)
    assert inspect.isgeneratorfunction(w) and w.__wrapped__ is gen
    assert list(w(3)) == [0, 1, 2]
    assert lp.enable_count == 0
    assert hits(lp, gen) == {1: 4, 2: 3}


def test_coroutine_function_stays_one():
    lp = LineProfiler()
    w = lp(coro)
    assert inspect.iscoroutinefunction(w)
    assert asyncio.run(w(4)) == 8
    assert hits(lp, coro) == {1: 1, 2: 1}


def test_async_generator_function_stays_one():
    lp = LineProfiler()
    w = lp(agen)
    assert inspect.isasyncgenfunction(w)

    async def consume():
        out = [i async for i in w(3)]
        g = w(5)
        out.append(await g.asend(None))
        out.append(await g.asend("sent"))  # asend reaches the inner generator
        with pytest.raises(KeyError):
            await g.athrow(KeyError("thrown"))  # athrow too
        return out

    assert asyncio.run(consume()) == [0, 1, 2, 0, "sent"]
    assert lp.enable_count == 0
    assert hits(lp, agen)[1] == 3 + 1 + 1  # the loop line: 3 rounds + end, then one round


def test_decorating_twice_returns_the_same_wrapper():
    lp = LineProfiler()
    w = lp(gen)
    assert lp(w) is w
    assert lp.functions == [gen]


def test_descriptors_and_partials_keep_their_kind():
    lp = LineProfiler()

    class C:
        def __init__(self):
            self.v = 3

        @lp
        @classmethod
        def cm(cls):
            return cls.__name__

        @lp
        @staticmethod
        def sm(x):
            return x + 1

        @lp
        @property
        def prop(self):
            return self.v

        @lp
        @functools.cached_property
        def cached(self):
            return self.v * 2

        def meth(self, x):
            return self.v * x

        pm = lp(functools.partialmethod(meth, 10))

    for name, kind in [
        ("cm", classmethod),
        ("sm", staticmethod),
        ("prop", property),
        ("cached", functools.cached_property),
        ("pm", functools.partialmethod),
    ]:
        assert isinstance(inspect.getattr_static(C, name), kind), name
    obj = C()
    bound = lp(obj.meth)
    part = lp(functools.partial(vars(C)["sm"].__func__, 1))
    assert isinstance(bound, types.MethodType) and bound.__self__ is obj
    assert isinstance(part, functools.partial)
    assert C.cm() == "C" and obj.sm(1) == 2 and obj.prop == 3
    assert obj.cached == 6 and obj.cached == 6  # computed once
    assert obj.pm() == 30 and bound(2) == 6 and part() == 2
    assert lp.enable_count == 0
    func = vars(C)
    assert hits(lp, func["cm"].__func__) == {1: 1}
    assert hits(lp, func["sm"].__func__) == {1: 2}  # obj.sm(1) and part()
    assert hits(lp, func["prop"].fget) == {1: 1}
    assert hits(lp, func["cached"].func) == {1: 1}
    assert hits(lp, C.meth) == {1: 2}  # obj.pm() and bound(2)


def unrelated(x):
    return str(x)


def test_class_decorator_profiles_its_own_methods_only():
    lp = LineProfiler()

    @lp
    class K:
        def __init__(self, x):
            self.x = self.convert(x)

        @property
        def ident(self):
            return id(self)

        convert = staticmethod(unrelated)  # defined elsewhere: left alone

    assert {f.__name__ for f in lp.functions} == {"__init__", "ident"}
    assert vars(K)["convert"].__func__ is unrelated
    k = K(1)
    assert k.x == "1" and k.ident == id(k)
    assert lp.enable_count == 0
    assert sorted(sum(lp.get_stats().timings.values(), []))[0][1] == 1
    assert sum(len(v) for v in lp.get_stats().timings.values()) == 2


def test_bound_method_and_partial_count_every_call():
    lp = LineProfiler()

    def add(x, y):
        return x + y

    p = functools.partial(add, 2)
    w1, w2 = lp(p), lp(p)
    assert w1(1) == w2(1) == 3
    assert lp.functions == [add, add]  # as line_profiler: added once per decoration
    assert hits(lp, add) == {1: 2}


@pytest.mark.parametrize(
    "func", [len, "s".split, str.split, (1).__str__, int.__repr__, vars(int)["from_bytes"]]
)
def test_c_callables_are_no_ops_with_a_warning(func):
    lp = LineProfiler()
    with pytest.warns(UserWarning, match="implemented in C"):
        assert lp(func) is func
    with pytest.warns(UserWarning, match="implemented in C"):
        assert lp.add_callable(func) == 0
    assert lp.functions == []


def test_add_callable_and_add_class_return_counts():
    lp = LineProfiler()

    class Outer:
        def a(self):
            return 1

        @classmethod
        def b(cls):
            return 2

        class Inner:
            def c(self):
                return 3

        d = staticmethod(unrelated)  # not Outer's own, but of its module: add_class takes
        # it, as line_profiler does (the class decorator does not)

    assert lp.add_callable(Outer.a) == 1
    assert lp.add_callable(Outer.a) == 1  # not a wrapper: added again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lp.add_class(Outer) == 4  # a, b, Inner, d
    with pytest.raises(TypeError, match="cls must be a class"):
        lp.add_class(3)
    with pytest.raises(ValueError, match="scoping_policy"):
        lp.add_class(Outer, scoping_policy="children")
    with pytest.raises(TypeError, match="func must be"):
        lp.add_callable(3)


def test_enable_count():
    lp = LineProfiler()
    assert lp.enable_count == 0
    lp.enable_by_count()
    lp.enable_by_count()
    assert lp.enable_count == 2 and lp.enabled
    lp.disable_by_count()
    assert lp.enable_count == 1 and lp.enabled
    lp.disable_by_count()
    lp.disable_by_count()  # unmatched: stays at 0
    assert lp.enable_count == 0 and not lp.enabled
    with pytest.raises(RuntimeError):
        with lp:
            assert lp.enable_count == 1
            raise RuntimeError
    assert lp.enable_count == 0 and not lp.enabled


# --- point 2: results and the explicit profile object ---------------------------------------


def test_print_stats_options():
    import test_lines_targets as T
    from test_lines import fake_profiler

    lp = fake_profiler()
    lp(T.timed)(2)  # 3 + 2 * 5 ticks, and defined before fib
    lp(T.fib)(4)  # no ticks
    totals = {key[2]: sum(r[2] for r in rows) for key, rows in lp.get_stats().timings.items()}
    assert totals == {"timed": 13, "fib": 0}

    def text(**kw):
        out = io.StringIO()
        lp.print_stats(out, **kw)
        return out.getvalue()

    full = text()
    assert full.count("Function: ") == 2
    assert full.index("Function: timed") < full.index("Function: fib")  # file order
    assert text(details=False).count("Function: ") == 0
    summary = [ln for ln in text(details=False, summarize=True).splitlines() if " seconds - " in ln]
    assert [ln.rsplit(" - ", 1)[1] for ln in summary] == ["timed", "fib"]  # as the blocks
    by_time = text(details=False, summarize=True, sort=True).splitlines()
    assert [ln.rsplit(" - ", 1)[1] for ln in by_time if " seconds - " in ln] == ["fib", "timed"]
    assert [
        ln.rsplit(" - ", 1)[1]
        for ln in text(details=False, summarize=True, stripzeros=True).splitlines()
        if " seconds - " in ln
    ] == ["timed"]
    ordered = text(sort=True)
    assert ordered.index("Function: fib") < ordered.index("Function: timed")  # by time
    assert text(rich=True, config=None) == full


def test_line_stats_add_and_files(tmp_path):
    from fastprof.lines import LineStats, load_stats

    a = LineStats(
        {
            ("spam.py", 1, "foo"): [(2, 10, 300)],
            ("spam.py", 10, "bar"): [(11, 2, 1000), (12, 1, 500)],
        },
        1e-6,
    )
    b = LineStats(
        {
            ("spam.py", 10, "bar"): [(11, 10, 20000), (12, 5, 1000)],
            ("eggs.py", 5, "baz"): [(5, 2, 5000)],
        },
        1e-7,
    )
    total = LineStats(
        {
            ("spam.py", 1, "foo"): [(2, 10, 300)],
            ("spam.py", 10, "bar"): [(11, 12, 3000), (12, 6, 600)],
            ("eggs.py", 5, "baz"): [(5, 2, 500)],
        },
        1e-6,
    )
    assert a + b == b + a == total
    a.to_file(tmp_path / "a.lprof")
    b.to_file(tmp_path / "b.lprof")
    assert LineStats.from_files(tmp_path / "a.lprof", tmp_path / "b.lprof") == total
    assert load_stats(tmp_path / "a.lprof", tmp_path / "b.lprof") == total
    assert load_stats(tmp_path / "b.lprof") == b
    c = LineStats(dict(a.timings), a.unit)
    c += b
    assert c == total
    with pytest.raises(TypeError, match=r"stats\[1\] must be a LineStats"):
        LineStats.from_stats_objects(a, {})


def test_add_module_counts_members():
    import test_lines_targets as T

    lp = LineProfiler()
    n = lp.add_module(T)
    own = [
        v for v in vars(T).values() if getattr(v, "__module__", None) == T.__name__ and callable(v)
    ]
    assert n == len(own)  # one per member of the module's own (a class counts once)
    assert lp.add_module(T) == n  # nothing is a wrapper: added again, same count


SCRIPT = """
from fastprof.lines import profile

@profile
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

print("decorated:", work.__name__, hasattr(work, "__wrapped__"))
work(5)
"""


@pytest.mark.parametrize("how", ["off", "FASTPROF_LINE_PROFILE", "LINE_PROFILE", "argv"])
def test_explicit_profile_switches_on_from_the_environment(tmp_path, how):
    import os
    import subprocess
    import sys

    (tmp_path / "script.py").write_text(SCRIPT)
    env = {
        k: v for k, v in os.environ.items() if k not in ("LINE_PROFILE", "FASTPROF_LINE_PROFILE")
    }
    # the fastprof these tests import (an installed one, or the checkout's in-place build)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    if how in ("FASTPROF_LINE_PROFILE", "LINE_PROFILE"):
        env[how] = "1"
    args = [sys.executable, "script.py"] + (["--line-profile"] if how == "argv" else [])
    proc = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    on = how != "off"
    assert f"decorated: work {on}" in proc.stdout
    assert (tmp_path / "profile_output.lprof").exists() == on
    assert (tmp_path / "profile_output.txt").exists() == on
    if on:
        from fastprof.lines import load_stats

        (rows,) = load_stats(tmp_path / "profile_output.lprof").timings.values()
        assert [r[1] for r in rows] == [1, 6, 5, 1]
        assert " seconds - " in proc.stdout and "work" in proc.stdout
        assert "Function: work" in (tmp_path / "profile_output.txt").read_text()


def test_explicit_profile_off_is_a_no_op():
    from fastprof._lines_explicit import ExplicitProfiler
    from fastprof.lines import profile

    p = ExplicitProfiler(LineProfiler)
    p.disable()
    assert p(gen) is gen
    assert profile.__class__ is ExplicitProfiler
    with pytest.raises(TypeError, match="output_prefix must be a str"):
        p.enable(output_prefix=3)
