"""CUDA-event timers and the benchmark helper against a kernel of known length."""

from __future__ import annotations

import numpy as np
import pytest

from fastprof import _fastprof
from fastprof.cuda import nvtx
from fastprof.cuda import runtime as cuda

pytestmark = pytest.mark.real_gpu  # real kernels of known length, the driver's own errors
TARGET_MS = 20.0


def spin_cycles(ms: float) -> int:
    """Clock cycles of about ms at the device's rated clock (a throttled clock runs longer)."""
    khz = cuda.devices()[0].clock_khz
    if khz <= 0:
        pytest.skip("the runtime does not report the SM clock (cudaDevAttrClockRate)")
    return int(khz * ms)


def spin(ms: float, stream: int = 0) -> None:
    _fastprof._cuda_spin(spin_cycles(ms), stream)


def test_devices_describe_the_hardware() -> None:
    devs = cuda.devices()
    assert devs and all(d.multiprocessors > 0 and d.total_memory > 0 for d in devs)
    assert devs[0].compute_capability >= (7, 0) and devs[0].l2_cache_bytes > 0
    assert "CUDA available" in cuda.status() and cuda.is_available()


def test_timer_measures_a_kernel_of_known_length() -> None:
    t = cuda.cuda_timer("spin")
    for _ in range(3):
        with t:
            spin(TARGET_MS)
    samples = t.samples_ms
    assert samples.shape == (3,)
    # at least the cycles at the top clock; at most a heavily throttled clock
    assert 0.9 * TARGET_MS <= t.median <= 4 * TARGET_MS, samples
    # the host saw only the launch: the kernel runs asynchronously
    assert np.median(t.cpu_samples_ms) < 0.5 * t.median
    assert t.min <= t.median and t.std >= 0 and t.iqr >= 0


def test_timer_on_stream_objects() -> None:
    class TorchLike:
        cuda_stream = 0

    class CupyLike:
        ptr = 0

    for stream in (None, 0, TorchLike(), CupyLike()):
        with cuda.cuda_timer(stream=stream) as t:
            spin(2.0)
        assert t.elapsed_ms >= 1.5


def test_benchmark_times_the_kernel_not_the_launch() -> None:
    res = cuda.benchmark(spin, args=(5.0,), n_warmup=2, n_repeat=8)
    assert res.n_repeat == 8 and res.gpu_times.shape == (8,) and res.cpu_times.shape == (8,)
    assert 4.5 <= res.median <= 20.0
    assert np.median(res.cpu_times) < res.median
    d = res.to_dict()
    assert d["gpu_ms"]["median"] == pytest.approx(res.median)
    assert "spin" in str(res)


def test_benchmark_max_duration_stops_early() -> None:
    res = cuda.benchmark(spin, args=(5.0,), n_warmup=0, n_repeat=1000, max_duration=0.05)
    assert 1 <= res.n_repeat < 1000


def test_l2_flush_makes_a_small_read_slower() -> None:
    # a read of a buffer that fits in L2: flushed, it comes from DRAM; warm, from L2
    l2 = cuda.devices()[0].l2_cache_bytes
    a = cuda.DeviceArray.empty((l2 // 8,), np.uint8)
    b = cuda.DeviceArray.empty((l2 // 8,), np.uint8)

    def copy() -> None:
        _fastprof._cuda_memcpy_dtod(b.ptr, a.ptr, a.nbytes, 0)

    warm = cuda.benchmark(copy, n_warmup=5, n_repeat=50, flush_l2=False)
    cold = cuda.benchmark(copy, n_warmup=5, n_repeat=50, flush_l2=True)
    assert cold.median >= warm.median * 0.9  # never faster; usually clearly slower


def test_synchronize_and_nvtx_with_a_device() -> None:
    spin(1.0)
    cuda.synchronize()
    cuda.synchronize(device=0)
    with nvtx.range("gpu block"):
        spin(1.0)


def test_out_of_memory_is_a_cuda_error_and_recoverable() -> None:
    with pytest.raises(cuda.CudaError) as info:
        cuda.DeviceArray.empty((1 << 50,), np.uint8)
    assert info.value.name == "cudaErrorMemoryAllocation" and info.value.code == 2
    x = cuda.DeviceArray.from_numpy(np.arange(10.0))
    np.testing.assert_array_equal(x.to_numpy(), np.arange(10.0))
