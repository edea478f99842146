"""The CUDA layer without a device: import, status reasons, errors, argument checks before any
CUDA call, and the timer/benchmark logic against a fake CUDA runtime."""

from __future__ import annotations

import numpy as np
import pytest

import fastprof
from fastprof import _fastprof
from fastprof.cuda import nvtx
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels
from kernel_helpers import fast_gpu

needs_no_cuda = pytest.mark.skipif(cuda.is_available(), reason="CUDA is available here")


def test_public_names() -> None:
    assert fastprof.cuda_timer is cuda.cuda_timer
    assert fastprof.cuda_trace is cuda.cuda_trace
    for name in (
        "is_available",
        "status",
        "devices",
        "synchronize",
        "benchmark",
        "DeviceArray",
        "CudaError",
        "CudaUnavailableError",
    ):
        assert hasattr(cuda, name), name


def test_status_is_a_reason() -> None:
    text = cuda.status()
    assert isinstance(text, str) and text
    if not cuda.is_available():
        known = (
            "built without CUDA",
            "no NVIDIA driver",
            "driver is too old",
            "no CUDA device",
            "CUDA initialization failed",
        )
        assert any(k in text for k in known), text
    if not _fastprof._cuda_built():
        assert "built without CUDA" in text


def test_cuda_error_fields() -> None:
    e = cuda.CudaError(2, "cudaErrorMemoryAllocation", "out of memory")
    assert (e.code, e.name, e.message) == (2, "cudaErrorMemoryAllocation", "out of memory")
    assert "cudaErrorMemoryAllocation" in str(e) and isinstance(e, RuntimeError)
    u = cuda.CudaUnavailableError("no device")
    assert u.reason == "no device" and str(u) == "no device"


def _entry_points() -> list:
    x = np.ones((4, 4), np.float32)
    return [
        ("devices", lambda: cuda.devices()),
        ("synchronize", lambda: cuda.synchronize()),
        ("cuda_timer", lambda: cuda.cuda_timer().__enter__()),
        ("benchmark", lambda: cuda.benchmark(lambda: None, n_warmup=0, n_repeat=1)),
        ("DeviceArray.empty", lambda: cuda.DeviceArray.empty((3,), np.float32)),
        ("DeviceArray.from_numpy", lambda: cuda.DeviceArray.from_numpy(x)),
        ("cuda_trace", lambda: cuda.cuda_trace().__enter__()),
        ("convolve", lambda: fast_gpu.convolve(x, np.ones((3, 3)))),
        ("correlate", lambda: fast_gpu.correlate(x, np.ones((3, 3)), mode="wrap")),
        ("uniform_filter", lambda: fast_gpu.uniform_filter(x, 3)),
        ("evaluate", lambda: _gpu_kernels.evaluate("sin(a) + b", {"a": x, "b": 2.0})),
        ("matmul", lambda: _gpu_kernels.matmul(x, x)),
    ]


@needs_no_cuda
@pytest.mark.parametrize("name, call", _entry_points(), ids=[n for n, _ in _entry_points()])
def test_entry_points_raise_unavailable_with_reason(name: str, call) -> None:
    with pytest.raises(cuda.CudaUnavailableError) as info:
        call()
    assert info.value.reason == cuda.status()


@needs_no_cuda
def test_is_available_and_probe_are_cached() -> None:
    assert cuda.is_available() is False
    assert cuda._probe() is cuda._probe()


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda x: fast_gpu.correlate(x, np.ones((3, 3)), mode="bogus"), ValueError, "mode"),
        (lambda x: fast_gpu.correlate(x, np.ones(3)), ValueError, "dimension"),
        (lambda x: fast_gpu.correlate(x, np.ones((3, 3)), origin=2), ValueError, "origin"),
        (lambda x: fast_gpu.convolve(x, np.ones((4, 4)), origin=(0, -3)), ValueError, "origin"),
        (lambda x: fast_gpu.correlate(x, np.ones((3, 3)), cval="a"), TypeError, "cval"),
        (lambda x: fast_gpu.correlate(x, np.ones((3, 3)), device="tpu"), ValueError, "device"),
        (lambda x: fast_gpu.correlate(x, np.ones((3, 3)), stream="s"), TypeError, "stream"),
        (
            lambda x: fast_gpu.correlate(x.astype(np.clongdouble), np.ones((3, 3))),
            TypeError,
            "input",
        ),
        (
            lambda x: fast_gpu.convolve(x.astype(complex), np.ones((3, 3)), mode="bogus"),
            ValueError,
            "mode",
        ),
        (lambda x: fast_gpu.uniform_filter(x.astype(np.complex64), origin=5), ValueError, "origin"),
        (
            lambda x: fast_gpu.correlate(x, np.ones((3, 3)), output=np.ones(3)),
            ValueError,
            "output",
        ),
        (lambda x: fast_gpu.correlate(x, np.zeros((0, 3))), ValueError, "empty"),
        (lambda x: fast_gpu.uniform_filter(x, size=float("inf")), ValueError, "size"),
        (lambda x: fast_gpu.uniform_filter(x, size=(3, 3, 3)), ValueError, "size"),
        (lambda x: fast_gpu.uniform_filter(x, size=3, origin=2), ValueError, "origin"),
        (lambda x: fast_gpu.uniform_filter(x, mode=("reflect", "nope")), ValueError, "mode"),
        (lambda x: fast_gpu.uniform_filter(x, axes=(0, 5)), ValueError, "axes"),
        (lambda x: _gpu_kernels.evaluate("a +", {"a": x}), ValueError, "expr"),
        (lambda x: _gpu_kernels.evaluate("a + zz", {"a": x}), ValueError, "zz"),
        (lambda x: _gpu_kernels.evaluate("a + b", {"a": x, "b": np.ones(3)}), ValueError, "shape"),
        (lambda x: _gpu_kernels.evaluate("a.b", {"a": x}), ValueError, "unsupported"),
        (lambda x: _gpu_kernels.evaluate("frobnicate(a)", {"a": x}), ValueError, "frobnicate"),
        (lambda x: _gpu_kernels.evaluate(3, {"a": x}), TypeError, "expr"),
        (lambda x: _gpu_kernels.evaluate("a", {"a": x}, out=np.ones(3)), ValueError, "out"),
        (lambda x: _gpu_kernels.matmul(x, np.ones((3, 2))), ValueError, "shapes"),
        (lambda x: _gpu_kernels.matmul(x, np.ones(4)), ValueError, "2-D"),
        (lambda x: cuda.benchmark(42), TypeError, "callable"),
        (lambda x: cuda.benchmark(print, n_repeat=0), ValueError, "n_repeat"),
        (lambda x: cuda.benchmark(print, max_duration=-1), ValueError, "max_duration"),
        (lambda x: cuda.benchmark(print, kwargs=[1]), TypeError, "kwargs"),
        (lambda x: cuda.cuda_timer(stream=1.5), TypeError, "stream"),
        (lambda x: cuda.DeviceArray.empty((-1, 2)), ValueError, "shape"),
        (lambda x: cuda.DeviceArray.empty((2,), object), TypeError, "dtype"),
        (lambda x: cuda.synchronize(device=-1), ValueError, "device"),
    ],
)
def test_bad_arguments_fail_before_any_cuda_call(call, exc, words, monkeypatch) -> None:
    # any CUDA call would trip this: the checks must come first
    def boom() -> None:
        raise AssertionError("a CUDA availability check ran before the argument checks")

    monkeypatch.setattr(cuda, "_require", boom)
    with pytest.raises(exc) as info:
        call(np.ones((4, 4), np.float32))
    assert words in str(info.value)


@pytest.mark.parametrize(
    "name, args, kwargs",
    [
        ("correlate", (np.ones((3, 3)),), dict(mode="bogus")),
        ("correlate", (np.ones(3),), {}),
        ("correlate", (np.ones((3, 3)),), dict(origin=2)),
        ("correlate", (np.ones((3, 3)),), dict(origin=(0, 0, 0))),
        ("correlate", (np.ones((3, 3)),), dict(cval="a")),
        ("correlate", (np.ones((3, 3)),), dict(output=np.ones(3))),
        ("correlate", (np.ones((3, 3)),), dict(output=object())),
        ("correlate", (np.ones(3),), dict(axes=(0, 0))),
        ("convolve", (np.ones(3),), dict(axes=5)),
        ("convolve", (np.ones((4, 4)),), dict(origin=(0, -3))),
        ("uniform_filter", (float("inf"),), {}),
        ("uniform_filter", ((3, 3, 3),), {}),
        ("uniform_filter", (3,), dict(mode=("reflect", "nope"))),
        ("uniform_filter", (3,), dict(mode=3)),
        ("uniform_filter", (3,), dict(origin=1.5)),
        ("uniform_filter", (3,), dict(axes=(0, 5))),
        ("uniform_filter", (3,), dict(cval="1")),
    ],
)
def test_gpu_and_cpu_give_a_bad_argument_one_error(name, args, kwargs) -> None:
    # one checker (fastprof.kernels.args) for both devices, whether the GPU side is reached
    # through the front end or called directly: the same exception with the same words
    from fastprof import kernels

    x = np.ones((4, 4), np.float32)
    errors = []
    for call in (getattr(kernels, name), getattr(_gpu_kernels, name)):
        with pytest.raises((TypeError, ValueError)) as info:
            call(x, *args, **kwargs)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_parse_device_and_stream_handle() -> None:
    assert cuda.parse_device("cuda") is None and cuda.parse_device("gpu") is None
    assert cuda.parse_device("cuda:1") == 1 and cuda.parse_device(2) == 2
    for bad in ("cpu", "cuda:x", -1, True):
        with pytest.raises(ValueError):
            cuda.parse_device(bad)

    class Torchy:
        cuda_stream = 1234

    class Cupyish:
        ptr = 99

    assert cuda.stream_handle(None) == 0 and cuda.stream_handle(7) == 7
    assert cuda.stream_handle(Torchy()) == 1234 and cuda.stream_handle(Cupyish()) == 99
    with pytest.raises(TypeError):
        cuda.stream_handle(object())


def test_is_device_array_makes_no_cuda_call() -> None:
    class Cai:
        __cuda_array_interface__ = {
            "shape": (3,),
            "typestr": "<f4",
            "data": (0, False),
            "version": 3,
        }

    class HostDl:
        def __dlpack__(self, stream=None):
            raise AssertionError("not to be called")

        def __dlpack_device__(self):
            return (1, 0)

    assert cuda.is_device_array(Cai())
    assert not cuda.is_device_array(np.ones(3)) and not cuda.is_device_array(HostDl())
    assert not cuda.is_device_array([1, 2])


def test_nvtx_range_context_and_decorator() -> None:
    with nvtx.range("block") as r:
        assert r.name == "block"

    @nvtx.range("named")
    def f(a, b=1):
        return a + b

    @nvtx.range
    def g():
        raise KeyError("x")

    assert f(2, b=3) == 5 and f.__name__ == "f"
    with pytest.raises(KeyError):
        g()
    with pytest.raises(TypeError):
        nvtx.range(3)
    assert isinstance(nvtx.push("p"), int) and isinstance(nvtx.pop(), int)


# --- timers and benchmark against a fake runtime ------------------------------------------------


class FakeRuntime:
    """Stands in for the CUDA calls of fastprof.cuda: events get a time when recorded (from a
    scripted device clock) and elapsed is the difference."""

    def __init__(self, kernel_ms: list[float]) -> None:
        self.kernel_ms = list(kernel_ms)
        self.clock = 0.0
        self.times: dict[int, float] = {}
        self.next = 1
        self.log: list[tuple] = []
        self.waits = 0

    def _cuda_event_create(self) -> int:
        self.next += 1
        return self.next

    def _cuda_event_record(self, ev: int, stream: int) -> None:
        self.log.append(("record", ev, stream))
        self.times[ev] = self.clock

    def _cuda_event_elapsed(self, e0: int, e1: int) -> float:
        self.waits += 1
        return self.times[e1] - self.times[e0]

    def _cuda_event_destroy(self, ev: int) -> None:
        pass

    def _cuda_scrub(self, ptr: int, n: int, stream: int) -> None:
        self.log.append(("scrub", ptr, n, stream))

    def _cuda_get_device(self) -> int:
        return 0

    def _cuda_device_props(self, dev: int) -> dict:
        return {"l2_cache_bytes": 1 << 20}

    def _cuda_malloc(self, n: int, stream: int) -> tuple[int, bool]:
        return 0xABC, True

    def _cuda_free(self, ptr: int, stream: int, ordered: bool) -> None:
        pass

    def _cuda_release(self, ptr: int, device: int, fence: int, ordered: bool) -> None:
        pass

    def work(self) -> None:
        """A 'kernel': advances the device clock by the next scripted duration."""
        self.clock += self.kernel_ms.pop(0)


@pytest.fixture
def fake(monkeypatch):
    def make(kernel_ms):
        rt = FakeRuntime(kernel_ms)
        monkeypatch.setattr(cuda, "_C", rt)
        monkeypatch.setattr(cuda, "_probe", lambda: (1, ""))
        monkeypatch.setattr(cuda, "_events", cuda._EventPool())
        monkeypatch.setattr(cuda, "_flush_buffers", {})
        monkeypatch.setattr(cuda, "_props_cache", {})
        return rt

    return make


def test_timer_accumulates_samples_and_reads_lazily(fake) -> None:
    rt = fake([3.0, 1.0, 2.0, 10.0])
    t = cuda.cuda_timer(name="loop", stream=5)
    for _ in range(4):
        with t:
            rt.work()
    assert rt.waits == 0  # nothing waited yet: reads are lazy
    assert t.elapsed_ms == 10.0
    assert rt.waits == 4
    np.testing.assert_array_equal(t.samples_ms, [3.0, 1.0, 2.0, 10.0])
    assert t.median == 2.5 and t.min == 1.0 and t.mean == 4.0
    assert t.iqr == pytest.approx(
        np.percentile([3, 1, 2, 10], 75) - np.percentile([3, 1, 2, 10], 25)
    )
    assert t.std == pytest.approx(np.std([3, 1, 2, 10]))
    assert len(t.cpu_samples_ms) == 4 and t.cpu_ms >= 0
    assert all(entry[2] == 5 for entry in rt.log if entry[0] == "record")
    assert len(t) == 4 and "loop" in repr(t)


def test_timer_rejects_nesting_and_empty_reads(fake) -> None:
    fake([1.0])
    t = cuda.cuda_timer()
    with pytest.raises(RuntimeError):
        _ = t.elapsed_ms
    with t:
        with pytest.raises(RuntimeError):
            t.__enter__()


def test_benchmark_structure(fake) -> None:
    rt = fake([0.5] * 3 + [1.0, 4.0, 2.0, 3.0])
    res = cuda.benchmark(rt.work, n_warmup=3, n_repeat=4, flush_l2=True)
    np.testing.assert_array_equal(res.gpu_times, [1.0, 4.0, 2.0, 3.0])
    assert res.cpu_times.shape == (4,) and res.n_repeat == 4 and res.n_warmup == 3
    assert res.median == 2.5 and res.min == 1.0
    # the flush happens before the start event of each repeat, outside the timed window
    kinds = [e[0] for e in rt.log]
    assert kinds == ["scrub", "record", "record"] * 4
    assert rt.log[0][2] == 2 << 20  # twice the L2
    assert rt.waits == 4  # one wait per repeat
    d = res.to_dict()
    assert (
        d["n_repeat"] == 4
        and d["gpu_ms"]["median"] == 2.5
        and d["gpu_times"] == [1.0, 4.0, 2.0, 3.0]
    )
    assert "median" in str(res) and "4 repeats" in str(res)


def test_benchmark_without_flush_and_max_duration(fake, monkeypatch) -> None:
    rt = fake([1.0] * 50)
    clock = iter(np.arange(0, 100, 1.0))
    monkeypatch.setattr(cuda.time, "perf_counter", lambda: next(clock))
    res = cuda.benchmark(rt.work, n_warmup=0, n_repeat=50, max_duration=2.5, flush_l2=False)
    assert res.n_repeat == 3  # fake clock: start 0, after repeats 1, 2, 3 > 2.5
    assert not any(e[0] == "scrub" for e in rt.log)


def test_output_dtype_and_axes_are_checked_first(monkeypatch) -> None:
    monkeypatch.setattr(cuda, "_require", lambda: (_ for _ in ()).throw(AssertionError("CUDA")))
    x = np.ones((4, 4))
    with pytest.raises(TypeError, match="output"):
        fast_gpu.correlate(x, np.ones((3, 3)), output=object())
    with pytest.raises(TypeError, match="output"):
        fast_gpu.correlate(x, np.ones((3, 3)), output=np.complex128)
    with pytest.raises(ValueError, match="axes"):
        fast_gpu.convolve(x, np.ones(3), axes=5)
    with pytest.raises(ValueError, match="origin"):
        fast_gpu.convolve(x, np.ones(3), axes=1, origin=2)


def test_cuda_trace_turns_records_into_a_summary(monkeypatch) -> None:
    from fastprof.cuda import _base as _cuda_base
    from fastprof.cuda import timeline as cuda_timeline

    calls = []

    def rec(kind, name, start, end, stream, corr, nbytes=0, extra=0):
        # (kind, name, start, end, device, context, stream, correlation, bytes, extra, tid, id)
        return (kind, name, start, end, 0, 1, stream, corr, nbytes, extra, 0, 0)

    class FakeCupti:
        def _cuda_cupti_version(self, paths):
            return 130000, 13000  # CUPTI and driver of CUDA 13.0

        def _cuda_cupti_start(self, paths):
            calls.append(("start", paths))
            return ("libcupti.so", (10, 1, 2), (100, 100, 0))

        def _cuda_synchronize(self):
            calls.append(("sync",))

        def _cuda_cupti_stop(self):
            calls.append(("stop",))
            records = [
                rec(0, "fp_cu_tiled_kernel", 3000, 5000, 7, 11),
                rec(1, None, 1000, 1500, 7, 10, 4096, 1),
                rec(0, "fp_cu_tiled_kernel", 6000, 7000, 7, 12),
                rec(1, None, 8000, 8250, 7, 13, 4096, 2),
                rec(2, None, 500, 600, 0, 9, 64),
            ]
            return (records, 3, [], 0, (100, 100, 0), (100, 9100, 0))

    monkeypatch.setattr(cuda_timeline, "_C", FakeCupti())
    monkeypatch.setattr(_cuda_base, "_probe", lambda: (1, ""))
    with cuda.cuda_trace() as tr:
        assert calls[0][0] == "start" and all(isinstance(p, str) for p in calls[0][1])
        with pytest.raises(RuntimeError, match="already running"):
            cuda.cuda_trace().__enter__()
    assert [c[0] for c in calls] == ["start", "sync", "stop"]
    assert [r.start_ns for r in tr.records] == [500, 1000, 3000, 6000, 8000]  # sorted
    assert [r.name for r in tr.copies()] == ["memcpy HtoD", "memcpy DtoH"]
    k = tr.kernels()
    assert len(k) == 2 and k[0].duration_ns == 2000 and k[1].duration_ms == 0.001
    assert tr.dropped == 3
    lines = tr.summary().splitlines()
    assert "fp_cu_tiled_kernel" in lines[1] and lines[1].split()[2] == "2"  # most time first
    events = tr.to_chrome_trace()
    assert len(events) == 5 and events[0]["ts"] == 0 and events[1]["dur"] == 0.5
    assert tr.recorder.summary().tables["cuda_gpu_kern_sum"].rows[0][1:3] == (3000, 2)
    with cuda.cuda_trace():  # a second trace after the first is fine
        pass
