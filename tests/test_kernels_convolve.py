"""fastprof.kernels convolve/correlate/uniform_filter against scipy.ndimage and the NumPy
reference, over ranks, shapes, dtypes, strides, modes, origins and kernel sizes."""

from __future__ import annotations

import gc
import itertools
import os
from typing import Optional, Tuple

import numpy as np
import pytest

import fastprof.kernels as fk
from fastprof import _reference as ref
from kernel_helpers import fast_kernels as kernels  # the fast paths (exact=False)

ndi = pytest.importorskip("scipy.ndimage")

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


def _tol(dtype: np.dtype) -> dict:
    return (
        dict(rtol=2e-6, atol=2e-5)
        if np.dtype(dtype) == np.float32
        else dict(rtol=1e-12, atol=1e-11)
    )


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _separable(shape: tuple, rng: np.random.Generator) -> np.ndarray:
    w = rng.standard_normal(shape[0])
    for s in shape[1:]:
        w = np.multiply.outer(w, rng.standard_normal(s))
    return w


CASES = [
    ((17,), (5,)),
    ((1,), (3,)),
    ((4,), (9,)),
    ((12,), (4,)),
    ((9, 11), (3, 3)),
    ((9, 11), (2, 5)),
    ((1, 7), (3, 1)),
    ((3, 2), (5, 6)),
    ((6, 7, 8), (3, 3, 3)),
    ((5, 4, 6), (2, 3, 4)),
    ((2, 9, 3), (1, 5, 2)),
    ((3, 4, 2, 5), (3, 1, 2, 3)),
]


@pytest.mark.parametrize("shape,wshape", CASES)
@pytest.mark.parametrize("kind", ["general", "separable", "box"])
@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_matches_scipy_every_mode(shape, wshape, kind, func):
    rng = _rng(len(shape) * 7 + sum(wshape))
    x = rng.standard_normal(shape)
    w = {
        "general": rng.standard_normal(wshape),
        "separable": _separable(wshape, rng),
        "box": np.full(wshape, 0.25),
    }[kind]
    for mode in MODES:
        got = getattr(kernels, func)(x, w, mode=mode, cval=-1.25)
        want = getattr(ndi, func)(x, w, mode=mode, cval=-1.25)
        mine = getattr(ref, func)(x, w, mode=mode, cval=-1.25)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11, err_msg=mode)
        np.testing.assert_allclose(mine, want, rtol=1e-12, atol=1e-11, err_msg=mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "strided", "negative", "transposed"])
def test_layouts_and_float_dtypes(dtype, layout):
    rng = _rng(3)
    base = rng.standard_normal((14, 12, 10)).astype(dtype)
    x = {
        "C": base,
        "F": np.asfortranarray(base),
        "strided": base[::2, 1::3, ::1],
        "negative": base[::-1, :, ::-2],
        "transposed": base.transpose(2, 0, 1),
    }[layout]
    for w in (rng.standard_normal((3, 4, 3)), _separable((5, 3, 2), rng), np.ones((3, 3, 3))):
        for mode in ("reflect", "constant", "wrap"):
            got = kernels.correlate(x, w, mode=mode, cval=0.5, origin=(1, -1, 0))
            want = ndi.correlate(x, w, mode=mode, cval=0.5, origin=(1, -1, 0))
            assert got.dtype == want.dtype == dtype
            np.testing.assert_allclose(got, want, **_tol(dtype))


@pytest.mark.parametrize("wshape", [(3, 3), (4, 2), (5, 1), (2, 2)])
def test_origins(wshape):
    rng = _rng(5)
    x = rng.standard_normal((8, 9))
    w = rng.standard_normal(wshape)
    ranges = [range(-(s // 2), (s - 1) // 2 + 1) for s in wshape]
    for origin in itertools.product(*ranges):
        for func in ("correlate", "convolve"):
            got = getattr(kernels, func)(x, w, mode="mirror", origin=origin)
            want = getattr(ndi, func)(x, w, mode="mirror", origin=origin)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_output_argument_and_in_place():
    rng = _rng(7)
    x = rng.standard_normal((20, 15))
    w = rng.standard_normal((3, 5))
    out = np.empty((20, 15), dtype=np.float32)
    res = kernels.correlate(x, w, output=out)
    assert res is out
    np.testing.assert_allclose(out, ndi.correlate(x, w, output=np.float32), rtol=2e-6, atol=2e-5)
    # non-contiguous output
    big = np.zeros((40, 30))
    view = big[::2, ::2]
    kernels.convolve(x, w, output=view)
    np.testing.assert_allclose(view, ndi.convolve(x, w), rtol=1e-12, atol=1e-12)
    assert np.all(big[1::2] == 0)
    # output is the input: the result must be as if from a copy
    y = x.copy()
    kernels.uniform_filter(y, 3, output=y)
    np.testing.assert_allclose(y, ndi.uniform_filter(x, 3), rtol=1e-12, atol=1e-12)
    # output given as a dtype
    r = kernels.correlate(x, w, output=np.float32)
    assert r.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint16])
def test_integer_dtypes_as_scipy(dtype):
    rng = _rng(11)
    x = rng.integers(0, 100, size=(9, 10)).astype(dtype)
    w = rng.integers(-3, 4, size=(3, 3)).astype(np.float64)  # exact in double
    for func in ("correlate", "convolve"):
        got = getattr(kernels, func)(x, w, mode="nearest")
        want = getattr(ndi, func)(x, w, mode="nearest")
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    got = kernels.uniform_filter(x, (3, 2))
    want = ndi.uniform_filter(x, (3, 2))
    assert got.dtype == want.dtype
    # each axis pass truncates to the integer dtype, as scipy; sums may round either way by one
    assert np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))) <= 1


def test_integer_input_float_output():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    w = np.array([[0.5, 0.25], [0.125, 1.0]])
    np.testing.assert_allclose(
        kernels.correlate(x, w, output=np.float64),
        ndi.correlate(x, w, output=np.float64),
        rtol=1e-12,
    )


@pytest.mark.parametrize("shape", [(0,), (0, 5), (4, 0, 3)])
def test_empty_arrays(shape):
    x = np.zeros(shape)
    w = np.ones((3,) * len(shape))
    assert kernels.correlate(x, w).shape == shape
    assert kernels.uniform_filter(x, 3).shape == shape


@pytest.mark.parametrize("size", [1, 2, 3, 5, (1, 4, 7), (6, 1, 2), 11, (3, 17, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_filter(size, dtype):
    rng = _rng(13)
    x = rng.standard_normal((9, 12, 8)).astype(dtype)
    for mode in MODES:
        got = kernels.uniform_filter(x, size, mode=mode, cval=2.0)
        want = ndi.uniform_filter(x, size, mode=mode, cval=2.0)
        mine = ref.uniform_filter(x, size, mode=mode, cval=2.0)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **_tol(dtype))
        np.testing.assert_allclose(got, mine, **_tol(dtype))


def test_uniform_filter_per_axis_modes_and_origin():
    rng = _rng(17)
    x = rng.standard_normal((10, 11))
    got = kernels.uniform_filter(x, (3, 4), mode=["wrap", "constant"], cval=3.0, origin=(1, -2))
    want = ndi.uniform_filter(x, (3, 4), mode=["wrap", "constant"], cval=3.0, origin=(1, -2))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_nan_and_inf_propagate_as_scipy():
    x = np.arange(49, dtype=np.float64).reshape(7, 7)
    x[3, 3] = np.nan
    x[0, 6] = np.inf
    for w in (
        np.ones((3, 3)),
        np.array([[0.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 0.0]]),
        np.array([[0.0, 0.0], [1.0, 2.0]]),
    ):
        for func in ("correlate", "convolve"):
            got = getattr(kernels, func)(x, w, mode="reflect")
            want = getattr(ndi, func)(x, w, mode="reflect")
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
            ok = np.isfinite(want)
            np.testing.assert_allclose(got[ok], want[ok], rtol=1e-12)


def test_big_enough_for_threads_matches_single_thread():
    rng = _rng(19)
    x = rng.standard_normal((64, 70, 33)).astype(np.float32)
    n = kernels.get_num_threads()
    try:
        results = []
        for threads in (1, 3):
            kernels.set_num_threads(threads)
            assert kernels.get_num_threads() == threads
            results.append(
                (
                    kernels.uniform_filter(x, 5),
                    kernels.correlate(x, rng.standard_normal((3, 2, 3)) * 0 + 1.5),
                )
            )
        for a, b in zip(*results):
            np.testing.assert_array_equal(a, b)
    finally:
        kernels.set_num_threads(n)
    np.testing.assert_allclose(results[0][0], ndi.uniform_filter(x, 5), rtol=2e-6, atol=2e-6)


def test_threads_setting_validation():
    with pytest.raises(ValueError, match="n must be"):
        kernels.set_num_threads(0)
    with pytest.raises(TypeError, match="n must be an int"):
        kernels.set_num_threads(2.5)
    assert kernels.get_num_threads() >= 1


@pytest.mark.parametrize(
    "bad,exc,match",
    [
        (dict(input=np.zeros(5, dtype=object)), TypeError, "input must have"),
        (dict(input=np.zeros(5, dtype=np.clongdouble)), TypeError, "input must have"),
        (dict(weights=np.ones((3, 3))), ValueError, "rank"),
        (dict(weights=np.array(["a", "b", "c"], dtype=object)), TypeError, "weights"),
        (dict(weights=np.array(["1", "2", "3"])), TypeError, "weights"),
        (dict(weights=np.ones(0)), ValueError, "empty"),
        (dict(mode="bogus"), ValueError, "mode"),
        (dict(mode=3), TypeError, "mode"),
        (dict(origin=2), ValueError, "origin"),
        (dict(origin=(0, 0)), ValueError, "origin"),
        (dict(origin=1.5), TypeError, "origin"),
        (dict(output=np.zeros(4)), ValueError, "output"),
        (dict(output=np.zeros(5, dtype=complex)), TypeError, "output"),
        (dict(cval="x"), TypeError, "cval"),
        (dict(cval="1"), TypeError, "cval"),  # a str is no number, even one float() reads
        (dict(cval=b"1"), TypeError, "cval"),
    ],
)
@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_bad_arguments(bad, exc, match, func):
    args = dict(input=np.zeros(5), weights=np.ones(3))
    args.update(bad)
    with pytest.raises(exc, match=match):
        getattr(kernels, func)(**args)


def test_uniform_filter_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        kernels.uniform_filter(np.zeros(5), float("inf"))  # 0 skips the axis, as in scipy
    with pytest.raises(ValueError, match="size"):
        kernels.uniform_filter(np.zeros((5, 5)), (3, 3, 3))
    with pytest.raises(ValueError, match="origin"):
        kernels.uniform_filter(np.zeros(5), 3, origin=2)
    with pytest.raises(ValueError, match="mode"):
        kernels.uniform_filter(np.zeros((5, 5)), 3, mode=["wrap"])


def test_device_dispatch_without_gpu_module(monkeypatch):
    import sys

    import fastprof

    monkeypatch.setitem(sys.modules, "fastprof.kernels.gpu", None)  # import fails ...
    monkeypatch.delattr(fastprof.kernels, "gpu", raising=False)  # ... even if loaded before
    with pytest.raises(Exception, match="CUDA kernels are unavailable"):
        kernels.correlate(np.zeros(5), np.ones(3), device="cuda")
    with pytest.raises(ValueError, match="device"):
        kernels.correlate(np.zeros(5), np.ones(3), device="tpu")
    np.testing.assert_array_equal(
        kernels.correlate(np.ones(5), np.ones(3), device="cpu"), np.full(5, 3.0)
    )


def test_matmul():
    rng = _rng(23)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    np.testing.assert_allclose(kernels.matmul(a, b), ref.matmul(a, b))
    with pytest.raises(ValueError, match="align"):
        kernels.matmul(a, a)
    with pytest.raises(TypeError):
        kernels.matmul(a.astype(object), b)


def test_compiled_entry_points_check_their_arguments():
    from fastprof import _fastprof

    x = np.zeros((4, 4))
    with pytest.raises(TypeError):
        _fastprof._correlate_separable(x.astype(np.int32), x, [np.ones(3)] * 2, (0, 0), 0.0, (0, 0))
    with pytest.raises(ValueError):
        _fastprof._correlate_separable(x, np.zeros((4, 5)), [np.ones(3)] * 2, (0, 0), 0.0, (0, 0))
    with pytest.raises(ValueError):
        _fastprof._correlate_general(x, x, np.ones((3, 3)), (0, 9), 0.0, (0, 0))
    with pytest.raises(ValueError):
        _fastprof._correlate_general(x, x, np.ones((3, 3)), (0, 0), 0.0, (0, 5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_kernels_past_one_batch_of_taps(dtype):
    # more than 64 taps on an axis: the separable path sums the taps in batches
    rng = _rng(29)
    x = rng.standard_normal((7, 150)).astype(dtype)
    for mode in ("reflect", "constant", "wrap"):
        got = kernels.uniform_filter(x, (3, 71), mode=mode, cval=0.5)
        want = ndi.uniform_filter(x, (3, 71), mode=mode, cval=0.5)
        np.testing.assert_allclose(got, want, **_tol(dtype))
    w = np.multiply.outer(rng.standard_normal(67), rng.standard_normal(3))
    y = rng.standard_normal((90, 5))
    np.testing.assert_allclose(
        kernels.correlate(y, w, mode="mirror"),
        ndi.correlate(y, w, mode="mirror"),
        rtol=1e-11,
        atol=1e-11,
    )


def test_length_one_axes_and_one_element():
    rng = _rng(31)
    for shape in [(1,), (1, 1), (1, 6, 1), (5, 1, 4)]:
        x = rng.standard_normal(shape)
        for mode in ("reflect", "mirror", "wrap", "nearest", "constant"):
            w = rng.standard_normal(tuple(3 for _ in shape))
            np.testing.assert_allclose(
                kernels.correlate(x, w, mode=mode),
                ndi.correlate(x, w, mode=mode),
                rtol=1e-12,
                atol=1e-12,
            )
            np.testing.assert_allclose(
                kernels.uniform_filter(x, 4, mode=mode),
                ndi.uniform_filter(x, 4, mode=mode),
                rtol=1e-12,
                atol=1e-12,
            )


def test_big_general_kernel_is_threaded_and_exact():
    rng = _rng(37)
    x = rng.standard_normal((40, 33, 20)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3))
    np.testing.assert_allclose(
        kernels.convolve(x, w, mode="wrap"), ndi.convolve(x, w, mode="wrap"), rtol=2e-6, atol=2e-5
    )


def test_input_is_not_modified():
    rng = _rng(41)
    x = rng.standard_normal((12, 13))
    keep = x.copy()
    kernels.correlate(x, rng.standard_normal((3, 3)))
    kernels.uniform_filter(x, 5)
    np.testing.assert_array_equal(x, keep)


def test_byte_swapped_and_unaligned_arrays():
    rng = _rng(43)
    x = rng.standard_normal((9, 10))
    w = rng.standard_normal((3, 3))
    want = ndi.correlate(x, w)
    big = x.astype(">f8")
    got = kernels.correlate(big, w)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    out = np.empty(x.shape, dtype=">f4")
    kernels.correlate(x, w, output=out)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)
    raw = np.zeros(x.size * 8 + 1, dtype=np.uint8)[1:].view(np.float64).reshape(x.shape)
    raw[...] = x
    assert not raw.flags.aligned
    np.testing.assert_allclose(
        kernels.uniform_filter(raw, 3), ndi.uniform_filter(x, 3), rtol=1e-12, atol=1e-12
    )
    n = 100_000
    odd = np.zeros(n * 8 + 1, dtype=np.uint8)[1:].view(np.float64)
    odd[...] = np.arange(n)
    odd_out = np.zeros(n * 8 + 1, dtype=np.uint8)[1:].view(np.float64)
    assert not odd.flags.aligned
    np.testing.assert_array_equal(kernels.evaluate("r * 2", {"r": odd}), np.arange(n) * 2.0)
    kernels.evaluate("r + 1", {"r": odd.astype(">f8")}, out=odd_out)
    np.testing.assert_array_equal(odd_out, np.arange(n) + 1.0)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_pool_works_in_a_forked_child():
    import os

    x = _rng(47).standard_normal((64, 64, 16))
    want = ndi.uniform_filter(x, 3)
    kernels.uniform_filter(x, 3)  # the parent's pool threads exist now
    pid = os.fork()
    if pid == 0:  # child: its pool must start afresh
        try:
            ok = np.allclose(kernels.uniform_filter(x, 3), want, rtol=1e-12, atol=1e-12)
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_concurrent_calls_from_python_threads():
    import threading

    rng = _rng(53)
    arrays = [rng.standard_normal((40, 50, 30)) for _ in range(4)]
    results = [None] * 4

    def work(i):
        results[i] = kernels.correlate(arrays[i], np.ones((3, 2, 3)) / 18.0, mode="wrap")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, r in zip(arrays, results):
        np.testing.assert_allclose(
            r, ndi.correlate(a, np.ones((3, 2, 3)) / 18.0, mode="wrap"), rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_boxes_use_running_sums_exactly_enough(dtype):
    rng = _rng(59)
    x = (rng.standard_normal((150, 7, 90)) * 100).astype(dtype)
    for mode in ("reflect", "constant", "mirror", "wrap", "nearest"):
        got = kernels.uniform_filter(x, (41, 3, 33), mode=mode, cval=1.0, origin=(3, 0, -5))
        want = ndi.uniform_filter(
            x.astype(np.float64), (41, 3, 33), mode=mode, cval=1.0, origin=(3, 0, -5)
        )
        np.testing.assert_allclose(
            got,
            want,
            rtol=1e-5 if dtype == np.float32 else 1e-10,
            atol=1e-4 if dtype == np.float32 else 1e-10,
            err_msg=mode,
        )
    got = kernels.correlate(x, np.ones((30, 1, 31)), mode="reflect")
    want = ndi.correlate(x, np.ones((30, 1, 31)), mode="reflect")
    np.testing.assert_allclose(
        got,
        want,
        rtol=1e-5 if dtype == np.float32 else 1e-10,
        atol=1e-3 if dtype == np.float32 else 1e-9,
    )


def test_long_boxes_keep_nan_and_inf_inside_their_windows():
    rng = _rng(61)
    x = rng.standard_normal((200, 120))
    x[50, 60] = np.nan
    x[150, 10] = np.inf
    x[120, 100] = -np.inf
    got = kernels.uniform_filter(x, (35, 29), mode="wrap")
    want = ref.uniform_filter(x, (35, 29), mode="wrap")  # direct sums
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-10, atol=1e-12)
    assert ok.sum() > 0.5 * ok.size


# --- 0-d input: 0-d output, as scipy.ndimage gives -----------------------------------------


def _gpu_front_end():
    from fastprof import _fastprof

    if not _fastprof._cuda_built():
        pytest.skip("fastprof built without CUDA (the host emulation of the GPU passes)")
    from fastprof.kernels import gpu as _gpu_kernels

    return _gpu_kernels


@pytest.mark.parametrize("func", ["correlate", "convolve"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint8])
def test_zero_d_input_gives_zero_d_output(func, dtype):
    x = np.array(7, dtype=dtype)
    for w in (np.array(2.5), 0.375, np.array(-1, dtype=np.int16)):
        want = getattr(ndi, func)(x, w)
        got = getattr(kernels, func)(x, w)
        assert got.shape == want.shape == () and got.dtype == want.dtype, (w, got)
        np.testing.assert_array_equal(got, want)
        out = np.zeros((), dtype=np.float32)
        assert getattr(kernels, func)(x, w, output=out) is out
        np.testing.assert_array_equal(out, getattr(ndi, func)(x, w, output=np.float32))
    with pytest.raises(ValueError, match="rank"):
        getattr(kernels, func)(x, [1.0])


@pytest.mark.parametrize("func", ["correlate", "convolve"])
def test_zero_d_input_through_the_gpu_front_end(func):
    gk = _gpu_front_end()
    for x in (np.array(7.0), np.array(3, dtype=np.int32), np.array(2.5, dtype=np.float32)):
        got = getattr(gk, func)(x, np.array(1.5), _emulate=True)
        want = getattr(ndi, func)(x, np.array(1.5))
        assert got.shape == want.shape == () and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    out = np.zeros((), dtype=np.float64)
    assert getattr(gk, func)(np.array(4.0), np.array(0.5), output=out, _emulate=True) is out
    assert out == 2.0
    with pytest.raises(ValueError, match=r"one dimension per filtered axis \(0\), got 1"):
        getattr(gk, func)(np.array(4.0), [1.0], _emulate=True)
    with pytest.raises(ValueError, match=r"shape \(\)"):
        getattr(gk, func)(np.array(4.0), np.array(0.5), output=np.zeros(1), _emulate=True)
    got = gk.uniform_filter(np.array(4.0), 3, _emulate=True)
    assert got.shape == () and got == 4.0


# --- boxes far longer than the input: folded to the input's length, equal to scipy's ---------

BASE_MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


@pytest.mark.parametrize("mode", BASE_MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_boxes_far_longer_than_the_input_match_scipy(mode, dtype):
    rng = _rng(11)
    for shape in ((8, 9), (5,), (1, 7), (2, 3, 4)):
        x = (rng.standard_normal(shape) * 40).astype(dtype)
        nd = len(shape)
        for s in (1000, 1001, 10007):
            for o in (0, -(s // 2), (s - 1) // 2, 7):
                for size, origin in (
                    (s, o),
                    ([s] + [1] * (nd - 1), [o] + [0] * (nd - 1)),
                    ([3] + [s] * (nd - 1), [0] + [o] * (nd - 1)),
                ):
                    got = kernels.uniform_filter(x, size, mode=mode, cval=0.7, origin=origin)
                    want = ndi.uniform_filter(x, size, mode=mode, cval=0.7, origin=origin)
                    assert got.dtype == want.dtype
                    if want.dtype.kind == "f":
                        np.testing.assert_allclose(
                            got, want, **_tol(dtype), err_msg=f"{shape} {size} {origin}"
                        )
                    else:  # scipy truncates its running sums after each axis: a mean
                        # within rounding of an integer may land one apart per axis (as for
                        # short boxes)
                        assert np.max(np.abs(got.astype(np.int64) - want)) <= nd


@pytest.mark.parametrize("mode", BASE_MODES)
def test_long_box_costs_no_more_than_the_input(mode, monkeypatch):
    real = kernels.cpu._fastprof._correlate_separable
    longest = []

    def spy(x, out, factors, *args):
        longest.append(max(len(f) for f in factors))
        if longest[-1] > 4 * max(x.shape):
            raise AssertionError(f"a factor of {longest[-1]} taps for an input of {x.shape}")
        return real(x, out, factors, *args)

    monkeypatch.setattr(kernels.cpu._fastprof, "_correlate_separable", spy)
    x = _rng(12).standard_normal((8, 9))
    s = 100_000_001
    got = kernels.uniform_filter(x, [s, 1], mode=mode, cval=0.7)
    assert longest and max(longest) <= 32
    # the mean over a window this long is, to 1e-6, the mean of the extended axis' pattern
    limit = {
        "reflect": x.mean(axis=0, keepdims=True),
        "wrap": x.mean(axis=0, keepdims=True),
        "mirror": (2 * x.sum(axis=0, keepdims=True) - x[:1] - x[-1:]) / 14,
        "constant": np.full((1, 9), 0.7),
        "nearest": (x[:1] + x[-1:]) / 2,
    }[mode]
    np.testing.assert_allclose(got, np.broadcast_to(limit, x.shape), atol=1e-6)


def _malloc_in_use() -> Optional[int]:
    """Bytes glibc's malloc holds for the program (mallinfo2), or None where it cannot say
    (another C library, or AddressSanitizer's allocator)."""
    import ctypes

    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None

    class _Info(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    info.restype = _Info
    got = info()
    return int(got.uordblks + got.hblkhd)


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("shape, ksize", [((2, 200_000), (3, 3)), ((300_000,), (5,))])
def test_general_correlate_frees_its_index_maps(
    shape: Tuple[int, ...], ksize: Tuple[int, ...], exact: bool
) -> None:
    """Each call's index maps (8 bytes per extended element of every axis) are
    freed after a successful run: they were kept, every call of the general path."""
    if _malloc_in_use() is None:
        pytest.skip("needs glibc's mallinfo2 (and not AddressSanitizer's allocator)")
    x = np.random.default_rng(0).random(shape)
    w = np.random.default_rng(1).random(ksize)
    fk.correlate(x, w, exact=exact)
    gc.collect()
    before = _malloc_in_use()
    for _ in range(20):
        fk.correlate(x, w, exact=exact)
    gc.collect()
    grown = (_malloc_in_use() or 0) - (before or 0)
    assert grown < 20 * 4096, f"{grown / 20:.0f} bytes a call"
