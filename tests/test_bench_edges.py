"""Edge cases of the benchmark machinery, driven directly (no inner pytest run): a timer that
never moves, foreign C-level profilers (cProfile), pedantic's teardown, extra_info snapshots and
JSON safety, async errors, the profiled round under a foreign hook, saving, the comparison
table, and what loads without NumPy.

Timings use fake clocks, so no figure depends on the machine's speed.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import os
import pstats
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import numpy as np
import pytest

import fastprof
from fastprof.bench import fixture as fixture_mod
from fastprof.bench import regression, rules, runner, sample_stats, storage
from fastprof.bench.runner import Options


class FakeClock:
    """A clock that moves 1 ns per read, plus what the benchmarked code spends."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1e-9
        return self.t

    def spend(self, seconds: float) -> None:
        self.t += seconds


def make_fixture(
    clock: FakeClock, profiler_factory: Any = None, **options: Any
) -> fixture_mod.BenchmarkFixture:
    """Return a BenchmarkFixture timing against clock, keeping its results in .recorded."""
    recorded: List[Dict[str, Any]] = []
    opts = Options(timer=clock.now, max_time=0.01, warmup=False, **options).check()
    fx = fixture_mod.BenchmarkFixture(
        name="test_x",
        fullname="test_x.py::test_x",
        options=opts,
        record=lambda result, prof: recorded.append(result),
        profiler_factory=profiler_factory,
    )
    fx.recorded = recorded
    return fx


# --- a timer that never moves -----------------------------------------------------------------


class Wall:
    """A fake real clock: moves only by what the rounds cost."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_timer_that_never_moves_is_an_error_within_the_real_clock_budget():
    wall = Wall()
    calls = [0]

    def run_round(n: int) -> float:
        calls[0] += n
        wall.t += n * 1e-7  # each call costs 100 ns of real time
        return 0.0  # the benchmark's timer did not move

    opts = Options(timer=lambda: 0.0, warmup=False)
    plan = runner.calibrated_plan(opts, 1e-9, wall=wall)
    with pytest.raises(runner.TimerStuckError, match="benchmark option timer.*did not advance"):
        runner.drive(plan, run_round)
    budget_calls = runner.STUCK_TIMER_SECONDS / 1e-7
    assert 0.5 * budget_calls <= calls[0] <= budget_calls  # the budget, not 10x past it
    assert isinstance(runner.TimerStuckError("x"), ValueError)


def test_a_timer_that_moves_late_still_calibrates():
    wall = Wall()

    def run_round(n: int) -> float:
        wall.t += n * 1e-7
        return 0.0 if n < 1000 else n * 1e-6  # a coarse timer: moves once rounds are long

    opts = Options(timer=lambda: 0.0, warmup=False, max_time=0.0, min_rounds=3)
    samples, n = runner.drive(runner.calibrated_plan(opts, 1e-9, wall=wall), run_round)
    assert n >= 1000 and samples == [pytest.approx(1e-6)] * 3


# --- foreign profilers ------------------------------------------------------------------------


def _work() -> int:
    return sum(range(10))


def _after() -> int:
    return 1


def test_quiet_pauses_cprofile_and_keeps_it_collecting_after():
    before_profile, before_trace = sys.getprofile(), sys.gettrace()
    pr = cProfile.Profile()
    pr.enable()
    try:
        installed = sys.getprofile()  # the profiler object below 3.12, None on 3.12+
        _work()
        with runner.quiet(True, "here"):
            inside = sys.getprofile()
            _work()
        restored = sys.getprofile()
        _after()  # 'Profile' object is not callable here when cProfile was set back badly
    finally:
        pr.disable()
        sys.setprofile(before_profile)
        sys.settrace(before_trace)
    assert inside is None and restored is installed
    names = {(fn, name): v for (fn, _, name), v in pstats.Stats(pr).stats.items()}
    assert names[(__file__, "_work")][1] == 1  # the call inside quiet was not profiled
    assert names[(__file__, "_after")][1] == 1  # profiling went on after


def test_quiet_leaves_a_hook_python_cannot_set_back_alone(monkeypatch):
    # a C-level hook that is neither callable nor cProfile's: removing it could not be undone
    class Holder:
        pass

    holder = Holder()
    calls: List[Any] = []
    monkeypatch.setattr(sys, "getprofile", lambda: holder)
    monkeypatch.setattr(sys, "setprofile", calls.append)
    with runner.quiet(True, "here"):
        pass
    assert calls == []


# --- pedantic's teardown ----------------------------------------------------------------------


def test_pedantic_teardown_runs_once_per_round_without_setup():
    clock = FakeClock()
    fx = make_fixture(clock)
    seen: List[Any] = []
    fx.pedantic(
        clock.spend,
        args=(1e-3,),
        teardown=lambda *a, **k: seen.append((a, k)),
        rounds=3,
        warmup_rounds=1,
        iterations=5,
    )
    assert seen == [((1e-3,), {})] * 4  # one warm-up round and three timed rounds
    assert fx.stats["median"] == pytest.approx(1e-3, rel=1e-5)


def test_pedantic_teardown_runs_once_per_call_with_setup():
    clock = FakeClock()
    fx = make_fixture(clock)
    made: List[float] = []

    def setup() -> Any:
        made.append(1e-3 * (len(made) + 1))
        return (made[-1],), {}

    seen: List[Any] = []
    fx.pedantic(clock.spend, setup=setup, teardown=seen.append, rounds=2, iterations=3)
    assert seen == made and len(made) == 6  # each call's own arguments, once each


def test_async_pedantic_teardown_runs_once_per_round():
    clock = FakeClock()
    fx = make_fixture(clock)
    seen: List[Any] = []

    async def work(x: float) -> float:
        clock.spend(x)
        return x

    assert fx.pedantic(work, args=(1e-3,), teardown=seen.append, rounds=2, iterations=3) == 1e-3
    assert seen == [1e-3, 1e-3]


# --- extra_info -------------------------------------------------------------------------------


def test_each_labelled_benchmark_keeps_the_extra_info_it_finished_with():
    clock = FakeClock()
    fx = make_fixture(clock)
    fx.extra_info["impl"] = "builtin"
    fx("builtin", clock.spend, 1e-4)
    fx.extra_info["impl"] = "custom"
    fx("custom", clock.spend, 2e-4)
    fx.extra_info["size"] = 3  # after the last benchmark: saved with it, as pytest-benchmark does
    fx.test_finished()
    first, second = fx.recorded
    assert first["extra_info"] == {"impl": "builtin"}
    assert second["extra_info"] == {"impl": "custom", "size": 3}
    fx.extra_info["impl"] = "changed later"
    assert first["extra_info"] == {"impl": "builtin"}
    with pytest.raises(TypeError, match="extra_info: expected a dict"):
        fx.extra_info = 5


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_extra_info_and_params_are_made_json_safe():
    loop: List[Any] = [1]
    loop.append(loop)
    value = {
        "np_int": np.int64(5),
        "np_float": np.float32(0.5),
        "np_bool": np.bool_(True),
        "zero_d": np.array(7),
        "tuple": (1, "a"),
        3: "int key",
        "obj": object(),
        "bad": BadRepr(),
        "loop": loop,
    }
    safe = fixture_mod._json_safe(value)
    assert safe["np_int"] == 5 and type(safe["np_int"]) is int
    assert safe["np_float"] == 0.5 and type(safe["np_float"]) is float
    assert safe["np_bool"] is True and safe["zero_d"] == 7
    assert safe["tuple"] == [1, "a"] and safe["3"] == "int key"
    assert safe["obj"].startswith("UNSERIALIZABLE[<object object at ")
    assert safe["bad"] == "UNSERIALIZABLE[<BadRepr object>]"
    assert safe["loop"] == [1, "UNSERIALIZABLE[<list containing itself>]"]
    json.dumps(safe)  # nothing left that JSON cannot write


# --- async errors -----------------------------------------------------------------------------


def test_an_async_error_is_not_chained_to_the_event_loop_lookup():
    fx = make_fixture(FakeClock())

    async def bad() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom") as info:
        fx(bad)
    assert info.value.__context__ is None and info.value.__cause__ is None
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # the fixture's loop is gone


# --- the profiled round -----------------------------------------------------------------------


def test_the_profiled_round_pauses_foreign_hooks():
    events: List[str] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        events.append(event)

    clock = FakeClock()
    fx = make_fixture(clock, profiler_factory=fastprof.Profile)
    before = sys.getprofile()
    sys.setprofile(hook)
    try:
        fx.pedantic(clock.spend, args=(1e-4,), rounds=2)
        restored = sys.getprofile()
    finally:
        sys.setprofile(before)
    assert restored is hook
    assert fx.recorded[0]["fastprof"]["profile"]["iterations"] == 1


# --- saving and comparing ---------------------------------------------------------------------


def test_a_failing_save_leaves_no_file_behind(tmp_path):
    path = str(tmp_path / "runs" / "0001_x.json")
    with pytest.raises(TypeError):
        storage.save({"benchmarks": [{"extra_info": {"obj": object()}}]}, path)
    assert os.listdir(tmp_path / "runs") == []
    storage.save({"benchmarks": []}, path)
    assert os.listdir(tmp_path / "runs") == ["0001_x.json"]


def _bench(fullname: str, median: float, mean: float) -> Dict[str, Any]:
    return {
        "fullname": fullname,
        "name": fullname,
        "stats": {"min": min(median, mean), "mean": mean, "median": median},
    }


def test_the_comparison_shows_the_statistic_its_rules_judge():
    old = {"benchmarks": [_bench("t", 1e-3, 1e-3)]}
    new = {"benchmarks": [_bench("t", 1e-3, 2e-3)]}  # the mean doubled, the median did not
    mean_rule = [rules.parse_rule("mean:5%")]
    comps, _, _ = regression.compare_runs(old, new, mean_rule)
    lines = regression.format_comparison(comps, mean_rule)
    assert "old mean" in lines[0] and "2.000" in lines[1] and lines[1].endswith("REGRESSION")
    lines = regression.format_comparison(comps, mean_rule, "median")
    assert "old median" in lines[0] and lines[1].endswith("REGRESSION (mean)")
    assert regression.format_comparison(comps, [])[0].split()[1:3] == ["old", "median"]


def test_rules_parse_without_numpy_and_name_the_comparable_statistics():
    assert rules.RULE_STATS == sample_stats.COMPARABLE
    assert regression.parse_rule is rules.parse_rule and regression.Rule is rules.Rule
    with pytest.raises(ValueError, match="--fastprof-compare-fail: expected STAT:N%"):
        rules.parse_rule("max:5%")


def test_saved_runs_and_rules_load_without_numpy(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        sys.modules["numpy"] = None
        import fastprof.bench as bench
        from fastprof.bench import rules, runner, storage
        assert str(bench.parse_rule("mean:5%")) == "mean:5%"
        assert bench.Options().min_rounds == 5
        try:
            bench.compute_stats
        except ImportError:
            print("STATS NEED NUMPY")
        """
    )
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fastprof.__file__)))
    env = dict(os.environ, PYTHONPATH=package_root)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=str(tmp_path)
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "STATS NEED NUMPY"
