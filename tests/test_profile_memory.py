"""The call profiler's memory: a program that makes code objects without end costs fastprof no
more per function than cProfile (each keeps the code object, and a record), enable/disable
cycles leave nothing behind, the code objects are released by clear() and by the profiler's
end, and counts stay exact while the tables grow.

Memory is read as the resident set of a fresh interpreter per profiler (cProfile allocates with
PyMem_Malloc, fastprof with PyMem_RawMalloc: the resident set counts both alike): allocation, not
timing, so a loaded machine does not move it."""

from __future__ import annotations

import cProfile
import gc
import os
import subprocess
import sys
import types
import weakref
from typing import Any, Callable

import pytest

import fastprof
from profile_helpers import comparable

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/statm"), reason="reads the resident set from /proc/self/statm"
)

# AddressSanitizer (.ci/sanitize) pads every malloc and keeps freed memory in quarantine, so
# the resident set measures it, not the profiler.
_NOT_UNDER_ASAN = pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="AddressSanitizer's allocator sets the memory",
)

# Makes n distinct functions (each its own code object), calls each from two callers under
# the profiler named on the command line, and prints the growth of the resident set in bytes
# per function.
_PER_FUNCTION = """
import cProfile, gc, sys
import fastprof

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096

def base(x):
    return x

def caller_a(f, i):
    return f(i)

def caller_b(f, i):
    return f(i)

mode, n = sys.argv[1], int(sys.argv[2])
prof = {"cprofile": cProfile.Profile, "fastprof": fastprof.Profile}[mode]()
code, ns = base.__code__, globals()
gc.collect()
r0 = rss()
prof.enable()
for i in range(n):
    f = type(base)(code.replace(co_name=f"f{i}"), ns)
    caller_a(f, i)
    caller_b(f, i)
prof.disable()
gc.collect()
print((rss() - r0) / n)
"""

# Runs n enable/disable cycles (after a warm-up) and prints the resident set's growth in bytes.
_CYCLES = """
import sys
import types
import fastprof

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096

def f(x):
    return x

def cycle(p, i):
    p.enable()
    f(i)
    sorted([2, 1], key=f)
    p.disable()

n = int(sys.argv[1])
p = fastprof.Profile()
for i in range(2000):
    cycle(p, i)
r0 = rss()
for i in range(n):
    cycle(p, i)
r1 = rss()
for i in range(n // 10):
    q = fastprof.Profile()
    cycle(q, i)
    q.getstats()
print(r1 - r0, rss() - r1)
"""


def _run(script: str, *args: Any) -> list[float]:
    r = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return [float(x) for x in r.stdout.split()]


@_NOT_UNDER_ASAN
def test_memory_per_function_at_most_cprofiles() -> None:
    """100,000 code objects, each called from two callers: fastprof's resident set grows by
    no more per function than cProfile's (both keep the code object; cProfile an 80-byte
    entry and a 64-byte entry per caller in its trees)."""
    n = 100_000
    (mine,) = _run(_PER_FUNCTION, "fastprof", n)
    (theirs,) = _run(_PER_FUNCTION, "cprofile", n)
    assert mine <= theirs, f"fastprof {mine:.1f} bytes a function, cProfile {theirs:.1f}"


@_NOT_UNDER_ASAN
def test_enable_disable_cycles_leave_nothing() -> None:
    """100,000 enable/disable cycles (Python and builtin calls in each), then 10,000 fresh
    profilers: the resident set stays flat (a leak of 16 bytes a cycle would add 1.6 MB)."""
    cycles, fresh = _run(_CYCLES, 100_000)
    assert cycles < 512 * 1024, f"{cycles / 1e5:.1f} bytes a cycle"
    assert fresh < 512 * 1024, f"{fresh / 1e4:.1f} bytes a profiler"


def _fresh_functions(n: int) -> list[Callable[[int], int]]:
    def base(x: int) -> int:
        return x

    return [types.FunctionType(base.__code__.replace(co_name=f"g{i}"), {}) for i in range(n)]


def test_code_objects_released_by_clear_and_by_the_profilers_end() -> None:
    for end in ("clear", "del"):
        funcs = _fresh_functions(300)
        refs = [weakref.ref(f.__code__) for f in funcs]
        p = fastprof.Profile()
        p.enable()
        for f in funcs:
            f(1)
        p.disable()
        del funcs, f
        gc.collect()
        assert all(r() is not None for r in refs)  # held by the profiler's records
        if end == "clear":
            p.clear()
        else:
            del p
        gc.collect()
        assert all(r() is None for r in refs), end


def _two_callers(funcs: list[Callable[[int], int]]) -> None:
    def one(f: Callable[[int], int], i: int) -> int:
        return f(i)

    def two(f: Callable[[int], int], i: int) -> int:
        return f(i) + f(i)

    for i, f in enumerate(funcs):
        one(f, i)
        if i % 3:
            two(f, i)
        len(funcs)


def test_counts_exact_while_the_maps_grow() -> None:
    """5,000 functions, reached from one or two callers, through many growths of the code
    and edge maps, and again after clear(): every count and caller as cProfile's."""
    funcs = _fresh_functions(5000)
    ref = cProfile.Profile()
    ref.runcall(_two_callers, funcs)
    ref.create_stats()
    p = fastprof.Profile()
    for _ in range(2):
        p.clear()
        p.runcall(_two_callers, funcs)
        p.create_stats()
        assert comparable(p.stats) == comparable(ref.stats)


# Starts and joins n short threads, one after another, under the profiler named on the command
# line, and prints the growth of the resident set in bytes per thread.
_PER_THREAD = """
import cProfile, gc, sys, threading
import fastprof

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096

def leaf():
    return 1

def task():
    for _ in range(10):
        leaf()

def threads(n):
    for _ in range(n):
        t = threading.Thread(target=task)
        t.start()
        t.join()

mode, n = sys.argv[1], int(sys.argv[2])
prof = {"cprofile": cProfile.Profile, "fastprof": fastprof.Profile}[mode]()
prof.enable()
threads(200)  # thread stacks, caches and the tables' first growth
gc.collect()
before = rss()
threads(n)
gc.collect()
print((rss() - before) / n)
prof.disable()
"""


@_NOT_UNDER_ASAN
def test_finished_threads_cost_a_few_bytes_each() -> None:
    """A server that starts threads without end: 5,000 threads, one after another. A finished
    thread's stack and activation counts are freed when it ends (its record, a few dozen bytes,
    stays for the per-thread views); they were kept, 3 to 6 KB a thread."""
    n = 5000
    (mine,) = _run(_PER_THREAD, "fastprof", n)
    (theirs,) = _run(_PER_THREAD, "cprofile", n)
    assert mine < 400 + max(theirs, 0), f"fastprof {mine:.0f} bytes a thread, cProfile {theirs:.0f}"


def test_a_small_finished_profile_stays_small() -> None:
    """Per-request profiles (werkzeug's ProfilerMiddleware makes one per request) kept
    around: a profile of a few calls holds its fixed code cache (16 KiB) and tables that
    start small and double, not tables sized for thousands of functions up front."""
    import gc
    import tracemalloc

    def work() -> int:
        return sum(range(10))

    def one() -> Any:
        p = fastprof.Profile()
        p.enable()
        work()
        p.disable()
        return p

    one()
    gc.collect()
    tracemalloc.start()
    try:
        keep = [one() for _ in range(50)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(keep) == 50
    assert held / 50 < 28 * 1024, f"{held / 50:.0f} bytes per finished profile"
