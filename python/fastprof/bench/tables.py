"""Text tables of benchmark results, grouped, sorted, in the units that fit."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def pick_unit(seconds: Iterable[float]) -> Tuple[str, float]:
    """Return (name, scale) of the largest unit in which the smallest positive value is >= 1."""
    positive = [v for v in seconds if v and v > 0 and math.isfinite(v)]
    smallest = min(positive) if positive else 1.0
    for name, scale in _UNITS:
        if smallest >= scale:
            return name, scale
    return _UNITS[-1]


def fmt_time(seconds: float, unit: Optional[Tuple[str, float]] = None) -> str:
    """Return seconds as text in unit (or the unit that fits it)."""
    name, scale = unit or pick_unit([seconds])
    return f"{seconds / scale:.4g} {name}"


def fmt_count(value: float) -> str:
    """Return a count per call as text, never in e-notation: a whole number as an integer
    (12345), else with 4 significant digits and at least 3 decimals, trailing zeros dropped
    (0.5, 3.333, 0.0001667)."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value):
        return str(int(value))
    decimals = max(3, 3 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> List[str]:
    """Return the lines of a left-aligned first column, right-aligned others table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [str(r[0]).ljust(widths[0])]
        cells += [str(c).rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return lines


def results_table(benchmarks: List[Dict[str, Any]], sort: str = "min") -> List[str]:
    """Return the summary lines: one table per group, rows sorted by `sort` (a stats key or
    "name"), times in the unit that fits each group's fastest benchmark."""
    groups: Dict[Any, List[Dict[str, Any]]] = {}
    for b in benchmarks:
        groups.setdefault(b.get("group"), []).append(b)
    lines: List[str] = []
    for group in sorted(groups, key=lambda g: (g is not None, g or "")):
        rows = groups[group]
        if sort == "name":
            rows = sorted(rows, key=lambda b: b["name"])
        else:
            rows = sorted(rows, key=lambda b: (b["stats"].get(sort, 0), b["name"]))
        name, scale = pick_unit(b["stats"]["min"] for b in rows)
        header = [
            "Name",
            f"Min ({name})",
            "Max",
            "Mean",
            "StdDev",
            "Median",
            "95% CI of median",
            "IQR",
            "Outliers",
            "OPS",
            "Rounds",
            "Iterations",
        ]
        body = []
        for b in rows:
            s = b["stats"]
            ci = b.get("fastprof", {}).get("median_ci") or s.get("median_ci")

            def v(k: str, s: Dict[str, Any] = s, scale: float = scale) -> str:
                return f"{s[k] / scale:.4f}"

            body.append(
                [
                    b["name"],
                    v("min"),
                    v("max"),
                    v("mean"),
                    v("stddev"),
                    v("median"),
                    f"[{ci[0] / scale:.4f}, {ci[1] / scale:.4f}]" if ci else "-",
                    v("iqr"),
                    s.get("outliers", "-"),
                    f"{s['ops']:.4g}",
                    s["rounds"],
                    s["iterations"],
                ]
            )
        title = f"benchmark group {group!r}" if group is not None else "benchmarks"
        lines.append(f"{title}: {len(rows)} (times in {name})")
        lines.extend(_table(header, body))
        for b in rows:
            host = b.get("fastprof", {}).get("host")
            if host:
                lines.append(
                    f"  {b['name']}: device median {fmt_time(b['stats']['median'])}, "
                    f"host median {fmt_time(host['median'])}"
                )
        lines.append("")
    return lines


#: how many rows of each benchmark's profiled round the terminal summary shows
PROFILE_ROWS = 10


def profile_tables(benchmarks: List[Dict[str, Any]], top: int = PROFILE_ROWS) -> List[str]:
    """Return, for each benchmark with a profiled round (--fastprof-profile), its ``top``
    functions by own time, per call of the benchmarked function (the round's figures divided
    by its iterations), as pytest-benchmark's --benchmark-cprofile prints its table."""
    lines: List[str] = []
    for b in benchmarks:
        prof = b.get("fastprof", {}).get("profile")
        if not prof or not prof.get("rows"):
            continue
        n = max(1, int(prof.get("iterations", 1)))
        rows = prof["rows"][:top]
        unit = pick_unit([max(r["tottime"] for r in rows) / n])  # the top row's unit
        body = [
            [
                fmt_count(r["ncalls"] / n),
                fmt_time(r["tottime"] / n, unit),
                fmt_time(r["cumtime"] / n, unit),
            ]
            for r in rows
        ]
        header = ["ncalls", "tottime", "cumtime"]
        widths = [max(len(x[i]) for x in [header, *body]) for i in range(3)]
        lines.append(f"profiled round of {b['name']} (per call of the benchmarked function):")
        for cells, func in [(header, "function"), *zip(body, (r["func"] for r in rows))]:
            lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths)) + "  " + func)
        lines.append("")
    return lines
