"""correlate/convolve(..., exact=True): float results equal scipy.ndimage's bit for bit.

scipy sums every tap of the whole kernel from 0.0 in C order of the taps, a product then a sum
each.  The exact path must give those bits whatever the fast paths would do instead (separate
a rank-1 kernel, fuse multiply-adds, hold quarter rows in vector lanes, permute the axes of a
Fortran-order input).  Every case is compared with scipy itself on random data."""

from __future__ import annotations

import numpy as np
import pytest

scipy_ndimage = pytest.importorskip("scipy.ndimage")

from fastprof import kernels  # noqa: E402
from kernel_helpers import needs_scipy_axes, same_bits  # noqa: E402

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
FLOATS = [np.float32, np.float64]


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_random_cases_equal_scipy_bit_for_bit(ndim, func, kernel_threads):
    rng = np.random.default_rng(100 * ndim + kernel_threads + (func == "convolve"))
    hi = {1: 400, 2: 60, 3: 24, 4: 9}[ndim]
    for _ in range(10):
        shape = tuple(int(rng.integers(1, hi + 1)) for _ in range(ndim))
        wshape = tuple(int(rng.integers(1, 6)) for _ in range(ndim))
        weights = rng.standard_normal(wshape)
        origins = [int(rng.integers(-(k // 2), (k - 1) // 2 + 1)) for k in wshape]
        in_dt, out_dt = FLOATS[int(rng.integers(2))], FLOATS[int(rng.integers(2))]
        x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(in_dt)
        mode = MODES[int(rng.integers(len(MODES)))]
        cval = float(rng.standard_normal())
        ref = getattr(scipy_ndimage, func)(
            x, weights, output=out_dt, mode=mode, cval=cval, origin=origins
        )
        got = getattr(kernels, func)(
            x, weights, output=out_dt, mode=mode, cval=cval, origin=origins, exact=True
        )
        same_bits(ref, got)


@pytest.mark.parametrize("dt", FLOATS)
def test_the_volume_the_fast_paths_take_apart(dt, kernel_threads):
    """A 3-D kernel of 5 taps along rows of 32 or more (the quarter-row loop's case), a rank-1
    kernel (the separable path's) and a box, where the fast paths differ from scipy."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((20, 24, 70)).astype(dt)
    for w in (
        rng.random((5, 5, 5)),
        np.multiply.outer(np.multiply.outer(rng.random(3), rng.random(5)), rng.random(5)),
        np.full((5, 5, 5), 1 / 125),
    ):
        same_bits(scipy_ndimage.correlate(x, w), kernels.correlate(x, w, exact=True))


@pytest.mark.parametrize("last", [3, 5])
@pytest.mark.parametrize("n", [32, 50, 70, 257])
def test_quarter_rows_without_fma(n, last, kernel_threads):
    """The quarter-row loop's cases (3-D, 3 or 5 taps along rows of 32 or more, no zero weight):
    with exact=True it sums each output a product then a sum per tap, in blocks of eight, four
    and one vectors of a quarter row (n = 50: 8 + 4 + 1), and gives scipy's bits in every mode;
    the fast path, with its fused multiply-adds, does not on float64."""
    rng = np.random.default_rng(n * 10 + last + kernel_threads)
    x = rng.standard_normal((7, 9, n))
    w = rng.random((int(rng.integers(1, 5)), int(rng.integers(1, 5)), last)) + 0.1
    fast_differs = False
    for mode in MODES:
        for in_dt, out_dt in ((np.float64, np.float64), (np.float32, np.float32)):
            xi = x.astype(in_dt)
            ref = scipy_ndimage.correlate(xi, w, output=out_dt, mode=mode, cval=0.5)
            got = kernels.correlate(xi, w, output=out_dt, mode=mode, cval=0.5, exact=True)
            same_bits(ref, got)
            if out_dt is np.float64:
                fast = kernels.correlate(xi, w, output=out_dt, mode=mode, cval=0.5, exact=False)
                fast_differs |= not np.array_equal(fast, ref)
    assert fast_differs


def test_fast_path_differs_on_float64_where_exact_does_not():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 20, 64))
    w = rng.random((5, 5, 5))
    ref = scipy_ndimage.correlate(x, w)
    assert not np.array_equal(ref, kernels.correlate(x, w, exact=False))
    same_bits(ref, kernels.correlate(x, w, exact=True))


@pytest.mark.parametrize(
    "view",
    [np.asfortranarray, lambda a: a[::-1, 1:, ::2], lambda a: a.transpose(2, 0, 1)],
    ids=["fortran", "slices", "transposed"],
)
def test_any_input_and_output_layout(view):
    rng = np.random.default_rng(6)
    x = view(rng.standard_normal((18, 22, 30)))
    w = rng.standard_normal((3, 4, 5))
    out = np.zeros(x.shape[::-1]).T
    ref = scipy_ndimage.convolve(x, w, mode="wrap", origin=[0, 1, -1])
    got = kernels.convolve(x, w, output=out, mode="wrap", origin=[0, 1, -1], exact=True)
    assert got is out
    same_bits(ref, got)


def test_tiny_and_zero_weights_are_dropped_as_scipy_drops_them():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((30, 40))
    x[10, 10] = np.nan
    x[20, 5] = np.inf
    w = rng.standard_normal((3, 5))
    w[1, 2] = 0.0
    w[0, 0] = 1e-17  # |w| <= DBL_EPSILON: scipy leaves it out of the sum
    ref = scipy_ndimage.correlate(x, w)
    same_bits(ref, kernels.correlate(x, w, exact=True))


@needs_scipy_axes(scipy_ndimage.correlate)
@pytest.mark.parametrize("axes", [(0, 2), (2,), (-1, 0)])
def test_axes(axes):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((14, 15, 40)).astype(np.float32)
    w = rng.standard_normal((3,) * len(axes))
    ref = scipy_ndimage.correlate(x, w, axes=axes, mode="nearest")
    same_bits(ref, kernels.correlate(x, w, axes=axes, mode="nearest", exact=True))


@pytest.mark.parametrize("dt", [np.uint8, np.int32, np.bool_])
def test_integer_input_with_float_output(dt):
    rng = np.random.default_rng(9)
    x = rng.random((25, 31)) < 0.5 if dt is np.bool_ else rng.integers(0, 100, (25, 31)).astype(dt)
    w = rng.standard_normal((3, 3))
    ref = scipy_ndimage.correlate(x, w, output=np.float64)
    same_bits(ref, kernels.correlate(x, w, output=np.float64, exact=True))


def test_exact_checks():
    with pytest.raises(TypeError, match="exact must be True or False"):
        kernels.correlate(np.zeros((4, 4)), np.ones((3, 3)), exact="yes")
    with pytest.raises(TypeError, match="exact must be True or False"):
        kernels.convolve(np.zeros((4, 4)), np.ones((3, 3)), exact=None, device="cuda")


@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 12289, 20000])
@pytest.mark.parametrize("k", [1, 2, 5, 9])
def test_long_lines_cut_into_rows(n, k, kernel_threads):
    """A 1-D line runs as overlapping rows of 4096 outputs on all the workers: every output,
    at the rows' seams and the line's ends alike, keeps scipy's bits, for every mode and
    origin, float32 and float64, strided input and output."""
    rng = np.random.default_rng(n + 7 * k + kernel_threads)
    weights = rng.standard_normal(k)
    for mode in MODES:
        for origin in sorted({-(k // 2), 0, (k - 1) // 2}):
            in_dt, out_dt = FLOATS[int(rng.integers(2))], FLOATS[int(rng.integers(2))]
            x = rng.standard_normal(2 * n).astype(in_dt)[::2]
            out = np.zeros(2 * n, dtype=out_dt)[1::2]
            ref = scipy_ndimage.correlate(
                x, weights, output=out_dt, mode=mode, cval=0.75, origin=origin
            )
            got = kernels.correlate(x, weights, output=out, mode=mode, cval=0.75, origin=origin)
            assert got is out
            same_bits(ref, got)


@pytest.mark.parametrize("n, k", [(5, 20001), (300, 9000), (1, 4097)])
@pytest.mark.parametrize("mode", ["constant", "nearest", "mirror", "wrap"])
def test_kernel_far_longer_than_the_line_equals_scipy(n, k, mode):
    # a pass per tap (k >> n): the rows' cost would grow as k squared. (reflect is left out:
    # scipy's correlate, unlike its own correlate1d, folds a kernel many times longer than
    # the line differently)
    rng = np.random.default_rng(n + k)
    w = rng.standard_normal(k)
    w[rng.integers(0, k, size=k // 4)] = 0.0  # scipy skips zero taps
    for dt in FLOATS:
        x = (rng.standard_normal(n) * 100).astype(dt)
        ref = scipy_ndimage.correlate(x, w, mode=mode, cval=1.25)
        got = kernels.correlate(x, w, mode=mode, cval=1.25, exact=True)
        same_bits(got, ref)
