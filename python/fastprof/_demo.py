"""``python -m fastprof demo``: the lesson fastprof lives by, shown on a small pipeline.

A noisy image is smoothed with a 5x5 neighbourhood mean, a cubic background is fitted by
least squares over every pixel, and the bright spots are labelled (examples/hotspots.py's
pipeline).  The demo asks which step takes the time, profiles it, shows that the loop of
small NumPy calls (not the big least-squares fit) is the bottleneck, then replaces that step
by an algorithm (a summed-area table) and by fastprof's compiled kernel, checks the results
agree, and times each, CUDA events on a GPU where one is present.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, List, Optional, Sequence, TextIO, Tuple

__all__ = ["main"]


def simulate(np: Any, n: int, nspots: int = 6, seed: int = 0) -> Any:
    """An n x n image: a tilted background, Gaussian spots and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n] / n
    img = 2.0 + 1.5 * x - 0.8 * y + 0.6 * x * y
    for _ in range(nspots):
        cy, cx = rng.uniform(0.1, 0.9, size=2)
        width = rng.uniform(0.01, 0.03)
        img += 3.0 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * width**2))
    return img + rng.normal(0.0, 0.5, size=img.shape)


def window_mean(img: Any, i: int, j: int, r: int) -> float:
    """Mean of the (2r+1)^2 window around (i, j), clipped at the borders."""
    return float(img[max(i - r, 0) : i + r + 1, max(j - r, 0) : j + r + 1].mean())


def smooth_loop(np: Any, img: Any, r: int) -> Any:
    """The neighbourhood mean, one pixel at a time."""
    out = np.empty_like(img)
    for i in range(img.shape[0]):
        for j in range(img.shape[1]):
            out[i, j] = window_mean(img, i, j, r)
    return out


def smooth_table(np: Any, img: Any, r: int) -> Any:
    """The same clipped neighbourhood mean from a summed-area table (2-D cumulative sums)."""
    n0, n1 = img.shape
    s = np.zeros((n0 + 1, n1 + 1))
    s[1:, 1:] = img.cumsum(0).cumsum(1)
    i0 = np.clip(np.arange(n0) - r, 0, n0)
    i1 = np.clip(np.arange(n0) + r + 1, 0, n0)
    j0 = np.clip(np.arange(n1) - r, 0, n1)
    j1 = np.clip(np.arange(n1) + r + 1, 0, n1)
    total = s[i1][:, j1] - s[i0][:, j1] - s[i1][:, j0] + s[i0][:, j0]
    return total / np.outer(i1 - i0, j1 - j0)


def fit_background(np: Any, img: Any, degree: int = 3) -> Any:
    """The least-squares polynomial surface of the given degree through every pixel."""
    n0, n1 = img.shape
    y, x = np.mgrid[0:n0, 0:n1] / max(n0, n1)
    terms = [x**a * y**b for a in range(degree + 1) for b in range(degree + 1 - a)]
    design = np.stack([t.ravel() for t in terms], axis=1)
    coef, *_ = np.linalg.lstsq(design, img.ravel(), rcond=None)
    return (design @ coef).reshape(img.shape)


def label_spots(np: Any, mask: Any) -> List[List[Tuple[int, int]]]:
    """Connected groups of True pixels (4-neighbourhood), by flood fill."""
    seen = np.zeros_like(mask, dtype=bool)
    spots = []
    for i, j in zip(*np.nonzero(mask)):
        if seen[i, j]:
            continue
        stack, pixels = [(int(i), int(j))], []
        seen[i, j] = True
        while stack:
            a, b = stack.pop()
            pixels.append((a, b))
            for c, d in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                if 0 <= c < mask.shape[0] and 0 <= d < mask.shape[1]:
                    if mask[c, d] and not seen[c, d]:
                        seen[c, d] = True
                        stack.append((c, d))
        spots.append(pixels)
    return spots


def pipeline(np: Any, img: Any, smooth: Callable[[Any, Any, int], Any]) -> Tuple[Any, int]:
    """The whole analysis with the given smoothing step: (the smoothed image, the number of
    spots of at least 5 pixels)."""
    smoothed = smooth(np, img, 2)
    residual = smoothed - fit_background(np, smoothed)
    spots = [s for s in label_spots(np, residual > 1.0) if len(s) >= 5]
    return smoothed, len(spots)


def _best_of(fn: Callable[[], Any], repeat: int) -> float:
    """The shortest of ``repeat`` host-clock timings of fn(), in seconds (CPU work only)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms"


def _gpu_line(np: Any, img: Any, out: TextIO) -> None:
    """Times the kernel on the GPU with CUDA events when a device is present; else says why
    the GPU step was left out."""
    from . import cuda

    if not cuda.is_available():
        out.write(f"On the GPU: left out ({cuda.status()}).\n")
        return
    from .kernels import uniform_filter

    dev = cuda.DeviceArray.from_numpy(img.astype(np.float32))
    res = cuda.benchmark(uniform_filter, args=(dev, 5), n_warmup=3, n_repeat=20)
    out.write(
        f"On the GPU, float32 (CUDA events, median of 20):\n"
        f"  fastprof.kernels.uniform_filter     {res.median:9.3f} ms\n"
    )


def run_demo(size: int, top: int, out: TextIO) -> int:
    """Runs the demo on a size x size image, writing to out; returns the exit status."""
    try:
        import numpy as np
    except ImportError:
        sys.stderr.write("fastprof demo: NumPy is needed (pip install fastprof[kernels])\n")
        return 2
    import fastprof

    from .kernels import uniform_filter

    img = simulate(np, size)
    out.write(
        f"fastprof demo: find the bright spots in a noisy {size}x{size} image.\n"
        f"  1. smooth it with a 5x5 neighbourhood mean (a loop over the pixels)\n"
        f"  2. fit a cubic background by least squares over every pixel "
        f"(a {size * size}x10 matrix)\n"
        f"  3. subtract it, threshold, and label the connected spots\n"
        f"Which step takes the time?  Step 2 looks expensive.  Profile before you rewrite:\n\n"
    )
    prof = fastprof.Profile()
    try:
        prof.enable()
    except (ValueError, RuntimeError) as e:  # run under another profiler: it holds the hook
        sys.stderr.write(f"fastprof demo: cannot profile here: {e}\n")
        return 2
    try:
        slow, nslow = pipeline(np, img, smooth_loop)
    finally:
        prof.disable()
    stats = fastprof.Stats(prof).filter(r"_demo\.py").sort("cumulative")
    out.write(stats.table(top, title="the demo's functions, by cumulative time"))
    rows = {r.name: r for r in stats.rows}
    whole = rows["pipeline"].cumtime or 1e-12
    share = {name: rows[name].cumtime / whole for name in ("smooth_loop", "fit_background")}
    out.write(
        f"\nThe smoothing loop takes {share['smooth_loop']:.0%} of the pipeline "
        f"({rows['window_mean'].ncalls} calls of window_mean); the least-squares fit "
        f"{share['fit_background']:.0%}.\n"
    )
    if share["smooth_loop"] > share["fit_background"]:
        out.write(
            "The fix is an algorithm, not a language: the same mean from a summed-area "
            "table, or a compiled kernel.\n\n"
        )
    else:
        out.write(
            f"At {size}x{size} the fit still weighs more (try the default --size); the fixes "
            f"of the loop:\n\n"
        )
    fast, nfast = pipeline(np, img, smooth_table)
    # the table's sums round differently from the window's: equal to 1e-9 (values near 5)
    if nfast != nslow or not np.allclose(fast, slow, rtol=0, atol=1e-9):
        sys.stderr.write("fastprof demo: the summed-area table disagrees with the loop\n")
        return 1
    kernel = uniform_filter(img, 5, mode="nearest")
    inner = (slice(2, -2), slice(2, -2))  # the borders: the loop clips, scipy's modes extend
    if not np.allclose(kernel[inner], slow[inner], rtol=0, atol=1e-9):
        sys.stderr.write("fastprof demo: fastprof.kernels.uniform_filter disagrees with the loop\n")
        return 1
    # unprofiled, as the others; best of 5 where that takes under a second or so
    loop_s = _best_of(lambda: smooth_loop(np, img, 2), 1)
    if loop_s < 0.2:
        loop_s = min(loop_s, _best_of(lambda: smooth_loop(np, img, 2), 4))
    table_s = _best_of(lambda: smooth_table(np, img, 2), 5)
    kernel_s = _best_of(lambda: uniform_filter(img, 5, mode="nearest"), 5)
    out.write(
        f"The smoothing step, {size}x{size} float64 (host clock, best of 5; the loop once "
        f"where it takes over 0.2 s):\n"
        f"  loop over the pixels                {_ms(loop_s)}\n"
        f"  summed-area table (NumPy)           {_ms(table_s)}   {loop_s / table_s:8.0f}x\n"
        f"  fastprof.kernels.uniform_filter     {_ms(kernel_s)}   {loop_s / kernel_s:8.0f}x\n"
        f"The table gives the loop's result ({nslow} spots); the kernel gives it away from the\n"
        f"2-pixel border, where it extends the image as scipy.ndimage does.\n"
    )
    _gpu_line(np, img, out)
    out.write(
        "\nYour own code: python -m fastprof run script.py "
        "(--html report.html for the call tree in a browser).\n"
    )
    return 0


def main(argv: Sequence[str], out: Optional[TextIO] = None) -> int:
    """``fastprof demo [--size N] [--top N]``; returns the exit status."""
    p = argparse.ArgumentParser(
        prog="fastprof demo",
        description="Profile a small image pipeline, find its bottleneck, and time the fixes.",
    )
    p.add_argument(
        "--size", type=int, default=448, metavar="N", help="the image's side (default 448)"
    )
    p.add_argument(
        "--top", type=int, default=8, metavar="N", help="rows of the profile shown (default 8)"
    )
    opts = p.parse_args(list(argv))
    if opts.size < 8:
        p.error(f"--size must be at least 8, got {opts.size}")
    if opts.top < 1:
        p.error(f"--top must be at least 1, got {opts.top}")
    try:
        return run_demo(opts.size, opts.top, sys.stdout if out is None else out)
    except BrokenPipeError:  # | head: the reader is gone, as the other commands end then
        sys.stderr.close()
        return 0
