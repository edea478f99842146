"""Summary statistics of benchmark samples, as pytest-benchmark defines them, plus bootstrap
confidence intervals of the median and of the ratio of two runs."""

from __future__ import annotations

import math
from typing import Callable, Dict, Sequence, Tuple, Union

import numpy as np

#: samples in seconds: any sequence of floats, or a 1-D float array
Samples = Union[Sequence[float], np.ndarray]

#: confidence level of every interval fastprof reports
CI_LEVEL = 0.95
#: bootstrap resamples; the seed is fixed so that a decision never flips between two reads
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240601
# at most this many resampled values are held in memory at once (resamples x samples)
_CHUNK_ELEMENTS = 2_000_000
# above this many samples the resampling is replaced by its large-sample form (see _bootstrap)
LARGE_SAMPLE = 20_000


def _sorted_median(sorted_data: Samples, start: int, stop: int) -> float:
    """Return the median of sorted_data[start:stop] (sorted, non-empty)."""
    mid = (start + stop) // 2
    if (stop - start) % 2:
        return float(sorted_data[mid])
    return (float(sorted_data[mid - 1]) + float(sorted_data[mid])) / 2.0


def quartiles(sorted_data: Samples) -> Tuple[float, float]:
    """Return (q1, q3) of already sorted data, computed as pytest-benchmark does.

    Even counts take the medians of the lower and upper halves; odd counts use the weighted
    neighbours of the quarter positions (Tukey's hinges, "method 3" on Wikipedia's Quartile page).
    """
    n = len(sorted_data)
    if n == 0:
        raise ValueError("quartiles: expected at least one sample")
    if n == 1:
        return float(sorted_data[0]), float(sorted_data[0])
    if n % 2 == 0:
        half = n // 2
        return _sorted_median(sorted_data, 0, half), _sorted_median(sorted_data, half, n)
    k, r = divmod(n, 4)
    if r == 1:
        q1 = 0.25 * sorted_data[k - 1] + 0.75 * sorted_data[k]
        q3 = 0.75 * sorted_data[3 * k] + 0.25 * sorted_data[3 * k + 1]
    else:  # r == 3
        q1 = 0.75 * sorted_data[k] + 0.25 * sorted_data[k + 1]
        q3 = 0.25 * sorted_data[3 * k + 1] + 0.75 * sorted_data[3 * k + 2]
    return float(q1), float(q3)


_STATISTICS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "median": lambda a: np.median(a, axis=-1),
    "mean": lambda a: np.mean(a, axis=-1),
    "min": lambda a: np.min(a, axis=-1),
}

#: the statistics that comparisons and --fastprof-compare-fail accept
COMPARABLE = tuple(_STATISTICS)


def _bootstrap(data: np.ndarray, stat: str, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Return `resamples` values of statistic `stat` over resamples (with replacement) of data.

    Up to LARGE_SAMPLE samples the resamples are drawn. Above, drawing n values per resample
    would cost seconds, so the statistic of a resample is drawn from its distribution instead:
    the rank of a resample's minimum is exactly floor(n (1 - U^(1/n))); the rank of its median
    is Binomial(n - 1, 1/2) to first order; its mean is normal with the standard error.
    """
    n = data.shape[0]
    if n > LARGE_SAMPLE:
        ordered = np.sort(data)
        if stat == "median":
            return ordered[rng.binomial(n - 1, 0.5, size=resamples)]
        if stat == "min":
            u = rng.random(resamples)
            ranks = np.minimum(np.floor(n * (1.0 - u ** (1.0 / n))).astype(np.int64), n - 1)
            return ordered[ranks]
        return rng.normal(
            float(np.mean(data)), float(np.std(data, ddof=1)) / math.sqrt(n), size=resamples
        )
    fn = _STATISTICS[stat]
    out = np.empty(resamples, dtype=np.float64)
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = fn(data[idx])
    return out


def bootstrap_ci(
    data: Samples,
    stat: str = "median",
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Tuple[float, float]:
    """Return the percentile bootstrap confidence interval (lo, hi) of `stat` over data."""
    arr = np.asarray(data, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("bootstrap_ci: expected a non-empty 1-D sequence of samples")
    if stat not in _STATISTICS:
        raise ValueError(f"bootstrap_ci: stat must be one of {COMPARABLE}, got {stat!r}")
    if arr.size == 1:
        return float(arr[0]), float(arr[0])
    values = _bootstrap(arr, stat, resamples, np.random.default_rng(seed))
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def ratio_ci(
    old: Samples,
    new: Samples,
    stat: str = "median",
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Tuple[float, float, float]:
    """Return (ratio, lo, hi): stat(new) / stat(old) and its bootstrap confidence interval.

    The two runs are resampled independently. With a single sample on both sides the interval
    collapses to the point ratio.
    """
    if stat not in _STATISTICS:
        raise ValueError(f"ratio_ci: stat must be one of {COMPARABLE}, got {stat!r}")
    a = np.asarray(old, dtype=np.float64)
    b = np.asarray(new, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or b.ndim != 1 or b.size == 0:
        raise ValueError("ratio_ci: expected two non-empty 1-D sequences of samples")
    fn = _STATISTICS[stat]
    base = float(fn(a))
    point = float(fn(b)) / base if base > 0 else math.inf
    rng = np.random.default_rng(seed)
    ra = _bootstrap(a, stat, resamples, rng) if a.size > 1 else np.full(resamples, a[0])
    rb = _bootstrap(b, stat, resamples, rng) if b.size > 1 else np.full(resamples, b[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = rb / ra
    ratios = np.where(np.isfinite(ratios), ratios, np.inf)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)


def compute_stats(data: Samples, iterations: int = 1, ci: bool = True) -> Dict[str, object]:
    """Return pytest-benchmark's stats dict for per-iteration times `data` (seconds).

    Keys: min, max, mean, stddev, rounds, median, iqr, q1, q3, iqr_outliers, stddev_outliers,
    outliers ("stddev;iqr" counts), ld15iqr, hd15iqr, ops, total, iterations, data; with
    ci=True also median_ci [lo, hi] at CI_LEVEL.
    """
    arr = np.asarray(data, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("compute_stats: expected a non-empty 1-D sequence of samples")
    s = np.sort(arr)
    n = int(s.size)
    mean = float(np.mean(s))
    stddev = float(np.std(s, ddof=1)) if n > 1 else 0.0
    q1, q3 = quartiles(s)
    iqr = q3 - q1
    inside = s[(s >= q1 - 1.5 * iqr) & (s <= q3 + 1.5 * iqr)]
    out: Dict[str, object] = {
        "min": float(s[0]),
        "max": float(s[-1]),
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": float(np.median(s)),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": n - int(inside.size),
        "stddev_outliers": int(np.count_nonzero((s < mean - stddev) | (s > mean + stddev))),
        "ld15iqr": float(inside[0]) if inside.size else float(s[0]),
        "hd15iqr": float(inside[-1]) if inside.size else float(s[-1]),
        "ops": 1.0 / mean if mean > 0 else 0.0,
        "total": float(math.fsum(arr.tolist())),
        "iterations": int(iterations),
        "data": arr.tolist(),
    }
    out["outliers"] = f"{out['stddev_outliers']};{out['iqr_outliers']}"
    if ci:
        out["median_ci"] = list(bootstrap_ci(arr, "median"))
    return out
