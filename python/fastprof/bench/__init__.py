"""Benchmark machinery behind fastprof's pytest fixtures and `python -m fastprof compare`:
timing (runner, fixture), statistics of samples (sample_stats), saved runs (storage), the
comparison of two runs and its regressions (regression, rules), profiled rounds (profiling) and
text tables (tables).

The names below load their module on first use: storage, rules and runner work without NumPy
(the plugin reads saved runs and checks --fastprof-* options with them); the statistics, and
so the fixtures and comparisons, need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fixture import BenchmarkFixture, CudaBenchmarkFixture, FixtureUsageError
    from .regression import Comparison, compare_runs, format_comparison
    from .rules import Rule, parse_rule
    from .runner import Options, ProfilerActiveError
    from .sample_stats import bootstrap_ci, compute_stats, ratio_ci

_HOMES = {
    "BenchmarkFixture": "fixture",
    "CudaBenchmarkFixture": "fixture",
    "FixtureUsageError": "fixture",
    "Comparison": "regression",
    "compare_runs": "regression",
    "format_comparison": "regression",
    "Rule": "rules",
    "parse_rule": "rules",
    "Options": "runner",
    "ProfilerActiveError": "runner",
    "bootstrap_ci": "sample_stats",
    "compute_stats": "sample_stats",
    "ratio_ci": "sample_stats",
}

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


def __getattr__(name: str) -> Any:
    """Return the public name `name`, importing its module on first use; raises
    AttributeError for other names."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
