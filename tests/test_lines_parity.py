"""Where fastprof's line profiler follows line_profiler 5.1 to the letter: qualified names as
keys (3.11+), kernprof's builtin ``profile`` (context manager, when it records), wrappers of C
functions, code nested in comprehensions, the table's column formatting, the summary line,
and adding LineStats of either kind.  Timings come from an injected fake clock; line_profiler
itself is used only where it is installed (the test extra)."""

from __future__ import annotations

import functools
import io
import math
import subprocess
import sys
import textwrap
import types
import warnings

import pytest

import test_lines_targets as T
from fastprof import LineProfiler
from fastprof.lines import LineStats, code_key, kernprof_builtin, load_stats
from profile_helpers import env_with_package

QUALNAMES = sys.version_info >= (3, 11)


def fake_profiler(*funcs):
    T.CLOCK[0] = 0
    return LineProfiler(*funcs, _timer=T.fake_timer, _timer_unit=1.0)


def rows(stats, func_or_code):
    """{lineno: hits} of one function's timings."""
    code = getattr(func_or_code, "__code__", func_or_code)
    return {ln: h for ln, h, _ in stats.timings.get(code_key(code), [])}


def first_line(func, text):
    """Line number of the first line of func's source containing text."""
    import inspect

    source, start = inspect.getsourcelines(func.__code__)  # not unwrapped
    return start + next(i for i, line in enumerate(source) if text in line)


# --- 1. qualified names --------------------------------------------------------------------


class K:
    def meth(self):
        def inner():
            return 1

        return inner()


def test_keys_are_qualified_names_on_311_and_bare_below():
    lp = fake_profiler(K.meth)
    lp.runcall(K().meth)
    names = sorted(key[2] for key in lp.get_stats().timings)
    if QUALNAMES:
        assert names == ["K.meth", "K.meth.<locals>.inner"]
    else:
        assert names == ["inner", "meth"]
    out = io.StringIO()
    lp.print_stats(out)
    first = K.meth.__code__.co_firstlineno
    assert f"Function: {'K.meth' if QUALNAMES else 'meth'} at line {first}\n" in out.getvalue()
    assert code_key(K.meth.__code__) == (
        K.meth.__code__.co_filename,
        first,
        "K.meth" if QUALNAMES else "meth",
    )


def test_saved_files_line_up_with_line_profilers_keys(tmp_path):
    lp = fake_profiler(K.meth)
    lp.runcall(K().meth)
    lp.dump_stats(tmp_path / "fp.lprof")
    code = K.meth.__code__
    name = "K.meth" if QUALNAMES else "meth"
    body = first_line(K.meth, "return inner()")
    # what line_profiler 5.1 writes for the same function (its key: co_qualname on 3.11+)
    theirs = LineStats({(code.co_filename, code.co_firstlineno, name): [(body, 2, 7)]}, 1.0)
    theirs.to_file(tmp_path / "lp.lprof")
    merged = load_stats(tmp_path / "lp.lprof", tmp_path / "fp.lprof")
    assert [k for k in merged.timings if k[1] == code.co_firstlineno] == [
        (code.co_filename, code.co_firstlineno, name)
    ]
    assert rows(merged, code)[body] == 3


def test_keys_match_line_profiler_itself():
    line_profiler = pytest.importorskip("line_profiler")
    theirs = line_profiler.LineProfiler(K.meth)
    theirs.runcall(K().meth)
    ours = fake_profiler(K.meth)
    ours.runcall(K().meth)
    assert set(theirs.get_stats().timings) <= set(ours.get_stats().timings)


# --- 2 and 3. kernprof's builtin profile -----------------------------------------------------


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


FOR = first_line(work, "for i in range")


def test_builtin_is_a_context_manager():
    lp = fake_profiler()
    prof = kernprof_builtin(lp)
    prof.add_function(work)
    with prof as entered:
        assert entered is prof and prof.enable_count == 1
        work(3)
    assert prof.enable_count == 0
    assert rows(lp.get_stats(), work)[FOR] == 4


def test_builtin_records_only_while_it_is_enabled_as_kernprof_does():
    """kernprof -l: the run itself is not profiled; a function registered with
    profile.add_function is timed only between enable and disable (by count or not), in
    ``with profile:``, runcall, or while a function @profile wrapped runs."""
    lp = fake_profiler()
    prof = kernprof_builtin(lp)

    def script():
        prof.add_function(work)
        work(1000)  # warm-up: not recorded
        prof.enable_by_count()
        work(3)
        prof.disable_by_count()
        work(50)  # not recorded
        prof.enable()
        work(2)
        prof.disable()
        prof.runcall(work, 1)

    with lp:  # what `fastprof run --lines` does around the script
        script()
    assert rows(lp.get_stats(), work)[FOR] == 4 + 3 + 2


def test_builtin_decorator_wraps_and_functions_of_lines_of_count_all_calls():
    lp = fake_profiler()

    def helper(k):  # as --lines-of registers it: in the run's profiler, timed all run
        return k * 2

    lp.add_function(helper)
    prof = kernprof_builtin(lp)

    @prof
    def decorated(n):
        return helper(n)

    both = prof(helper)  # registered both ways: the run's profiler times it, once
    with lp:
        helper(1)
        decorated(2)
        both(3)
        prof.add_function(work)
        work(5)  # registered through the builtin, the builtin is off: not recorded
    st = lp.get_stats()
    assert sum(rows(st, helper).values()) == 3
    assert sum(rows(st, decorated.__wrapped__).values()) == 1
    assert not rows(st, work)
    lp.reset()  # zeroes what the builtin recorded too
    assert all(h == 0 for r in lp.get_stats().timings.values() for _, h, _ in r)


KERNPROF_SCRIPT = textwrap.dedent("""\
    def work(n):
        s = 0
        for i in range(n):
            s += i
        return s

    profile.add_function(work)
    work(1000)                  # warm-up: not profiled under kernprof -l
    profile.enable_by_count()
    work(3)
    profile.disable_by_count()
    with profile:
        work(2)
    """)


def run_lines(tmp_path, script, *extra):
    """``python -m fastprof run [extra] --lines -o out.lprof script.py`` in tmp_path, with
    script as script.py's text; returns the finished process (checked to exit 0)."""
    path = tmp_path / "script.py"
    path.write_text(script)
    out = subprocess.run(
        [sys.executable, "-m", "fastprof", "run", *extra, "--lines", "-o", "out.lprof", str(path)],
        cwd=tmp_path,
        env=env_with_package(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out


def test_command_line_run_lines_records_what_kernprof_records(tmp_path):
    run_lines(tmp_path, KERNPROF_SCRIPT)
    (timings,) = load_stats(tmp_path / "out.lprof").timings.values()
    assert {ln: h for ln, h, _ in timings}[3] == 4 + 3  # the `for` line


# a script that takes the trace hook away between calls of its @profile function, then runs
# plain code: kernprof -l counts every call, and installs no hook outside them
HOOK_TAKING_SCRIPT = textwrap.dedent("""\
    import sys
    @profile
    def f(n):
        s = 0
        for i in range(n):
            s += i
        return s
    f(3)
    trace = sys.gettrace()
    tools = [sys.monitoring.get_tool(i) for i in range(6)] if sys.version_info >= (3, 12) else []
    sys.settrace(None)
    f(4)
    sys.settrace(lambda *a: None)  # a tracer of the script's own
    f(5)
    sys.settrace(None)
    print("trace:", trace, "tools:", tools)
    """)


@pytest.mark.parametrize("job", [False, True])
def test_command_line_run_lines_hooks_only_while_profile_code_runs(tmp_path, job):
    out = run_lines(tmp_path, HOOK_TAKING_SCRIPT, *(["--subprocesses"] if job else []))
    assert "RuntimeWarning" not in out.stderr
    assert "trace: None" in out.stdout  # no hook outside the calls
    if not job:  # (a job's processes run the call profiler too, on a tool id of its own)
        assert "fastprof" not in out.stdout
    (timings,) = load_stats(tmp_path / "out.lprof").timings.values()
    hits = {ln: h for ln, h, _ in timings}
    assert hits[4] == 3  # `s = 0`: every call counted
    assert hits[5] == 4 + 5 + 6  # the `for` line


# --- 4. Python wrappers of C functions ---------------------------------------------------------


@functools.wraps(math.sqrt)
def safe_sqrt(x):
    if x < 0:
        return float("nan")
    return math.sqrt(x)


@functools.wraps(safe_sqrt)  # Python -> Python -> C: the innermost Python function is timed
def outer_sqrt(x):
    return safe_sqrt(x)


def test_python_wrapper_of_a_c_function_times_its_own_lines():
    lp = fake_profiler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp.add_function(safe_sqrt)
    lp.runcall(safe_sqrt, -1.0)
    assert lp.functions == [safe_sqrt]
    assert rows(lp.get_stats(), safe_sqrt) == {
        first_line(safe_sqrt, "if x < 0"): 1,
        first_line(safe_sqrt, 'return float("nan")'): 1,
    }
    lp2 = fake_profiler()
    wrapped = lp2(safe_sqrt)
    assert wrapped(4.0) == 2.0
    assert sum(rows(lp2.get_stats(), safe_sqrt).values()) == 2
    lp3 = fake_profiler()
    lp3.add_function(outer_sqrt)
    assert lp3.functions == [safe_sqrt]


def test_c_function_or_its_wrapper_warns_instead_of_raising():
    # line_profiler 5.1: "Could not extract a code object", nothing added, None returned
    lp = fake_profiler()
    with pytest.warns(UserWarning, match="implemented in C"):
        lp.add_function(functools.lru_cache(math.sqrt))
    for func in (math.sqrt, len, str.split):
        with pytest.warns(UserWarning, match="implemented in C"):
            assert lp.add_function(func) is None
    assert lp.functions == []
    with pytest.raises(TypeError, match="func must be a Python function"):
        lp.add_function(42)


def test_builtin_decorates_a_wrapper_of_a_c_function():
    lp = fake_profiler()
    prof = kernprof_builtin(lp)
    wrapped = prof(safe_sqrt)
    assert wrapped(4.0) == 2.0 and math.isnan(wrapped(-1.0))
    assert sum(rows(lp.get_stats(), safe_sqrt).values()) == 4


# --- 6. code nested in comprehensions and generator expressions ------------------------------


def nested(rows_):
    key = lambda r: -r[0]  # noqa: E731
    out = [sorted(r, key=lambda v: -v) for r in rows_]
    g = sum(max(map(lambda v: v * 2, r)) for r in rows_)
    d = {i: [j for j in map(lambda v: v + 1, r)] for i, r in enumerate(rows_)}
    return sorted(rows_, key=key), out, g, d


def test_lambdas_inside_comprehensions_and_generator_expressions_are_registered():
    lp = fake_profiler(nested)
    with lp:
        nested([[1, 2], [3, 4]])
    lines = {key[1]: key[2] for key in lp.get_stats().timings}
    for text in ("key = lambda", "out = [", "g = sum(", "d = {i:"):
        assert first_line(nested, text) in lines, text
    assert all(
        name.endswith("<lambda>")
        for ln, name in lines.items()
        if ln != nested.__code__.co_firstlineno
    )
    st = lp.get_stats()
    (gen_key,) = [k for k in st.timings if k[1] == first_line(nested, "g = sum(")]
    assert sum(h for _, h, _ in st.timings[gen_key]) == 4  # 2 rows x 2 values


# --- 5. column formatting -----------------------------------------------------------------


SOURCE = "def f():\n    a = 1\n    b = 2\n    return 3\n"


def table(stats, **kw):
    out = io.StringIO()
    stats.print(out, **kw)
    return out.getvalue()


def test_columns_switch_to_g_and_widen_as_line_profiler_does(tmp_path):
    path = tmp_path / "src.py"
    path.write_text(SOURCE)
    big = LineStats(
        {
            (str(path), 1, "f"): [
                (2, 12345678901, 2 * 10**12),  # hits: 11 digits; time: 2e12 us
                (3, 1, 1050122),  # per hit 1050122.0 us: 9 characters
                (4, 3, 30),
            ]
        },
        1e-6,
    )
    text = table(big, output_unit=1e-6)
    expected = (
        "Timer unit: 1e-06 s\n\n"
        "Total time: 2e+06 s\n"
        f"File: {path}\n"
        "Function: f at line 1\n\n"
        "Line #        Hits         Time  Per Hit   % Time  Line Contents\n"
        "================================================================\n"
        "     1                                             def f():\n"
        "     2 1.23457e+10        2e+12    162.0    100.0      a = 1\n"
        "     3           1    1050122.0 1.05e+06      0.0      b = 2\n"
        "     4           3         30.0     10.0      0.0      return 3\n\n"
    )
    assert text == expected


def test_table_is_line_profilers_show_func(tmp_path):
    lp_mod = pytest.importorskip("line_profiler.line_profiler")
    path = tmp_path / "src.py"
    path.write_text(SOURCE)
    cases = [
        [(2, 12345678901, 2 * 10**12), (3, 1, 1050122), (4, 3, 30)],
        [(2, 1, 5), (3, 7, 10**15)],
        [(2, 3, 0), (4, 1, 0)],
        [(3, 10**9, 123456789)],
    ]
    for timings in cases:
        for output_unit in (None, 1e-6, 1e-3, 1.0):
            ours = io.StringIO()
            LineStats({(str(path), 1, "f"): timings}, 1e-6).print(ours, output_unit)
            theirs = io.StringIO()
            lp_mod.show_text(
                {(str(path), 1, "f"): timings}, 1e-6, output_unit, theirs, config=False
            )
            assert ours.getvalue() == theirs.getvalue(), (timings, output_unit)


# --- 7. the summary line ------------------------------------------------------------------


def test_summary_line_is_line_profilers(tmp_path):
    path = tmp_path / "src.py"
    path.write_text(SOURCE)
    stats = LineStats(
        {(str(path), 1, "f"): [(2, 1, 2_500_000)], ("rel/x.py", 5, "K.g"): [(6, 2, 10)]},
        1e-6,
    )
    text = table(stats, details=False, summarize=True)
    assert text == (  # the blocks' order (file, line), the file name as it is
        f"Timer unit: 1e-06 s\n\n  2.50 seconds - {path}:1 - f\n  0.00 seconds - rel/x.py:5 - K.g\n"
    )
    assert table(stats, details=False, summarize=True, sort=True).endswith(
        f"  0.00 seconds - rel/x.py:5 - K.g\n  2.50 seconds - {path}:1 - f\n"
    )


def test_summary_is_line_profilers_show_text(tmp_path):
    lp_mod = pytest.importorskip("line_profiler.line_profiler")
    path = tmp_path / "src.py"
    path.write_text(SOURCE)
    timings = {(str(path), 1, "f"): [(2, 1, 2_500_000)], (str(path), 3, "g"): []}
    for kw in ({}, {"stripzeros": True}, {"sort": True}):
        ours = io.StringIO()
        LineStats(timings, 1e-6).print(ours, details=False, summarize=True, **kw)
        theirs = io.StringIO()
        lp_mod.show_text(
            timings, 1e-6, stream=theirs, details=False, summarize=True, config=False, **kw
        )
        assert ours.getvalue() == theirs.getvalue(), kw


# --- 8. adding LineStats of either kind -----------------------------------------------------


def test_added_stats_hold_whole_units_of_the_largest_as_line_profilers_do():
    key = ("/x.py", 1, "f")
    fine = LineStats({key: [(2, 1, 7), (3, 2, 14)]}, 1e-7)
    coarse = LineStats({key: [(2, 1, 3)]}, 1e-6)
    for total in (fine + coarse, LineStats.from_stats_objects(fine, coarse, fine)):
        for _, _, t in total.timings[key]:
            assert type(t) is int
    assert (fine + coarse).timings == {key: [(2, 2, 4), (3, 2, 1)]}  # 3.7 and 1.4 rounded
    assert LineStats.from_stats_objects(fine).timings == fine.timings  # one: as it is
    try:
        import line_profiler
    except ImportError:
        return  # (not installed below 3.10)
    theirs = line_profiler.LineStats(fine.timings, fine.unit) + line_profiler.LineStats(
        coarse.timings, coarse.unit
    )
    assert (fine + coarse).timings == theirs.timings and (fine + coarse).unit == theirs.unit


def test_line_stats_add_any_object_of_line_profilers_shape():
    key = ("/x.py", 1, "f")
    ours = LineStats({key: [(2, 1, 10)]}, 1e-6)
    theirs = types.SimpleNamespace(timings={key: [(2, 2, 20)]}, unit=1e-6)
    assert (ours + theirs).timings == {key: [(2, 3, 30)]}
    assert LineStats.from_stats_objects(ours, theirs).timings == {key: [(2, 3, 30)]}
    total = LineStats({key: [(2, 1, 10)]}, 1e-6)
    total += theirs
    assert total.timings == {key: [(2, 3, 30)]}
    assert LineStats({key: [(2, 2, 20)]}, 1e-6) == theirs
    with pytest.raises(TypeError):
        ours + 3
    with pytest.raises(TypeError, match=r"stats\[1\] must be a LineStats"):
        LineStats.from_stats_objects(ours, types.SimpleNamespace(timings={}))


def test_line_stats_add_line_profilers_line_stats():
    lp_mod = pytest.importorskip("line_profiler.line_profiler")
    key = ("/x.py", 1, "f")
    ours = LineStats({key: [(2, 1, 10)]}, 1e-6)
    theirs = lp_mod.LineStats({key: [(2, 2, 20)]}, 1e-6)
    assert (ours + theirs).timings == (theirs + ours).timings == {key: [(2, 3, 30)]}
