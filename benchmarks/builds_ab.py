"""Two or more builds of the compiled core taking turns on the general correlation, in one
process: the CPU time of each call (the calling thread's with one thread, the process's with
more), so that two builds compared on a machine shared with other jobs see the same load.

    python benchmarks/builds_ab.py --threads 1 --rounds 8 --shape 128x512x256 OLD NEW

OLD and NEW are folders holding a ``fastprof`` package with its built extension (a copy of
``python/`` after ``setup.py build_ext --inplace``, one per build).  Each build's extension is
loaded under its own name; the first call of each also checks that every build gives the same
bits.  Prints the minimum and median CPU and wall-clock time of a call, and the CPU time an
output.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time
from types import ModuleType
from typing import Callable, List, Optional

import numpy as np


def load(folder: str, index: int) -> ModuleType:
    """The extension of the build in folder, loaded under a name of its own."""
    found = glob.glob(os.path.join(folder, "fastprof", "_fastprof*.so"))
    if not found:
        raise SystemExit(f"{folder}: no fastprof/_fastprof*.so (build it in place, then copy)")
    spec = importlib.util.spec_from_file_location(f"build{index}._fastprof", found[0])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("builds", nargs="+", help="folders holding a built fastprof package")
    p.add_argument("--threads", type=int, default=1, help="kernel threads (default 1)")
    p.add_argument("--rounds", type=int, default=8, help="calls of each build (default 8)")
    p.add_argument("--shape", default="128x512x256", help="float32 volume (default 128x512x256)")
    p.add_argument("--taps", type=int, default=5, help="kernel size along each axis (default 5)")
    args = p.parse_args(argv)
    shape = tuple(int(v) for v in args.shape.split("x"))
    mods = [load(folder, i) for i, folder in enumerate(args.builds)]
    rng = np.random.default_rng(0)
    x = rng.random(shape, dtype=np.float32)
    w = rng.random((args.taps,) * len(shape))
    modes = (0,) * len(shape)  # reflect
    origins = (0,) * len(shape)
    outs = [np.empty_like(x) for _ in mods]
    for mod, out in zip(mods, outs):
        mod._set_num_threads(args.threads)
        mod._correlate_general(x, out, w, modes, 0.0, origins)
    same = all(np.array_equal(out, outs[0]) for out in outs[1:])
    clock: Callable[[], float] = time.thread_time if args.threads == 1 else time.process_time
    cpu: List[List[float]] = [[] for _ in mods]
    wall: List[List[float]] = [[] for _ in mods]
    for _ in range(args.rounds):
        for i, (mod, out) in enumerate(zip(mods, outs)):
            c0, w0 = clock(), time.perf_counter()
            mod._correlate_general(x, out, w, modes, 0.0, origins)
            cpu[i].append(clock() - c0)
            wall[i].append(time.perf_counter() - w0)
    print(
        f"# {args.shape} float32, {args.taps}^{len(shape)} taps, {args.threads} thread(s), "
        f"{args.rounds} rounds; Python {sys.version.split()[0]}; same bits: {same}"
    )
    for folder, c, wl in zip(args.builds, cpu, wall):
        med = statistics.median(c)
        print(
            f"{folder:30s} cpu min {min(c) * 1e3:8.1f} med {med * 1e3:8.1f} ms "
            f"({med / x.size * 1e9:5.2f} ns an output)   wall min {min(wl) * 1e3:8.1f} "
            f"med {statistics.median(wl) * 1e3:8.1f} ms"
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
