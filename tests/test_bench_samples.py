"""The bootstrap of long runs and the summary a saved run keeps of them.

Above sample_stats.DRAWN_SAMPLES samples the statistic of each resample is drawn from its
distribution (order statistics of uniforms for the minimum and the median, a three-moment
gamma for the mean) instead of drawing every resample: these tests check that it agrees with
drawing the resamples, that its work does not grow with the sample count, that runs of up to
DRAWN_SAMPLES samples get the very figures they got before, and that comparisons read a
saved run's summary (fastprof.samples) as they read every sample.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fastprof.bench import regression, sample_stats, storage


def _timings(kind, n, seed, scale=1.0):
    """n per-call times (seconds) of a benchmark: lognormal, with outliers, or quantized."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(math.log(1e-6 * scale), 0.1, n)
    if kind == "outliers":
        x[rng.random(n) < 0.005] *= 20.0
    elif kind == "quantized":  # 20 ns steps, as a coarse clock divided by few iterations gives
        x = np.round(x / 2e-8) * 2e-8
    return x


# --- the bootstrap of long runs ---------------------------------------------------------------


def _drawn_ci(data, stat, resamples):
    """The interval of `stat` from resamples drawn one by one (the method of short runs)."""
    rng = np.random.default_rng(sample_stats.BOOTSTRAP_SEED)
    fn = {"median": np.median, "mean": np.mean, "min": np.min}[stat]
    values = [fn(data[rng.integers(0, data.size, data.size)]) for _ in range(resamples)]
    return np.quantile(values, [0.025, 0.975])


@pytest.mark.parametrize("n", [3001, 3000])  # the middle of odd and even counts
@pytest.mark.parametrize("stat", ["median", "mean"])
@pytest.mark.parametrize("kind", ["lognormal", "outliers"])
def test_long_run_intervals_match_drawn_resamples(n, stat, kind):
    data = _timings(kind, n, seed=n)
    drawn = _drawn_ci(data, stat, 3000)
    fast = sample_stats.bootstrap_ci(data, stat, resamples=20000)
    width = drawn[1] - drawn[0]
    assert width > 0
    # the Monte-Carlo error of 3000 drawn resamples alone is about 0.04 width
    assert fast[0] == pytest.approx(drawn[0], abs=0.12 * width)
    assert fast[1] == pytest.approx(drawn[1], abs=0.12 * width)


@pytest.mark.parametrize("n", [1001, 50_000])
def test_long_run_minimum_has_the_exact_rank_distribution(n):
    # the minimum of a resample is the j-th smallest sample with probability
    # (1 - j/n)^n - (1 - (j+1)/n)^n
    data = np.arange(n, dtype=np.float64)[::-1] * 1e-9 + 1e-6  # distinct, unsorted
    view = sample_stats._prepare(data, "test")
    draws = view.draws("min", 200_000, np.random.default_rng(5))
    ranks = np.rint((draws - 1e-6) / 1e-9).astype(int)
    for j in range(4):
        p = (1 - j / n) ** n - (1 - (j + 1) / n) ** n
        seen = np.mean(ranks == j)
        assert seen == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / draws.size))


class _CountingRng:
    """A numpy Generator that counts how many values it hands out."""

    def __init__(self, seed):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.values = 0

    def __getattr__(self, name):
        method = getattr(self.rng, name)

        def counted(*args, **kwargs):
            out = method(*args, **kwargs)
            self.values += int(np.size(out))
            return out

        return counted


@pytest.mark.parametrize("n", [1001, 19_999, 20_001, 200_000])
def test_bootstrap_work_does_not_grow_with_the_sample_count(n, monkeypatch):
    made = []

    def default_rng(seed=None):
        made.append(_CountingRng(seed))
        return made[-1]

    data = _timings("outliers", n, seed=1)
    monkeypatch.setattr(sample_stats.np.random, "default_rng", default_rng)
    sample_stats.compute_stats(data)
    for stat in sample_stats.COMPARABLE:
        sample_stats.ratio_ci(data, data * 1.1, stat)
    resamples = sample_stats.BOOTSTRAP_RESAMPLES
    # 2 random values per resample at most (the even median), not one per sample
    assert len(made) == 4 and all(r.values <= 2 * 2 * resamples for r in made)


@pytest.mark.parametrize("n", [2, 7, 100, sample_stats.DRAWN_SAMPLES])
def test_short_runs_get_the_figures_they_always_got(n):
    data = _timings("outliers", n, seed=n)
    rng = np.random.default_rng(sample_stats.BOOTSTRAP_SEED)
    resampled = data[rng.integers(0, n, size=(sample_stats.BOOTSTRAP_RESAMPLES, n))]
    lo, hi = np.quantile(np.median(resampled, axis=-1), [0.025, 0.975])
    assert sample_stats.compute_stats(data)["median_ci"] == [float(lo), float(hi)]


# --- the summary of a long run ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1001, 1002, 5000, 100_001, 1_000_000])
def test_summary_is_bounded_and_holds_what_comparisons_read(n):
    data = _timings("lognormal", n, seed=3)
    s = sample_stats.summarize(data)
    ordered = np.sort(data)
    ranks = np.array(s.ranks)
    assert s.count == n and len(s.ranks) == len(s.values) <= 400
    assert np.all(np.diff(ranks) > 0) and ranks[0] == 0 and ranks[-1] == n - 1
    assert list(s.values) == ordered[ranks].tolist()
    # the lowest ranks (the minimum of a resample), the middle and the percentiles
    assert set(range(20)) | {(n - 1) // 2, n // 2} <= set(s.ranks)
    assert set(np.round(np.linspace(0, n - 1, 101)).astype(int).tolist()) <= set(s.ranks)
    mean = float(np.mean(ordered))
    assert s.mean == mean
    assert s.m2 == pytest.approx(np.mean((ordered - mean) ** 2))
    assert s.m3 == pytest.approx(np.mean((ordered - mean) ** 3))
    assert sample_stats.SampleSummary.from_json(json.loads(json.dumps(s.to_json()))) == s


@pytest.mark.parametrize("kind", ["lognormal", "outliers", "quantized"])
@pytest.mark.parametrize("n", [1001, 1821, 20_000, 200_001])
def test_comparisons_read_a_summary_as_every_sample(kind, n):
    old = _timings(kind, n, seed=n)
    new = _timings(kind, n + 10, seed=n + 1, scale=1.04)
    for stat in sample_stats.COMPARABLE:
        full = sample_stats.ratio_ci(old, new, stat)
        short = sample_stats.ratio_ci(
            sample_stats.summarize(old), sample_stats.summarize(new), stat
        )
        mixed = sample_stats.ratio_ci(old, sample_stats.summarize(new), stat)
        assert short[0] == full[0] == mixed[0]  # the point ratio
        if stat == "median":  # interpolated between the summary's ranks: within 1e-4
            assert short[1:] == pytest.approx(full[1:], rel=1e-4)
        else:  # the minimum's ranks are all kept; the mean's moments are exact
            assert short == full
        assert mixed[1:] == pytest.approx(full[1:], rel=1e-4)


def _bench(name, samples):
    stats = sample_stats.compute_stats(samples, ci=False)
    section = {}
    if len(samples) > sample_stats.KEEP_SAMPLES:
        section["samples"] = sample_stats.summarize(samples).to_json()
    return {"name": name, "fullname": f"t.py::{name}", "stats": stats, "fastprof": section}


def _save_and_load(tmp_path, name, benches, keep_data):
    doc = {"benchmarks": storage.for_saving(benches, keep_data)}
    path = str(tmp_path / name)
    storage.save(doc, path)
    return storage.check_baseline(storage.load(path), path), path


def test_saved_runs_keep_a_summary_unless_asked_for_every_sample(tmp_path, capsys):
    from fastprof import compare as compare_cmd

    kinds = ("lognormal", "outliers", "quantized")
    old = [_bench(k, _timings(k, 30_000, seed=i)) for i, k in enumerate(kinds)]
    old.append(_bench("short", _timings("lognormal", 50, seed=9)))
    new = [_bench(k, _timings(k, 30_000, seed=10 + i, scale=1.06)) for i, k in enumerate(kinds)]
    new.append(_bench("short", _timings("lognormal", 50, seed=19)))
    full_old, full_old_path = _save_and_load(tmp_path, "old_full.json", old, True)
    small_old, small_old_path = _save_and_load(tmp_path, "old.json", old, False)
    _, full_new_path = _save_and_load(tmp_path, "new_full.json", new, True)
    small_new, small_new_path = _save_and_load(tmp_path, "new.json", new, False)

    for b in full_old["benchmarks"]:  # every sample, no summary
        assert len(b["stats"]["data"]) == b["stats"]["rounds"] and "samples" not in b["fastprof"]
    for b in small_old["benchmarks"]:
        if b["name"] == "short":  # a short run keeps its samples
            assert len(b["stats"]["data"]) == 50 and "samples" not in b["fastprof"]
        else:
            assert "data" not in b["stats"] and b["fastprof"]["samples"]["count"] == 30_000
    # the statistics themselves are saved whole either way
    for a, b in zip(full_old["benchmarks"], small_old["benchmarks"]):
        assert {k: v for k, v in a["stats"].items() if k != "data"} == {
            k: v for k, v in b["stats"].items() if k != "data"
        }
    size_full = (tmp_path / "old_full.json").stat().st_size
    size_small = (tmp_path / "old.json").stat().st_size
    assert size_small < 80_000 < 2_000_000 < size_full

    rules = [regression.parse_rule(f"{s}:3%") for s in sample_stats.COMPARABLE]
    full, _, _ = regression.compare_runs(full_old, storage.load(full_new_path), rules)
    small, _, _ = regression.compare_runs(small_old, small_new, rules)
    for f, s in zip(full, small):
        assert [r.stat for r in f.regressions] == [r.stat for r in s.regressions]
        for stat in sample_stats.COMPARABLE:
            a, b = f.stats[stat], s.stats[stat]
            assert not a.exact and not b.exact and a.ratio == b.ratio
            assert (b.lo, b.hi) == pytest.approx((a.lo, a.hi), rel=1e-4)
    assert any(c.regressions for c in full)
    # the command prints the same table from either pair of files
    for stat in sample_stats.COMPARABLE:
        assert compare_cmd.main([full_old_path, full_new_path, "--stat", stat]) == 0
        from_full = capsys.readouterr().out.splitlines()[2:]
        assert compare_cmd.main([small_old_path, small_new_path, "--stat", stat]) == 0
        assert capsys.readouterr().out.splitlines()[2:] == from_full


def test_for_saving_copies_and_drops_host_samples():
    long = _bench("gpu", _timings("lognormal", 2000, seed=1))
    long["fastprof"]["host"] = sample_stats.compute_stats(_timings("lognormal", 2000, seed=2))
    kept = storage.for_saving([long], keep_data=False)[0]
    assert "data" not in kept["stats"] and "data" not in kept["fastprof"]["host"]
    assert kept["fastprof"]["host"]["median"] == long["fastprof"]["host"]["median"]
    assert "data" in long["stats"] and "data" in long["fastprof"]["host"]  # not changed
    every = storage.for_saving([long], keep_data=True)[0]
    assert "samples" not in every["fastprof"] and "samples" in long["fastprof"]
    assert every["stats"]["data"] == long["stats"]["data"]


def _summary(**change):
    base = sample_stats.summarize(_timings("lognormal", 2000, seed=4)).to_json()
    base.update(change)
    return base


@pytest.mark.parametrize(
    "summary,what",
    [
        ([1, 2], "not an object"),
        (_summary(count=0), "'count' must be a positive integer"),
        (_summary(count=True), "'count' must be a positive integer"),
        (_summary(count=2**60), "'count' must be a positive integer"),
        (_summary(ranks="0,1"), "must be lists"),
        (_summary(values=[1e-6]), "as long as each other"),
        (_summary(ranks=[], values=[]), "as long as each other"),
        (_summary(count=2, ranks=[0, 1, 2], values=[1.0, 1.0, 1.0]), "as long as each other"),
        (_summary(count=3, ranks=[0, 1.5, 2], values=[1.0, 1.0, 1.0]), "integers from 0"),
        (_summary(count=3, ranks=[1, 2], values=[1.0, 1.0]), "integers from 0"),
        (_summary(count=3, ranks=[0, 1], values=[1.0, 1.0]), "integers from 0"),
        (_summary(count=5, ranks=[0, 3, 3, 4], values=[1.0] * 4), "must increase"),
        (_summary(count=2, ranks=[0, 1], values=[1.0, "x"]), "finite non-negative"),
        (_summary(count=2, ranks=[0, 1], values=[-1.0, 1.0]), "finite non-negative"),
        (_summary(count=2, ranks=[0, 1], values=[2.0, 1.0]), "must be sorted"),
        (_summary(mean=None), "'mean' must be"),
        (_summary(m2=-1.0), "'m2' must be"),
        (_summary(m3="1"), "'m3' must be a finite number"),
        (_summary(m3=False), "'m3' must be a finite number"),
    ],
)
def test_malformed_summaries_are_refused_naming_what_is_wrong(tmp_path, summary, what):
    bench = {"name": "a", "fullname": "t.py::a", "stats": {"min": 1, "mean": 1, "median": 1}}
    bench["fastprof"] = {"samples": summary}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"benchmarks": [bench]}))
    with pytest.raises(ValueError, match="fastprof.samples") as info:
        storage.load(str(path))
    assert what in str(info.value)


def test_a_summary_of_zeros_is_no_baseline(tmp_path):
    bench = _bench("a", _timings("lognormal", 2000, seed=1))
    bench["fastprof"]["samples"] = _summary(count=2, ranks=[0, 1], values=[0.0, 0.0])
    del bench["stats"]["data"]
    path = str(tmp_path / "zero.json")
    storage.save({"benchmarks": [bench]}, path)
    with pytest.raises(ValueError, match="all samples 0"):
        storage.check_baseline(storage.load(path), path)
    with pytest.raises(regression.ZeroBaselineError, match="all samples are 0"):
        regression.compare_benchmark(bench, bench, [])
