"""convolve, correlate and uniform_filter equal scipy.ndimage on every integer and float dtype it
accepts (random data, every mode, origins), and take ``axes=`` as scipy 1.11+ does; on the CPU
and through the GPU front end's host emulation of the device code."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from fastprof import _fastprof, kernels

ndi = pytest.importorskip("scipy.ndimage")
needs_scipy_axes = pytest.mark.skipif(
    "axes" not in inspect.signature(ndi.correlate).parameters
    or "axes" not in inspect.signature(ndi.uniform_filter).parameters,
    reason="this scipy.ndimage has no axes= to compare with",
)

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float32, np.float64]
MODES = [
    "reflect",
    "constant",
    "nearest",
    "mirror",
    "wrap",
    "grid-mirror",
    "grid-constant",
    "grid-wrap",
]
CUDA = _fastprof._cuda_built()


def _data(dtype, shape, seed: int = 0) -> np.ndarray:
    """Random data over the dtype's whole range (floats: normal, scaled)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Integer results equal scipy's exactly; float results to a few units of rounding (their
    sums run in another order)."""
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    if want.dtype.kind in "iu":
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (
            f"{bad.size} of {want.size} differ, first at {bad[0]}:"
            f" {got.flat[bad[0]]} != {want.flat[bad[0]]}"
        )
    else:
        tol = (
            dict(rtol=2e-6, atol=2e-4) if want.dtype == np.float32 else dict(rtol=1e-12, atol=1e-10)
        )
        np.testing.assert_allclose(got, want, **tol)


def _both(fn: str, *args, **kw):
    """(fastprof's result, scipy's) or None when scipy rejects the arguments."""
    try:
        want = getattr(ndi, fn)(*args, **kw)
    except (ValueError, RuntimeError):
        return None
    return getattr(kernels, fn)(*args, **kw), want


# --- the reported cases ----------------------------------------------------------------------


def test_uniform_filter_constant_uint8_stays_constant() -> None:
    x = np.full((6, 7), 7, dtype=np.uint8)
    np.testing.assert_array_equal(kernels.uniform_filter(x, 3), x)
    np.testing.assert_array_equal(kernels.uniform_filter(x, 3), ndi.uniform_filter(x, 3))


def test_uniform_filter_random_uint8_image_equals_scipy() -> None:
    x = _data(np.uint8, (128, 96), seed=3)
    _same(kernels.uniform_filter(x, 3), ndi.uniform_filter(x, 3))
    _same(kernels.uniform_filter(x, (5, 2)), ndi.uniform_filter(x, (5, 2)))


# --- every dtype, every mode, with origins ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_uniform_filter_every_dtype(dtype, mode) -> None:
    x = _data(dtype, (13, 11), seed=1)
    cval = 3.0 if np.dtype(dtype).kind == "u" else -2.5
    for size in (3, 4, (2, 5), (1, 6)):
        for origin in (0, -1, 1, (1, -2)):
            pair = _both("uniform_filter", x, size, mode=mode, cval=cval, origin=origin)
            if pair is not None:
                _same(*pair)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_correlate_and_convolve_every_dtype(dtype, mode) -> None:
    x = _data(dtype, (12, 10), seed=2)
    rng = np.random.default_rng(4)
    real = rng.standard_normal((3, 4))
    real /= np.abs(real).sum()  # results stay inside the dtype's range
    whole = rng.integers(-1, 2, (3, 3))  # integer weights, signed results in unsigned dtypes
    cval = 2.0 if np.dtype(dtype).kind == "u" else -1.5
    for fn in ("correlate", "convolve"):
        for w in (real, whole, np.ones((1, 5)) / 5):
            for origin in (0, -1, (0, 1)):
                pair = _both(fn, x, w, mode=mode, cval=cval, origin=origin)
                wide = np.dtype(dtype).kind in "iu" and np.dtype(dtype).itemsize == 8
                if pair is not None and not (wide and w is whole):
                    _same(*pair)  # (64-bit sums of integer weights overflow: undefined in C)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_negative_results_wrap_in_unsigned_dtypes_as_scipy(dtype) -> None:
    x = np.array([[0, 5, 1, 9, 2]], dtype=dtype)
    w = np.array([[1.0, -1.0]])
    _same(kernels.correlate(x, w), ndi.correlate(x, w))


def test_integer_output_of_float_input_and_output_arrays() -> None:
    x = _data(np.float64, (9, 8), seed=5)
    for fn, arg in (("uniform_filter", 3), ("correlate", np.full((3, 2), 0.25))):
        for out in (np.int16, np.uint8):
            _same(getattr(kernels, fn)(x, arg, output=out), getattr(ndi, fn)(x, arg, output=out))
        got = np.empty(x.shape, np.int32)
        want = np.empty(x.shape, np.int32)
        assert getattr(kernels, fn)(x, arg, output=got) is got
        getattr(ndi, fn)(x, arg, output=want)
        _same(got, want)


def test_64_bit_integers_beyond_double_precision() -> None:
    x = _data(np.int64, (7, 9), seed=6) // 4
    _same(kernels.uniform_filter(x, 3), ndi.uniform_filter(x, 3))
    w = np.array([[0.25, 0.5, 0.25]])
    _same(kernels.correlate(x, w, mode="wrap"), ndi.correlate(x, w, mode="wrap"))
    u = _data(np.uint64, (7, 9), seed=7)
    _same(
        kernels.uniform_filter(u, (2, 5), mode="nearest"),
        ndi.uniform_filter(u, (2, 5), mode="nearest"),
    )


# --- axes= ----------------------------------------------------------------------------------


AXES_CASES = [
    (0, 3, 0, "reflect"),
    (-1, 4, 1, "wrap"),
    ((0, 2), (3, 5), (1, -2), ["nearest", "mirror"]),
    ((2, 0), (5, 3), (-2, 1), ["mirror", "constant"]),
    ((1,), [2], [0], ["reflect"]),
    ((2, 1, 0), 3, (0, 1, -1), "constant"),
    ((), 3, 0, "reflect"),
]


@needs_scipy_axes
@pytest.mark.parametrize(
    "dtype", [np.uint8, np.int32, np.float32, np.float64], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("axes,size,origin,mode", AXES_CASES)
def test_uniform_filter_axes_as_scipy(dtype, axes, size, origin, mode) -> None:
    x = _data(dtype, (7, 6, 8), seed=8)
    got = kernels.uniform_filter(x, size, mode=mode, origin=origin, axes=axes, cval=4.0)
    _same(got, ndi.uniform_filter(x, size, mode=mode, origin=origin, axes=axes, cval=4.0))


@needs_scipy_axes
@pytest.mark.parametrize("fn", ["correlate", "convolve"])
@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(
    "axes,wshape,origin",
    [
        (1, (3,), 1),
        ((-1,), (4,), -1),
        ((0, 2), (3, 2), (1, 0)),
        ((2, 0), (3, 2), (-1, 0)),
        ((1, 0, 2), (3, 1, 2), (1, 0, 0)),
    ],
)
def test_correlate_axes_as_scipy(fn, dtype, axes, wshape, origin) -> None:
    x = _data(dtype, (6, 7, 5), seed=9)
    w = np.random.default_rng(10).standard_normal(wshape)
    w /= np.abs(w).sum()
    for mode in ("reflect", "constant", "wrap"):
        got = getattr(kernels, fn)(x, w, mode=mode, origin=origin, axes=axes, cval=1.0)
        _same(got, getattr(ndi, fn)(x, w, mode=mode, origin=origin, axes=axes, cval=1.0))


def test_axes_errors_name_the_argument() -> None:
    x = np.zeros((4, 5))
    with pytest.raises(ValueError, match="axes"):
        kernels.uniform_filter(x, 3, axes=(0, 0))
    with pytest.raises(ValueError, match="axes"):
        kernels.correlate(x, np.ones(3), axes=2)
    with pytest.raises(TypeError, match="axes"):
        kernels.uniform_filter(x, 3, axes=[0.5])
    with pytest.raises(ValueError, match="weights"):
        kernels.correlate(x, np.ones((3, 3)), axes=1)
    with pytest.raises(ValueError, match="size"):
        kernels.uniform_filter(x, (3, 3), axes=1)
    with pytest.raises(ValueError, match="origin"):
        kernels.convolve(x, np.ones(3), origin=(0, 0), axes=[1])


# --- the GPU front end through its host emulation of the device code ------------------------


needs_cuda = pytest.mark.skipif(not CUDA, reason="fastprof built without CUDA")


@needs_cuda
@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", INTS + FLOATS, ids=lambda d: np.dtype(d).name)
def test_gpu_front_end_every_dtype(dtype, mode) -> None:
    from fastprof.kernels import gpu

    x = _data(dtype, (11, 9), seed=11)
    rng = np.random.default_rng(12)
    real = rng.standard_normal((3, 3))
    real /= np.abs(real).sum()
    cval = 3.0
    for emulate in (True, "direct"):
        for size, origin in ((3, 0), ((4, 2), (-1, 0)), (5, 1)):
            _same(
                gpu.uniform_filter(x, size, mode=mode, origin=origin, cval=cval, _emulate=emulate),
                ndi.uniform_filter(x, size, mode=mode, origin=origin, cval=cval),
            )
        for w in (real, rng.integers(0, 3, (2, 3))):
            for fn in ("correlate", "convolve"):
                _same(
                    getattr(gpu, fn)(x, w, mode=mode, cval=cval, _emulate=emulate),
                    getattr(ndi, fn)(x, w, mode=mode, cval=cval),
                )


@needs_cuda
@needs_scipy_axes
def test_gpu_front_end_axes_and_integer_outputs() -> None:
    from fastprof.kernels import gpu

    x = _data(np.uint8, (7, 6, 5), seed=13)
    _same(
        gpu.uniform_filter(x, (3, 4), axes=(2, 0), mode=["wrap", "nearest"], _emulate=True),
        ndi.uniform_filter(x, (3, 4), axes=(2, 0), mode=["wrap", "nearest"]),
    )
    w = np.array([[1.0, 2.0], [0.0, -1.0]])
    _same(
        gpu.correlate(x, w, axes=(0, 2), origin=(0, -1), _emulate=True),
        ndi.correlate(x, w, axes=(0, 2), origin=(0, -1)),
    )
    f = _data(np.float64, (9, 8), seed=14)
    out = np.empty(f.shape, np.int16)
    assert gpu.uniform_filter(f, 3, output=out, _emulate=True) is out
    _same(out, ndi.uniform_filter(f, 3, output=np.int16))


@needs_scipy_axes
def test_negative_int_axis() -> None:
    # scipy 1.17 leaves a bare negative int axis of correlate unnormalised (and then fails);
    # here it names the axis from the end, as for uniform_filter and as a tuple does in scipy
    x = _data(np.int32, (5, 6, 4), seed=15)
    w = np.array([1.0, 2.0, 1.0]) / 4
    _same(kernels.correlate(x, w, axes=-1), ndi.correlate(x, w, axes=(-1,)))
    _same(kernels.uniform_filter(x, 3, axes=-2), ndi.uniform_filter(x, 3, axes=-2))


def test_running_sum_entry_point_checks_its_arguments() -> None:
    x = np.arange(12.0).reshape(3, 4)
    out = np.empty_like(x)
    _fastprof._uniform_filter1d(x, out, 3, 1, 0, 0.0, 0)
    np.testing.assert_array_equal(out, ndi.uniform_filter1d(x, 3, axis=1))
    with pytest.raises(TypeError, match="float64"):
        _fastprof._uniform_filter1d(x.astype(np.float32), out, 3, 1, 0, 0.0, 0)
    with pytest.raises(ValueError, match="shape"):
        _fastprof._uniform_filter1d(x, out[:2], 3, 1, 0, 0.0, 0)
    for size, axis, mode, origin in ((0, 1, 0, 0), (3, 2, 0, 0), (3, 0, 7, 0), (3, 0, 0, 2)):
        with pytest.raises(ValueError, match="out of range"):
            _fastprof._uniform_filter1d(x, out, size, axis, mode, 0.0, origin)
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _fastprof._uniform_filter1d(x, ro, 3, 1, 0, 0.0, 0)


def _bytes(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype == np.bool_ else a


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_bool_input_and_output_as_scipy(mode) -> None:
    # scipy takes bool and stores into it with an unsigned char cast: bytes 0..255, which the
    # next axis of uniform_filter reads back as they are
    rng = np.random.default_rng(16)
    x = rng.random((9, 8)) > 0.4
    f = rng.standard_normal((9, 8)) * 3
    cases = [
        ("uniform_filter", 3),
        ("uniform_filter", (2, 4)),
        ("correlate", np.ones((2, 3))),
        ("convolve", np.array([[1.0, -1.0]])),
        ("correlate", rng.standard_normal((3, 3))),
    ]
    for fn, arg in cases:
        for inp, out in ((x, None), (f, bool), (x, np.uint8), (x, np.float64)):
            want = getattr(ndi, fn)(inp, arg, mode=mode, output=out, cval=1)
            got = [getattr(kernels, fn)(inp, arg, mode=mode, output=out, cval=1)]
            if CUDA:
                from fastprof.kernels import gpu

                got.append(getattr(gpu, fn)(inp, arg, mode=mode, output=out, cval=1, _emulate=True))
            for g in got:
                _same(_bytes(g), _bytes(want))


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_integer_correlate_in_blocks_of_rows(monkeypatch, mode) -> None:
    # the exact path runs in blocks of the first axis, each extended on its own: blocks of one
    # and three rows must give what one block gives, and scipy's result
    from fastprof.kernels import ndimage_exact as _ndimage_exact

    x = _data(np.int16, (10, 7, 3), seed=17)
    w = np.random.default_rng(18).standard_normal((4, 3, 2))
    w /= np.abs(w).sum()
    want = ndi.correlate(x, w, mode=mode, cval=-3, origin=(1, 0, -1))
    for block in (1, 3 * 7 * 3, 1 << 16):
        monkeypatch.setattr(_ndimage_exact, "_BLOCK", block)
        _same(kernels.correlate(x, w, mode=mode, cval=-3, origin=(1, 0, -1)), want)
    one = np.array([5, 1, 9], dtype=np.uint8)  # an axis shorter than the kernel
    _same(
        kernels.correlate(one, np.ones(7) / 7, mode=mode),
        ndi.correlate(one, np.ones(7) / 7, mode=mode),
    )


@pytest.mark.parametrize("fn", ["correlate", "convolve"])
def test_bool_bytes_above_one_read_as_scipy_reads_them(fn) -> None:
    # a bool scipy (or fastprof) stored can hold bytes 2..255; scipy's correlate reads the byte,
    # into float outputs as into integer ones
    x = np.array([2, 0, 7, 1, 255, 3], np.uint8).view(np.bool_)
    for out in (np.float64, np.float32, np.uint8, bool):
        want = getattr(ndi, fn)(x, [1.0, 0.5], output=out)
        _same(_bytes(getattr(kernels, fn)(x, [1.0, 0.5], output=out)), _bytes(want))
        if CUDA:
            from fastprof.kernels import gpu

            got = getattr(gpu, fn)(x, [1.0, 0.5], output=out, _emulate=True)
            _same(_bytes(got), _bytes(want))
    zero_d = np.array(5, np.uint8).view(np.bool_)
    _same(kernels.correlate(zero_d, np.array(1.5)), ndi.correlate(zero_d, np.array(1.5)))


def test_zero_d_input_drops_a_zero_weight_as_scipy() -> None:
    # scipy drops weights with |w| <= DBL_EPSILON: no tap, a sum of 0.0 whatever the input
    for v in (np.nan, np.inf, -np.inf, 2.0):
        for w in (0.0, 1e-17, -1e-300):
            x = np.array(v)
            _same(kernels.correlate(x, np.array(w)), ndi.correlate(x, np.array(w)))
            _same(kernels.convolve(x, np.array(w)), ndi.convolve(x, np.array(w)))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_integer_boxes_longer_than_their_axis_equal_scipy(dtype, mode) -> None:
    # a box at or beyond its axis' length: an exact integer mean (7.0) must not come out as
    # 6.999... and truncate to 6
    rng = np.random.default_rng(31)
    cases = [np.array([25]), np.array([3, 10]), np.arange(5) * 7]
    cases += [rng.integers(0, 100, n) for n in (1, 2, 3, 5)] + [rng.integers(0, 60, (3, 2))]
    for x in cases:
        x = x.astype(dtype)
        for size in (2, 3, 5, 6, 7, 11, 20, 41):
            for origin in sorted({0, -(size // 2), (size - 1) // 2}):
                kw = dict(mode=mode, origin=origin, cval=3)
                _same(kernels.uniform_filter(x, size, **kw), ndi.uniform_filter(x, size, **kw))


def test_zero_d_array_arguments_as_scipy_takes_them() -> None:
    x = np.arange(12.0).reshape(3, 4)
    w = np.ones((3, 3))
    # (scipy before 1.14 or so takes them only in places: compared with the plain ints)
    _same(kernels.correlate(x, w, origin=np.array(1)), ndi.correlate(x, w, origin=1))
    _same(kernels.uniform_filter(x, np.array(3)), ndi.uniform_filter(x, 3))
    _same(
        kernels.uniform_filter(x, 3, origin=np.array(-1), mode=np.array("wrap")),
        ndi.uniform_filter(x, 3, origin=-1, mode="wrap"),
    )


def test_more_axes_than_the_kernels_take_is_a_clear_error() -> None:
    x = np.ones((1,) * 31 + (3, 2))
    with pytest.raises(ValueError, match="input has 33 axes; the kernels take at most 32"):
        kernels.correlate(x, np.ones((1,) * 33))
    with pytest.raises(ValueError, match="input has 33 axes"):
        kernels.uniform_filter(x, 2)
