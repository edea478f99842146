"""Comparing two runs: ratio of each statistic with its bootstrap confidence interval, and the
regressions a --fail rule catches (only when the whole interval lies beyond the threshold)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..report.escape import printable
from . import profiling, storage
from .rules import Rule as Rule
from .rules import parse_rule as parse_rule
from .sample_stats import COMPARABLE, Samples, SampleSummary, ratio_ci
from .tables import fmt_time, pick_unit


@dataclass
class StatComparison:
    """One statistic of one benchmark in both runs."""

    stat: str
    old: float
    new: float
    ratio: float
    lo: float
    hi: float
    exact: bool  # True when samples were missing (raw or summary): the interval is the point ratio


@dataclass
class Comparison:
    """One benchmark present in both runs."""

    fullname: str
    name: str
    stats: Dict[str, StatComparison]
    regressions: List[Rule] = field(default_factory=list)
    growth: List[Dict[str, Any]] = field(default_factory=list)
    profiled: Tuple[bool, bool] = (False, False)  # (baseline, new run) carry a profiled round


def _samples(bench: Dict[str, Any]) -> Optional[Samples]:
    """The raw samples of a benchmark, else the summary of them a saved run keeps, else None."""
    data = storage.raw_samples(bench)
    if data is not None:
        return data
    summary = storage.sample_summary(bench)
    return SampleSummary.from_json(summary) if summary else None


def _all_zero(samples: Samples) -> bool:
    values = samples.values if isinstance(samples, SampleSummary) else samples
    return not any(x > 0 for x in values)


class ZeroBaselineError(ValueError):
    """A baseline figure is zero: no ratio to it means anything."""


def compare_benchmark(old: Dict[str, Any], new: Dict[str, Any], rules: List[Rule]) -> Comparison:
    """Return the Comparison of one benchmark's old and new result dicts (as storage.load
    checks them).  Raises ZeroBaselineError when an old figure or all old samples are zero:
    such a comparison is an error, never a pass."""
    stats: Dict[str, StatComparison] = {}
    a, b = _samples(old), _samples(new)
    if a is not None and _all_zero(a):
        raise ZeroBaselineError(f"baseline of {old['fullname']!r}: all samples are 0")
    for stat in COMPARABLE:
        o, n = float(old["stats"][stat]), float(new["stats"][stat])
        if not o > 0:
            raise ZeroBaselineError(f"baseline of {old['fullname']!r}: {stat} is {o:g}")
        if a is not None and b is not None:
            ratio, lo, hi = ratio_ci(a, b, stat)
            exact = False
        else:
            ratio = n / o
            lo = hi = ratio
            exact = True
        stats[stat] = StatComparison(stat, o, n, ratio, lo, hi, exact)
    comp = Comparison(new["fullname"], new.get("name", new["fullname"]), stats)
    comp.regressions = [r for r in rules if stats[r.stat].lo > 1.0 + r.threshold]
    old_prof = old.get("fastprof", {}).get("profile")
    new_prof = new.get("fastprof", {}).get("profile")
    comp.profiled = (old_prof is not None, new_prof is not None)
    if comp.regressions and old_prof and new_prof:
        comp.growth = profiling.growth(old_prof, new_prof)
    return comp


def compare_runs(
    old_doc: Dict[str, Any], new_doc: Dict[str, Any], rules: List[Rule]
) -> Tuple[List[Comparison], List[str], List[str]]:
    """Return (comparisons, only_old, only_new): benchmarks matched by fullname."""
    old = {b["fullname"]: b for b in old_doc.get("benchmarks", [])}
    new = {b["fullname"]: b for b in new_doc.get("benchmarks", [])}
    comps = [compare_benchmark(old[k], new[k], rules) for k in new if k in old]
    return comps, sorted(set(old) - set(new)), sorted(set(new) - set(old))


def format_comparison(
    comps: List[Comparison], rules: List[Rule], stat: Optional[str] = None
) -> List[str]:
    """Return the lines of the comparison table (ratio new/old of `stat` with its 95% CI) and,
    for each regression, the old and new figures and the functions whose tottime grew.

    stat None shows the statistic of the first rule (the median when there is none). A row is
    flagged REGRESSION when a rule on the shown statistic caught it, REGRESSION (STAT, ...)
    naming the statistics when only rules on others did."""
    if not comps:
        return ["no benchmark in common with the baseline"]
    if stat is None:
        stat = rules[0].stat if rules else "median"
    unit = pick_unit(c.stats[stat].old for c in comps)
    names = {c.fullname: printable(c.name) for c in comps}
    width = max(len(n) for n in names.values())
    lines = [
        f"{'Name'.ljust(width)}  {'old ' + stat:>12}  {'new ' + stat:>12}  "
        f"{'ratio':>7}  95% CI of ratio"
    ]
    for c in comps:
        s = c.stats[stat]
        caught = sorted({r.stat for r in c.regressions})
        flag = ""
        if stat in caught:
            flag = "  REGRESSION"
        elif caught:
            flag = f"  REGRESSION ({', '.join(caught)})"
        ci = "(no raw samples)" if s.exact else f"[{s.lo:.3f}, {s.hi:.3f}]"
        lines.append(
            f"{names[c.fullname].ljust(width)}  {fmt_time(s.old, unit):>12}  "
            f"{fmt_time(s.new, unit):>12}  {s.ratio:7.3f}  {ci}{flag}"
        )
    for c in comps:
        for rule in c.regressions:
            s = c.stats[rule.stat]
            lines.append(
                f"REGRESSION {printable(c.fullname)}: {rule.stat} "
                f"{fmt_time(s.old)} -> {fmt_time(s.new)} "
                f"(x{s.ratio:.3f}, 95% CI [{s.lo:.3f}, {s.hi:.3f}] beyond {rule})"
            )
        if c.regressions and c.profiled[1] and not c.profiled[0]:
            lines.append(
                f"  {names[c.fullname]}: the baseline has no profiled round to "
                "compare with (save it with --fastprof-profile)"
            )
        if c.regressions and c.growth:
            lines.append(f"  tottime per call that grew most in {names[c.fullname]}:")
            for g in c.growth:
                lines.append(
                    f"    +{fmt_time(g['delta'])}  {printable(g['func'])}  "
                    f"({fmt_time(g['old'])} -> {fmt_time(g['new'])})"
                )
    return lines
