"""The compile-time specialisations of the device's N-d correlation (src/cuda/ndimage.cu), run
by fastprof's host emulation of the device code: extents 3, 5, 7, 9 fixed per weights shape
(k x k x k, 1 x 1 x k, 1 x k x 1; k x k, 1 x k, k x 1 in 2-D), boxes k x k x k with a running
sum along z, interior blocks read without boundary folding and edge blocks that fold, every
boundary mode, float32/float64 and the integer paths, each against scipy.ndimage and the
per-output path (``_emulate="direct"``)."""

from __future__ import annotations

import numpy as np
import pytest

import fake_device
from fastprof import _fastprof
from kernel_helpers import close, fast_gpu

ndimage = pytest.importorskip("scipy.ndimage")
pytestmark = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
dev = fake_device.dev  # the fixture: a FakeDevice installed for one test

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
# 3-D tiles are 32 x 8 x 8 outputs: a 9-wide window of block (1, 1, 1) ends at x = 68, y and
# z = 20, so these shapes have interior blocks for every k, and edge blocks all round.
SHAPE_3D = (21, 22, 71)
SHAPE_2D = (23, 75)


def forms(k: int, ndim: int) -> list[tuple[int, ...]]:
    """The weights shapes with extent k that run with extents fixed at compile time."""
    if ndim == 3:
        return [(k, k, k), (1, 1, k), (1, k, 1)]
    return [(k, k), (1, k), (k, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [3, 5, 7, 9])
@pytest.mark.parametrize("shape", [SHAPE_3D, SHAPE_2D])
def test_fixed_extent_correlations_equal_scipy(dev, dtype, k, shape) -> None:
    rng = np.random.default_rng(k)
    x = (rng.standard_normal(shape) * 20 + 1).astype(dtype)
    for wshape in forms(k, len(shape)):
        w = rng.standard_normal(wshape)
        for mode in MODES:
            ref = ndimage.correlate(x, w, mode=mode, cval=0.75)
            got = fast_gpu.correlate(x, w, mode=mode, cval=0.75, _emulate=True)
            close(got, ref)
            direct = fast_gpu.correlate(x, w, mode=mode, cval=0.75, _emulate="direct")
            close(got, direct)
        got = fast_gpu.convolve(x, w, mode="reflect")  # the fake device's launch
        close(got, ndimage.convolve(x, w, mode="reflect"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [3, 5, 7, 9])
@pytest.mark.parametrize("shape", [SHAPE_3D, SHAPE_2D])
def test_fixed_extent_boxes_equal_scipy(dev, dtype, k, shape) -> None:
    x = (np.random.default_rng(k).standard_normal(shape) * 20 + 1).astype(dtype)
    for mode in MODES:
        for origin in (0, -(k // 2), (k - 1) // 2):
            kw = dict(mode=mode, cval=-2.5, origin=origin)
            ref = ndimage.uniform_filter(x, k, **kw)
            close(fast_gpu.uniform_filter(x, k, _emulate=True, **kw), ref)
            close(fast_gpu.uniform_filter(x, k, **kw), ref)


@pytest.mark.parametrize("k", [3, 5, 7, 9])
def test_box_running_sum_along_z_keeps_non_finite_values_in_their_windows(dev, k) -> None:
    # the z sum adds the entering plane and takes away the leaving one: a NaN or an infinity
    # must leave the sums once out of the window, as in a direct sum (scipy.ndimage.correlate
    # with equal weights; uniform_filter's own running sums smear NaN along the line)
    for dtype in (np.float32, np.float64):
        x = np.random.default_rng(0).standard_normal(SHAPE_3D).astype(dtype)
        x[3, 10, 40] = np.inf
        x[12, 4, 2] = -np.inf
        x[13, 5, 3] = np.inf
        x[17, 11, 50] = np.nan
        for mode in MODES:
            ref = ndimage.correlate(x, np.full((k, k, k), 1.0 / k**3, dtype), mode=mode)
            got = fast_gpu.uniform_filter(x, k, mode=mode, _emulate=True)
            assert np.isinf(got).any() and np.isnan(got).any()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
            fin = np.isfinite(ref)
            close(got[fin], ref[fin])


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.int32])
@pytest.mark.parametrize("k", [3, 5, 7, 9])
def test_fixed_extent_integer_paths_equal_scipy_exactly(dev, dtype, k) -> None:
    info = np.iinfo(dtype)
    x = np.random.default_rng(k).integers(info.min, info.max, SHAPE_3D, dtype=dtype)
    w_int = np.zeros((k, k, k))
    w_int[k // 2, :, :] = 1.0
    w_int[:, 0, k - 1] = 2.0
    for mode in MODES:
        got = fast_gpu.uniform_filter(x, k, mode=mode, cval=5)
        np.testing.assert_array_equal(got, ndimage.uniform_filter(x, k, mode=mode, cval=5))
        got = fast_gpu.correlate(x, w_int, mode=mode, cval=1)
        np.testing.assert_array_equal(got, ndimage.correlate(x, w_int, mode=mode, cval=1))


def test_strided_and_reversed_inputs_take_the_interior_path_right(dev) -> None:
    # the interior blocks read with 32-bit offsets from the window's corner: negative and
    # non-unit strides must give what the folding path gives
    base = np.random.default_rng(5).standard_normal((25, 24, 150))
    for x in (base[::-1, :, ::2], base[:, ::-1, 1::2], base.transpose(2, 1, 0)[:70]):
        for k in (3, 5):
            w = np.random.default_rng(k).standard_normal((k, k, k))
            for mode in ("reflect", "constant"):
                ref = ndimage.correlate(x, w, mode=mode)
                close(fast_gpu.correlate(x, w, mode=mode, _emulate=True), ref)
                close(
                    fast_gpu.uniform_filter(x, k, mode=mode, _emulate=True),
                    ndimage.uniform_filter(x, k, mode=mode),
                )
