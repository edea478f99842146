"""Timeline overhead: bare, fastprof's timeline (fastprof.trace's recorder), fastprof's call
profiler alone, and VizTracer, side by side on the call-heavy workloads of
benchmarks/overhead.py.

Each workload runs under each tool in turn, in a shuffled order each round (interleaved), for
a number of rounds; the table gives the median time, the added nanoseconds per call (calls
counted by fastprof, builtins included) and the ratio of the timeline's added time to
VizTracer's (the bar: at most 0.5 on 3.12 and 3.13).  Both tools record builtins into a ring
of 1,000,000 entries; each run times recording only (start to stop), not the export (the
timeline's spans as Python objects, VizTracer's parse and save), which both do afterwards.

    python benchmarks/timeline.py [--rounds 15] [--quick] [--only a,b] [--json out.json]
    python benchmarks/timeline.py --instructions [--reps 3] [--only a,b]

--instructions counts the instructions each tool adds per call under callgrind instead of
timing (as benchmarks/instructions.py does): load-independent, blind to cache misses.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fastprof  # noqa: E402
import instructions as instructions_py  # noqa: E402
import overhead  # noqa: E402

try:  # the peer, installed in the benchmark environment
    from viztracer import VizTracer  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    VizTracer = None

ENTRIES = 1_000_000

WORKLOADS = overhead.WORKLOADS  # the call-heavy workloads (NumPy's call Python back)


class _Timeline:
    """fastprof.trace's recorder with a profiler's enable/disable: the call profiler with its
    timeline on (what ``with fastprof.trace():`` enables and disables)."""

    def __init__(self) -> None:
        self.p = fastprof.Profile(timeline=ENTRIES)

    def enable(self) -> None:
        self.p.enable()

    def disable(self) -> None:
        self.p.disable()


class _Profile:
    """fastprof's call profiler alone (what the timeline adds to it shows against this)."""

    def __init__(self) -> None:
        self.p = fastprof.Profile()

    def enable(self) -> None:
        self.p.enable()

    def disable(self) -> None:
        self.p.disable()


class _Viz:
    """VizTracer with builtins and a ring of ENTRIES."""

    def __init__(self) -> None:
        self.t = VizTracer(tracer_entries=ENTRIES, verbose=0, register_global=False)

    def enable(self) -> None:
        self.t.start()

    def disable(self) -> None:
        self.t.stop()
        self.t.clear()  # what a save would read: dropped (outside the timed region)


def tools() -> Dict[str, Optional[Callable[[], Any]]]:
    found: Dict[str, Optional[Callable[[], Any]]] = {
        "bare": None,
        "timeline": _Timeline,
        "profile": _Profile,
    }
    if VizTracer is not None:
        found["viztracer"] = _Viz
    return found


def timed(make: Optional[Callable[[], Any]], fn: Callable[[], None]) -> float:
    """Seconds of one run of fn under a fresh tool from make (None: bare), recording only."""
    tool = make() if make else None
    t0 = time.perf_counter()
    if tool:
        tool.enable()
    fn()
    if tool:
        tool.disable()
    elapsed = time.perf_counter() - t0
    if tool and isinstance(tool, _Viz):
        tool.t.clear()
    return elapsed


def measure(names: List[str], rounds: int, as_json: Optional[str]) -> int:
    runners = tools()
    print(
        f"# Python {platform.python_version()} on {platform.machine()}; {rounds} interleaved "
        f"rounds; fastprof clock {fastprof._fastprof.clock_info()[0]}"
        + ("" if VizTracer else "; VizTracer not installed")
    )
    cols = [r for r in runners if r != "bare"]
    print(
        f"{'workload':<22} {'calls':>8} {'bare ms':>8} "
        + " ".join(f"{r + ' ns/call':>18}" for r in cols)
        + f" {'timeline/viztracer':>19} {'timeline/profile':>17}"
    )
    results: Dict[str, Any] = {}
    rng = random.Random(1234)
    for name in names:
        fn = WORKLOADS[name]
        calls = overhead.count_calls(fn)
        for make in runners.values():  # warm-up
            timed(make, fn)
        samples: Dict[str, List[float]] = {r: [] for r in runners}
        gc.disable()
        try:
            for _ in range(rounds):
                order = list(runners)
                rng.shuffle(order)
                for r in order:
                    samples[r].append(timed(runners[r], fn))
                gc.collect()
        finally:
            gc.enable()
        med = {r: statistics.median(v) for r, v in samples.items()}
        added = {r: (med[r] - med["bare"]) / calls * 1e9 for r in cols}
        viz = added.get("viztracer", float("nan"))
        ratio = added["timeline"] / viz if viz and viz > 0 else float("nan")
        own = added["timeline"] / added["profile"] if added["profile"] > 0 else float("nan")
        results[name] = {
            "calls": calls,
            "median_s": med,
            "added_ns_per_call": added,
            "timeline_over_viztracer": ratio,
            "timeline_over_profile": own,
        }
        print(
            f"{name:<22} {calls:>8} {med['bare'] * 1e3:>8.2f} "
            + " ".join(f"{added[r]:>18.1f}" for r in cols)
            + f" {ratio:>19.2f} {own:>17.2f}"
        )
    ratios = [v["timeline_over_viztracer"] for v in results.values()]
    ratios = [r for r in ratios if r == r]
    if ratios:
        print(f"# median timeline/viztracer: {statistics.median(ratios):.2f} (bar: <= 0.5)")
    if as_json:
        with open(as_json, "w") as f:
            json.dump({"python": platform.python_version(), "results": results}, f, indent=1)
    return 0


# ---- --instructions: callgrind ---------------------------------------------------------------


def child(tool: str, reps: int, names: List[str]) -> None:
    """Runs each workload reps times through itertools.starmap under tool (in valgrind)."""
    instructions_py.run_counted(tools()[tool], names, reps)


def instructions(names: List[str], reps: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    names_of = list(tools())
    with tempfile.TemporaryDirectory() as out:
        procs = [
            subprocess.Popen(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--collect-atstart=no",
                    "--toggle-collect=starmap_next",
                    "--dump-after=starmap_next",
                    f"--callgrind-out-file={out}/{t}.%p",
                    sys.executable,
                    __file__,
                    "--child",
                    t,
                    "--reps",
                    str(reps),
                    "--only",
                    ",".join(names),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for t in names_of
        ]
        if any(p.wait() != 0 for p in procs):
            print("a valgrind run failed", file=sys.stderr)
            return 1
        tot = {t: instructions_py.totals(out, t, reps) for t in names_of}
    print(f"# Python {sys.version.split()[0]}; instructions added per call under callgrind")
    cols = [t for t in names_of if t != "bare"]
    print(
        f"{'workload':<22} {'calls':>8} "
        + " ".join(f"{t:>10}" for t in cols)
        + f" {'timeline/viztracer':>19}"
    )
    for i, name in enumerate(names):
        calls = overhead.count_calls(WORKLOADS[name]) * reps
        added = {t: (tot[t][i] - tot["bare"][i]) / calls for t in cols}
        viz = added.get("viztracer", float("nan"))
        ratio = added["timeline"] / viz if viz and viz > 0 else float("nan")
        print(
            f"{name:<22} {calls // reps:>8} "
            + " ".join(f"{added[t]:>10.0f}" for t in cols)
            + f" {ratio:>19.2f}"
        )
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="3 rounds, for a smoke run")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--json", help="write the raw medians here")
    ap.add_argument("--instructions", action="store_true", help="callgrind counts instead")
    ap.add_argument("--reps", type=int, default=3, help="runs per workload (--instructions)")
    ap.add_argument("--child", choices=list(tools()), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    if args.child:
        child(args.child, args.reps, names)
        return 0
    if args.instructions:
        return instructions(names, args.reps)
    return measure(names, 3 if args.quick else args.rounds, args.json)


if __name__ == "__main__":
    sys.exit(main())
