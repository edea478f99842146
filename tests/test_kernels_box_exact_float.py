"""uniform_filter(..., exact=True): float results equal scipy.ndimage's bit for bit.

The fused streaming kernel (kernels/box_fused.c) must give scipy's own doubles on every rank,
dtype pair, layout, mode, origin, axis order and thread count; NaN and inf run along the line
as in scipy.  Every case is compared with scipy itself on random data."""

from __future__ import annotations

import numpy as np
import pytest

scipy_ndimage = pytest.importorskip("scipy.ndimage")

from fastprof import _fastprof, kernels  # noqa: E402
from kernel_helpers import needs_scipy_axes, same_bits  # noqa: E402

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
FLOATS = [np.float32, np.float64]


def _random_case(rng: np.random.Generator, ndim: int, big: bool):
    hi = {1: 300000 if big else 60, 2: 400 if big else 30, 3: 48 if big else 9, 4: 20 if big else 6}
    lo = hi[ndim] // 2 if big else 1  # big: enough elements for every thread to take part
    shape = tuple(int(rng.integers(lo, hi[ndim] + 1)) for _ in range(ndim))
    sizes = [int(rng.integers(1, 8)) for _ in range(ndim)]
    modes = [MODES[int(rng.integers(len(MODES)))] for _ in range(ndim)]
    origins = [int(rng.integers(-(s // 2), (s - 1) // 2 + 1)) for s in sizes]
    return shape, sizes, modes, origins


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("big", [False, True], ids=["small", "threaded"])
def test_random_cases_equal_scipy_bit_for_bit(ndim, big, kernel_threads):
    rng = np.random.default_rng(1000 * ndim + big + 7 * kernel_threads)
    for _ in range(6 if big else 25):
        shape, sizes, modes, origins = _random_case(rng, ndim, big)
        in_dt, out_dt = FLOATS[int(rng.integers(2))], FLOATS[int(rng.integers(2))]
        x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(in_dt)
        cval = float(rng.standard_normal())
        ref = scipy_ndimage.uniform_filter(
            x, sizes, output=out_dt, mode=modes, cval=cval, origin=origins
        )
        got = kernels.uniform_filter(
            x, sizes, output=out_dt, mode=modes, cval=cval, origin=origins, exact=True
        )
        same_bits(ref, got)


def test_the_fast_path_differs_where_exact_does_not():
    """The reason for exact=True: the fast float32 path rounds differently from scipy."""
    x = np.random.default_rng(3).random((64, 64, 64), dtype=np.float32)
    ref = scipy_ndimage.uniform_filter(x, 5)
    fast = kernels.uniform_filter(x, 5, exact=False)
    assert not np.array_equal(ref, fast)
    np.testing.assert_allclose(fast, ref, rtol=1e-6)
    same_bits(ref, kernels.uniform_filter(x, 5, exact=True))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: np.asfortranarray(a),
        lambda a: a[::-1, 2:, ::2],
        lambda a: a.transpose(2, 0, 1),
        lambda a: a[:, ::-3, :],
    ],
    ids=["fortran", "slices", "transposed", "negative-stride"],
)
@pytest.mark.parametrize("dt", FLOATS)
def test_any_layout_of_input_and_output(view, dt, kernel_threads):
    rng = np.random.default_rng(5)
    x = view(rng.standard_normal((40, 50, 36)).astype(dt))
    sizes, modes, origins = [5, 3, 4], ["wrap", "constant", "mirror"], [1, 0, -2]
    ref = scipy_ndimage.uniform_filter(x, sizes, mode=modes, origin=origins, cval=0.25)
    out = np.zeros(x.shape[::-1], dtype=dt).T  # a Fortran-order output
    got = kernels.uniform_filter(
        x, sizes, output=out, mode=modes, origin=origins, cval=0.25, exact=True
    )
    assert got is out
    same_bits(ref, got)


@needs_scipy_axes(scipy_ndimage.uniform_filter)
@pytest.mark.parametrize(
    "axes,sizes",
    [
        ((0,), 5),
        ((2,), 4),
        ((1, 2), [3, 5]),
        ((2, 0), [5, 3]),
        ((1, 2, 0), [4, 3, 5]),
        ((-1, 1), 3),
    ],
)
def test_axes_in_scipys_order(axes, sizes, kernel_threads):
    x = np.random.default_rng(6).standard_normal((30, 44, 52)).astype(np.float32)
    ref = scipy_ndimage.uniform_filter(x, sizes, axes=axes, mode="nearest")
    same_bits(ref, kernels.uniform_filter(x, sizes, axes=axes, mode="nearest", exact=True))


@pytest.mark.parametrize("dt", [np.uint8, np.int16, np.int64, np.bool_])
@pytest.mark.parametrize("out_dt", FLOATS)
def test_integer_and_bool_input_with_float_output(dt, out_dt):
    rng = np.random.default_rng(8)
    if dt is np.bool_:
        x = rng.random((33, 47)) < 0.5
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, size=(33, 47), dtype=dt, endpoint=True)
    ref = scipy_ndimage.uniform_filter(x, 5, output=out_dt)
    same_bits(ref, kernels.uniform_filter(x, 5, output=out_dt, exact=True))


def test_nan_and_inf_run_along_the_line_as_in_scipy(kernel_threads):
    x = np.random.default_rng(9).standard_normal((40, 41, 42)).astype(np.float32)
    x[10, 20, 30] = np.nan
    x[30, 2, 5] = np.inf
    x[5, 40, 0] = -np.inf
    ref = scipy_ndimage.uniform_filter(x, 5)
    got = kernels.uniform_filter(x, 5, exact=True)
    assert np.isnan(ref).sum() > 125  # scipy's running sums carry a NaN on along the line
    same_bits(ref, got)


def test_signed_zero_and_big_values():
    x = np.full((20, 30), -0.0)
    x[3, 4] = 1e300
    x[10, 10] = -1e300
    ref = scipy_ndimage.uniform_filter(x, 3)
    same_bits(ref, kernels.uniform_filter(x, 3, exact=True))


def test_long_box_runs_scipys_chain():
    x = np.random.default_rng(10).standard_normal((9, 40))
    ref = scipy_ndimage.uniform_filter(x, [3, 301], mode="wrap")
    same_bits(ref, kernels.uniform_filter(x, [3, 301], mode="wrap", exact=True))


def test_one_element_axes_and_empty_arrays():
    x = np.random.default_rng(11).standard_normal((1, 17, 1))
    same_bits(scipy_ndimage.uniform_filter(x, 3), kernels.uniform_filter(x, 3, exact=True))
    e = np.zeros((0, 5), dtype=np.float32)
    assert kernels.uniform_filter(e, 3, exact=True).shape == (0, 5)


def test_output_overlapping_input():
    x = np.random.default_rng(12).standard_normal((30, 30))
    ref = scipy_ndimage.uniform_filter(x, 5)
    got = kernels.uniform_filter(x, 5, output=x, exact=True)
    assert got is x
    same_bits(ref, x)


def test_exact_must_be_a_bool():
    with pytest.raises(TypeError, match="exact must be True or False"):
        kernels.uniform_filter(np.zeros((4, 4)), 3, exact=1)


def test_exact_is_checked_before_any_device_work():
    """On the GPU path too (tests/test_cuda_exact_float.py runs it): a bad exact= is a
    TypeError, not a missing device."""
    with pytest.raises(TypeError, match="exact must be True or False"):
        kernels.uniform_filter(np.zeros((4, 4)), 3, exact="yes", device="cuda")


@pytest.mark.parametrize(
    "args,exc,match",
    [
        ((np.zeros(4, np.int32), np.zeros(4), [3], [0], [0], 0.0, [0]), TypeError, "input"),
        ((np.zeros(4), np.zeros(4, np.int32), [3], [0], [0], 0.0, [0]), TypeError, "output"),
        ((np.zeros(4), np.zeros(5), [3], [0], [0], 0.0, [0]), ValueError, "shape"),
        ((np.zeros(4), np.zeros(4), [3], [0], [0], 0.0, []), ValueError, "at least one"),
        (
            (np.zeros((4, 4)), np.zeros((4, 4)), [3, 3], [0, 0], [0, 0], 0.0, [1, 1]),
            ValueError,
            "twice",
        ),
        ((np.zeros(4), np.zeros(4), [1], [0], [0], 0.0, [0]), ValueError, "axis 0"),
        ((np.zeros(4), np.zeros(4), [3], [9], [0], 0.0, [0]), ValueError, "axis 0"),
        ((np.zeros(4), np.zeros(4), [3], [0], [5], 0.0, [0]), ValueError, "axis 0"),
        ((np.zeros(4), np.zeros(4), [3, 3], [0], [0], 0.0, [0]), ValueError, "sizes"),
        ((np.zeros(4), np.zeros(4).copy()[::1], [3], [0], [0], 0.0, [3]), ValueError, "axis 3"),
    ],
)
def test_compiled_entry_checks_its_arguments(args, exc, match):
    with pytest.raises(exc, match=match):
        _fastprof._uniform_filter_exact(*args)


def test_compiled_entry_refuses_a_read_only_output():
    out = np.zeros(8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _fastprof._uniform_filter_exact(np.zeros(8), out, [3], [0], [0], 0.0, [0])


@pytest.mark.parametrize("shape", [(1,), (7,), (5000,), (1, 3001, 1), (2999, 1)])
def test_single_lines_run_one_running_sum(shape):
    """A lone line (1-D, or other axes of length 1) runs as one scalar running sum: scipy's
    bits for every mode, origin and dtype pair, strided and reversed input and output, boxes
    longer than the line, and NaN/inf carried along it as scipy carries them."""
    rng = np.random.default_rng(sum(shape))
    axis = int(np.argmax(shape))
    n = shape[axis]
    for size in sorted({2, 3, 9, min(n + 3, 40), 1 + n // 2}):
        for mode in MODES:
            o = int(rng.integers(-(size // 2), (size - 1) // 2 + 1))
            in_dt, out_dt = FLOATS[int(rng.integers(2))], FLOATS[int(rng.integers(2))]
            x = rng.standard_normal(2 * n).astype(in_dt)[::-2].reshape(shape)
            if n > 20:
                x.flat[n // 3] = [np.inf, np.nan][size % 2]
            out = np.zeros(2 * n, dtype=out_dt)[::2].reshape(shape)
            sizes = [size if d == axis else 1 for d in range(len(shape))]
            ref = scipy_ndimage.uniform_filter(
                x, sizes, output=out_dt, mode=mode, cval=0.3, origin=o
            )
            got = kernels.uniform_filter(x, sizes, output=out, mode=mode, cval=0.3, origin=o)
            assert got is out
            same_bits(ref, got)


@pytest.mark.parametrize("shape", [(20, 30), (7,)])
def test_box_too_long_for_any_memory_is_a_memory_error(shape):
    # scipy's arithmetic extends each line into a buffer: its byte count must not wrap around
    # (scipy's own call crashes); the fast path folds such a box without one
    x = np.ones(shape)
    for size in (2**34, 2**61, 2**62):
        with pytest.raises(MemoryError):
            kernels.uniform_filter(x, size)
        np.testing.assert_allclose(kernels.uniform_filter(x, size, exact=False), x, rtol=1e-12)
    with pytest.raises(MemoryError):
        kernels.uniform_filter(np.ones((4, 5), np.uint8), 2**62)
