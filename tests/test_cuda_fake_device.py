"""The Python side of the GPU layer end to end, on a fake device that lives in host memory.

The fake replaces fastprof's CUDA calls: "device" blocks are host buffers, copies are memmoves,
the filter launches run the device code on the host (fastprof's own host emulation of the
.cu kernels, so CUDA builds only), and the evaluate kernels NVRTC would compile are compiled
for the host with a C++ compiler. What runs for real is everything above the CUDA calls:
uploads and downloads, passes and temporaries, strided device views, timings, caches,
DeviceArray, __cuda_array_interface__ and DLPack.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fake_device
from fake_device import CXX
from fastprof import _fastprof, kernels
from fastprof.cuda import libs as _cuda_libs
from fastprof.cuda import runtime as cuda
from fastprof.kernels import expr as _expr
from fastprof.kernels import gpu as _gpu_kernels
from kernel_helpers import close, fast_gpu
from test_expr_language import GPU_CASES, _gpu_names, _ulps

ndimage = pytest.importorskip("scipy.ndimage")
pytestmark = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
dev = fake_device.dev  # the fixture: a FakeDevice installed for one test


def test_device_array_copies_and_views(dev) -> None:
    host = np.arange(24, dtype=np.float64).reshape(4, 6)
    d = cuda.DeviceArray.from_numpy(host)
    np.testing.assert_array_equal(d.to_numpy(), host)
    np.testing.assert_array_equal(d.copy().to_numpy(), host)
    item = host.itemsize
    rev = cuda.DeviceArray(d.ptr + 5 * item, (4, 6), np.float64, (6 * item, -item), 0, d)
    np.testing.assert_array_equal(rev.to_numpy(), host[:, ::-1])
    tr = cuda.DeviceArray(d.ptr, (6, 4), np.float64, (item, 6 * item), 0, d)
    np.testing.assert_array_equal(tr.to_numpy(), host.T)
    assert cuda.DeviceArray.zeros((3, 2), np.int16).to_numpy().tolist() == [[0, 0]] * 3
    assert cuda.DeviceArray.empty((0, 3)).to_numpy().shape == (0, 3)


def test_blocks_are_freed_when_arrays_go(dev) -> None:
    d = cuda.DeviceArray.from_numpy(np.ones(100))
    assert d.ptr in dev.blocks
    ptr = d.ptr
    del d
    assert ptr not in dev.blocks


def test_dlpack_and_cai_views_share_memory(dev) -> None:
    d = cuda.DeviceArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))

    class Producer:
        def __dlpack__(self, stream=None):
            return d.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return d.__dlpack_device__()

    v = cuda.as_device_array(Producer())
    assert (v.ptr, v.shape, v.dtype, v.strides) == (d.ptr, d.shape, d.dtype, d.strides)
    cai = type("Cai", (), {"__cuda_array_interface__": d.__cuda_array_interface__})()
    w = cuda.as_device_array(cai)
    np.testing.assert_array_equal(w.to_numpy(), np.arange(6).reshape(2, 3))


MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_filters_host_input(dev, dtype) -> None:
    rng = np.random.default_rng(0)
    for shape, wshape in (
        ((40,), (5,)),
        ((21, 34), (3, 4)),
        ((9, 10, 11), (3, 3, 3)),
        ((3, 4, 5, 6), (3, 1, 2, 3)),
    ):
        x = (rng.standard_normal(shape) * 30).astype(dtype)
        w = rng.standard_normal(wshape)
        for mode in MODES:
            for fn in ("correlate", "convolve"):
                got = getattr(_gpu_kernels, fn)(x, w, mode=mode, cval=0.5)
                close(got, getattr(ndimage, fn)(x, w, mode=mode, cval=0.5))
                assert set(got.timings) == {"h2d_ms", "kernel_ms", "d2h_ms", "total_ms"}
                assert _gpu_kernels.last_timings() == got.timings


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
)
def test_integer_filters_equal_scipy_exactly(dev, dtype) -> None:
    # integer results truncate a double: every rounding on the way must be scipy's (the device
    # runs the cases exact in any order, the host the rest in scipy's order)
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, (13, 12), dtype=dtype, endpoint=True)
    w_int = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    w_real = np.array([[0.125, -0.25], [0.375, 0.25]])
    for mode in MODES:
        for size in (3, (4, 2)):
            got = fast_gpu.uniform_filter(x, size, mode=mode, cval=5)
            np.testing.assert_array_equal(got, ndimage.uniform_filter(x, size, mode=mode, cval=5))
            assert got.dtype == dtype
            assert set(got.timings) == {"h2d_ms", "kernel_ms", "d2h_ms", "total_ms"}
        for w in (w_real,) + ((w_int / 4,) if np.dtype(dtype).itemsize == 8 else (w_int,)):
            for fn in ("correlate", "convolve"):
                got = getattr(_gpu_kernels, fn)(x, w, mode=mode, cval=1)
                np.testing.assert_array_equal(got, getattr(ndimage, fn)(x, w, mode=mode, cval=1))
    before = len(dev.correlations)
    small = (x // 4).astype(np.int32) if np.dtype(dtype).itemsize == 8 else x
    fast_gpu.uniform_filter(small, 3)  # integer sums below 2**53: one device pass per axis
    assert len(dev.correlations) - before == 2


def test_separable_weights_run_as_passes_off_the_tiled_path(dev) -> None:
    x = np.random.default_rng(1).standard_normal((5, 6, 7, 8))
    w = np.multiply.outer(
        np.multiply.outer(np.multiply.outer([1.0, 2, 1], [1.0, -1]), [0.5, 0.5]), [1.0, 3, 1]
    )
    close(fast_gpu.correlate(x, w, mode="wrap"), ndimage.correlate(x, w, mode="wrap"))
    assert len(dev.correlations) == 4 and (dev.correlations[2] == ((1, 1, 2, 1), True))


def test_uniform_filter_one_box_pass_and_per_axis_passes(dev) -> None:
    x = np.random.default_rng(2).standard_normal((12, 13, 14)).astype(np.float32)
    close(fast_gpu.uniform_filter(x, 5), ndimage.uniform_filter(x, 5))
    assert dev.correlations == [((5, 5, 5), True)]
    dev.correlations.clear()
    close(
        fast_gpu.uniform_filter(x, 3, mode=["wrap", "reflect", "nearest"]),
        ndimage.uniform_filter(x, 3, mode=["wrap", "reflect", "nearest"]),
    )
    assert len(dev.correlations) == 3
    dev.correlations.clear()
    close(
        fast_gpu.uniform_filter(x, 3, mode="constant", cval=2.0),
        ndimage.uniform_filter(x, 3, mode="constant", cval=2.0),
    )
    assert len(dev.correlations) == 3  # constant with cval != 0: scipy's 1-D passes


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filters_device_input_strided(dev, dtype) -> None:
    rng = np.random.default_rng(3)
    host = rng.standard_normal((20, 30)).astype(dtype)
    base = cuda.DeviceArray.from_numpy(host)
    item = host.itemsize
    views = [
        (cuda.DeviceArray(base.ptr, (30, 20), dtype, (item, 30 * item), 0, base), host.T),
        (
            cuda.DeviceArray(base.ptr + 29 * item, (20, 30), dtype, (30 * item, -item), 0, base),
            host[:, ::-1],
        ),
        (
            cuda.DeviceArray(base.ptr, (10, 15), dtype, (60 * item, 2 * item), 0, base),
            host[::2, ::2],
        ),
    ]
    w = rng.standard_normal((3, 5))
    for view, ref_in in views:
        ref_in = np.ascontiguousarray(ref_in)
        for mode in MODES:
            out = fast_gpu.correlate(view, w, mode=mode)
            assert isinstance(out, cuda.DeviceArray) and out.dtype == dtype
            close(out.to_numpy(), ndimage.correlate(ref_in, w, mode=mode))
            out = fast_gpu.uniform_filter(view, (3, 2), mode=mode)
            close(out.to_numpy(), ndimage.uniform_filter(ref_in, (3, 2), mode=mode))
    np.testing.assert_array_equal(base.to_numpy(), host)  # input untouched


def test_weights_uploaded_once(dev) -> None:
    x = np.random.default_rng(4).standard_normal((16, 16))
    w = np.arange(9.0).reshape(3, 3)
    fast_gpu.correlate(x, w)
    n_blocks = len(_gpu_kernels._weights_cache)
    fast_gpu.correlate(x, w)
    assert len(_gpu_kernels._weights_cache) == n_blocks == 1


def test_output_argument(dev) -> None:
    x = np.random.default_rng(5).standard_normal((8, 9))
    out = np.zeros_like(x)
    assert fast_gpu.convolve(x, np.ones((2, 3)), output=out, mode="mirror") is out
    close(out, ndimage.convolve(x, np.ones((2, 3)), mode="mirror"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul(dev, dtype) -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((7, 5)).astype(dtype)
    b = rng.standard_normal((5, 3)).astype(dtype)
    got = _gpu_kernels.matmul(a, b)
    assert got.dtype == dtype and got.timings["kernel_ms"] >= 0
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    d = _gpu_kernels.matmul(cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b))
    np.testing.assert_allclose(d.to_numpy(), a @ b, rtol=1e-5)
    np.testing.assert_array_equal(
        _gpu_kernels.matmul(np.ones((2, 0)), np.ones((0, 3))), np.zeros((2, 3))
    )


EXPRS = {
    "sin(a) + cos(b)": lambda a, b, k: np.sin(a) + np.cos(b),
    "sin(a) + cos(a) + sqrt(abs(a))": lambda a, b, k: np.sin(a) + np.cos(a) + np.sqrt(np.abs(a)),
    "a ** 2 - b * 3.5 + a % 1.5 - b % -0.75": lambda a, b, k: (
        a**2 - b * 3.5 + np.mod(a, 1.5) - np.mod(b, -0.75)
    ),
    "where(a > b, a, -b) / 2": lambda a, b, k: np.where(a > b, a, -b) / 2,
    "(a > 0) & (b < 0.5) | ~(a < -1)": lambda a, b, k: (a > 0) & (b < 0.5) | ~(a < -1),
    "-a ** 2 + a ** 3 * k": lambda a, b, k: -(a**2) + a**3 * k,
    "arctan2(a, b) + minimum(a, k) + maximum(b, 0.25) - fmod(a, 0.3)": lambda a, b, k: (
        np.arctan2(a, b) + np.minimum(a, k) + np.maximum(b, 0.25) - np.fmod(a, 0.3)
    ),
    "exp(-a * a / 2) + log1p(abs(b)) + tanh(a) * expm1(b / 4)": lambda a, b, k: (
        np.exp(-a * a / 2) + np.log1p(np.abs(b)) + np.tanh(a) * np.expm1(b / 4)
    ),
    "a < b": lambda a, b, k: a < b,
    "where(a, 1, 2) + (a >= b) * 3": lambda a, b, k: np.where(a != 0, 1, 2) + (a >= b) * 3,
    "-a + k": lambda a, b, k: -a + 1.25,
    "2 ** a + power(abs(a), 0.5) + floor(b) * ceil(a)": lambda a, b, k: (
        2**a + np.power(np.abs(a), 0.5) + np.floor(b) * np.ceil(a)
    ),
}


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_evaluate_generated_kernels_match_numpy(dev, dtype) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal(1001).astype(dtype)
    b = rng.standard_normal(1001).astype(dtype)
    k = 1.25
    for expr, ref_fn in EXPRS.items():
        ref = np.asarray(ref_fn(a, b, dtype(k)))
        got = _gpu_kernels.evaluate(expr, {"a": a, "b": b, "k": k})
        assert got.dtype == ref.dtype, expr  # NumPy's dtype, as on the CPU
        if ref.dtype.kind != "f":
            np.testing.assert_array_equal(got, ref, err_msg=expr)
        else:
            tol = 2e-6 if ref.dtype == np.float32 else 1e-13
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=expr)
    n = dev.compiles
    _gpu_kernels.evaluate("sin(a) + cos(b)", {"a": a, "b": b})
    assert dev.compiles == n  # cached per expression and dtype
    d = _gpu_kernels.evaluate(
        "a * 2 + b", {"a": cuda.DeviceArray.from_numpy(a), "b": cuda.DeviceArray.from_numpy(b)}
    )
    assert isinstance(d, cuda.DeviceArray)
    np.testing.assert_allclose(d.to_numpy(), a * 2 + b, rtol=1e-6)


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_evaluate_mixed_dtypes_scalars_and_frame(dev) -> None:
    a = np.linspace(-2, 2, 50, dtype=np.float32)
    b = np.arange(50)  # int: the computation is float64
    z = np.float64(0.5)
    got = _gpu_kernels.evaluate("a * b + z")
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a.astype(np.float64) * b + z, rtol=1e-12)
    with pytest.raises(ValueError):
        _gpu_kernels.evaluate("a * 2", {"a": 3.0})
    out = np.zeros(50)
    assert _gpu_kernels.evaluate("a - b", {"a": a, "b": b}, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) - b)


def test_benchmark_and_timer_on_the_fake(dev) -> None:
    res = cuda.benchmark(lambda: None, n_warmup=1, n_repeat=3)
    assert res.n_repeat == 3 and all(res.gpu_times == 1.0)
    with cuda.cuda_timer() as t:
        pass
    assert t.elapsed_ms == 1.0


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_every_gpu_case_runs_with_the_cpus_results(dev, case) -> None:
    # the CUDA source of each case, built for the host, gives what evaluate gives on the CPU:
    # bit for bit where the operations are exact, within the documented ulps otherwise
    from fastprof import kernels

    dts, exprs = GPU_CASES[case]
    names = _gpu_names(dts)
    for expr in exprs:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.asarray(kernels.evaluate(expr, dict(names)))
        got = np.asarray(_gpu_kernels.evaluate(expr, dict(names)))
        assert got.dtype == want.dtype, expr
        assert got.shape == want.shape, expr
        if want.dtype.kind == "f" and ("sum" in expr or "prod" in expr):
            # the device adds in double, NumPy pairwise in the dtype
            tol = 1e-5 if want.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, err_msg=expr)
        elif want.dtype.kind == "f" and any(f in expr for f in ("log", "arc", "hypot")):
            assert _ulps(got, want) <= 4, expr
        else:
            np.testing.assert_array_equal(got, want, err_msg=expr)
    d = _gpu_kernels.evaluate(
        exprs[0], {k: cuda.DeviceArray.from_numpy(v) for k, v in names.items()}
    )
    want = np.asarray(kernels.evaluate(exprs[0], dict(names)))
    got = d.to_numpy() if isinstance(d, cuda.DeviceArray) else np.asarray(d)
    np.testing.assert_allclose(got, want, rtol=1e-5)


# --- long boxes: running sums ---------------------------------------------------------------

LONG_SHAPES = [((300,), None), ((7, 130), -1), ((5, 4, 90), (0, 2)), ((40, 9), 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [25, 101, 1001])
def test_long_boxes_equal_scipy(dev, dtype, size) -> None:
    # boxes longer than 24 along an axis run as running sums on the device; boxes longer than
    # the axis (1001 here, 101 on the short axes) fold whole periods or the constant ends
    rng = np.random.default_rng(size)
    for shape, axes in LONG_SHAPES:
        x = (rng.standard_normal(shape) * 40 + 3).astype(dtype)
        for mode in MODES + ["grid-wrap"]:
            for origin in (0, -(size // 2), (size - 1) // 2):
                kw = dict(mode=mode, cval=-1.5, origin=origin, axes=axes)
                ref = ndimage.uniform_filter(x, size, **kw)
                close(fast_gpu.uniform_filter(x, size, **kw), ref)
                close(fast_gpu.uniform_filter(x, size, _emulate=True, **kw), ref)
    d = cuda.DeviceArray.from_numpy(x)
    close(
        fast_gpu.uniform_filter(d, (3, size), mode="mirror").to_numpy(),
        ndimage.uniform_filter(x, (3, size), mode="mirror"),
    )


def test_long_boxes_per_axis_sizes_modes_and_strided_input(dev) -> None:
    x = np.random.default_rng(8).standard_normal((30, 64))
    for size, mode, origin in (
        ((101, 1001), ["wrap", "nearest"], (3, -100)),
        ((3, 1001), ["constant", "reflect"], (0, 500)),
        ((61, 1), "mirror", (-30, 0)),
    ):
        kw = dict(mode=mode, origin=origin, cval=2.0)
        close(fast_gpu.uniform_filter(x, size, **kw), ndimage.uniform_filter(x, size, **kw))
    base = cuda.DeviceArray.from_numpy(x)
    item = x.itemsize
    rev = cuda.DeviceArray(base.ptr + 63 * item, (30, 64), np.float64, (64 * item, -item), 0, base)
    close(
        fast_gpu.uniform_filter(rev, (1, 101), mode="reflect").to_numpy(),
        ndimage.uniform_filter(np.ascontiguousarray(x[:, ::-1]), (1, 101), mode="reflect"),
    )


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
)
def test_long_integer_boxes_equal_scipy_exactly(dev, dtype) -> None:
    info = np.iinfo(dtype)
    x = np.random.default_rng(9).integers(info.min, info.max, (9, 70), dtype=dtype, endpoint=True)
    for mode in MODES:
        for size, origin in (((1, 101), 0), ((31, 1), (-15, 0)), ((101, 1001), (50, -3)), (40, 7)):
            kw = dict(mode=mode, cval=3, origin=origin)
            ref = ndimage.uniform_filter(x, size, **kw)
            np.testing.assert_array_equal(fast_gpu.uniform_filter(x, size, **kw), ref)
            np.testing.assert_array_equal(
                fast_gpu.uniform_filter(x, size, _emulate=True, **kw), ref
            )


def test_long_boxes_non_finite_values_stay_in_their_windows(dev) -> None:
    # as the CPU's fast direct sums near NaN and inf: only the windows that hold them are
    # NaN/inf (exact=True keeps scipy's running sum, where inf - inf smears NaN down the line)
    from fastprof import kernels

    x = np.random.default_rng(10).standard_normal((6, 400))
    x[2, 100], x[3, 50], x[4, 10], x[4, 300] = np.nan, np.inf, -np.inf, np.inf
    for mode in MODES:
        for size in (101, 1001):
            ref = kernels.uniform_filter(x, (1, size), mode=mode, exact=False)
            for got in (
                fast_gpu.uniform_filter(x, (1, size), mode=mode),
                fast_gpu.uniform_filter(x, (1, size), mode=mode, _emulate=True),
            ):
                np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
                np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-11)
    assert np.isfinite(fast_gpu.uniform_filter(x, (1, 101))[0]).all()


@pytest.mark.parametrize("shape, axis", [((20000,), 0), ((30, 800), 1), ((800, 30), 0)])
def test_long_box_costs_what_a_short_one_does_per_output(dev, shape, axis) -> None:
    # the device code's loads of input elements per output (counted by its host emulation)
    x = np.random.default_rng(11).standard_normal(shape)
    per_output = {}
    for size in (3, 101, 1001, 100001):
        dev.reads = 0
        sizes = tuple(size if d == axis else 1 for d in range(x.ndim))
        fast_gpu.uniform_filter(x, sizes, mode="reflect")
        per_output[size] = dev.reads / x.size
    assert per_output[3] <= 3
    for size in (101, 1001, 100001):
        assert per_output[size] <= 5, per_output


# --- plans: what a repeat call does not do again ---------------------------------------------


class Counts:
    """Counts the front end's parsing (misses of fastprof.kernels.expr's parse cache), code generation
    and library searches."""

    def __init__(self, monkeypatch) -> None:
        self.parses = self.sources = self.searches = 0
        parse, gen = _expr.parse, _gpu_kernels.generate_source

        def counted_parse(*a):
            self.parses += 1
            return parse(*a)

        def counted_gen(*a):
            self.sources += 1
            return gen(*a)

        def counted_search(sonames, wheel):
            self.searches += 1
            return sonames

        monkeypatch.setattr(_expr, "parse", counted_parse)  # what parse_cached misses run
        monkeypatch.setattr(_expr, "_TREES", type(_expr._TREES)())
        monkeypatch.setattr(_gpu_kernels, "generate_source", counted_gen)
        monkeypatch.setattr(_cuda_libs, "_search", counted_search)
        monkeypatch.setattr(_cuda_libs, "_candidates_seen", {})

    def now(self, dev) -> tuple:
        return (
            self.parses,
            self.sources,
            self.searches,
            dev.compiles,
            _gpu_kernels._plan_builds,
            len(_gpu_kernels._weights_cache),
        )


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_repeat_calls_reuse_their_plans(dev, monkeypatch) -> None:
    counts = Counts(monkeypatch)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((32, 40))
    x32 = x.astype(np.float32)
    d = cuda.DeviceArray.from_numpy(x)
    w = rng.standard_normal((3, 2))
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    calls = {
        "uniform host": lambda: fast_gpu.uniform_filter(x32, 5, mode="wrap"),
        "uniform device": lambda: fast_gpu.uniform_filter(d, (3, 101), origin=(1, -7)),
        "correlate": lambda: fast_gpu.correlate(x, w, mode="mirror"),
        "convolve device": lambda: fast_gpu.convolve(d, w, cval=2.0, mode="constant"),
        "evaluate": lambda: _gpu_kernels.evaluate("sin(a) * k + b", {"a": x, "b": x, "k": 2.5}),
        "evaluate device": lambda: _gpu_kernels.evaluate("a - 2 * b", {"a": d, "b": d}),
        "matmul": lambda: _gpu_kernels.matmul(a, b),
    }
    for name, call in calls.items():
        first = call()
        before = counts.now(dev)
        again = call()
        assert counts.now(dev) == before, name
        as_host = (lambda r: r.to_numpy()) if isinstance(first, cuda.DeviceArray) else np.asarray
        np.testing.assert_array_equal(as_host(again), as_host(first))


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_plans_follow_dtype_shape_arguments_and_device(dev, monkeypatch) -> None:
    counts = Counts(monkeypatch)
    a = np.linspace(-1, 1, 50)

    def delta(call) -> tuple:
        before = counts.now(dev)
        call()
        return tuple(n - b for n, b in zip(counts.now(dev), before))

    ev = lambda **v: _gpu_kernels.evaluate("a * 2 + b", v)  # noqa: E731
    ev(a=a, b=a)
    # (parses, sources, searches, compiles, plans, weights); a new plan generates the kernel
    # source again (the expression stays parsed), a kernel is compiled once per source and
    # device, and the source follows each operand's dtype
    assert delta(lambda: ev(a=a, b=a)) == (0, 0, 0, 0, 0, 0)
    assert delta(lambda: ev(a=a.astype(np.float32), b=a.astype(np.float32))) == (0, 1, 0, 1, 1, 0)
    assert delta(lambda: ev(a=a[:40], b=a[:40])) == (0, 1, 0, 0, 1, 0)  # same kernel source
    assert delta(lambda: ev(a=a.astype(np.int16), b=a)) == (0, 1, 0, 1, 1, 0)  # int16 loads
    assert delta(lambda: ev(a=a.astype(np.int16), b=a)) == (0, 0, 0, 0, 0, 0)
    assert delta(lambda: ev(a=a, b=np.float32(2))) == (0, 1, 0, 1, 1, 0)  # b a scalar now
    assert delta(lambda: ev(a=a, b=np.float32(3))) == (0, 0, 0, 0, 0, 0)  # another value
    x = np.random.default_rng(13).standard_normal((20, 30))
    uf = _gpu_kernels.uniform_filter
    uf(x, 5)
    assert delta(lambda: uf(x, 5)) == (0, 0, 0, 0, 0, 0)
    assert delta(lambda: uf(x.astype(np.float32), 5))[4] == 1
    assert delta(lambda: uf(x[:, :20], 5))[4] == 1
    assert delta(lambda: uf(x, 5, mode="nearest"))[4] == 1
    assert delta(lambda: uf(x, [5, 3]))[4] == 1
    # a tuple is keyed apart from a list, but the checked arguments are the same: one plan
    assert delta(lambda: uf(x, (5, 3)))[4] == 0
    assert delta(lambda: uf(x, (5, 3), origin=(1, 0)))[4] == 1
    w = np.ones((2, 3))
    fast_gpu.correlate(x, w)
    assert delta(lambda: fast_gpu.correlate(x, w)) == (0, 0, 0, 0, 0, 0)
    assert delta(lambda: fast_gpu.correlate(x, w * 2))[4:] == (1, 1)  # new content
    # another device: the kernel is compiled and the weights uploaded for it, once
    monkeypatch.setattr(dev, "_cuda_get_device", lambda: 1)
    monkeypatch.setattr(dev, "_cuda_set_device", lambda i: None)
    monkeypatch.setattr(cuda, "_probe", lambda: (2, ""))
    assert delta(lambda: ev(a=a, b=a)) == (0, 0, 0, 1, 0, 0)
    assert delta(lambda: ev(a=a, b=a)) == (0, 0, 0, 0, 0, 0)
    assert delta(lambda: fast_gpu.correlate(x, w))[5] == 1
    assert delta(lambda: fast_gpu.correlate(x, w))[5] == 0


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_evaluate_plans_keep_numpys_python_int_rules(dev) -> None:
    # a Python int is weak (the array's dtype wins) but must fit that dtype: a cached plan for
    # a small int must not take a large one past NumPy's OverflowError
    a = np.arange(-5, 5, dtype=np.int8)
    for k in (3, -3, 127, -128):
        got = _gpu_kernels.evaluate("a + k", {"a": a, "k": k})
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, a + k)
    for k in (128, 1000, -129, 2**63):
        with pytest.raises(OverflowError):
            _gpu_kernels.evaluate("a + k", {"a": a, "k": k})
    np.testing.assert_array_equal(_gpu_kernels.evaluate("a * k", {"a": a, "k": 2.5}), a * 2.5)


def test_plans_keep_rejecting_bad_arguments(dev) -> None:
    x = np.ones((8, 9))
    fast_gpu.uniform_filter(x, 3)
    for bad in (dict(size=float("inf")), dict(mode="bogus"), dict(origin=5), dict(size=[3])):
        with pytest.raises(ValueError):
            fast_gpu.uniform_filter(x, **{"size": 3, **bad})
        with pytest.raises(ValueError):  # the failed call cached nothing
            fast_gpu.uniform_filter(x, **{"size": 3, **bad})
    with pytest.raises(TypeError):
        fast_gpu.uniform_filter(x, 3, cval="1")


def test_benchmark_start_event_follows_argument_preparation(dev, monkeypatch) -> None:
    # the fake's event timestamps: host work before the launch (an allocation costing 10
    # units here) must not count; the kernel (3 units) and the end event (1) do
    d = cuda.DeviceArray.from_numpy(np.ones((16, 16)))
    malloc, correlate = dev._cuda_malloc, dev._cuda_correlate

    def slow_malloc(n, stream):
        dev.clock += 10
        return malloc(n, stream)

    def kernel(*args):
        dev.clock += 3
        return correlate(*args)

    monkeypatch.setattr(dev, "_cuda_malloc", slow_malloc)
    monkeypatch.setattr(dev, "_cuda_correlate", kernel)
    for fn in (
        lambda: fast_gpu.uniform_filter(d, 5),
        lambda: fast_gpu.correlate(d, np.ones((2, 2))),
    ):
        res = cuda.benchmark(fn, n_warmup=1, n_repeat=3, flush_l2=False)
        assert res.gpu_times.tolist() == [4.0] * 3
    res = cuda.benchmark(lambda: dev._cuda_malloc(8, 0), n_repeat=2, flush_l2=False)
    assert res.gpu_times.tolist() == [11.0] * 2  # any other function: timed from its start
    assert cuda._bench_start.pending is None


# --- streams, frees and events ------------------------------------------------------------------


class CaiArray:
    """Another library's device array: a CUDA Array Interface v3 view on a stream."""

    def __init__(self, d: cuda.DeviceArray, stream: int) -> None:
        self.d = d
        self.__cuda_array_interface__ = {**d.__cuda_array_interface__, "stream": stream}


def waited(log: list, producer: int, consumer: int) -> bool:
    """Whether an event recorded on producer was then waited on by consumer."""
    recorded = {ev for what, st, *rest in log if what == "record" and st == producer for ev in rest}
    return any(what == "wait" and st == consumer and rest[0] in recorded for what, st, *rest in log)


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_kernels_wait_for_operands_advertised_streams(dev) -> None:
    x = np.random.default_rng(14).standard_normal((12, 10))
    a = CaiArray(cuda.DeviceArray.from_numpy(x), 5)
    b = CaiArray(cuda.DeviceArray.from_numpy(x[:10]), 6)
    c = CaiArray(cuda.DeviceArray.from_numpy(x[:10, :10]), 5)
    calls = (
        lambda: fast_gpu.uniform_filter(a, 3, stream=9),
        lambda: fast_gpu.correlate(a, np.ones((2, 2)), stream=9),
        lambda: _gpu_kernels.evaluate("p * 2 + q", {"p": a, "q": a}, stream=9),
        lambda: _gpu_kernels.matmul(a, b, stream=9),
    )
    for call in calls:
        dev.log.clear()
        call()
        assert waited(dev.log, 5, 9), dev.log
        first_kernel = next(i for i, e in enumerate(dev.log) if e[0] == "kernel")
        assert first_kernel > max(i for i, e in enumerate(dev.log) if e[:2] == ("wait", 9))
    dev.log.clear()
    _gpu_kernels.matmul(b, c)  # no stream given: b's stream, waiting for c's
    assert waited(dev.log, 5, 6) and all(e[1] == 6 for e in dev.log if e[0] == "kernel")
    dev.log.clear()
    fast_gpu.uniform_filter(a, 3)  # its own stream: nothing to wait for
    assert not [e for e in dev.log if e[0] == "wait" and e[1] != 0]


@pytest.mark.skipif(CXX is None, reason="no C++ compiler for the host build of generated kernels")
def test_front_end_takes_device_arrays_known_by_their_interface_alone(dev) -> None:
    # another library's array with no shape or dtype of its own: the shared checks read them
    # from its __cuda_array_interface__, and the front end runs it on the GPU
    x = np.random.default_rng(15).standard_normal((12, 10))
    a = CaiArray(cuda.DeviceArray.from_numpy(x), 1)
    close(kernels.uniform_filter(a, 3).to_numpy(), ndimage.uniform_filter(x, 3))
    close(kernels.correlate(a, np.ones((2, 3))).to_numpy(), ndimage.correlate(x, np.ones((2, 3))))
    close(kernels.evaluate("a * 2", {"a": a}).to_numpy(), x * 2)
    with pytest.raises(TypeError, match="input must have"):
        kernels.uniform_filter(CaiArray(cuda.DeviceArray.from_numpy(x.astype(complex)), 1), 3)


def test_frees_go_on_the_null_stream_after_the_last_work(dev) -> None:
    d = cuda.DeviceArray.from_numpy(np.ones((8, 8)), stream=9)
    out = fast_gpu.uniform_filter(d, 3)
    assert out.stream == 9
    ptr = out.ptr
    dev.log.clear()
    del out
    frees = [e for e in dev.log if e[0] == "free"]
    assert frees == [("free", 0, ptr)]
    wait = dev.log.index(next(e for e in dev.log if e[0] == "wait"))
    assert dev.log[wait][1] == 0 and wait < dev.log.index(frees[0])
    dev.log.clear()
    del d
    assert [e[:2] for e in dev.log] == [("free", 0)]  # made by the user: no fastprof work


def test_copy_says_its_stream_and_empty_arrays_have_numpys_strides(dev) -> None:
    d = cuda.DeviceArray.from_numpy(np.arange(12.0).reshape(3, 4), stream=7)
    dev.log.clear()
    c = d.copy()
    assert ("dtod", 7) in dev.log
    assert c.stream == 7 and c.__cuda_array_interface__["stream"] == 7
    np.testing.assert_array_equal(c.to_numpy(), d.to_numpy())
    item = d.itemsize
    t = cuda.DeviceArray(d.ptr, (4, 3), np.float64, (item, 4 * item), 0, d, stream=7).copy()
    assert t.stream == 7 and t.__cuda_array_interface__["stream"] == 7
    for shape in ((0,), (3, 0), (0, 4), (2, 0, 5)):
        for dtype in (np.float64, np.int16):
            e = cuda.DeviceArray.empty(shape, dtype)
            assert e.strides == np.empty(shape, dtype).strides
            assert e.is_c_contiguous and e.__cuda_array_interface__["strides"] is None
            assert e.to_numpy().strides == np.empty(shape, dtype).strides


def test_a_timer_never_read_keeps_a_bounded_number_of_events(dev) -> None:
    t = cuda.cuda_timer()
    for _ in range(1000):
        with t:
            pass
    assert dev.next_event < 2 * 64 + 10
    assert len(t) == 1000 and t.samples_ms.tolist() == [1.0] * 1000
