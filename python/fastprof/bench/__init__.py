"""Benchmark machinery behind fastprof's pytest fixtures and `python -m fastprof compare`:
timing (runner, fixture), statistics of samples (sample_stats), saved runs (storage), the
comparison of two runs and its regressions (regression), profiled rounds (profiling) and text
tables (tables)."""

from .fixture import BenchmarkFixture, CudaBenchmarkFixture, FixtureUsageError
from .regression import Comparison, Rule, compare_runs, format_comparison, parse_rule
from .runner import Options, ProfilerActiveError
from .sample_stats import bootstrap_ci, compute_stats, ratio_ci

__all__ = [
    "BenchmarkFixture",
    "Comparison",
    "CudaBenchmarkFixture",
    "FixtureUsageError",
    "Options",
    "ProfilerActiveError",
    "Rule",
    "bootstrap_ci",
    "compare_runs",
    "compute_stats",
    "format_comparison",
    "parse_rule",
    "ratio_ci",
]
