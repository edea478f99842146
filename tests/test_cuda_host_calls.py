"""The host side of repeat GPU kernel calls, on the fake device of tests/fake_device.py: calls on
NumPy operands reuse their staging buffers (no allocation or free once warm, and a buffer goes
back only once its call waited for its stream), matmul's cuBLAS search stops once the library
loaded, and a cached plan skips no check: every bad argument still gets its error on a repeat
call."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import fake_device
from fake_device import CXX, FakeDevice, install
from fastprof import _fastprof
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels
from kernel_helpers import fast_gpu

ndimage = pytest.importorskip("scipy.ndimage")
pytestmark = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
dev = fake_device.dev  # the fixture: a FakeDevice installed for one test
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler for the generated kernels")


class Tally:
    """Counts the fake's allocations and frees (direct or through _cuda_release)."""

    def __init__(self, dev: FakeDevice, monkeypatch) -> None:
        self.mallocs = self.frees = 0
        malloc, free = dev._cuda_malloc, dev._cuda_free

        def counted_malloc(n, stream):
            self.mallocs += 1
            return malloc(n, stream)

        def counted_free(ptr, stream, ordered):
            self.frees += 1
            return free(ptr, stream, ordered)

        monkeypatch.setattr(dev, "_cuda_malloc", counted_malloc)
        monkeypatch.setattr(dev, "_cuda_free", counted_free)

    def now(self) -> tuple[int, int]:
        gc.collect()
        return self.mallocs, self.frees


def host_cases() -> dict:
    rng = np.random.default_rng(21)
    x = rng.standard_normal((24, 30))
    x32 = x.astype(np.float32)
    a, b = rng.standard_normal((9, 7)), rng.standard_normal((7, 5))
    w = rng.standard_normal((3, 4))  # not separable: one pass
    return {
        "uniform_filter": (
            lambda: fast_gpu.uniform_filter(x32, 5, mode="wrap"),
            ndimage.uniform_filter(x32, 5, mode="wrap"),
        ),
        "uniform_filter per axis": (  # two passes: a temporary between them
            lambda: fast_gpu.uniform_filter(x, (3, 40), mode="nearest"),
            ndimage.uniform_filter(x, (3, 40), mode="nearest"),
        ),
        "correlate": (
            lambda: fast_gpu.correlate(x, w, mode="mirror"),
            ndimage.correlate(x, w, mode="mirror"),
        ),
        "evaluate": (
            lambda: _gpu_kernels.evaluate("sin(p) * 2.5 + q", {"p": x, "q": x[::-1]}),
            np.sin(x) * 2.5 + x[::-1],
        ),
        "evaluate sum": (
            lambda: _gpu_kernels.evaluate("sum(p * q, axis=1)", {"p": x, "q": x}),
            np.sum(x * x, axis=1),
        ),
        "matmul": (lambda: _gpu_kernels.matmul(a, b), a @ b),
        "matmul int and strided": (
            lambda: _gpu_kernels.matmul(a.astype(np.int32), b[:, ::2]),
            a.astype(np.int32) @ b[:, ::2],
        ),
    }


@needs_cxx
@pytest.mark.parametrize("name", list(host_cases()))
def test_repeat_calls_on_numpy_operands_allocate_and_free_nothing(dev, monkeypatch, name) -> None:
    call, want = host_cases()[name]
    tally = Tally(dev, monkeypatch)
    first = call()
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    before = tally.now()
    assert before[0] > 0
    for _ in range(3):
        got = call()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert type(got) is _gpu_kernels.TimedArray
        assert got.timings == {"h2d_ms": 1.0, "kernel_ms": 1.0, "d2h_ms": 1.0, "total_ms": 3.0}
        assert _gpu_kernels.last_timings() is got.timings
    assert tally.now() == before, "a repeat call allocated or freed device memory"
    assert got[1:].timings is None  # arrays derived from a result have none


@needs_cxx
def test_evaluate_out_is_filled_straight_or_cast(dev) -> None:
    x = np.linspace(-2, 2, 60).reshape(6, 10)
    out = np.empty_like(x)
    for _ in range(2):
        assert _gpu_kernels.evaluate("p * p - 1", {"p": x}, out=out) is out
        np.testing.assert_array_equal(out, x * x - 1)
    out32 = np.empty(x.shape, np.float32)  # another dtype: copied over, cast as NumPy does
    assert _gpu_kernels.evaluate("p * p - 1", {"p": x}, out=out32) is out32
    np.testing.assert_allclose(out32, (x * x - 1).astype(np.float32))
    # out aliasing an operand: the operand went up before the result comes down
    y = x.copy()
    _gpu_kernels.evaluate("p * 2", {"p": y}, out=y)
    np.testing.assert_array_equal(y, x * 2)


def test_a_staging_set_is_kept_only_once_its_call_waited(dev, monkeypatch) -> None:
    x = np.ones((16, 16))
    kept_while_waiting: list[bool] = []
    times = dev._cuda_event_times

    def timed(events):
        kept = [got for sets in cuda._staging.free.values() for got in sets]
        kept_while_waiting.append(any(got[2] == events for got in kept))
        return times(events)

    monkeypatch.setattr(dev, "_cuda_event_times", timed)
    for _ in range(3):
        fast_gpu.uniform_filter(x, 3)
    assert kept_while_waiting == [False] * 3  # handed out to nobody while its work may run
    assert [len(sets) for sets in cuda._staging.free.values()] == [1]  # then kept


def test_a_failed_call_fences_its_staging_set_instead_of_keeping_it(dev, monkeypatch) -> None:
    x = np.ones((16, 16))
    fast_gpu.uniform_filter(x, 3, stream=7)  # warm: a set is kept
    ((key, sets),) = cuda._staging.free.items()
    kept = set(sets[0][0])

    def broken(*args):
        raise RuntimeError("the launch failed")

    monkeypatch.setattr(dev, "_cuda_correlate", broken)
    dev.log.clear()
    with pytest.raises(RuntimeError, match="the launch failed"):
        fast_gpu.uniform_filter(x, 3, stream=7)
    gc.collect()
    assert cuda._staging.free[key] == []  # not given back
    frees = [i for i, e in enumerate(dev.log) if e[0] == "free"]
    assert {dev.log[i][2] for i in frees} == kept
    # each free waits on the null stream for an event recorded on the call's stream first
    fences = {e[2] for e in dev.log if e[:2] == ("record", 7)}
    assert fences and all(
        dev.log[i - 1][:2] == ("wait", 0) and dev.log[i - 1][2] in fences for i in frees
    )
    assert dev.events and cuda._events.free[0]  # the call's events went back too
    monkeypatch.undo()
    install(monkeypatch, dev)
    close = fast_gpu.uniform_filter(x, 3, stream=7)
    np.testing.assert_allclose(close, ndimage.uniform_filter(x, 3))


def test_the_staging_pool_keeps_a_bounded_amount(dev, monkeypatch) -> None:
    tally = Tally(dev, monkeypatch)
    monkeypatch.setattr(cuda, "_STAGING_MAX_BYTES", 2 * 64 * 64 * 8)
    big, small = np.ones((64, 64)), np.ones((8, 8))
    fast_gpu.uniform_filter(small, 3)
    fast_gpu.uniform_filter(big, 3)  # its set (2 blocks of 32 KiB) does not fit beside
    assert sum(len(v) for v in cuda._staging.free.values()) == 1
    before = tally.now()
    fast_gpu.uniform_filter(big, 3)
    assert tally.now() == (before[0] + 2, before[1] + 2)  # allocated and freed each call
    assert cuda._staging.held[0] <= cuda._STAGING_MAX_BYTES


def test_a_full_device_drops_the_kept_sets_and_tries_again(dev, monkeypatch) -> None:
    fast_gpu.uniform_filter(np.ones((8, 8)), 3)
    assert cuda._staging.free
    malloc = dev._cuda_malloc
    fail = [1]

    def full(n, stream):
        if fail and fail.pop():
            raise cuda.CudaError(2, "cudaErrorMemoryAllocation", "out of memory")
        return malloc(n, stream)

    monkeypatch.setattr(dev, "_cuda_malloc", full)
    got = fast_gpu.uniform_filter(np.ones((9, 9)), 3)
    np.testing.assert_allclose(got, np.ones((9, 9)))
    assert list(cuda._staging.free) == [(0, (648, 648))]


# --- matmul's cuBLAS search -------------------------------------------------------------------


def test_matmul_searches_for_cublas_until_it_loads(dev, monkeypatch, tmp_path) -> None:
    seen: list[tuple] = []
    gemm = dev._cuda_gemm
    missing = [True]

    def recording_gemm(*args):
        seen.append(args[-1])
        if missing[0]:
            raise cuda.CudaUnavailableError("cuBLAS (libcublas) could not be loaded")
        return gemm(*args)

    monkeypatch.setattr(dev, "_cuda_gemm", recording_gemm)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    a = np.ones((3, 2))
    with pytest.raises(cuda.CudaUnavailableError):
        _gpu_kernels.matmul(a, a.T)
    # the user installs cuBLAS and points CUDA_HOME at it: the next call looks there
    lib = tmp_path / "toolkit" / "lib64" / "libcublas.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    missing[0] = False
    np.testing.assert_array_equal(_gpu_kernels.matmul(a, a.T), a @ a.T)
    assert str(lib) not in seen[0] and seen[1][0] == str(lib)
    # loaded: later calls pass what it was loaded from, without searching or reading the
    # environment (which cannot change a library already loaded)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "elsewhere"))
    searches: list[tuple] = []

    def counted(*args):
        searches.append(args)
        return ()

    monkeypatch.setattr(_gpu_kernels, "library_candidates", counted)
    d = cuda.DeviceArray.from_numpy(a)
    for _ in range(2):
        _gpu_kernels.matmul(a, a.T)
        _gpu_kernels.matmul(d, cuda.DeviceArray.from_numpy(a.T.copy()))
    assert seen[2:] == [seen[1]] * 4 and searches == []


# --- a cached plan skips no check -------------------------------------------------------------


def freed_like(d: cuda.DeviceArray) -> cuda.DeviceArray:
    """A DeviceArray with d's layout whose memory is gone (a null pointer)."""
    return cuda.DeviceArray(0, d.shape, d.dtype, d.strides, 0, None)


def raises_every_time(call, exc, match) -> None:
    for _ in range(2):
        with pytest.raises(exc, match=match):
            call()


@needs_cxx
def test_evaluate_repeat_calls_keep_every_check(dev) -> None:
    x = np.linspace(0, 1, 12).reshape(3, 4)
    d = cuda.DeviceArray.from_numpy(x)
    ev = _gpu_kernels.evaluate
    ev("p + q", {"p": x, "q": x})
    ev("p + q", {"p": d, "q": d})
    raises_every_time(lambda: ev("p + q", {"p": x, "q": x.astype(np.float16)}), TypeError, "16")
    raises_every_time(lambda: ev("p + q", {"p": x, "q": x.astype(complex)}), TypeError, "dtype")
    raises_every_time(lambda: ev("p + q", {"p": x, "q": x[:2]}), ValueError, "share one shape")
    raises_every_time(
        lambda: ev("p + q", {"p": x, "q": x}, out=np.empty((4, 3))), ValueError, "out must have"
    )
    ro = np.empty_like(x)
    ro.flags.writeable = False
    raises_every_time(lambda: ev("p + q", {"p": x, "q": x}, out=ro), ValueError, "writeable")
    raises_every_time(
        lambda: ev("p + q", {"p": d, "q": d}, out=np.empty_like(x)), TypeError, "out must be"
    )
    raises_every_time(lambda: ev("p + q", {"p": x, "q": x}, stream=-1), ValueError, "stream")
    raises_every_time(lambda: ev("p + q", {"p": d, "q": d}, stream="s"), TypeError, "stream")
    raises_every_time(lambda: ev("p + q", {"p": d, "q": d}, device="tpu"), ValueError, "device")
    gone = freed_like(d)
    raises_every_time(lambda: ev("p + q", {"p": d, "q": gone}), ValueError, "'q'.*freed")
    np.testing.assert_array_equal(ev("p + q", {"p": d, "q": d}).to_numpy(), 2 * x)


def test_filter_repeat_calls_keep_every_check(dev) -> None:
    x = np.ones((6, 7))
    d = cuda.DeviceArray.from_numpy(x)
    uf = _gpu_kernels.uniform_filter
    out = np.empty_like(x)
    uf(x, 3)
    uf(x, 3, output=out)
    uf(d, 3)
    ro = np.empty_like(x)
    ro.flags.writeable = False
    raises_every_time(lambda: uf(x, 3, output=ro), ValueError, "writeable")
    raises_every_time(lambda: uf(x, 3, output=np.empty((7, 6))), ValueError, "output")
    raises_every_time(lambda: uf(x, 3, stream=-2), ValueError, "stream")
    raises_every_time(lambda: uf(d, 3, stream=object()), TypeError, "stream")
    raises_every_time(lambda: uf(d, 3, device="cuda:x"), ValueError, "device")
    raises_every_time(lambda: uf(d, 3, output=out), ValueError, "output")
    i32 = cuda.DeviceArray.from_numpy(x.astype(np.int32))
    raises_every_time(lambda: uf(i32, 3), TypeError, "device input must be float32 or float64")
    raises_every_time(lambda: uf(freed_like(d), 3), ValueError, "freed")
    np.testing.assert_allclose(uf(d, 3).to_numpy(), x)


def test_matmul_repeat_calls_keep_every_check(dev) -> None:
    a, b = np.ones((4, 3)), np.ones((3, 2))
    da, db = cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b)
    mm = _gpu_kernels.matmul
    mm(a, b)
    mm(da, db)
    raises_every_time(lambda: mm(a, np.ones((2, 2))), ValueError, "do not align")
    raises_every_time(lambda: mm(a, b.astype(complex)), TypeError, "dtype")
    raises_every_time(lambda: mm(np.ones((2, 4, 3)), b), ValueError, "2-D")
    raises_every_time(
        lambda: mm(da, cuda.DeviceArray.from_numpy(b.astype(np.float32))), TypeError, "both"
    )
    np.testing.assert_array_equal(mm(a, db).to_numpy(), a @ b)  # the host operand uploaded
    raises_every_time(lambda: mm(a, b, stream=-1), ValueError, "stream")
    raises_every_time(lambda: mm(da, db, stream=1.5), TypeError, "stream")
    raises_every_time(lambda: mm(da, db, device="npu"), ValueError, "device")
    raises_every_time(lambda: mm(da, freed_like(db)), ValueError, "freed")
    raises_every_time(lambda: mm(freed_like(da), db), ValueError, "freed")
    np.testing.assert_array_equal(mm(da, db).to_numpy(), a @ b)


# --- the C entry points, without a device -----------------------------------------------------


def test_the_c_entry_points_check_their_arguments_before_any_cuda_call() -> None:
    with pytest.raises(ValueError, match="2 device pointers for 1 buffers"):
        _fastprof._cuda_upload((1, 2), (b"x",), 0)
    with pytest.raises(TypeError, match="sequence"):
        _fastprof._cuda_upload(1, (b"x",), 0)
    with pytest.raises(TypeError):
        _fastprof._cuda_upload(("p",), (b"x",), 0)
    for events in ((1,), tuple(range(1, 18))):
        with pytest.raises(ValueError, match="2 to 16 events"):
            _fastprof._cuda_event_times(events)
    with pytest.raises(TypeError):
        _fastprof._cuda_event_times([1, 2])
    with pytest.raises(TypeError):
        _fastprof._cuda_upload((1,), (b"x",), 0, "event")
    ro = np.zeros(4)
    ro.flags.writeable = False
    for dst in (ro, np.zeros((4, 4))[:, ::2], b"bytes"):  # read-only, strided
        with pytest.raises((BufferError, ValueError, TypeError)):
            _fastprof._cuda_download(dst, 1, 0)
    with pytest.raises(TypeError):
        _fastprof._cuda_download(np.zeros(4), 1, 0, 0, "event")
    assert _fastprof._cuda_release(0, 0, 0, True) is None  # a null block: nothing to free
    with pytest.raises(TypeError):
        _fastprof._cuda_release("p", 0, 0, True)
