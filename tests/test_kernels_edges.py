"""convolve, correlate and uniform_filter at the edges of the float range, against
scipy.ndimage on the same inputs: silent where scipy is silent (a caller under ``-W error``
gets scipy's result, not a RuntimeWarning), 0-d outputs stored with scipy's cast, the fast
paths (``exact=False``) keeping the class of scipy's values (finite, inf, NaN) for any cval,
and out-of-range integer stores as scipy's."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest

from fastprof import kernels

ndi = pytest.importorskip("scipy.ndimage")

X32 = np.linspace(-1, 1, 50, dtype=np.float32)
X32_2D = np.ones((3, 4), np.float32)
XI = np.arange(12, dtype=np.int32).reshape(3, 4)
W_INF = np.array([[1.0, np.inf], [0.5, 1.0]])


def _quiet(f: Callable[..., Any], *args: Any, **kwargs: Any) -> np.ndarray:
    """f(*args, **kwargs) with every warning raised as an error (pytest's filterwarnings=error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return np.asarray(f(*args, **kwargs))


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.bool_:  # scipy's bool bytes as they are
        got, want = got.view(np.uint8), want.view(np.uint8)
    if want.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True), (got, want)
    else:
        assert np.array_equal(got, want), (got, want)


def _same_class(got: np.ndarray, want: np.ndarray, rtol: float, scale: float = 0.0) -> None:
    """got equals want to rounding: NaN, +inf and -inf at the same places, finite values close
    (to rtol of themselves or of scale, the largest term of their sums)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    assert np.array_equal(np.isposinf(got), np.isposinf(want)), (got, want)
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), (got, want)
    fin = np.isfinite(want)
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    assert np.allclose(g, w, rtol=rtol, atol=rtol * scale), (got, want)


# (name, call with the module (scipy.ndimage or fastprof.kernels) and its extra keywords)
SILENT_CASES = {
    "1-D float32 correlate, constant, cval=1e39": lambda m, **k: m.correlate(
        X32, [1.0, 2.0, 1.0], mode="constant", cval=1e39, **k
    ),
    "float32 uniform_filter, size > axis, cval=1e39": lambda m, **k: m.uniform_filter(
        X32_2D, 9, mode="constant", cval=1e39, **k
    ),
    "int32 correlate, constant, cval=1e308": lambda m, **k: m.correlate(
        XI, np.ones((3, 3)), mode="constant", cval=1e308, **k
    ),
    "int32 correlate, an inf weight": lambda m, **k: m.correlate(XI, W_INF, **k),
    "float64 2-D correlate, an inf weight": lambda m, **k: m.correlate(
        XI.astype(float), W_INF, **k
    ),
    "float64 1-D correlate, an inf weight, a line shorter than the kernel": lambda m, **k: (
        m.correlate(np.arange(3.0), np.array([np.inf, 1.0, 0.5, 1.0, 2.0, 1.0, 1.0]), **k)
    ),
    "float64 into float32, values beyond float32": lambda m, **k: m.correlate(
        np.full((3, 4), 1e300), np.ones((2, 2)), output=np.float32, **k
    ),
    "float64 uniform_filter into int32, values beyond int32": lambda m, **k: m.uniform_filter(
        np.array([1e20, -1e20, np.nan, 3.0, 5.0]), 3, output=np.int32, **k
    ),
    "float64 uniform_filter into float32, a box far longer than the axis": lambda m, **k: (
        m.uniform_filter(np.full(4, 1e300), 30, output=np.float32, **k)
    ),
    "float64 uniform_filter, a long box whose period sums overflow": lambda m, **k: (
        m.uniform_filter(np.full(4, 1e308), 30, **k)
    ),
}


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("name", list(SILENT_CASES))
def test_silent_where_scipy_is_silent_with_scipys_result(name, exact):
    case = SILENT_CASES[name]
    want = _quiet(case, ndi)  # scipy computes these without a warning
    got = _quiet(case, kernels, exact=exact)
    if exact or want.dtype.kind != "f":
        _same_bits(got, want)
    else:
        _same_class(got, want, 1e-6)


@pytest.mark.parametrize("shape", [(3, 3), (3, 3, 3)])
def test_fast_path_takes_huge_and_inf_weights_silently(shape):
    # rank-1 weights whose factors' scale overflowed a float's power (OverflowError), and weights
    # with inf (NaN factors, a warning): both run as the general kernel
    x = np.arange(float(np.prod((4,) * len(shape)))).reshape((4,) * len(shape))
    for w in (np.full(shape, 1e200), np.where(np.arange(np.prod(shape)) == 4, np.inf, 1.0)):
        w = w.reshape(shape)
        want = _quiet(ndi.correlate, x, w)
        got = _quiet(kernels.correlate, x, w, exact=False)
        _same_class(got, want, 1e-12)


@pytest.mark.parametrize(
    "value, weight, dtype",
    [
        (-0.5, 1.0, np.bool_),
        (np.nan, 1.0, np.bool_),
        (2.0, 1.0, np.bool_),
        (1e20, -1.0, np.uint64),
        (3.5, -1.0, np.uint8),
        (3.5, -1.0, np.uint32),
        (300.0, 1.0, np.uint8),
        (np.nan, 1.0, np.int32),
        (1e39, 1.0, np.float32),
    ],
)
def test_zero_d_correlate_stores_with_scipys_cast(value, weight, dtype):
    x = np.array(value)
    for f in ("correlate", "convolve"):
        want = _quiet(getattr(ndi, f), x, np.array(weight), output=dtype)
        got = _quiet(getattr(kernels, f), x, np.array(weight), output=dtype)
        _same_bits(got, want)
        # the value the same input gives as a (1,) array, through the n-d paths
        _same_bits(got.reshape(1), getattr(kernels, f)(x.reshape(1), [weight], output=dtype))
        out = np.empty((), dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert getattr(kernels, f)(x, np.array(weight), output=out) is out
        _same_bits(out, want)


CVALS = [1e39, -1e39, 3.5e38, 1e308, -1e308, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("cval", CVALS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [3, 9])
def test_fast_uniform_filter_keeps_scipys_class_for_any_cval(cval, dtype, size):
    # the fast float32 path rounded cval to float32 (1e39 -> inf where scipy's means are
    # 3.3e38); scipy's running sums turn an inf or huge cval into NaN along the line
    x = np.zeros((4, 5), dtype)
    x[1, 2] = 1.5
    scale = abs(cval) if np.isfinite(cval) else 0.0  # scipy's sums cancel cval's rounding
    want = _quiet(ndi.uniform_filter, x, size, mode="constant", cval=cval)
    got = _quiet(kernels.uniform_filter, x, size, mode="constant", cval=cval, exact=False)
    _same_class(got, want, 1e-6, scale)
    # one constant axis among others
    modes = ["reflect", "constant"]
    want = _quiet(ndi.uniform_filter, x, size, mode=modes, cval=cval)
    got = _quiet(kernels.uniform_filter, x, size, mode=modes, cval=cval, exact=False)
    _same_class(got, want, 1e-6, scale)


@pytest.mark.parametrize("cval", CVALS)
@pytest.mark.parametrize("shape", [(7,), (4, 5)])
def test_fast_correlate_keeps_scipys_class_for_any_cval(cval, shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    w = np.array([0.1, -0.2, 0.3])
    if len(shape) == 2:
        w = np.multiply.outer(w, [0.5, 1.0, 0.25])
    want = _quiet(ndi.correlate, x, w, mode="constant", cval=cval)
    got = _quiet(kernels.correlate, x, w, mode="constant", cval=cval, exact=False)
    _same_class(got, want, 1e-5)


def test_uniform_filter_into_uint32_stores_as_scipys_c_cast():
    # (npy_uint)v on x86-64: the low 32 bits of the 64-bit conversion (5e9 -> 705032704,
    # 1e38 -> 0), where NumPy's own cast gives 0 and 2**31
    x = np.array([5e9, 5e9, 5e9, 1e38, 1e38, 1e38, -3.5, -3.5, -3.5, -3.5, 7.0, 7.0])
    for exact in (True, False):
        for size in (3, 30):
            want = _quiet(ndi.uniform_filter, x, size, output=np.uint32)
            got = _quiet(kernels.uniform_filter, x, size, output=np.uint32, exact=exact)
            _same_bits(got, want)
    x32 = (np.arange(24, dtype=np.float32).reshape(4, 6) - 10) * np.float32(1e37)
    want = _quiet(ndi.uniform_filter, x32, 3, output=np.uint32, mode="constant")
    got = _quiet(kernels.uniform_filter, x32, 3, output=np.uint32, mode="constant")
    _same_bits(got, want)
