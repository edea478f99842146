"""Unit tests of fastprof.bench: statistics, calibration plan, timing environment, storage,
comparison rules and the `python -m fastprof compare` command."""

from __future__ import annotations

import gc
import json
import math
import random
import statistics
import sys

import numpy as np
import pytest

from fastprof import compare as compare_cmd
from fastprof.bench import regression, runner, sample_stats, storage
from fastprof.bench.runner import Options

# --- statistics -------------------------------------------------------------------------------


def _ref_quartiles(data):
    """Quartiles from the textbook rules: medians of the halves for an even count; for 4k+1
    and 4k+3 points the weighted 1-based positions (k, k+1) and (k+1, k+2)."""
    s = sorted(data)
    n = len(s)
    if n == 1:
        return s[0], s[0]
    if n % 2 == 0:
        return statistics.median(s[: n // 2]), statistics.median(s[n // 2 :])
    k = n // 4
    at = lambda i: s[i - 1]  # noqa: E731  1-based
    if n % 4 == 1:
        return 0.25 * at(k) + 0.75 * at(k + 1), 0.75 * at(3 * k + 1) + 0.25 * at(3 * k + 2)
    return 0.75 * at(k + 1) + 0.25 * at(k + 2), 0.25 * at(3 * k + 2) + 0.75 * at(3 * k + 3)


@pytest.mark.parametrize("n", list(range(1, 14)) + [50, 101, 1001, 4000, 20_001])
def test_compute_stats_matches_plain_reference(n):
    rng = random.Random(n)
    data = [rng.lognormvariate(0, 0.5) * 1e-3 for _ in range(n)]
    if n > 8:
        data[3] = 1.0  # an outlier
    s = sample_stats.compute_stats(data, iterations=3)
    assert s["min"] == min(data) and s["max"] == max(data)
    assert s["mean"] == pytest.approx(statistics.fmean(data))
    assert s["stddev"] == pytest.approx(statistics.stdev(data) if n > 1 else 0.0)
    assert s["median"] == statistics.median(data)
    q1, q3 = _ref_quartiles(data)
    assert (s["q1"], s["q3"]) == (pytest.approx(q1), pytest.approx(q3))
    assert s["iqr"] == pytest.approx(q3 - q1)
    lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = [x for x in data if lo <= x <= hi]
    assert s["iqr_outliers"] == n - len(inside)
    mean, sd = statistics.fmean(data), s["stddev"]
    assert s["stddev_outliers"] == sum(1 for x in data if abs(x - mean) > sd)
    assert s["outliers"] == f"{s['stddev_outliers']};{s['iqr_outliers']}"
    assert s["ld15iqr"] == min(inside) and s["hd15iqr"] == max(inside)
    assert s["ops"] == pytest.approx(1 / statistics.fmean(data))
    assert s["rounds"] == n and s["iterations"] == 3 and s["data"] == data
    assert s["total"] == pytest.approx(sum(data))
    lo_ci, hi_ci = s["median_ci"]
    assert lo_ci <= s["median"] <= hi_ci


def test_stats_match_pytest_benchmark_when_installed():
    pb = pytest.importorskip("pytest_benchmark.stats")
    rng = random.Random(7)
    for n in (1, 2, 5, 6, 7, 9, 10, 31, 64):
        data = [rng.expovariate(1e3) for _ in range(n)]
        ref = pb.Stats()
        for x in data:
            ref.update(x)
        ours = sample_stats.compute_stats(data)
        for key in (
            "min",
            "max",
            "mean",
            "stddev",
            "median",
            "q1",
            "q3",
            "iqr",
            "iqr_outliers",
            "stddev_outliers",
            "outliers",
            "ld15iqr",
            "ops",
            "total",
        ):
            assert ours[key] == pytest.approx(getattr(ref, key)), (n, key)


def test_bootstrap_ci_is_deterministic_and_covers_the_median():
    rng = np.random.default_rng(1)
    covered = 0
    trials = 120
    for _ in range(trials):
        sample = rng.normal(0.0, 1.0, size=41)
        lo, hi = sample_stats.bootstrap_ci(sample)
        covered += lo <= 0.0 <= hi
    assert 0.85 <= covered / trials <= 1.0
    sample = list(rng.normal(size=30))
    assert sample_stats.bootstrap_ci(sample) == sample_stats.bootstrap_ci(sample)
    narrow = sample_stats.bootstrap_ci(list(rng.normal(size=2000)))
    wide = sample_stats.bootstrap_ci(list(rng.normal(size=20)))
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert sample_stats.bootstrap_ci([3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError, match="stat must be"):
        sample_stats.bootstrap_ci([1.0, 2.0], "mode")
    with pytest.raises(ValueError, match="non-empty"):
        sample_stats.bootstrap_ci([])


@pytest.mark.parametrize("stat", ["median", "mean", "min"])
def test_ratio_ci(stat):
    rng = np.random.default_rng(3)
    old = rng.lognormal(0.0, 0.05, size=200)
    slow = rng.lognormal(np.log(1.3), 0.05, size=200)
    ratio, lo, hi = sample_stats.ratio_ci(old, slow, stat)
    assert lo <= ratio <= hi or stat == "min"
    assert 1.2 < lo and hi < 1.4
    same = rng.lognormal(0.0, 0.05, size=200)
    ratio, lo, hi = sample_stats.ratio_ci(old, same, stat)
    assert lo < 1.02 and hi > 0.98
    assert sample_stats.ratio_ci([2.0], [3.0], stat) == (1.5, 1.5, 1.5)


# --- the round plan ---------------------------------------------------------------------------


def _drive_with_cost(plan, cost):
    seen = []

    def run_round(n):
        seen.append(n)
        return n * cost

    samples, n = runner.drive(plan, run_round)
    return samples, n, seen


@pytest.mark.parametrize(
    "cost,resolution,min_time",
    [
        (1e-7, 1e-9, 5e-6),
        (1e-6, 1e-4, 5e-6),
        (2e-3, 1e-9, 5e-6),
        (3e-8, 1e-8, 1e-3),
    ],
)
def test_calibration_reaches_the_timer_resolution(cost, resolution, min_time):
    opts = Options(min_time=min_time, max_time=0.05, min_rounds=4, warmup=False)
    samples, n, seen = _drive_with_cost(runner.calibrated_plan(opts, resolution), cost)
    target = max(min_time, resolution * opts.calibration_precision)
    assert n * cost >= target
    assert n == 1 or (n / 1.2 - 1) * cost < target * 1.05  # not wildly over
    assert len(samples) == max(4, math.ceil(0.05 / max(n * cost, resolution)))
    assert all(s == pytest.approx(cost) for s in samples)
    assert seen[-len(samples) :] == [n] * len(samples)


def test_warmup_is_bounded_by_iterations_and_time():
    opts = Options(max_time=0.01, min_rounds=3, warmup=True, warmup_iterations=50)
    _, n, seen = _drive_with_cost(runner.calibrated_plan(opts, 1e-9), 1e-3)
    assert n == 1 and sum(seen) - len(seen[-10:]) <= 60
    opts = Options(max_time=10.0, min_rounds=3, warmup=True, warmup_iterations=10**9)
    _, n, seen = _drive_with_cost(runner.calibrated_plan(opts, 1e-9), 0.1)
    assert len(seen) - 100 <= 8  # half a second of warm-up at most, then 100 rounds


def test_fixed_plan():
    samples, n, seen = _drive_with_cost(runner.fixed_plan(3, 2, 4), 1e-3)
    assert seen == [4] * 5 and n == 4 and samples == [pytest.approx(1e-3)] * 3


def test_options_are_checked():
    base = Options()
    assert runner.options_from(base, {"group": "g", "cprofile": True}, "here").group == "g"
    with pytest.raises(TypeError, match="unknown benchmark option 'rounds'"):
        runner.options_from(base, {"rounds": 3}, "here")
    with pytest.raises(ValueError, match="min_rounds"):
        runner.options_from(base, {"min_rounds": 0}, "here")
    with pytest.raises(TypeError, match="timer"):
        runner.options_from(base, {"timer": 3}, "here")


def test_stuck_timer_resolution_does_not_hang():
    assert runner.timer_resolution(lambda: 1.0) == 1e-9


# --- the timing environment -------------------------------------------------------------------


def test_quiet_pauses_and_restores_hooks_and_gc():
    def hook(*args):
        return hook

    seen = {}
    old_profile, old_trace = sys.getprofile(), sys.gettrace()
    sys.setprofile(hook)
    try:
        with runner.quiet(True, "here"):
            seen["profile"], seen["gc"] = sys.getprofile(), gc.isenabled()
        assert sys.getprofile() is hook and gc.isenabled()
    finally:
        sys.setprofile(old_profile)
        sys.settrace(old_trace)
    assert seen == {"profile": None, "gc": False}
    with runner.quiet(False, "here"):
        assert gc.isenabled()


def test_quiet_refuses_fastprof_profilers():
    class FakeProfile:
        enabled = True

        def __call__(self, *args):
            return None

    FakeProfile.__module__ = "fastprof.profile"
    old = sys.getprofile()
    sys.setprofile(FakeProfile())
    try:
        with pytest.raises(runner.ProfilerActiveError, match="a fastprof profiler is active"):
            with runner.quiet(True, "here"):
                pass
        assert isinstance(sys.getprofile(), FakeProfile)
    finally:
        sys.setprofile(old)


# --- storage ----------------------------------------------------------------------------------


def test_storage_numbering_and_lookup(tmp_path):
    folder = str(tmp_path / "runs")
    with pytest.raises(FileNotFoundError, match="no saved runs"):
        storage.find(folder, None)
    doc = {"benchmarks": []}
    first = storage.save(doc, storage.next_path(folder, "base"))
    second = storage.save(doc, storage.next_path(folder, "new"))
    assert first.endswith("0001_base.json") and second.endswith("0002_new.json")
    assert storage.find(folder, None) == second
    assert storage.find(folder, "latest") == second
    assert storage.find(folder, "base") == first
    assert storage.find(folder, "0001") == first
    assert storage.find(folder, first) == first
    with pytest.raises(FileNotFoundError, match="have: 0001_base.json, 0002_new.json"):
        storage.find(folder, "other")
    with pytest.raises(ValueError, match="--fastprof-save"):
        storage.next_path(folder, "a/b")
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": 1}')
    with pytest.raises(ValueError, match="'benchmarks' list"):
        storage.load(str(bad))


def test_document_has_machine_and_pytest_benchmark_keys(tmp_path):
    doc = storage.make_document([], str(tmp_path), {"cuda": "not used"}, "0.1.0")
    for key in ("machine_info", "commit_info", "benchmarks", "datetime", "version"):
        assert key in doc
    assert doc["machine_info"]["cpu"]["count"] >= 1
    assert doc["fastprof"]["device"] == {"cuda": "not used"}


# --- rules and the compare command ------------------------------------------------------------


def test_parse_rule():
    assert regression.parse_rule("median:5%") == regression.Rule("median", 0.05)
    assert regression.parse_rule(" min : 2.5% ") == regression.Rule("min", 0.025)
    for bad in ("median:5", "p99:5%", "median", "", "mean:x%"):
        with pytest.raises(ValueError, match="expected STAT:N%"):
            regression.parse_rule(bad)


def _bench(name, samples, group=None):
    return {
        "group": group,
        "name": name,
        "fullname": f"tests/test_x.py::{name}",
        "stats": sample_stats.compute_stats(samples, ci=False),
        "fastprof": {},
    }


def _write(path, benches):
    path.write_text(json.dumps({"benchmarks": benches}))
    return str(path)


def _noisy(center, spread, n, seed):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.fixture
def runs(tmp_path):
    old = [
        _bench("test_slowed", _noisy(1e-3, 0.02, 40, 1)),
        _bench("test_same", _noisy(2e-6, 0.02, 40, 2)),
        _bench("test_noisy", _noisy(5e-4, 0.6, 7, 3)),
    ]
    new_ok = [
        _bench("test_slowed", _noisy(1e-3, 0.02, 40, 4)),
        _bench("test_same", _noisy(2e-6, 0.02, 40, 5)),
        _bench("test_noisy", _noisy(5.4e-4, 0.6, 7, 6)),
    ]
    new_bad = [_bench("test_slowed", _noisy(1.3e-3, 0.02, 40, 7))] + new_ok[1:]
    return (
        _write(tmp_path / "a.json", old),
        _write(tmp_path / "ok.json", new_ok),
        _write(tmp_path / "bad.json", new_bad),
    )


def test_compare_command_exit_codes(runs, capsys, tmp_path):
    old, ok, bad = runs
    assert compare_cmd.main([old, ok, "--fail", "median:5%"]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" not in out and "test_noisy" in out
    assert compare_cmd.main([old, bad, "--fail", "median:5%"]) == 1
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("REGRESSION"))
    assert "test_slowed" in line and "-> " in line and "median" in line
    assert "test_same" not in line and "1 benchmark(s) regressed" in out
    # without a rule nothing fails; a huge threshold lets it pass
    assert compare_cmd.main([old, bad]) == 0
    assert compare_cmd.main([old, bad, "--fail", "median:50%"]) == 0
    assert compare_cmd.main([old, bad, "--fail", "min:5%", "--fail", "mean:5%"]) == 1
    capsys.readouterr()
    assert compare_cmd.main([old, bad, "--fail", "p90:5%"]) == 2
    assert "expected STAT:N%" in capsys.readouterr().err
    assert compare_cmd.main([old, str(tmp_path / "missing.json")]) == 2
    assert compare_cmd.main([old]) == 2
    assert compare_cmd.main(["--help"]) == 0


def test_noisy_benchmark_within_its_interval_passes(runs):
    old, ok, _ = runs
    a, b = storage.load(old), storage.load(ok)
    comps, _, _ = regression.compare_runs(a, b, [regression.parse_rule("median:5%")])
    noisy = next(c for c in comps if c.name == "test_noisy").stats["median"]
    assert noisy.ratio > 1.05  # the point estimate alone would cry wolf
    assert noisy.lo <= 1.05 and not any(c.regressions for c in comps)


def test_compare_without_raw_samples_uses_the_point_ratio(tmp_path):
    old = _bench("test_a", [1.0, 1.0, 1.0])
    new = _bench("test_a", [1.2, 1.2, 1.2])
    del old["stats"]["data"], new["stats"]["data"]
    comps, _, _ = regression.compare_runs(
        {"benchmarks": [old]}, {"benchmarks": [new]}, [regression.parse_rule("mean:10%")]
    )
    assert comps[0].stats["mean"].exact and comps[0].regressions


def test_quiet_restores_everything_when_the_timed_code_raises():
    def hook(*args):
        return hook

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        with pytest.raises(ZeroDivisionError):
            with runner.quiet(True, "here"):
                _ = 1 / 0
        assert sys.getprofile() is hook and gc.isenabled()
    finally:
        sys.setprofile(old)


@pytest.mark.parametrize("stat", ["median", "mean", "min"])
def test_large_sample_bootstrap_matches_drawn_resamples(stat, monkeypatch):
    rng = np.random.default_rng(11)
    data = rng.lognormal(0.0, 0.3, size=20_000 + 5000)
    fast = sample_stats.bootstrap_ci(data, stat, resamples=2000)
    monkeypatch.setattr(sample_stats, "DRAWN_SAMPLES", 10**9)  # force drawing every resample
    drawn = sample_stats.bootstrap_ci(data, stat, resamples=300)
    width = drawn[1] - drawn[0]
    assert width > 0
    assert fast[0] == pytest.approx(drawn[0], abs=0.3 * width)
    assert fast[1] == pytest.approx(drawn[1], abs=0.3 * width)


def test_profile_labels_do_not_depend_on_the_checkout(tmp_path):
    from fastprof.bench import profiling

    root = str(tmp_path / "proj")
    key = (str(tmp_path / "proj" / "pkg" / "mod.py"), 12, "work")
    assert profiling.func_label(key, root) == "pkg/mod.py:12(work)"
    site = "/venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py"
    assert profiling.func_label((site, 3, "sum"), root) == "numpy/core/fromnumeric.py:3(sum)"
    assert profiling.func_label(("~", 0, "<built-in method len>"), root) == "<built-in method len>"
    assert profiling.func_label(("/elsewhere/x.py", 1, "f"), root) == "/elsewhere/x.py:1(f)"
    old = {
        "iterations": 2,
        "rows": [{"func": "a", "tottime": 2e-3}, {"func": "b", "tottime": 4e-3}],
    }
    new = {
        "iterations": 1,
        "rows": [
            {"func": "a", "tottime": 1e-3},
            {"func": "b", "tottime": 5e-3},
            {"func": "c", "tottime": 1e-4},
        ],
    }
    grown = profiling.growth(old, new)
    assert [g["func"] for g in grown] == ["b", "c"]
    assert grown[0]["delta"] == pytest.approx(3e-3) and grown[1]["old"] == 0.0
