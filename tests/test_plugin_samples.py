"""What the plugin saves of a long benchmark's samples, run through pytester: a summary by
default (fastprof.samples), every sample with --fastprof-save-data, and comparisons that read
either alike, in the session and through ``python -m fastprof compare``.

Inner runs time against test_plugin's fake clock, so two runs of one suite give the same
samples and every figure is exact.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from fastprof.bench import sample_stats
from fastprof.compare import main as compare_main
from test_plugin import run, with_fakeclock

pytest_plugins = ["pytester"]

SUITE = """
import pytest
from fakeclock import CLOCK, noisy

NOISE = noisy({seed}, 0.3)

def work():
    CLOCK.spend(1e-5 * {scale} * NOISE())

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.03, warmup=False)
def test_long(fastprof_benchmark):
    fastprof_benchmark(work)

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.0, min_rounds=9, warmup=False)
def test_short(fastprof_benchmark):
    fastprof_benchmark(work)
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with fakeclock importable (test_plugin's) and the plugin's hooks restored."""
    return with_fakeclock(pytester, monkeypatch)


def _runs(pytester: pytest.Pytester) -> List[Any]:
    return sorted((pytester.path / "runs").glob("*.json"))


def _by_name(path: Any) -> Dict[str, Dict[str, Any]]:
    return {b["name"]: b for b in json.loads(path.read_text())["benchmarks"]}


def _table(lines: List[str]) -> List[str]:
    """The comparison table's rows (from its header to the line after its last row)."""
    start = next(i for i, line in enumerate(lines) if line.endswith("95% CI of ratio"))
    return [line.rstrip() for line in lines[start : start + 3]]


def test_long_runs_save_a_summary_that_compares_as_every_sample(inner, capsys):
    inner.makepyfile(test_suite=SUITE.format(seed=1, scale=1.0))
    run(inner, "--fastprof-save=every", "--fastprof-save-data").assert_outcomes(passed=2)
    run(inner, "--fastprof-save=small").assert_outcomes(passed=2)  # the same samples
    every_path, small_path = _runs(inner)
    every, small = _by_name(every_path), _by_name(small_path)

    rounds = every["test_long"]["stats"]["rounds"]
    assert rounds > sample_stats.KEEP_SAMPLES
    assert len(every["test_long"]["stats"]["data"]) == rounds
    assert "samples" not in every["test_long"]["fastprof"]
    assert "data" not in small["test_long"]["stats"]
    summary = small["test_long"]["fastprof"]["samples"]
    assert summary["count"] == rounds and len(summary["values"]) < 400
    assert summary["values"][0] == every["test_long"]["stats"]["min"]
    assert summary["values"][-1] == every["test_long"]["stats"]["max"]
    for name in ("test_long", "test_short"):  # the statistics are the same either way
        a, b = every[name]["stats"], small[name]["stats"]
        assert {k: v for k, v in a.items() if k != "data"} == {
            k: v for k, v in b.items() if k != "data"
        }
        assert every[name]["fastprof"]["median_ci"] == small[name]["fastprof"]["median_ci"]
    assert small["test_short"]["stats"]["data"] == every["test_short"]["stats"]["data"]
    assert "samples" not in small["test_short"]["fastprof"]  # short runs keep their samples
    assert small_path.stat().st_size * 4 < every_path.stat().st_size

    # a slower run compared with either baseline: the same table, the same verdict
    inner.makepyfile(test_suite=SUITE.format(seed=2, scale=1.2))
    tables = []
    for baseline in ("every", "small"):
        result = run(inner, f"--fastprof-compare={baseline}", "--fastprof-compare-fail=median:5%")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["REGRESSION test_suite.py::test_long: median *"])
        tables.append(_table(result.stdout.lines))
    assert tables[0] == tables[1] and "REGRESSION" in tables[0][1]

    # in the session and on the saved files, the comparison is the same
    result = run(inner, "--fastprof-compare=small", "--fastprof-save=slow")
    in_session = _table(result.stdout.lines)
    slow_path = _runs(inner)[-1]
    assert "samples" in _by_name(slow_path)["test_long"]["fastprof"]
    capsys.readouterr()
    assert compare_main([str(small_path), str(slow_path)]) == 0
    assert _table(capsys.readouterr().out.splitlines()) == in_session
    assert compare_main([str(every_path), str(slow_path)]) == 0
    assert _table(capsys.readouterr().out.splitlines()) == in_session
