"""Benchmark machinery behind fastprof's pytest fixtures and `python -m fastprof compare`:
timing (runner, fixture), statistics (stats), saved runs (storage), comparison (compare),
profiled rounds (profiling) and text tables (report)."""

from .compare import Comparison, Rule, compare_runs, format_comparison, parse_rule
from .fixture import BenchmarkFixture, CudaBenchmarkFixture, FixtureUsageError
from .runner import Options, ProfilerActiveError
from .stats import bootstrap_ci, compute_stats, ratio_ci

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
