"""Fixes to the pytest plugin and `fastprof compare`, each checked against what it got wrong:
the profiled round holds the target's calls only (not pedantic's setup and teardown, nor the
runner's own calls), regression .prof files of different tests never share a name, a time
option of infinity is refused before any test runs, the profile table's calls per call read
as plain numbers, and `compare`'s help and table match the plugin's.

Timings use fake clocks, so no figure depends on the machine's speed.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import marshal
import math
import os
import re
from typing import Any, Dict, List

import pytest

import fastprof
import fastprof.pytest_plugin as plugin
from fastprof.bench import fixture as fixture_mod
from fastprof.bench import runner, tables
from fastprof.bench.runner import Options
from fastprof.compare import main as compare_main
from test_plugin import run, with_fakeclock

pytest_plugins = ["pytester"]


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with fakeclock importable (test_plugin's) and the plugin's hooks restored."""
    return with_fakeclock(pytester, monkeypatch)


# --- the profiled round holds the target's calls only -----------------------------------------


class Clock:
    """A clock that moves 1 ns per read, plus what the target adds to .t."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1e-9
        return self.t


CLOCK = Clock()


def _inner(x: int) -> int:
    CLOCK.t += 1e-4  # inline: no call the profile would count
    return x + 1


def _target(x: int) -> int:
    return _inner(x)


async def _atarget(x: int) -> int:
    return _inner(x)


def _made() -> Any:
    sorted([3, 2, 1])
    return (3,), {}


def _cleanup(*args: Any) -> None:
    len(args)
    isinstance(args, tuple)


class Recorded(fixture_mod.BenchmarkFixture):
    """A BenchmarkFixture that keeps its results in .recorded and the pstats dicts it hands
    over in .prof_stats."""

    def __init__(self, **kwargs: Any) -> None:
        self.recorded: List[Dict[str, Any]] = []
        self.prof_stats: List[Dict[Any, Any]] = []
        super().__init__(record=self._keep, **kwargs)

    def _keep(self, result: Dict[str, Any], stats: Any) -> None:
        self.recorded.append(result)
        self.prof_stats.append(stats)


def _fixture(factory: Any) -> Recorded:
    """Return a fixture timing against CLOCK and profiling with factory's profilers."""
    opts = Options(timer=CLOCK.now, max_time=0.01, warmup=False).check()
    return Recorded(
        name="test_x", fullname="test_x.py::test_x", options=opts, profiler_factory=factory
    )


def _name(label: str) -> str:
    """Return the function name of a pstats label ("file:line(name)", or a builtin's label)."""
    m = re.search(r"\((\w+)\)$", label)
    return m.group(1) if m else label


FACTORIES = [
    pytest.param(lambda: cProfile.Profile(CLOCK.now), id="cProfile"),
    pytest.param(fastprof.Profile, id="fastprof.Profile"),
]


def _check_only_the_target(fx: Recorded, target: str) -> None:
    """The JSON rows and the pstats dict of the one benchmark fx ran hold target and _inner,
    each called `iterations` times, and nothing else."""
    (result,) = fx.recorded
    prof = result["fastprof"]["profile"]
    n = prof["iterations"]
    rows = {_name(r["func"]): r for r in prof["rows"]}
    assert set(rows) == {target, "_inner"}
    assert [rows[target]["ncalls"], rows["_inner"]["ncalls"]] == [n, n]
    (stats,) = fx.prof_stats
    assert {key[2] for key in stats} == {target, "_inner"}
    for value in stats.values():
        assert set(value[4]) <= set(stats)  # no caller outside the profile either


@pytest.mark.parametrize("factory", FACTORIES)
def test_pedantic_profile_leaves_out_setup_and_teardown(factory):
    fx = _fixture(factory)
    fx.pedantic(_target, setup=_made, teardown=_cleanup, rounds=2, iterations=3)
    _check_only_the_target(fx, "_target")
    assert fx.recorded[0]["fastprof"]["profile"]["iterations"] == 3


@pytest.mark.parametrize("factory", FACTORIES)
def test_pedantic_profile_with_args_and_a_teardown_only(factory):
    fx = _fixture(factory)
    fx.pedantic(_target, args=(4,), teardown=_cleanup, rounds=2, iterations=2)
    _check_only_the_target(fx, "_target")


@pytest.mark.parametrize("factory", FACTORIES)
def test_calibrated_profile_leaves_out_the_timer(factory):
    fx = _fixture(factory)  # the timer (CLOCK.now, a Python function) ran between the rounds
    assert fx(_target, 1) == 2
    _check_only_the_target(fx, "_target")


@pytest.mark.parametrize("factory", FACTORIES)
def test_async_profile_leaves_out_setup_and_teardown(factory):
    fx = _fixture(factory)
    fx.pedantic(_atarget, setup=_made, teardown=_cleanup, rounds=2, iterations=2)
    _check_only_the_target(fx, "_atarget")

    fx = _fixture(factory)

    async def in_a_loop() -> Any:
        return await fx.pedantic(_atarget, setup=_made, teardown=_cleanup, rounds=2)

    assert asyncio.run(in_a_loop()) == 4
    _check_only_the_target(fx, "_atarget")


def test_a_target_calling_the_timer_keeps_those_calls_in_its_profile():
    import time

    def reads() -> float:
        CLOCK.t += 1e-4
        return time.perf_counter()

    fx = _fixture(lambda: cProfile.Profile(CLOCK.now))
    fx.pedantic(reads, rounds=1, iterations=4)
    rows = fx.recorded[0]["fastprof"]["profile"]["rows"]
    counts = {r["func"]: r["ncalls"] for r in rows}
    assert counts["<built-in method time.perf_counter>"] == 4


PEDANTIC_SUITE = """
import cProfile
import os
import pytest
from fakeclock import CLOCK
import fastprof.pytest_plugin as plugin

plugin._profiler_factory = lambda: cProfile.Profile(CLOCK.now)
SLOW = float(os.environ.get("SLOW", "1"))

def prepare():
    CLOCK.t += 1e-3 * SLOW * SLOW  # grows far more than the target
    sorted([3, 2, 1])
    return (1,), {}

def cleanup(x):
    CLOCK.t += 1e-3 * SLOW * SLOW
    len([x])

def target(x):
    CLOCK.t += 1e-4 * SLOW
    return x

@pytest.mark.benchmark(timer=CLOCK.now)
def test_ps(fastprof_benchmark):
    fastprof_benchmark.pedantic(target, setup=prepare, teardown=cleanup, rounds=5)
"""


def test_plugin_profile_table_json_and_regression_show_the_target_only(inner, monkeypatch):
    inner.makepyfile(test_ps=PEDANTIC_SUITE)
    first = run(inner, "--fastprof-profile", "--fastprof-save=base")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        [
            "profiled round of test_ps (per call of the benchmarked function):",
            "  ncalls * tottime * cumtime  function",
            "       1 * 100 us * 100 us  test_ps.py:*(target)",
            "",
        ]
    )
    (base,) = [json.loads(p.read_text()) for p in (inner.path / "runs").glob("*.json")]
    rows = base["benchmarks"][0]["fastprof"]["profile"]["rows"]
    assert [r["func"] for r in rows] == ["test_ps.py:19(target)"]

    monkeypatch.setenv("SLOW", "2")
    result = run(
        inner, "--fastprof-profile", "--fastprof-compare", "--fastprof-compare-fail=median:5%"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  tottime per call that grew most in test_ps:",
            "    +100 us  test_ps.py:19(target)  (100 us -> 200 us)",
            "profile of test_ps.py::test_ps: *.prof",
        ]
    )
    out = result.stdout.str()
    assert "prepare" not in out and "cleanup" not in out and "sorted" not in out
    path = out.split("profile of test_ps.py::test_ps: ")[1].split()[0]
    with open(path, "rb") as fh:  # the .prof format: a marshalled pstats dict
        assert {func[2] for func in marshal.load(fh)} == {"target"}


# --- regression .prof files of different tests never share a name ------------------------------


def test_prof_paths_are_unique_stable_and_readable():
    ids = ["t.py::test_pr[a/b]", "t.py::test_pr[a b]", "t.py::test_pr[a_b]", "t.py::test_pr_a_b"]
    paths = [plugin._prof_path("store", i) for i in ids]
    assert len(set(paths)) == len(ids)
    assert paths == [plugin._prof_path("store", i) for i in ids]  # the same in every run
    assert paths[0] == os.path.join("store", "profiles", "t.py_test_pr_a_b-df04d0dd7d2a.prof")
    for path in paths:
        assert re.fullmatch(r"t\.py_test_pr_a_b-[0-9a-f]{12}\.prof", os.path.basename(path))
    long_id = "t.py::test_long[" + "x" * 1000 + "]"
    name = os.path.basename(plugin._prof_path("store", long_id))
    assert len(name) <= 200 and name.startswith("t.py_test_long_xxx")
    odd = os.path.basename(plugin._prof_path("store", "::[\udcff]"))
    assert re.fullmatch(r"benchmark-[0-9a-f]{12}\.prof", odd)


COLLIDE_SUITE = """
import cProfile
import os
import pytest
from fakeclock import CLOCK
import fastprof.pytest_plugin as plugin

plugin._profiler_factory = lambda: cProfile.Profile(CLOCK.now)
SLOW = float(os.environ.get("SLOW", "1"))

def work():
    CLOCK.t += 1e-4 * SLOW

@pytest.mark.parametrize("p", ["a/b", "a b", "a_b"])
@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
def test_pr(fastprof_benchmark, p):
    fastprof_benchmark(work)
"""


def test_regressions_of_tests_whose_ids_read_alike_write_one_file_each(inner, monkeypatch):
    inner.makepyfile(test_collide=COLLIDE_SUITE)
    assert run(inner, "--fastprof-profile", "--fastprof-save=base").ret == 0
    monkeypatch.setenv("SLOW", "2")
    result = run(inner, "--fastprof-profile", "--fastprof-compare-fail=median:5%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = [ln for ln in result.stdout.lines if ln.startswith("profile of ")]
    paths = {ln.split(": ", 1)[1] for ln in lines}
    assert len(lines) == 3 and len(paths) == 3
    assert sorted(os.listdir(inner.path / "runs" / "profiles")) == sorted(
        os.path.basename(p) for p in paths
    )


# --- time options of infinity ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["min_time", "max_time"])
@pytest.mark.parametrize("value", [math.inf, 10**400], ids=["inf", "10**400"])
def test_time_options_must_be_finite(name, value):
    with pytest.raises(ValueError, match=rf"benchmark option {name}: .* \(a time must be finite\)"):
        Options(**{name: value}).check()
    with pytest.raises(ValueError, match=rf"benchmark option {name}: expected a number >= 0"):
        runner.options_from(Options(), {name: -math.inf}, "here")


@pytest.mark.parametrize("option", ["--fastprof-max-time=inf", "--fastprof-min-time=inf"])
def test_an_infinite_session_time_is_a_usage_error(inner, option):
    inner.makepyfile(test_inf="def test_inf(fastprof_benchmark):\n    fastprof_benchmark(len, 'x')")
    result = run(inner, option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    name = option.split("=")[0]
    result.stderr.fnmatch_lines(
        [f"*{name}: expected a number >= 0, got inf (a time must be finite)"]
    )
    assert "OverflowError" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("key", ["max_time", "min_time"])
def test_an_infinite_marker_time_is_refused_with_the_reason(inner, key):
    inner.makepyfile(
        test_inf=f"""
        import pytest

        @pytest.mark.benchmark({key}=float("inf"))
        def test_inf(fastprof_benchmark):
            fastprof_benchmark(len, "x")
    """
    )
    result = run(inner)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*benchmark option {key}: expected a number >= 0, got inf*"])
    assert "OverflowError" not in result.stdout.str()


# --- calls per call in the profile table -------------------------------------------------------


def test_counts_per_call_read_as_plain_numbers():
    cases = {
        1.0: "1",
        12345.0: "12345",
        20000.0: "20000",
        1e14: "100000000000000",
        0.5: "0.5",
        10 / 3: "3.333",
        2 / 3: "0.6667",
        1 / 6000: "0.0001667",
        1e-7: "0.0000001",
        12345.5: "12345.5",
    }
    assert {v: tables.fmt_count(v) for v in cases} == cases


def test_the_profile_table_prints_counts_without_e_notation():
    rows = [
        {"func": "m.py:3(outer)", "ncalls": 3, "tottime": 3e-3, "cumtime": 6e-3},
        {"func": "m.py:2(inner)", "ncalls": 37035, "tottime": 3e-4, "cumtime": 3e-4},
        {"func": "m.py:9(every)", "ncalls": 60000, "tottime": 2e-4, "cumtime": 2e-4},
        {"func": "m.py:5(some)", "ncalls": 10, "tottime": 1e-4, "cumtime": 1e-4},
        {"func": "m.py:7(once)", "ncalls": 1, "tottime": 1e-5, "cumtime": 1e-5},
    ]
    bench = {"name": "test_nc", "fastprof": {"profile": {"iterations": 3, "rows": rows}}}
    assert tables.profile_tables([bench]) == [
        "profiled round of test_nc (per call of the benchmarked function):",
        "  ncalls      tottime      cumtime  function",
        "       1         1 ms         2 ms  m.py:3(outer)",
        "   12345       0.1 ms       0.1 ms  m.py:2(inner)",
        "   20000   0.06667 ms   0.06667 ms  m.py:9(every)",
        "   3.333   0.03333 ms   0.03333 ms  m.py:5(some)",
        "  0.3333  0.003333 ms  0.003333 ms  m.py:7(once)",
        "",
    ]


# --- compare: its help, and the statistic its table shows --------------------------------------


def test_compare_help_reads_like_the_other_subcommands(capsys):
    assert compare_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fastprof compare ")
    assert "95% bootstrap" in " ".join(out.split()) and "%%" not in out


def _run_file(path: Any, mean: float) -> str:
    doc = {
        "benchmarks": [
            {"fullname": "t.py::t", "name": "t", "stats": {"min": 1.0, "mean": mean, "median": 1.0}}
        ]
    }
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize(
    "extra, header, flag",
    [
        (["--fail", "mean:5%"], "old mean", "REGRESSION"),
        (["--fail", "mean:5%", "--stat", "median"], "old median", "REGRESSION (mean)"),
        (["--fail", "median:5%", "--fail", "mean:5%"], "old median", "REGRESSION (mean)"),
    ],
)
def test_compare_shows_the_statistic_of_the_first_rule(tmp_path, capsys, extra, header, flag):
    old, new = _run_file(tmp_path / "a.json", 1.0), _run_file(tmp_path / "b.json", 2.0)
    assert compare_main([old, new, *extra]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert header in lines[2]
    assert lines[3].startswith("t ") and lines[3].endswith(f"(no raw samples)  {flag}")


def test_compare_without_a_rule_shows_the_median(tmp_path, capsys):
    old, new = _run_file(tmp_path / "a.json", 1.0), _run_file(tmp_path / "b.json", 2.0)
    assert compare_main([old, new]) == 0
    assert "old median" in capsys.readouterr().out.splitlines()[2]


def test_pytest_run_under_fastprof_run_with_warnings_as_errors(tmp_path):
    """`fastprof run -m pytest -W error`: fastprof is imported before pytest loads its plugin
    (an entry point once installed), which pytest warns it cannot rewrite unless the package
    says PYTEST_DONT_REWRITE; under -W error the warning failed the run."""
    import subprocess
    import sys

    (tmp_path / "test_one.py").write_text(
        "def test_one(pytestconfig):\n"
        "    plugins = pytestconfig.pluginmanager.list_name_plugin()\n"
        "    assert any(getattr(p, '__name__', '') == 'fastprof.pytest_plugin'"
        " for _, p in plugins)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    cmd = [sys.executable, "-m", "fastprof", "run", "-o", str(tmp_path / "o.prof"), "-m"]
    cmd += ["pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "test_one.py"]
    if "fastprof" not in {
        e.name for d in _dists() for e in d.entry_points if e.group == "pytest11"
    }:
        cmd[-1:-1] = ["-p", "fastprof.pytest_plugin"]  # not installed: named here
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout and "warning" not in r.stdout


def _dists() -> List[Any]:
    """The installed distributions that register pytest plugins."""
    from importlib import metadata

    return [
        d for d in metadata.distributions() if any(e.group == "pytest11" for e in d.entry_points)
    ]
