"""Every GPU kernel against the CPU reference (fastprof.kernels where it exists, else
scipy.ndimage / NumPy) across shapes, dtypes, strides, modes and origins; and against
cupyx.scipy.ndimage where CuPy is present."""

from __future__ import annotations

import numpy as np
import pytest

from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as gk
from kernel_helpers import close

ndimage = pytest.importorskip("scipy.ndimage")
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


def cpu(name: str):
    """The CPU kernel: fastprof.kernels.<name> when it is there, else scipy.ndimage's."""
    try:
        from fastprof import kernels

        fn = getattr(kernels, name, None)
    except ImportError:
        fn = None
    return fn if callable(fn) else getattr(ndimage, name)


@pytest.mark.parametrize("fn", ["correlate", "convolve"])
@pytest.mark.parametrize(
    "shape, wshape",
    [
        ((50,), (5,)),
        ((31, 17), (3, 4)),
        ((12, 9, 10), (5, 5, 5)),
        ((8, 1, 6), (3, 1, 2)),
        ((4, 5, 3, 3), (2, 3, 1, 3)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_filters_host_input(fn, shape, wshape, dtype) -> None:
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    w = rng.standard_normal(wshape)
    for mode in MODES:
        for origin in (0, -(min(wshape) // 2)):
            ref = cpu(fn)(x, w, mode=mode, cval=-2.0, origin=origin)
            got = getattr(gk, fn)(x, w, mode=mode, cval=-2.0, origin=origin, device="cuda")
            close(got, ref)
            assert set(got.timings) >= {"h2d_ms", "kernel_ms", "d2h_ms"}
            assert all(v >= 0 for v in got.timings.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filters_device_input_with_strides(dtype) -> None:
    rng = np.random.default_rng(1)
    host = rng.standard_normal((20, 30)).astype(dtype)
    base = cuda.DeviceArray.from_numpy(host)
    item = host.itemsize
    views = {
        "contiguous": (base, host),
        "transposed": (
            cuda.DeviceArray(base.ptr, (30, 20), dtype, (item, 30 * item), base.device, base),
            host.T,
        ),
        "reversed": (
            cuda.DeviceArray(
                base.ptr + 29 * item, (20, 30), dtype, (30 * item, -item), base.device, base
            ),
            host[:, ::-1],
        ),
        "every other": (
            cuda.DeviceArray(base.ptr, (10, 15), dtype, (60 * item, 2 * item), base.device, base),
            host[::2, ::2],
        ),
    }
    w = rng.standard_normal((3, 5))
    for name, (dev, ref_in) in views.items():
        for mode in ("reflect", "wrap", "constant"):
            got = gk.correlate(dev, w, mode=mode, cval=0.5)
            assert isinstance(got, cuda.DeviceArray), name
            close(
                got.to_numpy(),
                cpu("correlate")(np.ascontiguousarray(ref_in), w, mode=mode, cval=0.5),
            )
            got = gk.uniform_filter(dev, (3, 4), mode=mode)
            close(
                got.to_numpy(),
                cpu("uniform_filter")(np.ascontiguousarray(ref_in), (3, 4), mode=mode),
            )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
def test_uniform_filter(mode, dtype) -> None:
    x = (np.random.default_rng(2).random((16, 15, 14)) * 200).astype(dtype)
    for size, origin in ((3, 0), (5, -2), ((1, 4, 2), (0, 1, -1))):
        close(
            gk.uniform_filter(x, size, mode=mode, origin=origin, cval=3.0),
            cpu("uniform_filter")(x, size, mode=mode, origin=origin, cval=3.0),
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16])
@pytest.mark.parametrize("size", [25, 101, 1001])
def test_long_boxes(dtype, size) -> None:
    # running sums on the device, boxes longer than the axis folded
    rng = np.random.default_rng(size)
    for shape, axes in (((5000,), None), ((40, 300), -1), ((300, 7), 0), ((6, 50, 30), (0, 1))):
        x = (rng.standard_normal(shape) * 100).astype(dtype)
        for mode in MODES:
            for origin in (0, (size - 1) // 2):
                kw = dict(mode=mode, cval=1.5, origin=origin, axes=axes)
                got = gk.uniform_filter(x, size, device="cuda", **kw)
                ref = ndimage.uniform_filter(x, size, **kw)
                if x.dtype.kind == "i":
                    np.testing.assert_array_equal(got, ref)
                else:
                    close(got, ref)


def test_separable_and_general_paths_agree() -> None:
    x = np.random.default_rng(3).standard_normal((40, 33, 20)).astype(np.float32)
    w = np.multiply.outer(np.multiply.outer([1.0, 2, 1], [1.0, 0, -1]), [0.25, 0.5, 0.25])
    sep = gk.correlate(x, w, mode="mirror")
    gen = gk.correlate(x, w + np.eye(3)[:, :, None] * 1e-3, mode="mirror")  # not separable
    ref = ndimage.correlate(x, w, mode="mirror")
    close(sep, ref)
    assert np.abs(np.asarray(gen) - ref).max() < 0.1


def test_output_argument_and_caller_data_untouched() -> None:
    x = np.random.default_rng(4).standard_normal((10, 10))
    keep = x.copy()
    out = np.empty_like(x)
    res = gk.convolve(x, np.ones((3, 3)), output=out, mode="nearest")
    assert res is out
    close(out, ndimage.convolve(keep, np.ones((3, 3)), mode="nearest"))
    np.testing.assert_array_equal(x, keep)


EXPRS = {
    "sin(a) + cos(b)": lambda a, b: np.sin(a) + np.cos(b),
    "sin(a) + cos(a) + sqrt(abs(b))": lambda a, b: np.sin(a) + np.cos(a) + np.sqrt(np.abs(b)),
    "a ** 2 - b * 3.5 + a % 1.5": lambda a, b: a**2 - b * 3.5 + np.mod(a, 1.5),
    "where(a > b, a, -b) / 2": lambda a, b: np.where(a > b, a, -b) / 2,
    "(a > 0) & (b < 0.5)": lambda a, b: (a > 0) & (b < 0.5),
    "exp(-a * a) + log1p(abs(b)) + arctan2(a, b)": lambda a, b: (
        np.exp(-a * a) + np.log1p(np.abs(b)) + np.arctan2(a, b)
    ),
    "minimum(a, b) + maximum(a, 0.25) + tanh(b)": lambda a, b: (
        np.minimum(a, b) + np.maximum(a, 0.25) + np.tanh(b)
    ),
}


@pytest.mark.parametrize("expr", list(EXPRS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_evaluate_against_numpy(expr, dtype) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal(10007).astype(dtype)
    b = rng.standard_normal(10007).astype(dtype)
    ref = EXPRS[expr](a, b)
    got = gk.evaluate(expr, {"a": a, "b": b})
    assert got.dtype == ref.dtype
    if ref.dtype == bool:
        np.testing.assert_array_equal(got, ref)
    else:
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    assert got.timings["kernel_ms"] >= 0
    # device input: same answer, cached kernel, DeviceArray out
    da, db = cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b)
    dev = gk.evaluate(expr, {"a": da, "b": db})
    np.testing.assert_array_equal(dev.to_numpy(), np.asarray(got))


def test_evaluate_scalars_and_caller_frame() -> None:
    a = np.linspace(-1, 1, 101)
    k = 3
    np.testing.assert_allclose(gk.evaluate("a * k + 1"), a * k + 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (17, 33, 5), (128, 64, 256), (3, 0, 4)])
def test_matmul(dtype, m, k, n) -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    got = gk.matmul(a, b)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol * max(k, 1))
    dev = gk.matmul(cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b))
    np.testing.assert_allclose(dev.to_numpy(), a @ b, rtol=tol, atol=tol * max(k, 1))


@pytest.mark.real_gpu
def test_against_cupyx() -> None:
    cp = pytest.importorskip("cupy")
    cndi = pytest.importorskip("cupyx.scipy.ndimage")
    x = cp.random.standard_normal((64, 64, 32), dtype=cp.float32)
    w = cp.random.standard_normal((5, 5, 5), dtype=cp.float32)
    for mode in ("reflect", "constant", "nearest", "mirror", "wrap"):
        ours = cp.asarray(gk.correlate(x, cp.asnumpy(w), mode=mode))
        ref = cndi.correlate(x, w, mode=mode)
        np.testing.assert_allclose(cp.asnumpy(ours), cp.asnumpy(ref), rtol=1e-4, atol=1e-3)
        ours = cp.asarray(gk.uniform_filter(x, 5, mode=mode))
        np.testing.assert_allclose(
            cp.asnumpy(ours), cp.asnumpy(cndi.uniform_filter(x, 5, mode=mode)), rtol=1e-5, atol=1e-5
        )


@pytest.mark.real_gpu
def test_cuda_trace_records_kernels_and_copies() -> None:
    x = np.random.default_rng(7).standard_normal((64, 64))
    try:
        with cuda.cuda_trace() as tr:
            gk.correlate(x, np.ones((3, 3)), mode="wrap")
    except cuda.CudaUnavailableError as e:
        pytest.skip(f"CUPTI not usable: {e}")
    kernels = tr.kernels()
    assert any("correlate" in r.name for r in kernels), [r.name for r in tr.records]
    assert any(r.name == "memcpy HtoD" for r in tr.copies())
    assert any(r.name == "memcpy DtoH" for r in tr.copies())
    assert all(r.end_ns >= r.start_ns for r in tr.records)
    assert "correlate" in tr.summary() and tr.to_chrome_trace()


def test_axes_and_output_dtype() -> None:
    x = np.random.default_rng(8).standard_normal((16, 12, 10))
    w = np.random.default_rng(9).standard_normal((3, 4))
    if "axes" in ndimage.correlate.__code__.co_varnames:
        close(
            gk.correlate(x, w, axes=(0, 2), mode="mirror"),
            ndimage.correlate(x, w, axes=(0, 2), mode="mirror"),
        )
        close(
            gk.convolve(x, w, axes=(2, 1), origin=(1, 0)),
            ndimage.convolve(x, w, axes=(2, 1), origin=(1, 0)),
        )
    got = gk.uniform_filter(x, 3, output=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ndimage.uniform_filter(x, 3), rtol=1e-5, atol=1e-6)
