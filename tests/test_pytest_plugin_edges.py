"""The pytest plugin's edge cases, run through pytester: a timer that never moves, saving
extra_info that JSON cannot hold, a save that fails, runs where no benchmark ran, benchmarks
only in the baseline, the statistic a --fastprof-compare-fail rule judges, and sessions
without NumPy.

Inner runs time against a fake clock that the benchmarked functions advance, so every figure
is exact and no test depends on the machine's speed.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest

import fastprof
from fastprof.bench import fixture as fixture_mod
from fastprof.bench import runner
from test_plugin import PLUGIN_ARGS, run, with_fakeclock

pytest_plugins = ["pytester"]


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with fakeclock importable (test_plugin's) and the plugin's hooks restored."""
    return with_fakeclock(pytester, monkeypatch)


def saved(pytester: pytest.Pytester) -> List[Dict[str, Any]]:
    """Return the saved runs (oldest first)."""
    folder = pytester.path / "runs"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_a_timer_that_never_moves_fails_the_test_with_the_reason(inner, monkeypatch):
    monkeypatch.setattr(runner, "STUCK_TIMER_SECONDS", 0.05)
    inner.makepyfile(
        test_stuck="""
        import pytest

        @pytest.mark.benchmark(timer=lambda: 0.0)
        def test_stuck(fastprof_benchmark):
            fastprof_benchmark(len, "abc")
    """
    )
    result = run(inner)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TimerStuckError: benchmark option timer*did not advance*"])


SAVE_SUITE = """
import numpy as np
import pytest
from fakeclock import CLOCK

class Thing:
    def __repr__(self):
        return "Thing()"

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
def test_extra(fastprof_benchmark):
    fastprof_benchmark.extra_info["size"] = np.int64(5)
    fastprof_benchmark.extra_info["thing"] = Thing()
    fastprof_benchmark(CLOCK.spend, 1e-3)
"""


def test_extra_info_that_json_cannot_hold_is_saved_as_pytest_benchmark_saves_it(inner):
    inner.makepyfile(test_save=SAVE_SUITE)
    result = run(inner, "--fastprof-save=x")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*fastprof benchmarks*", "*test_extra*", "saved 1 benchmark(s)*"])
    (doc,) = saved(inner)
    assert doc["benchmarks"][0]["extra_info"] == {"size": 5, "thing": "UNSERIALIZABLE[Thing()]"}
    assert sorted(os.listdir(inner.path / "runs")) == ["0001_x.json"]


def test_a_failing_save_is_one_line_and_leaves_no_file(inner, monkeypatch):
    # values the JSON writer refuses reach storage.save: the run is reported, not lost
    monkeypatch.setattr(fixture_mod, "_json_safe", lambda value, _active=None: value)
    inner.makepyfile(test_save=SAVE_SUITE)
    result = run(inner, "--fastprof-save=x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        ["*test_extra*", "fastprof: could not save the benchmark results: TypeError: *"]
    )
    assert "Traceback" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()
    assert os.listdir(inner.path / "runs") == []


def test_no_benchmark_run_says_nothing_was_saved_or_compared(inner):
    inner.makepyfile(
        test_plain="""
        def test_plain():
            pass
    """
    )
    result = run(inner, "--fastprof-save=x")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["fastprof: not saving anything, no benchmarks have been run"])
    assert not (inner.path / "runs").exists()
    (inner.path / "runs").mkdir()
    (inner.path / "runs" / "0001_base.json").write_text(json.dumps({"benchmarks": []}))
    result = run(inner, "--fastprof-compare-fail=mean:5%")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["fastprof: nothing compared with *0001_base.json, no benchmarks*"])


def test_the_compare_table_shows_the_judged_statistic_and_the_missing_benchmarks(
    inner, monkeypatch
):
    inner.makepyfile(
        test_cmp="""
        import os
        import pytest
        from fakeclock import CLOCK

        SLOW = float(os.environ.get("SLOW", "1"))

        def work():
            CLOCK.spend(1e-3 * SLOW)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
        def test_a(fastprof_benchmark):
            fastprof_benchmark(work)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
        def test_b(fastprof_benchmark):
            fastprof_benchmark(work)
    """
    )
    assert run(inner, "--fastprof-save=base").ret == 0
    monkeypatch.setenv("SLOW", "2")
    result = run(inner, "-k", "test_a", "--fastprof-compare-fail=mean:5%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "Name * old mean * new mean * ratio*",
            "test_a * 1 ms * 2 ms * 2.000*REGRESSION",
            "not run (in the baseline only): test_cmp.py::test_b",
        ]
    )


def test_save_and_compare_fail_without_numpy(pytester, monkeypatch):
    pytester.makeconftest('import sys\nsys.modules["numpy"] = None\n')
    pytester.makepyfile(
        test_nn="""
        def test_bench(fastprof_benchmark):
            fastprof_benchmark(len, "a")

        def test_plain():
            pass
    """
    )
    os.makedirs(pytester.path / "runs")
    base = {"benchmarks": [{"fullname": "t", "stats": {"min": 1.0, "mean": 1.0, "median": 1.0}}]}
    (pytester.path / "runs" / "0001_base.json").write_text(json.dumps(base))
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    monkeypatch.setenv("PYTHONPATH", package_root)
    result = pytester.runpytest_subprocess(
        *PLUGIN_ARGS,
        "--fastprof-storage=runs",
        "--fastprof-save=x",
        "--fastprof-compare-fail=mean:5%",
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ImportError: fastprof's benchmark fixtures need NumPy*fastprof?kernels?*",
            "fastprof: not saving anything, no benchmarks have been run",
        ]
    )
