"""The pytest plugin, run through pytester: fixture API and results, calibration, async,
several benchmarks per test, save/compare/fail, profile attribution, CUDA fixture, output,
xdist and pytest-benchmark side by side.

Inner runs time against a fake clock (fakeclock.py below) that the benchmarked functions
advance, so every figure is exact and no test depends on the machine's speed.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import fastprof
import fastprof.cuda
import fastprof.pytest_plugin as plugin

pytest_plugins = ["pytester"]

# Load the plugin under one name whether or not the entry point is installed.
PLUGIN_ARGS = [
    "-p",
    "no:fastprof",
    "-p",
    "fastprof.pytest_plugin",
    "-p",
    "no:cacheprovider",
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
]

FAKECLOCK = '''
import random

class FakeClock:
    """A clock that moves only when told (plus 1 ns per read, like a real one)."""
    def __init__(self, step=1e-9, quantum=None):
        self.t = 0.0
        self.step = step
        self.quantum = quantum
    def now(self):
        self.t += self.step
        if self.quantum:
            return (self.t // self.quantum) * self.quantum
        return self.t
    def spend(self, seconds):
        self.t += seconds

CLOCK = FakeClock()
COARSE = FakeClock(step=1e-7, quantum=1e-4)

def noisy(seed, spread):
    rng = random.Random(seed)
    return lambda: 1.0 + rng.uniform(-spread, spread)
'''


def with_fakeclock(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with fakeclock importable and the plugin's module hooks restored after."""
    pytester.makepyfile(fakeclock=FAKECLOCK)
    pytester.syspathinsert()
    monkeypatch.setattr(plugin, "_profiler_factory", None)
    return pytester


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """pytester with fakeclock importable and the plugin's module hooks restored after."""
    return with_fakeclock(pytester, monkeypatch)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*PLUGIN_ARGS, "--fastprof-storage=runs", *args)


def saved(pytester: pytest.Pytester) -> List[Dict[str, Any]]:
    """Return the saved runs (oldest first)."""
    folder = pytester.path / "runs"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def by_name(doc: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {b["name"]: b for b in doc["benchmarks"]}


# --- the fixture's API and results ------------------------------------------------------------


def test_fixture_api_and_results(inner):
    inner.makepyfile(
        test_api="""
        import pytest
        from fakeclock import CLOCK

        def work(x, y=1):
            CLOCK.spend(1e-3 * x)
            return x + y

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.02, min_rounds=3, group="g1")
        def test_call(fastprof_benchmark):
            assert fastprof_benchmark(work, 2, y=5) == 7
            assert fastprof_benchmark.group == "g1"
            fastprof_benchmark.extra_info["answer"] = 42
            assert fastprof_benchmark.stats["rounds"] >= 3

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
        @pytest.mark.parametrize("x", [1, 3])
        def test_param(fastprof_benchmark, x):
            assert fastprof_benchmark(work, x) == x + 1

        def test_bad_call(fastprof_benchmark):
            fastprof_benchmark(42)
    """
    )
    result = run(inner, "--fastprof-save=api", "--strict-markers")  # the marker is registered
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*expected a callable to time*got 42*"])
    (doc,) = saved(inner)
    benches = by_name(doc)
    call = benches["test_call"]
    assert call["fullname"] == "test_api.py::test_call" and call["group"] == "g1"
    assert call["extra_info"] == {"answer": 42}
    s = call["stats"]
    assert s["median"] == pytest.approx(2e-3, rel=1e-6)
    assert s["rounds"] == len(s["data"]) == 10 and s["iterations"] == 1
    assert call["options"]["timer"] == "now" and call["options"]["max_time"] == 0.02
    lo, hi = call["fastprof"]["median_ci"]
    assert lo <= s["median"] <= hi
    p3 = benches["test_param[3]"]
    assert p3["params"] == {"x": 3} and p3["param"] == "3"
    assert p3["stats"]["median"] == pytest.approx(3e-3, rel=1e-6)
    assert p3["stats"]["rounds"] == 5  # min_rounds beats max_time / round time (4)


def test_calibration_follows_the_timer_resolution(inner):
    inner.makepyfile(
        test_cal="""
        import pytest
        from fakeclock import CLOCK, COARSE

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, min_time=1e-5)
        def test_fine(fastprof_benchmark):
            fastprof_benchmark(CLOCK.spend, 1e-7)

        @pytest.mark.benchmark(timer=COARSE.now, max_time=0.2, warmup=False)
        def test_coarse(fastprof_benchmark):
            fastprof_benchmark(COARSE.spend, 1e-6)
    """
    )
    run(inner, "--fastprof-save=cal").assert_outcomes(passed=2)
    benches = by_name(saved(inner)[0])
    fine = benches["test_fine"]["stats"]
    assert fine["iterations"] * 1e-7 >= 1e-5 and fine["iterations"] < 1000
    assert fine["median"] == pytest.approx(1e-7, rel=1e-3)
    coarse = benches["test_coarse"]
    # a 0.1 ms tick: rounds must last >= 10 ticks, i.e. 1000+ calls of 1 us
    assert coarse["fastprof"]["timer_resolution"] == pytest.approx(1e-4)
    assert coarse["stats"]["iterations"] * 1e-6 >= 1e-3
    assert coarse["stats"]["median"] == pytest.approx(1.1e-6, rel=0.1)


def test_async_functions_are_timed_inside_the_loop(inner):
    inner.makepyfile(
        test_async="""
        import asyncio
        import pytest
        from fakeclock import CLOCK

        loops = []

        async def work(x):
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0)
            CLOCK.spend(1e-3)
            return x * 2

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
        def test_from_sync(fastprof_benchmark):
            loops.clear()
            assert fastprof_benchmark(work, 4) == 8
            assert len(loops) > 5 and len(set(map(id, loops))) == 1

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, warmup=False)
        def test_in_running_loop(fastprof_benchmark):
            loops.clear()

            async def main():
                result = await fastprof_benchmark(work, 5)
                return result, asyncio.get_running_loop()

            result, loop = asyncio.run(main())
            assert result == 10 and set(map(id, loops)) == {id(loop)}
    """
    )
    run(inner, "--fastprof-save=a").assert_outcomes(passed=2)
    for bench in saved(inner)[0]["benchmarks"]:
        assert bench["fastprof"]["kind"] == "async"
        assert bench["stats"]["median"] == pytest.approx(1e-3, rel=1e-5)


def test_several_benchmarks_per_test(inner):
    inner.makepyfile(
        test_many="""
        import pytest
        from fakeclock import CLOCK

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
        def test_two(fastprof_benchmark):
            fastprof_benchmark("small", CLOCK.spend, 1e-4)
            fastprof_benchmark("large", CLOCK.spend, 2e-3)
            fastprof_benchmark.pedantic("fixed", CLOCK.spend, args=(5e-4,), rounds=4)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
        def test_twice_unlabelled(fastprof_benchmark):
            fastprof_benchmark(CLOCK.spend, 1e-4)
            fastprof_benchmark(CLOCK.spend, 1e-4)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01)
        def test_same_label(fastprof_benchmark):
            fastprof_benchmark("a", CLOCK.spend, 1e-4)
            fastprof_benchmark("a", CLOCK.spend, 1e-4)
    """
    )
    result = run(inner, "--fastprof-save=m")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["*the unlabelled benchmark was already run*", "*label 'a' was already run*"]
    )
    benches = by_name(saved(inner)[0])
    assert benches["test_two::small"]["stats"]["median"] == pytest.approx(1e-4, rel=1e-4)
    assert benches["test_two::large"]["stats"]["median"] == pytest.approx(2e-3, rel=1e-4)
    assert benches["test_two::fixed"]["stats"]["rounds"] == 4
    assert benches["test_two::large"]["fullname"] == "test_many.py::test_two::large"
    assert benches["test_two::small"]["fastprof"]["label"] == "small"


def test_pedantic(inner):
    inner.makepyfile(
        test_ped="""
        import pytest
        from fakeclock import CLOCK

        calls, setups, teardowns = [], [], []

        def target(a, b=0):
            calls.append((a, b))
            CLOCK.spend(1e-3)
            return a + b

        def setup():
            setups.append(1)
            CLOCK.spend(1.0)  # untimed
            return (len(setups),), {"b": 100}

        @pytest.mark.benchmark(timer=CLOCK.now)
        def test_setup_with_iterations(fastprof_benchmark):
            r = fastprof_benchmark.pedantic(target, setup=setup, teardown=lambda a, b: teardowns.append(a),
                                            rounds=3, warmup_rounds=2, iterations=4)
            assert len(calls) == len(setups) == len(teardowns) == (3 + 2) * 4
            assert calls[-1] == (20, 100) and r == 120 and teardowns == list(range(1, 21))
            assert fastprof_benchmark.stats["rounds"] == 3
            assert fastprof_benchmark.stats["iterations"] == 4
            assert fastprof_benchmark.stats["max"] < 1.1e-3

        def test_setup_returns_a_list(fastprof_benchmark):  # pytest-benchmark unpacks it
            r = fastprof_benchmark.pedantic(target, setup=lambda: [[7], {"b": 1}], rounds=2)
            assert r == 8

        def test_plain_args(fastprof_benchmark):
            assert fastprof_benchmark.pedantic(target, (1,), {"b": 2}, rounds=2) == 3

        def test_setup_and_args(fastprof_benchmark):
            fastprof_benchmark.pedantic(target, args=(1,), setup=setup)

        def test_bad_rounds(fastprof_benchmark):
            fastprof_benchmark.pedantic(target, args=(1,), rounds=0)
    """
    )
    result = run(inner)
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*setup returned arguments, so args= and kwargs= must be left empty*",
            "*rounds must be an int >= 1, got 0*",
        ]
    )


def test_gc_hooks_and_fastprof_profilers(inner):
    inner.makepyfile(
        test_env="""
        import gc, sys
        import pytest
        from fakeclock import CLOCK

        seen = []

        def probe():
            seen.append((gc.isenabled(), sys.getprofile(), sys.gettrace()))
            CLOCK.spend(1e-3)
            return len(seen)

        def hook(*args):
            return hook

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.005)
        def test_paused(fastprof_benchmark):
            seen.clear()
            sys.setprofile(hook)
            try:
                result = fastprof_benchmark(probe)
                assert sys.getprofile() is hook
            finally:
                sys.setprofile(None)
            # timed with the hook paused and gc off; then one call with the hook on (as
            # pytest-benchmark makes), whose result is returned
            assert len(seen) > 2 and set(seen[:-1]) == {(False, None, None)}
            assert seen[-1] == (True, hook, None) and result == len(seen)
            assert gc.isenabled()

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.005)
        def test_pedantic_no_extra_call(fastprof_benchmark):
            seen.clear()
            sys.setprofile(hook)
            try:
                fastprof_benchmark.pedantic(probe, rounds=3, iterations=1)
            finally:
                sys.setprofile(None)
            assert seen == [(False, None, None)] * 3

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.005)
        def test_no_hooks_no_extra_call(fastprof_benchmark):
            if sys.gettrace() is not None or sys.getprofile() is not None:
                pytest.skip("this run has a trace or profile hook on (coverage?)")
            seen.clear()
            assert fastprof_benchmark(probe) == len(seen)
            assert all(s == (False, None, None) for s in seen)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.005, disable_gc=False)
        def test_gc_kept(fastprof_benchmark):
            seen.clear()
            fastprof_benchmark(probe)
            assert seen[-1][0] is True

        class Profile:
            enabled = True
            def __call__(self, *args):
                return None
        Profile.__module__ = "fastprof.profile"

        def test_refused(fastprof_benchmark):
            sys.setprofile(Profile())
            try:
                fastprof_benchmark(probe)
            finally:
                sys.setprofile(None)
    """
    )
    result = run(inner)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*ProfilerActiveError*a fastprof profiler is active*"])


def test_marker_with_an_unknown_key_is_a_usage_error(inner):
    inner.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.benchmark(rounds=3)
        def test_it(fastprof_benchmark):
            fastprof_benchmark(lambda: None)
    """
    )
    result = run(inner)
    assert result.ret != 0
    # pytest-benchmark, when installed, checks the marker first with its own words
    result.stdout.fnmatch_lines(
        [
            "*unknown benchmark option 'rounds'*"
            if "benchmark-" not in result.stdout.str()
            else "*benchmark mark can't have 'rounds'*"
        ]
    )


# --- save, compare, fail ----------------------------------------------------------------------

SUITE = """
import pytest
from fakeclock import CLOCK, noisy

SLOW = {slow}
NOISE = noisy({seed}, 0.6)

def work(cost):
    CLOCK.spend(cost)

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.05, warmup=False)
def test_slowed(fastprof_benchmark):
    fastprof_benchmark(work, 1e-3 * SLOW)

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.05, warmup=False)
def test_unchanged(fastprof_benchmark):
    fastprof_benchmark(work, 2e-4)

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.0, min_rounds=7, warmup=False)
def test_noisy(fastprof_benchmark):
    fastprof_benchmark.pedantic(lambda: work(5e-4 * {noisy_scale} * NOISE()), rounds=7)
"""


def test_save_compare_and_fail(inner):
    inner.makepyfile(test_suite=SUITE.format(slow=1.0, seed=1, noisy_scale=1.0))
    run(inner, "--fastprof-save=base").assert_outcomes(passed=3)

    # unchanged code, noisy benchmark shifted 8% inside its interval: passes
    inner.makepyfile(test_suite=SUITE.format(slow=1.0, seed=2, noisy_scale=1.08))
    result = run(inner, "--fastprof-compare", "--fastprof-compare-fail=median:5%")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["compared with *0001_base.json (fail on median:5%)"])
    assert "REGRESSION" not in result.stdout.str()

    # the slowed function fails the session, named with its old and new figures
    inner.makepyfile(test_suite=SUITE.format(slow=1.3, seed=1, noisy_scale=1.0))
    result = run(
        inner,
        "--fastprof-compare=base",
        "--fastprof-compare-fail=median:5%",
        "--fastprof-save=slow",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "REGRESSION test_suite.py::test_slowed: median 1 ms -> 1.3 ms (x1.300, 95% CI *"
            " beyond median:5%)",
            "1 benchmark(s) regressed",
        ]
    )
    assert "REGRESSION test_suite.py::test_unchanged" not in result.stdout.str()
    assert "REGRESSION test_suite.py::test_noisy" not in result.stdout.str()
    # compare without --fastprof-compare-fail reports but passes; latest is now 0002_slow
    result = run(inner, "--fastprof-compare")
    assert result.ret == 0 and "0002_slow.json" in result.stdout.str()

    # the same files through the command line
    first, second = sorted((inner.path / "runs").glob("*.json"))
    from fastprof.compare import main

    assert main([str(first), str(second), "--fail", "median:5%"]) == 1
    assert main([str(first), str(first), "--fail", "median:5%"]) == 0


def test_compare_usage_errors(inner):
    inner.makepyfile(test_x="def test_x(): pass")
    result = run(inner, "--fastprof-compare")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no saved runs in*"])
    result = run(inner, "--fastprof-compare-fail=median:5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected STAT:N% with STAT one of median, mean, min*"])
    result = run(inner, "--fastprof-save=a/b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# --- why is it slower -------------------------------------------------------------------------

PROFILED = """
import cProfile
import pytest
from fakeclock import CLOCK
import fastprof.pytest_plugin as plugin

plugin._profiler_factory = lambda: cProfile.Profile(CLOCK.now)

def parse():
    CLOCK.t += 2e-4  # inline, so the time is parse's own (tottime)

def transform():
    CLOCK.t += {cost}

def pipeline():
    parse()
    transform()

@pytest.mark.benchmark(timer=CLOCK.now, max_time=0.02, warmup=False)
def test_pipeline(fastprof_benchmark):
    fastprof_benchmark(pipeline)
"""


def test_profile_attribution(inner):
    inner.makepyfile(test_prof=PROFILED.format(cost=1e-4))
    first = run(inner, "--fastprof-profile", "--fastprof-save=base")
    first.assert_outcomes(passed=1)
    # the summary shows the profiled round per call, as --benchmark-cprofile's table
    first.stdout.fnmatch_lines(
        [
            "profiled round of test_pipeline (per call of the benchmarked function):",
            "  ncalls * tottime * cumtime  function",
            "       1 * 200 us * 200 us  test_prof.py:*(parse)",
            "       1 * 100 us * 100 us  test_prof.py:*(transform)",
        ]
    )
    (base,) = saved(inner)
    prof = base["benchmarks"][0]["fastprof"]["profile"]
    rows = {r["func"].rsplit("(", 1)[1].rstrip(")"): r for r in prof["rows"]}
    assert set(rows) >= {"parse", "transform", "pipeline"}
    n = prof["iterations"]
    assert rows["parse"]["tottime"] / n == pytest.approx(2e-4, rel=1e-3)
    assert rows["transform"]["ncalls"] == n
    assert not any("fastprof" in r["func"] and "bench" in r["func"] for r in prof["rows"])

    inner.makepyfile(test_prof=PROFILED.format(cost=6e-4))
    result = run(
        inner, "--fastprof-profile", "--fastprof-compare", "--fastprof-compare-fail=median:5%"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "REGRESSION test_prof.py::test_pipeline: median *",
            "  tottime per call that grew most in test_pipeline:",
            "    +500 us  test_prof.py:*(transform)  (100 us -> 600 us)",
            "profile of test_prof.py::test_pipeline: *.prof",
        ]
    )
    out = result.stdout.str()
    assert "(parse)" not in out.split("grew most")[1].split("profile of")[0]
    path = out.split("profile of test_prof.py::test_pipeline: ")[1].split()[0]
    st = pstats.Stats(path)
    names = {func[2]: v for func, v in st.stats.items()}
    assert names["transform"][2] == pytest.approx(6e-4 * names["transform"][1], rel=1e-3)


def test_profile_uses_fastprof_profile_by_default(inner, monkeypatch):
    made = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            import cProfile

            made.append(self)
            self._p = cProfile.Profile()
            self.enable, self.disable = self._p.enable, self._p.disable

        def create_stats(self):
            self._p.create_stats()
            self.stats = self._p.stats

    monkeypatch.setattr(sys.modules["fastprof.profile"], "Profile", Recorder)
    inner.makepyfile(
        test_d="""
        def test_d(fastprof_benchmark):
            fastprof_benchmark.pedantic(sum, args=([1, 2],), rounds=2)
    """
    )
    run(inner, "--fastprof-profile").assert_outcomes(passed=1)
    assert len(made) == 1


# --- CUDA -------------------------------------------------------------------------------------

CUDA_SUITE = """
import contextlib
import pytest
import fastprof.cuda
from fakeclock import CLOCK

class Timer:
    entered = 0
    def __init__(self, stream):
        self.stream = stream
    def __enter__(self):
        Timer.entered += 1
        self.t0 = CLOCK.t
        return self
    def __exit__(self, *exc):
        gpu = CLOCK.t - self.t0
        self.elapsed_ms = gpu * 1e3       # device time
        self.cpu_ms = gpu * 1e3 * 0.25    # the host only launched
        return False

fastprof.cuda.is_available = lambda: True
fastprof.cuda.status = lambda: "fake device ready"
fastprof.cuda.cuda_timer = lambda stream=None: Timer(stream)

@pytest.mark.benchmark(max_time=0.01, min_rounds=4, warmup=False)
def test_gpu(cuda_benchmark):
    cuda_benchmark.stream = "s1"
    Timer.entered = 0
    cuda_benchmark(CLOCK.spend, 1e-3)
    rounds = cuda_benchmark.stats["rounds"]
    assert Timer.entered == rounds + 3  # cold call, two calibration rounds, the rounds
"""


@pytest.fixture
def fake_cuda(monkeypatch):
    for name in ("is_available", "status", "cuda_timer"):
        monkeypatch.setattr(fastprof.cuda, name, getattr(fastprof.cuda, name, None), raising=False)


def test_cuda_benchmark_device_and_host_time(inner, fake_cuda):
    inner.makepyfile(test_gpu=CUDA_SUITE)
    run(inner, "--fastprof-save=gpu").assert_outcomes(passed=1)
    (doc,) = saved(inner)
    bench = doc["benchmarks"][0]
    assert bench["fastprof"]["kind"] == "cuda" and bench["fastprof"]["clock"] == "cuda_event"
    assert bench["stats"]["median"] == pytest.approx(1e-3, rel=1e-5)
    assert bench["fastprof"]["host"]["median"] == pytest.approx(2.5e-4, rel=1e-5)
    assert bench["fastprof"]["host"]["rounds"] == bench["stats"]["rounds"] == 10
    assert doc["fastprof"]["device"]["cuda"]["status"] == "fake device ready"


def test_cuda_benchmark_skips_with_the_reason(inner, fake_cuda, monkeypatch):
    inner.makepyfile(
        test_gpu="""
        def test_gpu(cuda_benchmark):
            raise AssertionError("must not run")
    """
    )
    monkeypatch.setattr(fastprof.cuda, "is_available", lambda: False, raising=False)
    monkeypatch.setattr(fastprof.cuda, "status", lambda: "no NVIDIA driver found", raising=False)
    result = run(inner, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cuda_benchmark: no usable GPU: no NVIDIA driver found*"])
    monkeypatch.setitem(sys.modules, "fastprof.cuda", None)
    result = run(inner, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cuda_benchmark: fastprof.cuda cannot be imported*"])


# --- output -----------------------------------------------------------------------------------


def test_terminal_summary_grouped_sorted_in_fitting_units(inner):
    inner.makepyfile(
        test_out="""
        import pytest
        from fakeclock import CLOCK

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, group="io")
        def test_io_b(fastprof_benchmark):
            fastprof_benchmark(CLOCK.spend, 2e-3)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.01, group="io")
        def test_io_a(fastprof_benchmark):
            fastprof_benchmark(CLOCK.spend, 5e-3)

        @pytest.mark.benchmark(timer=CLOCK.now, max_time=0.001, group="cpu")
        def test_cpu(fastprof_benchmark):
            fastprof_benchmark(CLOCK.spend, 3e-7)
    """
    )
    result = run(inner)
    result.stdout.fnmatch_lines(
        [
            "*- fastprof benchmarks -*",
            "benchmark group 'cpu': 1 (times in ns)",
            "Name*Min (ns)*Max*Mean*StdDev*Median*95% CI of median*IQR*Outliers*OPS*Rounds*Iterations",
            "-*",
            "test_cpu * 300.0*",
            "",
            "benchmark group 'io': 2 (times in ms)",
            "Name*Min (ms)*",
            "-*",
            "test_io_b * 2.0000 *",
            "test_io_a * 5.0000 *",
        ]
    )
    result = run(inner, "--fastprof-sort=name", "-k", "io")
    result.stdout.fnmatch_lines(["test_io_a * 5.0000 *", "test_io_b * 2.0000 *"])


def test_a_failing_function_fails_its_test_only(inner):
    inner.makepyfile(
        test_fail="""
        import gc, sys

        def boom():
            raise KeyError("inside")

        def test_boom(fastprof_benchmark):
            fastprof_benchmark(boom)

        def test_after():
            assert gc.isenabled() and sys.getprofile() is None
    """
    )
    result = run(inner, "--fastprof-save=f")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*KeyError: 'inside'*"])
    assert not (inner.path / "runs").exists()  # nothing was measured, nothing saved


# --- pytest-xdist and pytest-benchmark --------------------------------------------------------


def _subprocess_env(monkeypatch):
    """Make the package importable from inner subprocess runs (the tests may run uninstalled)."""
    root = str(Path(fastprof.__file__).resolve().parent.parent)
    monkeypatch.setenv(
        "PYTHONPATH",
        os.pathsep.join(
            [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )


def test_beside_pytest_benchmark(inner, monkeypatch):
    pytest.importorskip("pytest_benchmark")
    _subprocess_env(monkeypatch)
    inner.makepyfile(
        test_both="""
        import pytest

        @pytest.mark.benchmark(group="shared", min_rounds=3, max_time=0.01)
        def test_theirs(benchmark):
            assert benchmark(sum, [1, 2]) == 3

        @pytest.mark.benchmark(group="shared", min_rounds=3, max_time=0.01)
        def test_ours(fastprof_benchmark):
            assert fastprof_benchmark(sum, [1, 2]) == 3
            assert fastprof_benchmark.group == "shared"
    """
    )
    result = inner.runpytest_subprocess(
        *PLUGIN_ARGS,
        "-p",
        "benchmark",
        "--strict-markers",
        "--fastprof-save=both",
        "--fastprof-storage=runs",
        "--benchmark-json=theirs.json",
    )
    result.assert_outcomes(passed=2)
    ours = saved(inner)[0]["benchmarks"]
    assert [b["name"] for b in ours] == ["test_ours"] and ours[0]["group"] == "shared"
    theirs = json.loads((inner.path / "theirs.json").read_text())["benchmarks"]
    assert [b["name"] for b in theirs] == ["test_theirs"]
    # pytest-benchmark's own tool reads our file
    path = next((inner.path / "runs").glob("*.json"))
    code = "import sys; from pytest_benchmark.cli import main; sys.argv[0] = 'pytest-benchmark'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "compare", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "test_ours" in proc.stdout
