"""Host time of repeat GPU kernel calls: what fastprof's Python side costs per call once its
plans are cached (the bar: at most 15 us per repeat call).

    python benchmarks/gpu_host.py [--calls 2000] [--rounds 7] [--quick] [--count]

Runs on a no-op fake device (no GPU needed, none used): every CUDA entry point of
fastprof._fastprof is replaced by a Python function that does nothing and returns at once, so
what is timed is fastprof's own host work per call (argument checks, plan lookup, device
arrays, events), plus one Python call per CUDA entry point.  Per case: the median over rounds
of the mean host time per call, and how many plans, NVRTC compiles and library searches the
repeat calls made (0 when the cache is hit).  Take the figures on a quiet machine.

``--count`` prints instead the function calls one repeat call makes, counted exactly by
fastprof's own profiler (Python functions, and builtins and methods apart): a figure that does
not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from typing import Any, Callable

import numpy as np

from fastprof import _fastprof
from fastprof.cuda import libs as _cuda_libs
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels


class NoopDevice:
    """Stands in for fastprof._fastprof's CUDA functions: allocations are numbers, copies,
    launches and events do nothing."""

    def __init__(self) -> None:
        self.next_ptr = 1 << 20
        self.compiles = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(_fastprof, name)  # functions that touch no device

    def _cuda_get_device(self) -> int:
        return 0

    def _cuda_set_device(self, dev: int) -> None:
        pass

    def _cuda_pointer_device(self, ptr: int) -> int:
        return 0

    def _cuda_device_props(self, dev: int) -> dict:
        return {"compute_capability": (9, 0), "l2_cache_bytes": 1 << 20}

    def _cuda_malloc(self, n: int, stream: int) -> tuple[int, bool]:
        self.next_ptr += (n + 255) // 256 * 256
        return self.next_ptr, True

    def _cuda_nvrtc_compile(self, *args: Any) -> bytes:
        self.compiles += 1
        return b"image"

    def _cuda_library_load(self, image: bytes, name: str) -> tuple[int, int]:
        return 1, 1

    def _cuda_event_create(self) -> int:
        self.next_ptr += 1
        return self.next_ptr

    def _cuda_event_elapsed(self, e0: int, e1: int) -> float:
        return 0.0

    def _cuda_event_times(self, events: tuple) -> tuple:
        return (0.0,) * (len(events) - 1)

    def _noop(self, *args: Any) -> None:
        return None

    _cuda_free = _cuda_release = _cuda_upload = _cuda_download = _noop
    _cuda_memcpy_htod = _cuda_memcpy_dtoh = _cuda_memcpy_dtod = _noop
    _cuda_event_record = _cuda_event_destroy = _cuda_stream_wait_event = _noop
    _cuda_correlate = _cuda_launch = _cuda_gemm = _cuda_synchronize = _cuda_scrub = _noop


def per_call_us(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    """Median over rounds of the mean host time of one call (us)."""
    for _ in range(max(10, calls // 10)):
        fn()
    means = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter_ns() - t0) / calls / 1e3)
    return float(np.median(means))


def calls_per_call(fn: Callable[[], Any], calls: int) -> tuple[float, float]:
    """(Python function calls, builtin and method calls) per call of fn, counted exactly by
    fastprof's profiler over calls repeat calls (the profiler's own enable/disable left out)."""
    import fastprof

    fn()
    prof = fastprof.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    prof.create_stats()
    py = builtin = 0
    for (filename, _line, name), (_cc, nc, _tt, _ct, _callers) in prof.stats.items():
        if name in ("calls_per_call", "<lambda>") and filename == __file__:
            continue
        if filename == "~":
            if "disable" not in name:
                builtin += nc
        else:
            py += nc
    return py / calls, builtin / calls


def cases() -> dict[str, Callable[[], Any]]:
    x32 = np.ones((64, 64), np.float32)
    x64 = np.ones(4096)
    a, b = np.ones((32, 16)), np.ones((16, 8))
    dx = cuda.DeviceArray.from_numpy(x32)
    w3 = np.full((3, 3), 1 / 9)
    da, db = cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b)
    d1, d2 = cuda.DeviceArray.from_numpy(x64), cuda.DeviceArray.from_numpy(x64)
    return {
        "evaluate 'sin(a) + b * 2.5', device arrays": lambda: _gpu_kernels.evaluate(
            "sin(a) + b * 2.5", {"a": d1, "b": d2}
        ),
        "evaluate 'sin(a) + b * 2.5', NumPy arrays": lambda: _gpu_kernels.evaluate(
            "sin(a) + b * 2.5", {"a": x64, "b": x64}
        ),
        "uniform_filter 5, device array": lambda: _gpu_kernels.uniform_filter(dx, 5, exact=False),
        "uniform_filter 5, NumPy array": lambda: _gpu_kernels.uniform_filter(x32, 5, exact=False),
        "uniform_filter 5 exact (default), device": lambda: _gpu_kernels.uniform_filter(dx, 5),
        "correlate 3x3 exact (default), device": lambda: _gpu_kernels.correlate(dx, w3),
        "matmul, device arrays": lambda: _gpu_kernels.matmul(da, db),
        "matmul, NumPy arrays": lambda: _gpu_kernels.matmul(a, b),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="a few calls, to see that it runs")
    ap.add_argument(
        "--count", action="store_true", help="function calls per repeat call (exact, no timing)"
    )
    args = ap.parse_args()
    calls, rounds = (50, 2) if args.quick else (args.calls, args.rounds)
    fake = NoopDevice()
    saved = (cuda._C, _gpu_kernels._C, cuda._probe)
    cuda._C = _gpu_kernels._C = fake  # type: ignore[assignment]
    cuda._probe = lambda: (1, "")
    searches = [0]
    real_search = _cuda_libs._search

    def counted(*a: Any) -> tuple[str, ...]:
        searches[0] += 1
        return real_search(*a)

    _cuda_libs._search = counted  # type: ignore[assignment]
    try:
        print(
            f"# {platform.node()} {platform.processor() or platform.machine()}, Python "
            f"{sys.version.split()[0]}, NumPy {np.__version__}; no-op fake device"
        )
        if args.count:
            print(f"{'case':48s} {'Python calls':>12s} {'builtin calls':>13s}")
            for name, fn in cases().items():
                py, builtin = calls_per_call(fn, 100)
                print(f"{name:48s} {py:12.1f} {builtin:13.1f}")
            return 0
        print(f"{'case':48s} {'host us/call':>12s} {'compiles':>9s} {'searches':>9s}")
        for name, fn in cases().items():
            fn()  # the first call builds the plan
            c0, s0 = fake.compiles, searches[0]
            us = per_call_us(fn, calls, rounds)
            print(f"{name:48s} {us:12.2f} {fake.compiles - c0:9d} {searches[0] - s0:9d}")
    finally:
        cuda._C, _gpu_kernels._C, cuda._probe = saved
        _cuda_libs._search = real_search  # type: ignore[assignment]
    return 0


if __name__ == "__main__":
    sys.exit(main())
