"""Memory per distinct function: cProfile and fastprof on a program that makes functions
without end, each in a fresh interpreter; the growth of the resident set per function (the
code objects each profiler keeps included) and, for fastprof, what its C tables took from
malloc (mallinfo2: tracemalloc does not see them).  Linux only.

    python benchmarks/memory.py [--n 200000] [--kind replace|exec]

kind "replace": code.replace() makes each code object (cheap, so n can be large); "exec": each
function comes from its own exec'd source (a module code object and a function's per exec).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import ctypes, gc, sys
import cProfile, fastprof

class MallInfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2

def malloced():
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096

def base(x):
    return x

def caller(f, i):
    return f(i)

mode, n, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
prof = {"bare": None, "cProfile": cProfile.Profile, "fastprof": fastprof.Profile}[mode]
prof = prof() if prof else None
code, g = base.__code__, globals()
gc.collect()
m0, r0 = malloced(), rss()
if prof:
    prof.enable()
for i in range(n):
    if kind == "replace":
        f = type(base)(code.replace(co_name=f"f{i}"), g)
    else:
        ns = {}
        exec(f"def f{i}(x):\n    return x\n", ns)
        f = ns[f"f{i}"]
    caller(f, i)
if prof:
    prof.disable()
gc.collect()
print((rss() - r0) / n, (malloced() - m0) / n)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--kind", choices=("replace", "exec"), default="replace")
    args = ap.parse_args(argv)
    print(
        f"# Python {sys.version.split()[0]}; {args.n} functions ({args.kind}), each called "
        f"once; bytes per function"
    )
    print(f"{'profiler':<10} {'resident':>9} {'malloc':>9}")
    for mode in ("bare", "cProfile", "fastprof"):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(args.n), args.kind],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"{mode:<10} {float(out[0]):>9.1f} {float(out[1]):>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
