"""The general correlation's row loop: blocks of 32, 16 and 4 outputs and a masked tail of 1-3,
compared with scipy.ndimage and the NumPy reference across row lengths, ranks, dtypes, modes,
origins, strides and output=, and checked to sum every output the same way wherever it lies."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from fastprof import _reference as ref
from kernel_helpers import fast_kernels as kernels  # the fast paths (exact=False)

ndi = pytest.importorskip("scipy.ndimage")

# every split of a row into 32-, 16- and 4-wide blocks and a tail of 0..3
ROW_LENGTHS = [1, 2, 3, 4, 5, 7, 15, 16, 17, 19, 31, 32, 33, 35, 47, 48, 51, 63, 64, 65, 99]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def _tol(dtype: type) -> dict:
    return dict(rtol=2e-6, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_lengths_match_scipy_and_reference(n, dtype):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((4, 3, n)).astype(dtype)
    w = rng.standard_normal((3, 2, 5))
    for mode in MODES:
        got = kernels.correlate(x, w, mode=mode, cval=0.75, origin=(0, 0, 1 if n > 2 else 0))
        want = ndi.correlate(x, w, mode=mode, cval=0.75, origin=(0, 0, 1 if n > 2 else 0))
        mine = ref.correlate(x, w, mode=mode, cval=0.75, origin=(0, 0, 1 if n > 2 else 0))
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **_tol(dtype), err_msg=mode)
        np.testing.assert_allclose(got, mine, **_tol(dtype), err_msg=mode)


@pytest.mark.parametrize("n", [5, 17, 33, 35, 67])
def test_every_output_is_summed_the_same_way_wherever_it_lies(n):
    # with wrap along the row, rolling the input rolls the output; each output moves between
    # the 32-, 16-, 4-wide blocks and the masked tail, and must come out bit for bit the same
    rng = np.random.default_rng(100 + n)
    x = rng.standard_normal((3, 4, n))
    w = rng.standard_normal((2, 3, 7))
    base = kernels.correlate(x, w, mode="wrap")
    for s in (1, 2, 3, 5, 16, n - 1):
        got = kernels.correlate(np.roll(x, s, axis=2), w, mode="wrap")
        np.testing.assert_array_equal(got, np.roll(base, s, axis=2), err_msg=f"shift {s}")


@pytest.mark.parametrize("n", [3, 33, 35])
def test_nan_stays_in_its_window_at_every_place_in_the_row(n):
    w = np.arange(1.0, 1.0 + 2 * 3 * 3).reshape(2, 3, 3)
    for pos in range(n):
        x = np.ones((3, 3, n))
        x[1, 1, pos] = np.nan
        got = kernels.correlate(x, w, mode="constant")
        want = ndi.correlate(x, w, mode="constant")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"pos {pos}")
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-13)


@pytest.mark.parametrize(
    "shape", [(1,), (2,), (1, 1), (1, 3), (3, 1), (1, 1, 1), (2, 1, 3), (1, 2, 1, 1)]
)
def test_tiny_volumes(shape):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape)
    w = rng.standard_normal((3,) * len(shape))
    for mode in MODES:
        np.testing.assert_allclose(
            kernels.correlate(x, w, mode=mode),
            ndi.correlate(x, w, mode=mode),
            rtol=1e-12,
            atol=1e-12,
            err_msg=mode,
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_odd_strides_and_strided_output(dtype):
    rng = np.random.default_rng(7)
    base = rng.standard_normal((9, 14, 75)).astype(dtype)
    w = rng.standard_normal((3, 5, 4))
    for x in (base[::2, ::3, ::3], base[:, 1::2, ::-1], base.transpose(1, 2, 0)):
        want = ndi.correlate(x, w, mode="mirror", origin=(1, 0, -1))
        out_base = np.full((2,) + x.shape, -7.0, dtype=dtype)
        out = out_base[1, ..., ::-1][..., ::-1]  # a view with a non-C layout
        got = kernels.correlate(x, w, mode="mirror", origin=(1, 0, -1), output=out)
        assert got is out
        np.testing.assert_allclose(out, want, **_tol(dtype))
        assert (out_base[0] == -7.0).all()


def test_four_dimensional_and_axes():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5, 37)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 5))
    np.testing.assert_allclose(
        kernels.correlate(x, w, mode="nearest"),
        ndi.correlate(x, w, mode="nearest"),
        **_tol(np.float32),
    )
    w3 = rng.standard_normal((3, 2, 5))
    got = kernels.correlate(x, w3, axes=(0, 2, 3))
    # axes=(0, 2, 3) is the full-rank kernel with a length-1 axis 1 (scipy before 1.15 has no
    # axes= on correlate)
    np.testing.assert_allclose(got, ndi.correlate(x, w3[:, None]), **_tol(np.float32))
    if "axes" in inspect.signature(ndi.correlate).parameters:
        np.testing.assert_allclose(got, ndi.correlate(x, w3, axes=(0, 2, 3)), **_tol(np.float32))


def test_large_volume_same_for_any_thread_count_and_tiles():
    # several axis-1 tiles and axis-0 chunks: the result does not depend on how work is split
    rng = np.random.default_rng(5)
    x = rng.random((20, 120, 70), dtype=np.float32)
    w = rng.random((5, 5, 5))
    before = kernels.get_num_threads()
    try:
        kernels.set_num_threads(1)
        one = kernels.correlate(x, w, mode="reflect")
        kernels.set_num_threads(3)
        three = kernels.correlate(x, w, mode="reflect")
    finally:
        kernels.set_num_threads(before)
    np.testing.assert_array_equal(one, three)
    np.testing.assert_allclose(one, ndi.correlate(x, w, mode="reflect"), **_tol(np.float32))


# --- 3-D rows summed in pairs ----------------------------------------------------------------
# In 3-D the general path sums neighbouring output rows (axis-1 indices y, y + 1) as a pair that
# loads each shared source once; a 4-D call with a length-1 axis takes the one-row loop.  Both
# must give the same bits, whatever the weights' zero pattern (taps merged by offset).


def _as_4d(x: np.ndarray, w: np.ndarray, **kw) -> np.ndarray:
    origin = kw.pop("origin", 0)
    origin = (origin,) * 3 if np.isscalar(origin) else tuple(origin)
    o4 = (origin[0], origin[1], 0, origin[2])
    return kernels.correlate(x[:, :, None, :], w[:, :, None, :], origin=o4, **kw)[:, :, 0, :]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ny", [1, 2, 3, 7, 10])
def test_pairs_of_rows_give_the_one_row_bits(dtype, ny):
    rng = np.random.default_rng(ny)
    x = rng.standard_normal((5, ny, 37)).astype(dtype)
    w = rng.standard_normal((3, 4, 5))
    for mode in MODES:
        got = kernels.correlate(x, w, mode=mode, cval=0.5, origin=(0, 1, -1))
        np.testing.assert_array_equal(
            got, _as_4d(x, w, mode=mode, cval=0.5, origin=(0, 1, -1)), err_msg=mode
        )
        np.testing.assert_allclose(
            got,
            ndi.correlate(x, w, mode=mode, cval=0.5, origin=(0, 1, -1)),
            **_tol(dtype),
            err_msg=mode,
        )


@pytest.mark.parametrize(
    "zeros",
    [
        "checker",  # neighbouring axis-1 taps never share an offset
        "row",  # a whole axis-1 tap row is zero
        "plane",  # a whole axis-0 tap plane is zero
        "random",
        "all",
    ],
)
def test_pairs_with_zero_weights_merge_taps_by_offset(zeros):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 9, 41))
    w = rng.standard_normal((3, 5, 5))
    if zeros == "checker":
        w[(np.indices(w.shape).sum(axis=0) % 2) == 0] = 0.0
    elif zeros == "row":
        w[:, 2, :] = 0.0
        w[1, 0, :] = 0.0
    elif zeros == "plane":
        w[1] = 0.0
    elif zeros == "random":
        w[rng.random(w.shape) < 0.5] = 0.0
    else:
        w[...] = 0.0
    for mode in ("constant", "reflect", "wrap"):
        got = kernels.correlate(x, w, mode=mode, cval=-1.25)
        np.testing.assert_array_equal(got, _as_4d(x, w, mode=mode, cval=-1.25), err_msg=mode)
        np.testing.assert_allclose(
            got, ndi.correlate(x, w, mode=mode, cval=-1.25), rtol=1e-12, atol=1e-11
        )


def test_a_row_gives_the_same_bits_first_or_second_in_its_pair_and_across_tiles():
    # wrap along axis 1: rolling the input by one row rolls the output, and moves every row
    # between the first and the second place of a pair (and across the tiles of axis 1)
    rng = np.random.default_rng(21)
    x = rng.standard_normal((4, 301, 27)).astype(np.float32)
    w = rng.standard_normal((2, 5, 3))
    base = kernels.correlate(x, w, mode="wrap")
    for s in (1, 2, 3, 150):
        got = kernels.correlate(np.roll(x, s, axis=1), w, mode="wrap")
        np.testing.assert_array_equal(got, np.roll(base, s, axis=1), err_msg=f"shift {s}")


def test_pairs_with_nan_keep_it_in_its_window():
    w = np.arange(1.0, 1.0 + 3 * 3 * 3).reshape(3, 3, 3)
    x = np.ones((4, 6, 9))
    x[2, 3, 4] = np.nan
    got = kernels.correlate(x, w, mode="nearest")
    want = ndi.correlate(x, w, mode="nearest")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], _as_4d(x, w, mode="nearest")[ok])


# every split of a row into the pair loop's 24- and 8-wide blocks, 4-wide blocks and a tail
PAIR_ROW_LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 23, 24, 25, 31, 32, 33, 35, 36, 47, 48, 51, 59]


@pytest.mark.parametrize("n", PAIR_ROW_LENGTHS)
def test_pair_row_lengths_give_the_one_row_bits(n):
    rng = np.random.default_rng(200 + n)
    x = rng.standard_normal((3, 6, n)).astype(np.float32)
    w = rng.standard_normal((2, 3, 5))
    for mode in ("reflect", "constant", "wrap"):
        got = kernels.correlate(x, w, mode=mode, cval=2.0)
        np.testing.assert_array_equal(got, _as_4d(x, w, mode=mode, cval=2.0), err_msg=mode)
        np.testing.assert_allclose(
            got, ndi.correlate(x, w, mode=mode, cval=2.0), **_tol(np.float32), err_msg=mode
        )


@pytest.mark.parametrize("wshape", [(3, 1, 5), (2, 1, 3), (2, 2, 1), (3, 2, 2)])
def test_kernels_with_one_or_two_axis_1_taps(wshape):
    # one axis-1 tap: the two rows of a pair share no source, and are summed one by one (random
    # weights of these shapes are not rank 1, so they take the general path)
    rng = np.random.default_rng(sum(wshape))
    x = rng.standard_normal((5, 8, 29))
    w = rng.standard_normal(wshape)
    for mode in ("reflect", "constant"):
        got = kernels.correlate(x, w, mode=mode, cval=0.25)
        np.testing.assert_array_equal(got, _as_4d(x, w, mode=mode, cval=0.25), err_msg=mode)
        np.testing.assert_allclose(
            got, ndi.correlate(x, w, mode=mode, cval=0.25), rtol=1e-12, atol=1e-11
        )


# --- the pair loop where the quarter-row loop does not run ------------------------------------
# (4 or 6 taps along the last axis, or a zero weight): sources placed once per slice, runs that
# feed one row interleaved with the next run that feeds the other, contiguous output rows
# written by the loop itself (float32 or float64), other layouts through a row of doubles.


@pytest.mark.parametrize("n", [37, 64, 101, 300])
@pytest.mark.parametrize("kx", [4, 6])
def test_pair_loop_long_rows_and_output_layouts(n, kx):
    rng = np.random.default_rng(n + kx)
    x = rng.standard_normal((4, 90, n)).astype(np.float32)
    w = rng.standard_normal((3, 3, kx))
    kw = dict(mode="reflect", origin=(0, 1, 0))
    one = _as_4d(x, w, **kw)
    got = kernels.correlate(x, w, **kw)
    np.testing.assert_array_equal(got, one)
    np.testing.assert_allclose(got, ndi.correlate(x, w, **kw), **_tol(np.float32))
    for out_dtype in (np.float32, np.float64):
        ref = np.empty(x.shape, dtype=out_dtype)
        kernels.correlate(x, w, output=ref, **kw)
        big = np.full(x.shape[:2] + (2 * n,), -7.0, dtype=out_dtype)
        strided = big[:, :, ::2]
        kernels.correlate(x, w, output=strided, **kw)
        np.testing.assert_array_equal(strided, ref)
        assert (big[:, :, 1::2] == -7.0).all()
        np.testing.assert_allclose(
            ref, ndi.correlate(x, w, output=out_dtype, **kw), **_tol(np.float32)
        )


@pytest.mark.parametrize("seed", range(6))
def test_pair_runs_of_uneven_lengths(seed):
    # zeros on the first and last axis-1 tap rows leave runs feeding one row of unequal
    # lengths next to each other: interleaved as far as both go, the rest after
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 11, 45))
    w = rng.standard_normal((3, 4, 5))
    w[:, 0, rng.integers(0, 5, size=2)] = 0.0
    w[:, 3, rng.integers(0, 5, size=1 + seed % 3)] = 0.0
    for mode in ("constant", "mirror"):
        got = kernels.correlate(x, w, mode=mode, cval=1.5)
        np.testing.assert_array_equal(got, _as_4d(x, w, mode=mode, cval=1.5), err_msg=mode)
        np.testing.assert_allclose(
            got, ndi.correlate(x, w, mode=mode, cval=1.5), rtol=1e-12, atol=1e-11, err_msg=mode
        )
