"""The pytest plugin's run modes, as pytest-benchmark's users know them under --benchmark-*:
--fastprof-disable (each function once, untimed) and --fastprof-enable, --fastprof-skip,
--fastprof-only, --fastprof-json, the session-wide --fastprof-min-rounds / --fastprof-max-time
/ --fastprof-min-time, and pytest-xdist workers, where benchmarks run untimed instead of being
skipped, so the tests' own assertions still run.

Inner runs time against the fake clock of test_plugin, so every figure is exact.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

import fastprof.bench.fixture  # noqa: F401  (NumPy loaded once, not by each inner run)
from test_plugin import PLUGIN_ARGS, _subprocess_env, run, with_fakeclock

pytest_plugins = ["pytester"]


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with fakeclock importable (test_plugin's) and the plugin's hooks restored."""
    return with_fakeclock(pytester, monkeypatch)


def saved(pytester: pytest.Pytester) -> List[Dict[str, Any]]:
    """Return the saved runs (oldest first)."""
    return [json.loads(p.read_text()) for p in sorted((pytester.path / "runs").glob("*.json"))]


# Each benchmarked function counts its calls; the tests check their results as a test suite
# that also benchmarks does.
MODES = """
import asyncio
import pytest
from fakeclock import CLOCK

calls = {"work": 0, "setup": 0, "teardown": 0, "coro": 0}

def work(x, y=1):
    calls["work"] += 1
    CLOCK.spend(1e-3)
    return x + y

def setup():
    calls["setup"] += 1
    return (10,), {"y": 5}

def teardown(x, y):
    calls["teardown"] += 1

async def coro(x):
    calls["coro"] += 1
    CLOCK.spend(1e-3)
    await asyncio.sleep(0)
    return 2 * x

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
def test_call(fastprof_benchmark):
    assert fastprof_benchmark(work, 2, y=5) == 7
    assert fastprof_benchmark("labelled", work, 1) == 2

@pytest.mark.benchmark(timer=CLOCK.now)
def test_pedantic(fastprof_benchmark):
    before = dict(calls)
    assert fastprof_benchmark.pedantic(work, setup=setup, teardown=teardown, rounds=3) == 15
    made = {k: calls[k] - before[k] for k in calls}
    pytest.fastprof_made = made

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
def test_async(fastprof_benchmark):
    assert fastprof_benchmark(coro, 4) == 8

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
def test_in_a_running_loop(fastprof_benchmark):
    async def main():
        return await fastprof_benchmark(coro, 5)
    assert asyncio.run(main()) == 10

def test_plain():
    assert work(1) == 2

def test_report():
    print("CALLS", calls, getattr(pytest, "fastprof_made", None))
"""


def calls_printed(result: pytest.RunResult) -> str:
    (line,) = [ln for ln in result.outlines if "CALLS " in ln]
    return line[line.index("CALLS ") :]


def test_disable_runs_each_function_once_and_saves_nothing(inner):
    inner.makepyfile(test_modes=MODES)
    result = run(inner, "--fastprof-disable", "--fastprof-save=x", "-s")
    result.assert_outcomes(passed=6)
    # work: 2 calls + 1 pedantic + 1 plain; setup and teardown once; two coroutines
    line = calls_printed(result)
    assert "{'work': 4, 'setup': 1, 'teardown': 1, 'coro': 2}" in line
    assert "{'work': 1, 'setup': 1, 'teardown': 1, 'coro': 0}" in line
    result.stdout.fnmatch_lines(
        ["*fastprof: not saving anything, the benchmarks were disabled (--fastprof-disable)*"]
    )
    assert not (inner.path / "runs").exists()


def test_enable_undoes_disable(inner):
    inner.makepyfile(test_modes=MODES)
    result = run(inner, "--fastprof-disable", "--fastprof-enable", "--fastprof-save=x", "-s")
    result.assert_outcomes(passed=6)
    names = sorted(b["name"] for b in saved(inner)[0]["benchmarks"])
    assert names == [
        "test_async",
        "test_call",
        "test_call::labelled",
        "test_in_a_running_loop",
        "test_pedantic",
    ]
    assert "'setup': 3, 'teardown': 3" in calls_printed(result)  # three timed rounds


def test_disabled_pedantic_checks_its_arguments(inner):
    inner.makepyfile(
        test_bad="""
        def test_rounds(fastprof_benchmark):
            fastprof_benchmark.pedantic(len, args=([],), rounds=0)

        def test_setup_and_args(fastprof_benchmark):
            fastprof_benchmark.pedantic(len, args=([],), setup=lambda: (([1],), {}))

        def test_twice(fastprof_benchmark):
            fastprof_benchmark(len, [])
            fastprof_benchmark(len, [])
    """
    )
    result = run(inner, "--fastprof-disable")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*rounds must be an int >= 1, got 0*",
            "*setup returned arguments, so args= and kwargs= must be left empty*",
            "*the unlabelled benchmark was already run in this test*",
        ]
    )


def test_skip_and_only(inner):
    inner.makepyfile(test_modes=MODES)
    result = run(inner, "--fastprof-skip", "-rs")
    result.assert_outcomes(passed=2, skipped=4)
    result.stdout.fnmatch_lines(["*SKIPPED*a benchmark (--fastprof-skip)*"])
    result = run(inner, "--fastprof-only", "-rs")
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(["*SKIPPED*not a benchmark (--fastprof-only)*"])
    # as pytest-benchmark: --fastprof-only wins over --fastprof-skip
    result = run(inner, "--fastprof-only", "--fastprof-skip")
    result.assert_outcomes(passed=4, skipped=2)


def test_skip_covers_a_fixture_requested_at_run_time(inner):
    inner.makepyfile(
        test_late="""
        def test_late(request):
            request.getfixturevalue("fastprof_benchmark")(len, [])
    """
    )
    result = run(inner, "--fastprof-skip", "-rs")
    result.assert_outcomes(skipped=1)


def test_only_with_disable_is_a_usage_error(inner):
    inner.makepyfile(test_modes=MODES)
    result = run(inner, "--fastprof-only", "--fastprof-disable")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fastprof-only and --fastprof-disable contradict*"])


def test_json_writes_the_run_as_saved(inner):
    inner.makepyfile(test_modes=MODES)
    result = run(inner, "--fastprof-json=out/run.json", "--fastprof-save=s")
    result.assert_outcomes(passed=6)
    written = json.loads((inner.path / "out" / "run.json").read_text())
    (kept,) = saved(inner)
    assert written["benchmarks"] == kept["benchmarks"]
    assert {"machine_info", "commit_info", "datetime", "version"} <= set(written)
    result.stdout.fnmatch_lines(["*saved 5 benchmark(s) to*out/run.json*"])


def test_json_that_cannot_be_written_fails_the_session(inner):
    inner.makepyfile(test_modes=MODES)
    (inner.path / "blocker").write_text("a file, not a folder")
    result = run(inner, "--fastprof-json=blocker/run.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*fastprof: could not save the benchmark results*"])


SESSION_OPTIONS = """
import pytest
from fakeclock import CLOCK

def work():
    CLOCK.spend(1e-3)

@pytest.mark.benchmark(timer=CLOCK.now)
def test_defaults(fastprof_benchmark):
    fastprof_benchmark(work)

@pytest.mark.benchmark(timer=CLOCK.now, min_rounds=2, max_time=0.0)
def test_marker_wins(fastprof_benchmark):
    fastprof_benchmark(work)
"""


def test_session_wide_rounds_and_times(inner):
    inner.makepyfile(test_opts=SESSION_OPTIONS)
    result = run(
        inner,
        "--fastprof-min-rounds=7",
        "--fastprof-max-time=0.002",
        "--fastprof-min-time=0.0005",
        "--fastprof-save=s",
    )
    result.assert_outcomes(passed=2)
    benches = {b["name"]: b for b in saved(inner)[0]["benchmarks"]}
    opts = benches["test_defaults"]["options"]
    assert (opts["min_rounds"], opts["max_time"], opts["min_time"]) == (7, 0.002, 0.0005)
    assert benches["test_defaults"]["stats"]["rounds"] == 7  # min_rounds beats 0.002 s / 1 ms
    marked = benches["test_marker_wins"]
    assert (marked["options"]["min_rounds"], marked["options"]["max_time"]) == (2, 0.0)
    assert marked["options"]["min_time"] == 0.0005
    assert marked["stats"]["rounds"] == 2


@pytest.mark.parametrize(
    "option, message",
    [
        ("--fastprof-min-rounds=0", "--fastprof-min-rounds: expected an int >= 1, got 0"),
        ("--fastprof-max-time=-1", "--fastprof-max-time: expected a number >= 0, got -1.0"),
        ("--fastprof-min-time=nan", "--fastprof-min-time: expected a number >= 0, got nan"),
    ],
)
def test_session_option_values_are_checked(inner, option, message):
    inner.makepyfile(test_opts=SESSION_OPTIONS)
    result = run(inner, option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_xdist_workers_run_benchmarks_once_untimed(inner, monkeypatch):
    pytest.importorskip("xdist")
    _subprocess_env(monkeypatch)
    inner.makepyfile(
        test_x="""
        calls = []

        def f():
            calls.append(1)
            return 3

        def test_b(fastprof_benchmark):
            assert fastprof_benchmark(f) == 3
            assert calls == [1]  # once, untimed: the test's own checks still run

        def test_wrong(fastprof_benchmark):
            assert fastprof_benchmark(f) == 4

        def test_plain():
            pass
    """
    )
    result = inner.runpytest_subprocess(
        *PLUGIN_ARGS, "-n", "2", "--fastprof-save=x", "--fastprof-storage=runs"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["*fastprof_benchmark ran its function once, untimed*pytest-xdist workers*-n 0*"]
    )
    assert not (inner.path / "runs").exists()
