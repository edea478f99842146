"""A decorated function's cost per call: fastprof vs line_profiler, by functions registered.

kernprof's model turns the line profiler on at each outermost call of a ``@profile``-decorated
function and off when it returns, so a small decorated function called in a loop pays the
switch on every call.  Each row registers N small functions with each profiler (as ``@profile``
on N functions of a code base) and times calls of one of them from undecorated code.  The
modes alternate (their order rotates each repeat); the table shows medians, in microseconds
per call, and fastprof's figure over line_profiler's.

On 3.12+ fastprof turns line events on in the registered code objects only (code not
registered runs at full speed while the profiler is on) and gives its sys.monitoring tool id
back at every switch off, so each switch instruments and clears every registered code: the
"floor" column times exactly that (sys.monitoring.set_local_events on and off for the same N
codes, nothing else).  line_profiler turns line events on for all code (global events) and
filters in its callback, which costs the same for any N.

    python benchmarks/line_toggle.py [--repeats N] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import fastprof  # noqa: E402

try:
    import line_profiler
except ImportError:  # the table then shows fastprof alone
    line_profiler = None


def _functions(n: int) -> List[Callable[[int], int]]:
    """n distinct small functions (each its own code object)."""
    out = []
    for k in range(n):
        ns: Dict[str, Any] = {}
        exec(f"def f{k}(x):\n    y = x + 1\n    return y\n", ns)
        out.append(ns[f"f{k}"])
    return out


def _per_call(f: Callable[[int], int], calls: int) -> float:
    """Microseconds per call of f over calls calls."""
    t = time.perf_counter()
    for _ in range(calls):
        f(1)
    return (time.perf_counter() - t) / calls * 1e6


def _floor(n: int, calls: int) -> Optional[float]:
    """3.12+: microseconds to turn the line profiler's events on and off in n codes."""
    if sys.version_info < (3, 12):
        return None
    mon = sys.monitoring
    E = mon.events
    events = E.LINE | E.PY_START | E.PY_RESUME | E.PY_RETURN | E.PY_YIELD
    codes = [f.__code__ for f in _functions(n)]
    tool = next(i for i in (3, 4, 5, 2, 1, 0) if mon.get_tool(i) is None)
    mon.use_tool_id(tool, "line_toggle floor")
    try:
        t = time.perf_counter()
        for _ in range(calls):
            for c in codes:
                mon.set_local_events(tool, c, events)
            for c in codes:
                mon.set_local_events(tool, c, 0)
        return (time.perf_counter() - t) / calls * 1e6
    finally:
        mon.free_tool_id(tool)


def measure(sizes: List[int], repeats: int) -> List[Dict[str, Any]]:
    """One row per size: the medians of each mode's microseconds per call."""
    rows = []
    for n in sizes:
        calls = max(20, min(2000, 200000 // (n + 10)))
        lp_fast = fastprof.LineProfiler()
        fast = [lp_fast(f) for f in _functions(n)][0]
        modes: Dict[str, Callable[[], Optional[float]]] = {
            "fastprof": functools.partial(_per_call, fast, calls)
        }
        if line_profiler is not None:
            lp_ref = line_profiler.LineProfiler()
            ref = [lp_ref(f) for f in _functions(n)][0]
            modes["line_profiler"] = functools.partial(_per_call, ref, calls)
        if sys.version_info >= (3, 12):
            modes["floor"] = functools.partial(_floor, n, calls)
        samples: Dict[str, List[float]] = {m: [] for m in modes}
        names = list(modes)
        for r in range(repeats):
            for m in names[r % len(names) :] + names[: r % len(names)]:
                value = modes[m]()
                if value is not None:
                    samples[m].append(value)
        rows.append({"n": n, **{m: statistics.median(v) for m, v in samples.items()}})
    return rows


def print_table(rows: List[Dict[str, Any]], repeats: int) -> None:
    """A markdown table of rows."""
    print(f"Python {platform.python_version()}, {repeats} repeats, medians, us per call")
    ref = "line_profiler" if line_profiler is not None else None
    version = getattr(line_profiler, "__version__", "absent")
    print(f"line_profiler {version}\n")
    print(
        "| functions registered | fastprof us | line_profiler us | fastprof / line_profiler "
        "| floor: set_local_events on+off, us |"
    )
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        lp = row.get(ref) if ref else None
        floor = row.get("floor")
        print(
            f"| {row['n']} | {row['fastprof']:.2f} | "
            + (f"{lp:.2f} | {row['fastprof'] / lp:.2f}x" if lp else "- | -")
            + " | "
            + (f"{floor:.2f}" if floor is not None else "- (below 3.12)")
            + " |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats (a smoke run)")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    print_table(measure([1, 10, 50, 200, 1000], repeats), repeats)


if __name__ == "__main__":
    main()
