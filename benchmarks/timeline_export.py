"""What a large timeline costs after recording: fastprof's block exit and its Chrome-trace
export, against VizTracer's stop and save, side by side on one workload (a recursive fib:
hundreds of thousands of short calls).

Each round runs every contender once, in a shuffled order (interleaved); the table gives the
medians and the ratio to VizTracer's stop + save.  Rows:

- ``fastprof``: ``with fastprof.trace()`` exit (the spans read back from the ring as sorted
  records, in C), then ``tr.export_chrome_trace(path)`` (the text written from the records,
  in C); the last column is the first read of ``tr.spans`` after that (the Span objects are
  built then, not at the exit);
- ``fastprof, Python writer``: the same exit, then the trace written by the Python writer
  from ``tr.spans`` (what the export did before its C writer, the spans built on the way);
- ``viztracer``: ``stop()``, then ``save(path)``.

    python benchmarks/timeline_export.py [--rounds 7] [--depth 25]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import fastprof
from fastprof.report import chrome

try:  # the peer, installed in the benchmark environment
    from viztracer import VizTracer  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    VizTracer = None

ENTRIES = 1_000_000


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class _SpansOnly:
    """A timeline seen through its spans alone: the Python writer's path."""

    def __init__(self, tl: Any) -> None:
        self._tl = tl

    def __getattr__(self, name: str) -> Any:
        if name in ("_span_records", "_span_count"):
            raise AttributeError(name)
        return getattr(self._tl, name)


def _fastprof(depth: int, path: str, python_writer: bool) -> Tuple[float, float, float, int]:
    """(exit s, export s, first spans read s, spans) of one traced run."""
    tr = fastprof.trace(buffer_size=ENTRIES)
    tr.__enter__()
    fib(depth)
    t0 = time.perf_counter()
    tr.__exit__(None, None, None)
    t1 = time.perf_counter()
    if python_writer:
        chrome.write_chrome_trace(path, chrome.chrome_trace_chunks(_SpansOnly(tr)))
    else:
        tr.export_chrome_trace(path)
    t2 = time.perf_counter()
    n = len(tr.spans)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, n


def _viztracer(depth: int, path: str) -> Tuple[float, float, float, int]:
    """(stop s, save s, 0, 0) of one traced run."""
    vz = VizTracer(tracer_entries=ENTRIES, verbose=0)
    vz.start()
    fib(depth)
    t0 = time.perf_counter()
    vz.stop()
    t1 = time.perf_counter()
    vz.save(path)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, 0.0, 0


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--depth", type=int, default=25, help="fib(depth): about 243k calls at 25")
    opts = ap.parse_args(argv)
    tools: Dict[str, Callable[[str], Tuple[float, float, float, int]]] = {
        "fastprof": lambda p: _fastprof(opts.depth, p, False),
        "fastprof, Python writer": lambda p: _fastprof(opts.depth, p, True),
    }
    if VizTracer is not None:
        tools["viztracer"] = lambda p: _viztracer(opts.depth, p)
    runs: Dict[str, List[Tuple[float, float, float, int]]] = {name: [] for name in tools}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(opts.rounds):
            order = list(tools)
            random.shuffle(order)
            for name in order:
                runs[name].append(tools[name](os.path.join(tmp, "t.json")))
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"fib({opts.depth}), {opts.rounds} interleaved rounds, medians"
    )
    spans = runs["fastprof"][0][3]
    print(f"# spans per trace: {spans}" + ("" if VizTracer else "; VizTracer not installed"))
    ref = None
    if "viztracer" in runs:
        ref = statistics.median(r[0] + r[1] for r in runs["viztracer"])
    print(
        f"{'contender':28} {'exit/stop':>10} {'export/save':>12} {'total':>9} {'vs viztracer':>13}"
        f" {'spans read':>11}"
    )
    for name, rows in runs.items():
        first = statistics.median(r[0] for r in rows)
        second = statistics.median(r[1] for r in rows)
        total = statistics.median(r[0] + r[1] for r in rows)
        ratio = f"{total / ref:12.2f}x" if ref else f"{'-':>13}"
        read = f"{statistics.median(r[2] for r in rows):10.3f}s" if name == "fastprof" else ""
        print(f"{name:28} {first:9.3f}s {second:11.3f}s {total:8.3f}s {ratio} {read}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
