"""The statistics of a benchmark's samples, before and after the bootstrap of long runs drew
each resample's statistic from its distribution: compute_stats (what each fastprof_benchmark
pays at the end of its rounds) and ratio_ci of min, mean and median (what a comparison pays
per benchmark), old and new taking turns at each sample count.

    python benchmarks/bench_sample_stats.py [--old-rev 3b2bc0a] [--reps 7]

The old module is python/fastprof/bench/sample_stats.py at --old-rev (read with git show) or
the file given with --old.  Prints, per sample count, the median time of each, their ratio,
the comparison's time on two saved summaries (fastprof.samples), and how far the new
intervals of the ratio (min, mean, median: the largest) are from the old ones, in widths of
the old interval, beside how far the old ones move with another seed (the Monte-Carlo noise
of 1000 resamples).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from types import ModuleType
from typing import Callable, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from fastprof.bench import sample_stats as new  # noqa: E402

SIZES = (100, 1000, 1001, 2000, 5000, 10_000, 19_999, 20_001, 100_000, 1_000_000)


def load_old(rev: str, path: Optional[str]) -> ModuleType:
    """The old sample_stats module: the file at path, else the one at git revision rev."""
    if path is None:
        text = subprocess.run(
            ["git", "show", f"{rev}:python/fastprof/bench/sample_stats.py"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        fd, path = tempfile.mkstemp(suffix="_sample_stats_old.py")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
    spec = importlib.util.spec_from_file_location("sample_stats_old", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timings(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    """n per-call times of a ~1 us function: lognormal, 0.5% outliers 20x slower."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(np.log(1e-6 * scale), 0.1, n)
    x[rng.random(n) < 0.005] *= 20.0
    return x


def clock(fn: Callable[..., object], *args: object) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def compare3(mod: ModuleType, a: object, b: object) -> None:
    """What a comparison computes per benchmark: the ratio's interval of min, mean, median."""
    for stat in new.COMPARABLE:
        mod.ratio_ci(a, b, stat)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old-rev", default="3b2bc0a", help="git revision of the old module")
    p.add_argument("--old", default=None, help="path of the old module (instead of git)")
    p.add_argument("--reps", type=int, default=7, help="turns of each (default 7)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="sample counts")
    args = p.parse_args(argv)
    old = load_old(args.old_rev, args.old)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    print(
        f"{'samples':>9}  {'compute_stats old':>17} {'new':>9} {'old/new':>8}  "
        f"{'ratio_ci x3 old':>15} {'new':>9} {'old/new':>8}  {'summaries':>9}  "
        f"{'CI shift/width':>14} {'old reseeded':>12}"
    )
    for n in sizes:
        a, b = timings(n, 1), timings(n, 2, 1.03)
        sa, sb = new.summarize(a), new.summarize(b)
        t = {k: [] for k in ("stats_old", "stats_new", "ratio_old", "ratio_new", "summ")}
        mods = {"old": old, "new": new}
        for rep in range(args.reps):
            order = ("old", "new") if rep % 2 == 0 else ("new", "old")  # interleaved
            for name in order:
                mod = mods[name]
                t[f"stats_{name}"].append(clock(mod.compute_stats, a))
                t[f"ratio_{name}"].append(clock(compare3, mod, a, b))
            t["summ"].append(clock(compare3, new, sa, sb))
        med = {k: statistics.median(v) for k, v in t.items()}
        shift = reseed = 0.0
        for s in new.COMPARABLE:
            _, lo0, hi0 = old.ratio_ci(a, b, s)
            _, lo1, hi1 = new.ratio_ci(a, b, s)
            _, lo2, hi2 = old.ratio_ci(a, b, s, seed=old.BOOTSTRAP_SEED + 1)
            if hi0 > lo0:
                shift = max(shift, abs(lo1 - lo0) / (hi0 - lo0), abs(hi1 - hi0) / (hi0 - lo0))
                reseed = max(reseed, abs(lo2 - lo0) / (hi0 - lo0), abs(hi2 - hi0) / (hi0 - lo0))
        print(
            f"{n:>9}  {med['stats_old'] * 1e3:>14.2f} ms {med['stats_new'] * 1e3:>6.2f} ms "
            f"{med['stats_old'] / med['stats_new']:>7.1f}x  "
            f"{med['ratio_old'] * 1e3:>12.2f} ms {med['ratio_new'] * 1e3:>6.2f} ms "
            f"{med['ratio_old'] / med['ratio_new']:>7.1f}x  {med['summ'] * 1e3:>6.2f} ms  "
            f"{shift:>14.3f} {reseed:>12.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
