"""The general 3-D correlation's quarter-row loop (3 or 5 taps along the last axis, no zero
weight, rows of 32 outputs or more, AVX2/FMA CPUs): each row cut into four quarters held in the
lanes of a vector, blocks of 8, 4 and 1 vectors, rows whose length is not a multiple of 4 (the
last quarter shorter), compared bit for bit with the one-row loop (a 4-D call with a length-1
axis, which never takes it) and with scipy.ndimage across row lengths, kernels, modes, origins,
dtypes, strides and output=."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_helpers import fast_kernels as kernels  # the fast paths (exact=False)

ndi = pytest.importorskip("scipy.ndimage")

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]

# quarters of 8..27 vectors: blocks of 8, 4 and 1, and every remainder of a row by 4 (n % 4 of
# 0..3: the last quarter one to three outputs short); 31 stays below the quarter loop
ROW_LENGTHS = [31, 32, 33, 34, 35, 36, 37, 45, 48, 63, 64, 65, 66, 67, 99, 100, 101, 102, 107]


def _tol(dtype: type) -> dict:
    return dict(rtol=2e-6, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)


def _one_row(x: np.ndarray, w: np.ndarray, **kw) -> np.ndarray:
    """The same correlation through the one-row loop (4-D, a length-1 axis 2)."""
    origin = kw.pop("origin", 0)
    origin = (origin,) * 3 if np.isscalar(origin) else tuple(origin)
    o4 = (origin[0], origin[1], 0, origin[2])
    out = kw.pop("output", None)
    if out is not None:
        kw["output"] = out[:, :, None, :]
    return kernels.correlate(x[:, :, None, :], w[:, :, None, :], origin=o4, **kw)[:, :, 0, :]


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("kx", [3, 5])
def test_row_lengths_give_the_one_row_bits(n, kx):
    rng = np.random.default_rng(n * 10 + kx)
    x = rng.standard_normal((4, 5, n)).astype(np.float32)
    w = rng.standard_normal((3, 2, kx))
    for mode in MODES:
        kw = dict(mode=mode, cval=0.75, origin=(1, -1, 1 if kx == 5 else -1))
        got = kernels.correlate(x, w, **kw)
        np.testing.assert_array_equal(got, _one_row(x, w, **kw), err_msg=mode)
        np.testing.assert_allclose(got, ndi.correlate(x, w, **kw), **_tol(np.float32), err_msg=mode)


@pytest.mark.parametrize("shape", [(1, 1, 40), (2, 3, 33), (6, 1, 64), (1, 7, 35), (9, 2, 131)])
@pytest.mark.parametrize("wshape", [(1, 2, 5), (5, 5, 5), (7, 3, 3), (2, 6, 5), (4, 1, 3)])
def test_kernels_larger_than_the_volume_and_every_tap_count(shape, wshape):
    # more axis-0 or axis-1 taps than slices or rows: blocks of cval (constant) or folded rows
    rng = np.random.default_rng(sum(shape) + sum(wshape))
    x = rng.standard_normal(shape)
    w = rng.standard_normal(wshape)
    for mode in MODES:
        got = kernels.correlate(x, w, mode=mode, cval=-0.5)
        np.testing.assert_array_equal(got, _one_row(x, w, mode=mode, cval=-0.5), err_msg=mode)
        np.testing.assert_allclose(
            got, ndi.correlate(x, w, mode=mode, cval=-0.5), rtol=1e-12, atol=1e-11, err_msg=mode
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strides_and_output_layouts(dtype):
    # negative and non-unit input strides; output rows contiguous (stored with transposes),
    # strided or reversed (stored one by one), float32 or float64
    rng = np.random.default_rng(17)
    base = rng.standard_normal((8, 30, 140)).astype(dtype)
    w = rng.standard_normal((3, 4, 5))
    views = (base[:, ::2, ::2], base[::-1, :, ::-1], base[1::2, 3:, 1:-2], base.transpose(0, 1, 2))
    for x in views:
        want = ndi.correlate(x, w, mode="mirror", origin=(0, -1, 2))
        plain = kernels.correlate(x, w, mode="mirror", origin=(0, -1, 2))
        np.testing.assert_allclose(plain, want, **_tol(dtype))
        for out_dtype in (np.float32, np.float64):
            ref = np.empty(x.shape, dtype=out_dtype)
            kernels.correlate(x, w, mode="mirror", origin=(0, -1, 2), output=ref)
            np.testing.assert_array_equal(
                ref, _one_row(x, w, mode="mirror", origin=(0, -1, 2), output=np.empty_like(ref))
            )
            n = x.shape[2]
            for pick in (np.s_[:, :, :n], np.s_[:, :, ::-2], np.s_[:, :, 1::2]):
                # the output inside a larger array: what lies around it stays untouched
                big = np.full(x.shape[:2] + (2 * n,), -7.0, dtype=out_dtype)
                out = big[pick]
                got = kernels.correlate(x, w, mode="mirror", origin=(0, -1, 2), output=out)
                assert got is out
                np.testing.assert_array_equal(out, ref)
                around = np.ones(big.shape, dtype=bool)
                around[pick] = False
                assert (big[around] == -7.0).all()


def test_zero_weights_take_the_other_loops_with_the_same_sums():
    # one zero weight sends the call to the pair loop (zero taps are skipped, as scipy does, so
    # an inf or nan under a zero weight stays out of the sum); the other outputs keep their bits
    rng = np.random.default_rng(23)
    x = rng.standard_normal((5, 9, 70))
    w = rng.standard_normal((3, 3, 5))
    full = kernels.correlate(x, w, mode="nearest")
    w0 = w.copy()
    w0[2, 2, 4] = 0.0
    x_inf = x.copy()
    x_inf[4, 8, 69] = np.inf
    got = kernels.correlate(x_inf, w0, mode="nearest")
    want = ndi.correlate(x_inf, w0, mode="nearest")
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got, _one_row(x_inf, w0, mode="nearest"))
    np.testing.assert_array_equal(full, _one_row(x, w, mode="nearest"))


@pytest.mark.parametrize("pos", [0, 1, 24, 25, 26, 27, 51, 52, 76, 99])
def test_nan_stays_in_its_window_across_the_quarters(pos):
    # a nan at each place of a row of 100 (quarters of 25) reaches the outputs whose window
    # holds it, in whatever lane and vector they sit
    w = np.arange(1.0, 1.0 + 3 * 3 * 5).reshape(3, 3, 5)
    x = np.ones((4, 5, 100))
    x[2, 2, pos] = np.nan
    got = kernels.correlate(x, w, mode="reflect")
    want = ndi.correlate(x, w, mode="reflect")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13)


def test_every_output_is_summed_the_same_way_wherever_it_lies():
    # with wrap along the row, rolling the input rolls the output: every output moves between
    # lanes, vectors and blocks of 8, 4 and 1, and must come out bit for bit the same
    rng = np.random.default_rng(31)
    x = rng.standard_normal((3, 6, 67))
    w = rng.standard_normal((2, 3, 5))
    base = kernels.correlate(x, w, mode="wrap")
    for s in (1, 2, 3, 4, 17, 33, 66):
        got = kernels.correlate(np.roll(x, s, axis=2), w, mode="wrap")
        np.testing.assert_array_equal(got, np.roll(base, s, axis=2), err_msg=f"shift {s}")


def test_tiles_and_threads_give_the_same_bits():
    # several axis-1 tiles (rows of 300: 40 rows a tile) and axis-0 chunks; any thread count
    rng = np.random.default_rng(41)
    x = rng.random((12, 130, 300), dtype=np.float32)
    w = rng.random((5, 5, 5)) + 0.1
    before = kernels.get_num_threads()
    try:
        kernels.set_num_threads(1)
        one = kernels.correlate(x, w, mode="constant", cval=0.25)
        kernels.set_num_threads(3)
        three = kernels.correlate(x, w, mode="constant", cval=0.25)
    finally:
        kernels.set_num_threads(before)
    np.testing.assert_array_equal(one, three)
    np.testing.assert_array_equal(one, _one_row(x, w, mode="constant", cval=0.25))
    np.testing.assert_allclose(
        one, ndi.correlate(x, w, mode="constant", cval=0.25), **_tol(np.float32)
    )


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.float32])
def test_integer_and_float_inputs(dtype):
    rng = np.random.default_rng(5)
    x = (rng.random((4, 6, 41)) * 100).astype(dtype)
    w = rng.standard_normal((3, 3, 3))
    got = kernels.correlate(x, w, mode="reflect")
    want = ndi.correlate(x, w, mode="reflect")
    assert got.dtype == want.dtype
    if np.issubdtype(dtype, np.integer):
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
    else:
        np.testing.assert_allclose(got, want, **_tol(np.float32))
