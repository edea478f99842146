"""GPU benchmarks: fastprof's CUDA kernels and timers side by side with their peers.

    python benchmarks/gpu.py [--rounds 5] [--repeat 10] [--small]

Each case runs every contender in interleaved rounds (round 1: A, B, C; round 2: A, B, C ...),
each round timed by fastprof.cuda.benchmark (CUDA events, L2 flushed before every repeat);
the table gives medians over all repeats, the effective bandwidth or FLOP rate, and the ratio
to the case's first contender. Peers: the device's own copy bandwidth (cudaMemcpy device to
device), CuPy / cupyx.scipy.ndimage and PyTorch events when installed.

Bars: box 5x5x5 mean on 512x512x256 float32 >= 70% of copy bandwidth; general 5x5x5
in <= 1 ms on an H100-class device; fused sin+cos+sqrt(abs) on 10M float64 >= 70% of copy
bandwidth and not slower than CuPy; SGEMM 4096^3 within 10% of CuPy's matmul; host overhead of
one timed region <= 5 us.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from typing import Callable, Optional

import numpy as np

from fastprof import _fastprof
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as gk

try:
    import cupy as cp
    import cupyx.scipy.ndimage as cndi
except Exception:  # CuPy is optional
    cp = None
    cndi = None


def run_case(
    title: str,
    contenders: dict[str, Callable[[], object]],
    rounds: int,
    repeat: int,
    work: Optional[Callable[[float], str]] = None,
) -> list[tuple]:
    """Interleaved rounds of cuda.benchmark for each contender; returns table rows."""
    times: dict[str, list[np.ndarray]] = {name: [] for name in contenders}
    for fn in contenders.values():  # warm-up (compiles, caches, loads modules)
        fn()
    cuda.synchronize()
    for _ in range(rounds):
        for name, fn in contenders.items():
            res = cuda.benchmark(fn, n_warmup=2, n_repeat=repeat, flush_l2=True)
            times[name].append(res.gpu_times)
    rows = []
    base = None
    for name in contenders:
        t = np.concatenate(times[name])
        med = float(np.median(t))
        iqr = float(np.subtract(*np.percentile(t, [75, 25])))
        base = med if base is None else base
        rows.append((title, name, med, iqr, work(med) if work else "", base / med))
    return rows


def print_table(rows: list[tuple]) -> None:
    head = f"{'case':44s} {'contender':28s} {'median ms':>10s} {'IQR ms':>9s} {'rate':>16s} {'speed vs first':>14s}"
    print(head)
    print("-" * len(head))
    last = None
    for case, name, med, iqr, rate, ratio in rows:
        print(
            f"{case if case != last else '':44s} {name:28s} {med:10.4f} {iqr:9.4f} {rate:>16s} {ratio:13.2f}x"
        )
        last = case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--small", action="store_true", help="smaller sizes (quick check)")
    args = ap.parse_args()
    if not cuda.is_available():
        print(f"CUDA unavailable: {cuda.status()}")
        return 0
    dev = cuda.devices()[0]
    print(
        f"# fastprof GPU benchmarks, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    print(
        f"# device: {dev.name} (sm_{dev.compute_capability[0]}{dev.compute_capability[1]}, "
        f"{dev.multiprocessors} SMs, {dev.total_memory / 2**30:.0f} GiB, L2 {dev.l2_cache_bytes >> 20} MiB, "
        f"peak DRAM {dev.peak_bandwidth_gbs:.0f} GB/s)"
    )
    print(
        f"# {cuda.status()}; Python {platform.python_version()}; CuPy "
        f"{cp.__version__ if cp is not None else 'not installed'}"
    )
    print(f"# command: python {' '.join(sys.argv)}")
    rows: list[tuple] = []
    R, N = args.rounds, args.repeat

    # --- copy bandwidth, the yardstick -------------------------------------------------------
    shape3 = (128, 128, 64) if args.small else (512, 512, 256)
    n3 = int(np.prod(shape3))
    src = cuda.DeviceArray.from_numpy(np.random.default_rng(0).random(shape3, dtype=np.float32))
    dst = cuda.DeviceArray.empty(shape3, np.float32)
    gbs = lambda nbytes: lambda ms: f"{nbytes / ms / 1e6:.0f} GB/s"  # noqa: E731
    copy_rows = run_case(
        f"copy {n3 * 4 >> 20} MiB (read+write)",
        {"cudaMemcpy DtoD": lambda: _fastprof._cuda_memcpy_dtod(dst.ptr, src.ptr, src.nbytes, 0)},
        R,
        N,
        gbs(2 * n3 * 4),
    )
    rows += copy_rows
    copy_ms = copy_rows[0][2]
    copy_bw = 2 * n3 * 4 / copy_ms / 1e6

    # --- box mean 5x5x5 ----------------------------------------------------------------------
    # the fast kernels (exact=False) carry the bars; exact=True, the default, gives scipy's bits
    c = {
        "fastprof uniform_filter": lambda: gk.uniform_filter(src, 5, mode="reflect", exact=False),
        "fastprof, exact=True": lambda: gk.uniform_filter(src, 5, mode="reflect"),
    }
    if cndi is not None:
        xs = cp.asarray(src)
        c["cupyx uniform_filter"] = lambda: cndi.uniform_filter(xs, 5, mode="reflect")
    box = run_case(f"box mean 5^3 on {shape3} f32", c, R, N, gbs(2 * n3 * 4))
    rows += box

    # --- general 5x5x5 -----------------------------------------------------------------------
    w = np.random.default_rng(1).standard_normal((5, 5, 5)).astype(np.float32)
    c = {
        "fastprof correlate": lambda: gk.correlate(src, w, mode="reflect", exact=False),
        "fastprof, exact=True": lambda: gk.correlate(src, w, mode="reflect"),
    }
    if cndi is not None:
        wc = cp.asarray(w)
        c["cupyx correlate"] = lambda: cndi.correlate(xs, wc, mode="reflect")
    gen = run_case(f"general 5^3 on {shape3} f32", c, R, N, gbs(2 * n3 * 4))
    rows += gen

    # --- fused elementwise -------------------------------------------------------------------
    n1 = 1_000_000 if args.small else 10_000_000
    a = cuda.DeviceArray.from_numpy(np.random.default_rng(2).standard_normal(n1))
    c = {"fastprof evaluate": lambda: gk.evaluate("sin(a) + cos(a) + sqrt(abs(a))", {"a": a})}
    if cp is not None:
        ac = cp.asarray(a)
        fused = cp.fuse(lambda x: cp.sin(x) + cp.cos(x) + cp.sqrt(cp.abs(x)))
        c["CuPy ufuncs"] = lambda: cp.sin(ac) + cp.cos(ac) + cp.sqrt(cp.abs(ac))
        c["CuPy fuse"] = lambda: fused(ac)
    ew = run_case(f"sin+cos+sqrt(abs) on {n1:,} f64", c, R, N, gbs(2 * n1 * 8))
    rows += ew

    # --- SGEMM -------------------------------------------------------------------------------
    m = 1024 if args.small else 4096
    A = cuda.DeviceArray.from_numpy(
        np.random.default_rng(3).standard_normal((m, m)).astype(np.float32)
    )
    B = cuda.DeviceArray.from_numpy(
        np.random.default_rng(4).standard_normal((m, m)).astype(np.float32)
    )
    c = {"fastprof matmul (cuBLAS)": lambda: gk.matmul(A, B)}
    if cp is not None:
        Ac, Bc = cp.asarray(A), cp.asarray(B)
        c["CuPy matmul"] = lambda: cp.matmul(Ac, Bc)
    mm = run_case(f"SGEMM {m}^3", c, R, N, lambda ms: f"{2 * m**3 / ms / 1e9:.1f} TFLOP/s")
    rows += mm

    print_table(rows)

    # --- host overhead of a timed region -----------------------------------------------------
    print()
    print("host overhead of one empty timed region (median of 20 x 2000, microseconds):")
    t = cuda.cuda_timer()
    peers: dict[str, Callable[[], None]] = {}

    def fastprof_region() -> None:
        with t:
            pass

    peers["fastprof cuda_timer"] = fastprof_region
    if cp is not None:
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()

        def cupy_region() -> None:
            e0.record()
            e1.record()

        peers["CuPy Event pair"] = cupy_region
    try:
        import torch

        if torch.cuda.is_available():
            s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def torch_region() -> None:
                s0.record()
                s1.record()

            peers["PyTorch Event pair"] = torch_region
    except Exception:
        pass
    per: dict[str, list[float]] = {k: [] for k in peers}
    for _ in range(20):
        for name, fn in peers.items():
            t0 = time.perf_counter_ns()
            for _ in range(2000):
                fn()
            per[name].append((time.perf_counter_ns() - t0) / 2000 / 1e3)
            cuda.synchronize()
            t._resolve()  # reads the samples and returns the events to the pool
    for name, v in per.items():
        print(f"  {name:24s} {np.median(v):6.2f} us")

    # --- transfers vs kernel for NumPy input ---------------------------------------------------
    host = np.random.default_rng(5).random(
        (256, 256, 128) if not args.small else (64, 64, 32), dtype=np.float32
    )
    gk.uniform_filter(host, 5, exact=False)
    out = gk.uniform_filter(host, 5, exact=False)
    tm = out.timings
    print()
    print(
        f"NumPy input {host.shape} f32, uniform_filter 5^3: host->device {tm['h2d_ms']:.3f} ms, "
        f"kernel {tm['kernel_ms']:.3f} ms, device->host {tm['d2h_ms']:.3f} ms"
    )

    # --- the bars ------------------------------------------------------------------------------
    print()
    print("bars:")
    box_bw = 2 * n3 * 4 / box[0][2] / 1e6
    print(
        f"  box 5^3 at {box_bw:.0f} GB/s = {100 * box_bw / copy_bw:.0f}% of copy bandwidth ({copy_bw:.0f} GB/s); bar 70%"
    )
    print(f"  general 5^3: {gen[0][2]:.3f} ms; bar 1 ms (H100 class)")
    ew_bw = 2 * n1 * 8 / ew[0][2] / 1e6
    cupy_ew = min((r[2] for r in ew[1:]), default=float("nan"))
    print(
        f"  fused elementwise at {ew_bw:.0f} GB/s = {100 * ew_bw / copy_bw:.0f}% of copy bandwidth; "
        f"vs best CuPy {cupy_ew / ew[0][2]:.2f}x; bars 70% and >= 1x"
    )
    if len(mm) > 1:
        print(f"  SGEMM at {mm[1][2] / mm[0][2] * 100:.0f}% of CuPy's rate; bar 90%")
    print(f"  timed region host overhead {np.median(per['fastprof cuda_timer']):.2f} us; bar 5 us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
