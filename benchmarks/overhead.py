"""Call-profiler overhead: bare, cProfile, fastprof, fastprof without its calling-context tree
("no tree": tree_nodes=0, the per-edge table), and yappi when installed, side by side.

Each workload runs under each profiler in turn, in a shuffled order each round (interleaved),
for a number of rounds; the table gives the median time, the slowdown against bare and the
added nanoseconds per profiled call (calls counted by fastprof, builtins included), and the
ratio of fastprof's added time to cProfile's and to "no tree"'s (what the tree costs).  Below
Python 3.12 two floors run too: an "empty hook" (a C profile function that does nothing: what
the interpreter's profiling mode costs whatever the hook does) and a "stamp hook" (one that
names each call and times it, keeping no records: the least any timing profiler does); the last
columns give each as a fraction of cProfile's added time.  On 3.12+ the floor is an "empty
callback": an empty C callback for the exact default's sys.monitoring events
(benchmarks/floors.py), what the interpreter spends delivering them.

    python benchmarks/overhead.py [--rounds 15] [--quick] [--json out.json] [--processes N]

A process's memory layout and string hashes move every profiler's cost a little, and ratios
near a bar move with them: --processes N runs the whole measurement in N fresh interpreters,
one after another, and prints each workload's ratio in every run and their median.
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import difflib
import functools
import gc
import inspect
import json
import platform
import pprint
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

import fastprof

try:  # optional peer
    import yappi  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    yappi = None


# ---- workloads ---------------------------------------------------------------------------


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def w_recursion() -> None:
    fib(20)


def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


def w_deep_recursion() -> None:
    for _ in range(25):
        depth(900)  # under the default recursion limit of 1000


def _make_small_functions(n: int) -> list[Callable[[int], int]]:
    funcs: list[Callable[[int], int]] = []
    for i in range(n):
        ns: dict = {}
        exec(f"def f{i}(x):\n    return x + {i}\n", ns)
        funcs.append(ns[f"f{i}"])
    return funcs


SMALL = _make_small_functions(300)


def w_many_functions() -> None:
    total = 0
    for _ in range(60):
        for f in SMALL:
            total = f(total)


class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x: float, y: float) -> None:
        self.x = x
        self.y = y

    def add(self, other: "Vec") -> "Vec":
        return Vec(self.x + other.x, self.y + other.y)

    def scale(self, k: float) -> "Vec":
        return Vec(self.x * k, self.y * k)

    @property
    def norm2(self) -> float:
        return self.x * self.x + self.y * self.y


def w_methods() -> None:
    v = Vec(0.0, 0.0)
    d = Vec(1.0, 0.5)
    for _ in range(6000):
        v = v.add(d).scale(0.999)
        _ = v.norm2


def w_builtins() -> None:
    out: list = []
    data = list(range(200))
    for _ in range(120):
        for x in data:
            if isinstance(x, int) and abs(x) > 3:
                out.append(len(str(x)))
        out.clear()


def _gen(n: int):
    for i in range(n):
        yield i * i


def w_generators() -> None:
    for _ in range(150):
        for _v in _gen(100):
            pass


_SRC = inspect.getsource(difflib)


def w_ast() -> None:
    tree = ast.parse(_SRC)
    ast.dump(tree)


_A = [f"line {i} {'x' * (i % 7)}\n" for i in range(400)]
_B = [f"line {i} {'x' * (i % 5)}\n" for i in range(0, 400, 1) if i % 11]


def w_difflib() -> None:
    list(difflib.unified_diff(_A, _B))


_NESTED = {
    f"k{i}": [{"a": j, "b": [j, str(j)], "c": {"d": (j, j)}} for j in range(8)] for i in range(40)
}


def w_pprint() -> None:
    pprint.pformat(_NESTED, width=60)


_PY_ENCODER = json.JSONEncoder(indent=2)
_PY_ENCODER_C = json.encoder.c_make_encoder


def w_json() -> None:
    json.encoder.c_make_encoder = None  # the pure-Python encoder, on every version
    try:
        "".join(_PY_ENCODER.iterencode(_NESTED))
    finally:
        json.encoder.c_make_encoder = _PY_ENCODER_C


# -- Python functions called from C: the interpreter's C code calls them (no CALL event of
# the profiled code's own precedes them on 3.12+, and below 3.12 they run in a frame entered
# from C), which a profiler may handle less well than a call from Python.

_KEYS = [(i * 7919) % 1000 for i in range(1000)]


def _sort_key(x: int) -> int:
    return -x


def w_sort_key() -> None:
    for _ in range(6):
        sorted(_KEYS, key=_sort_key)


class _Item:
    __slots__ = ("v",)

    def __init__(self, v: int) -> None:
        self.v = v

    def __lt__(self, other: "_Item") -> bool:
        return self.v < other.v


_ITEMS = [_Item(v) for v in _KEYS[:300]]


def w_sort_lt() -> None:
    for _ in range(3):
        sorted(_ITEMS)


def _double(x: int) -> int:
    return x + x


def _odd(x: int) -> bool:
    return x & 1 == 1


def w_map_filter() -> None:
    for _ in range(4):
        list(map(_double, _KEYS))
        list(filter(_odd, _KEYS))


def _add(a: int, b: int) -> int:
    return a + b


def w_reduce() -> None:
    for _ in range(6):
        functools.reduce(_add, _KEYS, 0)


_WORD = re.compile(r"\w+")
_TEXT = " ".join(f"w{i}" for i in range(1500))


def _upper(m: "re.Match[str]") -> str:
    return m.group(0)


def w_re_sub() -> None:
    _WORD.sub(_upper, _TEXT)


def _numpy_workloads() -> dict[str, Callable[[], None]]:
    """NumPy calling Python back (np.vectorize, np.apply_along_axis), when NumPy is there."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - depends on the machine
        return {}
    vec = np.vectorize(_double)
    xs = np.arange(3000)
    grid = np.arange(3000.0).reshape(1000, 3)

    def row_sum(row: "np.ndarray") -> float:
        return row[0] + row[1]

    def w_vectorize() -> None:
        vec(xs)

    def w_apply_along_axis() -> None:
        np.apply_along_axis(row_sum, 1, grid)

    return {"np.vectorize": w_vectorize, "np.apply_along_axis": w_apply_along_axis}


WORKLOADS: dict[str, Callable[[], None]] = {
    "recursion": w_recursion,
    "deep recursion": w_deep_recursion,
    "many functions": w_many_functions,
    "methods": w_methods,
    "builtins": w_builtins,
    "generators": w_generators,
    "ast": w_ast,
    "difflib": w_difflib,
    "pprint": w_pprint,
    "json (py encoder)": w_json,
    "sort key (from C)": w_sort_key,
    "sort __lt__ (from C)": w_sort_lt,
    "map/filter (from C)": w_map_filter,
    "reduce (from C)": w_reduce,
    "re.sub repl (from C)": w_re_sub,
    **{f"{k} (from C)": v for k, v in _numpy_workloads().items()},
}

# ---- runners -----------------------------------------------------------------------------


def run_bare(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_cprofile(fn: Callable[[], None]) -> float:
    p = cProfile.Profile()
    t0 = time.perf_counter()
    p.enable()
    fn()
    p.disable()
    return time.perf_counter() - t0


def run_fastprof(fn: Callable[[], None], tree_nodes: int = 1_000_000) -> float:
    p = fastprof.Profile(tree_nodes=tree_nodes)
    t0 = time.perf_counter()
    p.enable()
    fn()
    p.disable()
    return time.perf_counter() - t0


def floor_runner(set_hook: Callable[[bool], object]) -> Callable[[Callable[[], None]], float]:
    """Returns a runner timing fn under a floor profile function that set_hook sets and
    removes (below 3.12: the empty hook or the stamp hook)."""

    def run(fn: Callable[[], None]) -> float:
        t0 = time.perf_counter()
        set_hook(True)
        fn()
        set_hook(False)
        return time.perf_counter() - t0

    return run


def run_monitoring_floor(fn: Callable[[], None]) -> float:
    """Times fn under an empty C callback for the exact default's sys.monitoring events (3.12+):
    the interpreter's delivery of the events, beneath any profiler (benchmarks/floors.py)."""
    from floors import monitoring_floor

    t0 = time.perf_counter()
    with monitoring_floor(exact=True):
        fn()
    return time.perf_counter() - t0


def run_yappi(fn: Callable[[], None]) -> float:  # pragma: no cover - optional peer
    yappi.clear_stats()
    yappi.set_clock_type("wall")
    t0 = time.perf_counter()
    yappi.start(builtins=True)
    fn()
    yappi.stop()
    return time.perf_counter() - t0


def count_calls(fn: Callable[[], None]) -> int:
    """Returns the number of calls (builtins included) fastprof records for one run of fn."""
    p = fastprof.Profile()
    p.enable()
    fn()
    p.disable()
    return sum(entry.callcount for entry in p.getstats())


def across_processes(n: int, argv: list[str]) -> int:
    """Runs this script n times in fresh interpreters with argv (less --processes) and prints
    each workload's fastprof/cProfile ratio per run, and the medians (with the tree's cost and
    the floors': the empty and stamp hooks below 3.12, the empty callback on 3.12+).  Returns 0, or the first failing run's exit status."""
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            out = f"{tmp}/run{i}.json"
            rc = subprocess.call(
                [sys.executable, __file__, *argv, "--json", out], stdout=subprocess.DEVNULL
            )
            if rc != 0:
                return rc
            with open(out) as fh:
                runs.append(json.load(fh))
    print(
        f"# Python {runs[0]['python']}; {n} processes of {runs[0]['rounds']} interleaved rounds "
        f"each; fastprof/cProfile added-time ratio per process, median last"
    )
    worst = 0.0
    for name in runs[0]["results"]:
        ratios = [r["results"][name]["fastprof_over_cprofile"] for r in runs]
        med = statistics.median(ratios)
        worst = max(worst, med)
        line = f"{name:<28} " + " ".join(f"{x:.2f}" for x in ratios) + f"  median {med:.2f}"
        trees = [r["results"][name].get("tree_over_no_tree") for r in runs]
        if None not in trees:
            line += f"  (tree/no tree median {statistics.median(trees):.2f})"
        if "empty_callback_over_cprofile" in runs[0]["results"][name]:
            cb = [r["results"][name]["empty_callback_over_cprofile"] for r in runs]
            line += f"  (empty callback median {statistics.median(cb):.2f})"
        if "empty_hook_over_cprofile" in runs[0]["results"][name]:
            floors = [r["results"][name]["empty_hook_over_cprofile"] for r in runs]
            stamps = [r["results"][name]["stamp_hook_over_cprofile"] for r in runs]
            line += (
                f"  (empty hook median {statistics.median(floors):.2f},"
                f" stamp hook {statistics.median(stamps):.2f})"
            )
        print(line)
    print(f"worst median fastprof/cProfile added-time ratio: {worst:.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="3 rounds, for a smoke run")
    ap.add_argument("--json", help="write the raw medians here")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run the measurement in this many fresh interpreters and summarise",
    )
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error("--processes must be >= 1")
    if args.processes > 1:
        if args.json:
            ap.error("--json applies to one process; leave it out with --processes")
        rest = ["--rounds", str(args.rounds)] + (["--quick"] if args.quick else [])
        rest += ["--only", args.only] if args.only else []
        return across_processes(args.processes, rest)
    rounds = 3 if args.quick else args.rounds

    runners: dict[str, Callable[[Callable[[], None]], float]] = {
        "bare": run_bare,
        "cProfile": run_cprofile,
        "fastprof": run_fastprof,
        "no tree": functools.partial(run_fastprof, tree_nodes=0),  # the per-edge table only
    }
    if yappi is not None:
        runners["yappi"] = run_yappi
    floor = hasattr(fastprof._fastprof, "_empty_profile_hook")  # below 3.12
    if floor:
        runners["empty hook"] = floor_runner(fastprof._fastprof._empty_profile_hook)
        runners["stamp hook"] = floor_runner(fastprof._fastprof._stamp_profile_hook)
    callback_floor = sys.version_info >= (3, 12)
    if callback_floor:
        runners["empty callback"] = run_monitoring_floor
    names = list(WORKLOADS) if not args.only else args.only.split(",")

    print(
        f"# Python {platform.python_version()} on {platform.machine()}, "
        f"{platform.processor() or platform.platform()}; {rounds} interleaved rounds; "
        f"fastprof clock {fastprof._fastprof.clock_info()[0]}"
    )
    header = (
        f"{'workload':<28} {'calls':>8} {'bare ms':>8} "
        + " ".join(f"{r + ' x':>11}" for r in runners if r != "bare")
        + " "
        + " ".join(f"{r + ' ns/call':>17}" for r in runners if r != "bare")
        + f" {'fastprof/cProfile':>18} {'tree/no tree':>13}"
        + (f" {'empty hook/cProfile':>20} {'stamp hook/cProfile':>20}" if floor else "")
        + (f" {'empty callback/cProfile':>24}" if callback_floor else "")
    )
    print(header)
    results: dict = {}
    rng = random.Random(1234)
    for name in names:
        fn = WORKLOADS[name]
        calls = count_calls(fn)
        for runner in runners.values():  # warm-up
            runner(fn)
        samples: dict[str, list[float]] = {r: [] for r in runners}
        gc.disable()
        try:
            for _ in range(rounds):
                order = list(runners)
                rng.shuffle(order)
                for r in order:
                    samples[r].append(runners[r](fn))
                gc.collect()
        finally:
            gc.enable()
        med = {r: statistics.median(v) for r, v in samples.items()}
        added = {r: (med[r] - med["bare"]) / calls * 1e9 for r in runners if r != "bare"}
        ratio = added["fastprof"] / added["cProfile"] if added["cProfile"] > 0 else float("nan")
        tree_ratio = added["fastprof"] / added["no tree"] if added["no tree"] > 0 else float("nan")
        results[name] = {
            "calls": calls,
            "median_s": med,
            "added_ns_per_call": added,
            "fastprof_over_cprofile": ratio,
            "tree_over_no_tree": tree_ratio,
        }
        line = (
            f"{name:<28} {calls:>8} {med['bare'] * 1e3:>8.2f} "
            + " ".join(f"{med[r] / med['bare']:>10.2f}x" for r in runners if r != "bare")
            + " "
            + " ".join(f"{added[r]:>17.1f}" for r in runners if r != "bare")
            + f" {ratio:>18.2f} {tree_ratio:>13.2f}"
        )
        if floor:
            for runner in ("empty hook", "stamp hook"):
                floor_ratio = added[runner] / added["cProfile"]
                results[name][runner.replace(" ", "_") + "_over_cprofile"] = floor_ratio
                line += f" {floor_ratio:>20.2f}"
        if callback_floor:
            floor_ratio = added["empty callback"] / added["cProfile"]
            results[name]["empty_callback_over_cprofile"] = floor_ratio
            line += f" {floor_ratio:>24.2f}"
        print(line)
    worst = max(v["fastprof_over_cprofile"] for v in results.values())
    print(f"worst fastprof/cProfile added-time ratio: {worst:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"python": platform.python_version(), "rounds": rounds, "results": results},
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
