"""Instructions a profiler adds per call, under callgrind: bare, cProfile, fastprof and fastprof
without its calling-context tree (tree_nodes=0, the per-edge table) on the workloads of
benchmarks/overhead.py.  Instruction counts do not move with the machine's load,
so this runs where timings cannot be trusted (a shared machine); they do not weigh cache
misses, so they are no substitute for overhead.py's times on a quiet machine.

    python benchmarks/instructions.py [--reps 3] [workload ...]

On 3.12+ a "floor" column gives what an empty C callback for the same events adds (the
interpreter's delivery of the events, benchmarks/floors.py).

Each profiler runs in its own valgrind process.  callgrind collects only inside
itertools.starmap's next (which none of the workloads use), through which the script runs each
workload reps times, and dumps after each run; added instructions per call are (profiled -
bare) / reps / calls, calls counted by fastprof (the starmap's own call included).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import gc
import glob
import itertools
import os
import subprocess
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastprof
import overhead

PROFILERS: tuple[str, ...] = ("bare", "cProfile", "fastprof", "no tree")
if sys.version_info >= (3, 12):  # the interpreter's cost of delivering fastprof's events
    PROFILERS += ("floor",)


class _Floor:
    """An empty C callback for the events of fastprof's exact default (benchmarks/floors.py),
    with a profiler's enable/disable."""

    def __init__(self) -> None:
        import floors

        self._cm = floors.monitoring_floor(exact=True)

    def enable(self) -> None:
        self._cm.__enter__()

    def disable(self) -> None:
        self._cm.__exit__(None, None, None)


def child(profiler: str, reps: int, names: list[str]) -> None:
    """Runs each workload reps times through starmap under profiler (in valgrind)."""
    make = {
        "bare": None,
        "cProfile": cProfile.Profile,
        "fastprof": fastprof.Profile,
        "no tree": functools.partial(fastprof.Profile, tree_nodes=0),
        "floor": _Floor,
    }[profiler]
    run_counted(make, names, reps)


def run_counted(make: Any, names: list[str], reps: int) -> None:
    """Runs each workload of overhead.py reps times through itertools.starmap (where callgrind
    collects), under a profiler that make() returns (none when make is None)."""
    for name in names:
        fn = overhead.WORKLOADS[name]
        fn()
        fn()
        gc.disable()
        p = make() if make else None
        if p:
            p.enable()
        fn()
        collections.deque(itertools.starmap(fn, [()] * reps), 0)
        if p:
            p.disable()
        gc.enable()


def totals(out: str, profiler: str, reps: int) -> list[int]:
    """Returns the instructions of each workload's reps runs, from the dumps in out."""
    files = sorted(glob.glob(f"{out}/{profiler}.*.*"), key=lambda f: int(f.rsplit(".", 1)[1]))
    runs = []
    for f in files:
        with open(f) as fh:
            runs.append(next(int(line.split()[1]) for line in fh if line.startswith("summary:")))
    per = reps + 1  # the starmap's last next() raises StopIteration: one more dump
    return [sum(runs[i * per : i * per + reps]) for i in range(len(runs) // per)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", choices=PROFILERS, help=argparse.SUPPRESS)
    ap.add_argument("workloads", nargs="*")
    args = ap.parse_args(argv)
    names = args.workloads or list(overhead.WORKLOADS)
    if args.child:
        child(args.child, args.reps, names)
        return 0
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as out:
        procs = [
            subprocess.Popen(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--collect-atstart=no",
                    "--toggle-collect=starmap_next",
                    "--dump-after=starmap_next",
                    f"--callgrind-out-file={out}/{p.replace(' ', '_')}.%p",
                    sys.executable,
                    __file__,
                    "--child",
                    p,
                    "--reps",
                    str(args.reps),
                    *names,
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for p in PROFILERS
        ]
        if any(proc.wait() != 0 for proc in procs):
            print("a valgrind run failed", file=sys.stderr)
            return 1
        t = {p: totals(out, p.replace(" ", "_"), args.reps) for p in PROFILERS}
    print(
        f"# Python {sys.version.split()[0]}; instructions added per call under callgrind, "
        f"{args.reps} runs"
    )
    floor = "floor" in PROFILERS
    print(
        f"{'workload':<30} {'calls':>7} {'cProfile':>9} {'fastprof':>9} {'no tree':>9} "
        f"{'fastprof/cProfile':>18} {'tree/no tree':>13}"
        + (f" {'floor':>6} {'floor/cProfile':>15}" if floor else "")
    )
    for i, name in enumerate(names):
        fn = overhead.WORKLOADS[name]
        calls = overhead.count_calls(fn) + 1
        base = t["bare"][i]
        added = {p: (t[p][i] - base) / args.reps / calls for p in PROFILERS[1:]}
        print(
            f"{name:<30} {calls:>7} {added['cProfile']:>9.0f} {added['fastprof']:>9.0f} "
            f"{added['no tree']:>9.0f} {added['fastprof'] / added['cProfile']:>18.2f} "
            f"{added['fastprof'] / added['no tree']:>13.2f}"
            + (
                f" {added['floor']:>6.0f} {added['floor'] / added['cProfile']:>15.2f}"
                if floor
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
