"""Line-timing overhead: bare vs line_profiler vs fastprof, side by side in one run.

Each workload runs bare, under line_profiler (when installed) and under fastprof.LineProfiler
with the same functions registered; the modes are interleaved (their order rotates each
repeat) and the table shows medians, the time each profiler adds over bare, and fastprof's
added time as a fraction of line_profiler's (the bar: at most 1/3).  A last column times the
workload while a fastprof LineProfiler is on for *other* code only: on 3.12+ that is the
cost to code not registered (the bar: within 10% of bare); below 3.12 it is the floor that
any trace function pays there (the interpreter's tracing mode checks every instruction of
every frame once a trace function is installed), which bounds what a line profiler built on
the public trace API can reach.

    python benchmarks/line_overhead.py [--repeats N] [--quick]
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import pprint
import random
import statistics
import sys
import textwrap
import time
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import fastprof  # noqa: E402

try:
    import line_profiler
except ImportError:  # the table then shows fastprof alone
    line_profiler = None


# --- workloads --------------------------------------------------------------------------


def loop_sum(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def loop_branches(n: int) -> int:
    a = b = 0
    for i in range(n):
        if i % 3 == 0:
            a += i
        elif i % 3 == 1:
            b += i
        else:
            a -= 1
    return a + b


def life_step(grid: List[List[int]]) -> List[List[int]]:
    rows = len(grid)
    cols = len(grid[0])
    out = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            n = 0
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    if dr or dc:
                        n += grid[(r + dr) % rows][(c + dc) % cols]
            if grid[r][c]:
                out[r][c] = 1 if n in (2, 3) else 0
            else:
                out[r][c] = 1 if n == 3 else 0
    return out


def _module_functions(*objs: Any) -> List[types.FunctionType]:
    """The plain functions defined in the given modules and classes."""
    found: List[types.FunctionType] = []
    for obj in objs:
        for value in vars(obj).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, types.FunctionType) and value.__module__ == getattr(
                obj, "__module__", getattr(obj, "__name__", None)
            ):
                found.append(value)
    return found


_rng = random.Random(7)
_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
_TEXT = " ".join(_rng.choice(_WORDS) for _ in range(6000))
_A = [" ".join(_rng.choice(_WORDS) for _ in range(8)) + "\n" for _ in range(1500)]
_B = [ln if _rng.random() < 0.8 else ln.upper() for ln in _A]
_DATA = {
    f"k{i}": [{"x": i, "y": [j for j in range(i % 7)], "s": _WORDS[i % 9]} for _ in range(3)]
    for i in range(300)
}
_GRID = [[_rng.randint(0, 1) for _ in range(64)] for _ in range(64)]

# name -> (function to time, functions to register)
WORKLOADS: Dict[str, Tuple[Callable[[], Any], List[Any]]] = {
    "loop_sum (200k)": (lambda: loop_sum(200_000), [loop_sum]),
    "loop_branches (150k)": (lambda: loop_branches(150_000), [loop_branches]),
    "life_step (64x64)": (lambda: life_step(_GRID), [life_step]),
    "textwrap.fill": (
        lambda: textwrap.fill(_TEXT, width=60),
        _module_functions(textwrap, textwrap.TextWrapper),
    ),
    "difflib.unified_diff": (
        lambda: list(difflib.unified_diff(_A, _B)),
        _module_functions(difflib, difflib.SequenceMatcher),
    ),
    "pprint.pformat": (
        lambda: pprint.pformat(_DATA, width=60),
        _module_functions(pprint, pprint.PrettyPrinter),
    ),
}


def _decoy() -> int:
    return 1


# --- timing -------------------------------------------------------------------------------


def _time_once(run: Callable[[], Any], prof: Any) -> float:
    if prof is not None:
        prof.enable()
    try:
        t0 = time.perf_counter()
        run()
        return time.perf_counter() - t0
    finally:
        if prof is not None:
            prof.disable()


def measure(repeats: int) -> List[Dict[str, Any]]:
    rows = []
    for name, (run, funcs) in WORKLOADS.items():
        modes: Dict[str, Optional[Any]] = {"bare": None}
        refused: List[str] = []
        if line_profiler is not None:
            lp = line_profiler.LineProfiler()
            kept = []
            for f in funcs:
                try:
                    lp.add_function(f)
                    kept.append(f)
                except ValueError:
                    # line_profiler 4.0.x on 3.11 cannot rewrite a code object whose bytecode
                    # another registered one shares ("co_code is malformed"): both profilers
                    # then time the same set without it.
                    refused.append(getattr(f, "__qualname__", repr(f)))
            funcs = kept
            modes["line_profiler"] = lp
        fp = fastprof.LineProfiler()
        for f in funcs:
            fp.add_function(f)
        modes["fastprof"] = fp
        modes["fastprof, other code"] = fastprof.LineProfiler(_decoy)
        times: Dict[str, List[float]] = {m: [] for m in modes}
        run()  # warm-up
        order = list(modes)
        for r in range(repeats):
            for m in order[r % len(order) :] + order[: r % len(order)]:
                times[m].append(_time_once(run, modes[m]))
        med = {m: statistics.median(v) for m, v in times.items()}
        rows.append({"name": name, "median": med, "refused": refused})
    return rows


def print_table(rows: List[Dict[str, Any]], repeats: int) -> None:
    has_lp = line_profiler is not None
    has_other = True
    head = "| workload | bare ms |"
    sep = "|---|---:|"
    if has_lp:
        head += " line_profiler ms (x bare) |"
        sep += "---:|"
    head += " fastprof ms (x bare) |"
    sep += "---:|"
    if has_lp:
        head += " fastprof added / line_profiler added |"
        sep += "---:|"
    if has_other:
        head += (
            " other code registered, ms (vs bare) |"
            if sys.version_info >= (3, 12)
            else " tracing floor: other code registered, ms (vs bare) |"
        )
        sep += "---:|"
    print(
        f"Python {platform.python_version()}, {platform.machine()}, "
        f"line_profiler {getattr(line_profiler, '__version__', 'not installed')}, "
        f"{repeats} interleaved repeats, medians"
    )
    print()
    print(head)
    print(sep)
    for row in rows:
        m = row["median"]
        bare = m["bare"]
        line = f"| {row['name']} | {bare * 1e3:.2f} |"
        if has_lp:
            line += f" {m['line_profiler'] * 1e3:.2f} ({m['line_profiler'] / bare:.1f}x) |"
        line += f" {m['fastprof'] * 1e3:.2f} ({m['fastprof'] / bare:.2f}x) |"
        if has_lp:
            added_lp = m["line_profiler"] - bare
            added_fp = m["fastprof"] - bare
            line += f" {added_fp / added_lp:.3f} |" if added_lp > 0 else " n/a |"
        if has_other:
            o = m["fastprof, other code"]
            line += f" {o * 1e3:.2f} ({(o / bare - 1) * 100:+.1f}%) |"
        print(line)
    for row in rows:
        if row["refused"]:
            print(
                f"\n{row['name']}: line_profiler refused {', '.join(row['refused'])}; "
                f"left out of both profilers"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 repeats (a smoke run)")
    args = parser.parse_args()
    repeats = 3 if args.quick else args.repeats
    print_table(measure(repeats), repeats)


if __name__ == "__main__":
    main()
