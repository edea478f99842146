"""Side-by-side benchmark of fastprof.kernels against scipy.ndimage, NumPy and numexpr.

Every case runs its contenders in one process, interleaved (A B C A B C ...), and prints the
median time of each and its ratio to fastprof's, with the bar the project set for it.

    python benchmarks/kernels.py              # the full sizes (512x512x256 volume, 10M elements)
    python benchmarks/kernels.py --quick      # small sizes, a smoke run
    python benchmarks/kernels.py --threads 1  # fastprof on one thread
    python benchmarks/kernels.py --cpu        # also the CPU time of each call (all threads)

On a machine shared with other jobs the wall clock moves with their load; the CPU time of the
process (time.process_time, every thread of the pool counted) moves much less, and for a
kernel that keeps both cores busy it is about twice its wall clock on a quiet machine.

Instruction counts, which do not depend on the machine's load (one call on a 64x64x32 float32
volume, one thread; the counts of the kernel are the inclusive ones of fp_conv_general or
fp_conv_separable in callgrind_annotate's listing):

    valgrind --tool=callgrind --callgrind-out-file=cg.out \
        python benchmarks/kernels.py --callgrind general      # or: box
    callgrind_annotate --inclusive=yes --threshold=100 cg.out | grep fp_conv_
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from fastprof import kernels  # noqa: E402

try:
    import scipy.ndimage as ndi
except ImportError:  # pragma: no cover - scipy is a test dependency
    ndi = None
try:
    import numexpr
except ImportError:
    numexpr = None

Case = Tuple[str, Dict[str, Callable[[], object]], Optional[str]]


def interleaved(
    funcs: Dict[str, Callable[[], object]], repeat: int
) -> Tuple[Dict[str, List[float]], Dict[str, List[float]]]:
    """Wall-clock and process CPU seconds per call of each function, the functions taking
    turns, after one warm-up each."""
    for f in funcs.values():
        f()
    times: Dict[str, List[float]] = {name: [] for name in funcs}
    cpu: Dict[str, List[float]] = {name: [] for name in funcs}
    for _ in range(repeat):
        for name, f in funcs.items():
            c0 = time.process_time()
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return times, cpu


def cases(quick: bool) -> List[Case]:
    rng = np.random.default_rng(0)
    shape = (64, 64, 32) if quick else (512, 512, 256)
    vol = rng.random(shape, dtype=np.float32)
    out = np.empty_like(vol)
    w_general = rng.random((5, 5, 5))
    n = 100_000 if quick else 10_000_000
    x = rng.standard_normal(n)
    y = np.empty_like(x)
    label = "x".join(map(str, shape))
    result: List[Case] = []

    # the copy of the volume into an existing array is the yardstick of the box with output=;
    # without output= the time includes allocating (and first touching) the result, as a user
    # sees it
    box: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.uniform_filter(vol, 5, output=out),
        "fastprof, no output=": lambda: kernels.uniform_filter(vol, 5),
        "fastprof, exact=False": lambda: kernels.uniform_filter(vol, 5, output=out, exact=False),
        "copy (np.copyto)": lambda: np.copyto(out, vol),
    }
    if ndi is not None:
        box["scipy.ndimage"] = lambda: ndi.uniform_filter(vol, 5, output=out)
    result.append(
        (f"5x5x5 mean, {label} float32 (uniform_filter)", box, "<= 2x the copy (with output=)")
    )

    gen: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.correlate(vol, w_general, output=out),
        "fastprof, no output=": lambda: kernels.correlate(vol, w_general),
        "fastprof, exact=False": lambda: kernels.correlate(vol, w_general, output=out, exact=False),
    }
    if ndi is not None:
        gen["scipy.ndimage"] = lambda: ndi.correlate(vol, w_general, output=out)
    result.append((f"general 5x5x5 kernel, {label} float32 (correlate)", gen, "<= 250 ms"))

    small = (32, 32, 32) if quick else (128, 256, 256)
    vol2 = rng.random(small, dtype=np.float32)
    out2 = np.empty_like(vol2)
    for size in (9, 31, 65):
        boxes: Dict[str, Callable[[], object]] = {
            "fastprof": lambda size=size: kernels.uniform_filter(vol2, size, output=out2),
            "fastprof, exact=False": lambda size=size: kernels.uniform_filter(
                vol2, size, output=out2, exact=False
            ),
        }
        if ndi is not None:
            boxes["scipy.ndimage"] = lambda size=size: ndi.uniform_filter(vol2, size, output=out2)
        result.append((f"box {size}^3 mean, {'x'.join(map(str, small))} float32", boxes, None))

    # a long 1-D line (a signal): the exact correlation runs it as rows on every worker; the
    # exact box keeps scipy's running sum, one serial chain along the line
    w_line = rng.random(9)
    line: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.correlate(x, w_line, output=y),
        "fastprof, exact=False": lambda: kernels.correlate(x, w_line, output=y, exact=False),
    }
    if ndi is not None:
        line["scipy.ndimage"] = lambda: ndi.correlate(x, w_line, output=y)
    result.append((f"9-tap line, {n:,} float64 (correlate)", line, None))
    line_box: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.uniform_filter(x, 9, output=y),
        "fastprof, exact=False": lambda: kernels.uniform_filter(x, 9, output=y, exact=False),
    }
    if ndi is not None:
        line_box["scipy.ndimage"] = lambda: ndi.uniform_filter(x, 9, output=y)
    result.append((f"9-box line, {n:,} float64 (uniform_filter)", line_box, None))

    trig: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.evaluate("sin(x) + cos(x) + sqrt(abs(x))", {"x": x}, out=y),
        "numpy": lambda: np.sin(x) + np.cos(x) + np.sqrt(np.abs(x)),
    }
    if numexpr is not None:
        trig["numexpr"] = lambda: numexpr.evaluate(
            "sin(x) + cos(x) + sqrt(abs(x))", {"x": x}, out=y
        )
    result.append((f"sin(x)+cos(x)+sqrt(abs(x)), {n:,} float64", trig, ">= 3x faster than numpy"))

    cheap: Dict[str, Callable[[], object]] = {
        "fastprof": lambda: kernels.evaluate("2 * x + 1", {"x": x}, out=y),
        "numpy": lambda: 2 * x + 1,
        "copy (np.copyto)": lambda: np.copyto(y, x),
    }
    if numexpr is not None:
        cheap["numexpr"] = lambda: numexpr.evaluate("2 * x + 1", {"x": x}, out=y)
    result.append((f"2*x+1, {n:,} float64", cheap, "<= 1.5x the copy"))
    return result


def callgrind_case(name: str) -> None:
    """One call of a volume case on the quick 64x64x32 volume with one thread, for an
    instruction count under callgrind (the process's start-up is counted too; read the
    kernel's inclusive count)."""
    kernels.set_num_threads(1)
    rng = np.random.default_rng(0)
    vol = rng.random((64, 64, 32), dtype=np.float32)
    out = np.empty_like(vol)
    if name == "general":
        kernels.correlate(vol, rng.random((5, 5, 5)), output=out, exact=False)
    elif name == "box":
        kernels.uniform_filter(vol, 5, output=out, exact=False)
    else:
        np.copyto(out, vol)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument(
        "--slow-repeat",
        type=int,
        default=3,
        help="rounds for the cases where scipy takes seconds (default 3)",
    )
    p.add_argument("--threads", type=int, default=None, help="fastprof's thread count")
    p.add_argument(
        "--cpu", action="store_true", help="also print the median process CPU time of each call"
    )
    p.add_argument(
        "--callgrind",
        choices=("general", "box", "copy"),
        default=None,
        help="one call of a case on 64x64x32, one thread, to run under valgrind --tool=callgrind",
    )
    args = p.parse_args(argv)
    if args.callgrind:
        callgrind_case(args.callgrind)
        return 0
    if args.threads:
        kernels.set_num_threads(args.threads)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, numpy {np.__version__}"
        + (f", scipy {__import__('scipy').__version__}" if ndi is not None else "")
        + (f", numexpr {numexpr.__version__}" if numexpr is not None else "")
        + f"; fastprof threads: {kernels.get_num_threads()}"
    )
    print(
        f"{'case':<58} {'contender':<22} {'median':>11} {'vs fastprof':>12}"
        + (f" {'cpu':>11}" if args.cpu else "")
    )
    for title, funcs, bar in cases(args.quick):
        repeat = args.slow_repeat if ("5x5x5" in title and not args.quick) else args.repeat
        times, cpu = interleaved(funcs, repeat)
        base = statistics.median(times["fastprof"])
        for i, (name, ts) in enumerate(times.items()):
            med = statistics.median(ts)
            extra = f" {statistics.median(cpu[name]) * 1e3:>8.1f} ms" if args.cpu else ""
            print(
                f"{title if i == 0 else '':<58} {name:<22} {med * 1e3:>8.1f} ms"
                f" {med / base:>11.2f}x{extra}"
            )
        if bar:
            print(f"{'':<58} bar: {bar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
