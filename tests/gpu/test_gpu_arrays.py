"""DeviceArray copies, views, __cuda_array_interface__ and DLPack; CuPy and PyTorch interop."""

from __future__ import annotations

import numpy as np
import pytest

from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels
from kernel_helpers import fast_gpu


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int8, np.int64, np.uint16, np.bool_, np.complex64]
)
@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4), (2, 3, 4)])
def test_roundtrip(dtype, shape) -> None:
    host = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    d = cuda.DeviceArray.from_numpy(host)
    assert (d.shape, d.dtype, d.strides, d.nbytes) == (
        host.shape,
        host.dtype,
        host.strides,
        host.nbytes,
    )
    np.testing.assert_array_equal(d.to_numpy(), host)
    np.testing.assert_array_equal(d.copy().to_numpy(), host)


def test_from_numpy_copies_non_contiguous_input_and_leaves_it_alone() -> None:
    host = np.arange(24.0).reshape(4, 6)
    view = host[::2, ::-1]
    before = host.copy()
    d = cuda.DeviceArray.from_numpy(view)
    np.testing.assert_array_equal(d.to_numpy(), view)
    np.testing.assert_array_equal(host, before)


def test_strided_views_come_back_right() -> None:
    base = cuda.DeviceArray.from_numpy(np.arange(12.0))
    rev = cuda.DeviceArray(base.ptr + 11 * 8, (12,), np.float64, (-8,), base.device, base)
    np.testing.assert_array_equal(rev.to_numpy(), np.arange(12.0)[::-1])
    tr = cuda.DeviceArray(base.ptr, (4, 3), np.float64, (8, 32), base.device, base)
    np.testing.assert_array_equal(tr.to_numpy(), np.arange(12.0).reshape(3, 4).T)
    assert not tr.is_c_contiguous and tr.__cuda_array_interface__["strides"] == (8, 32)


def test_cuda_array_interface_v3() -> None:
    d = cuda.DeviceArray.from_numpy(np.ones((2, 3), np.float32))
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (2, 3) and cai["typestr"] == "<f4"
    assert cai["data"] == (d.ptr, False) and cai["strides"] is None and cai["stream"] == 1
    view = cuda.as_device_array(type("Cai", (), {"__cuda_array_interface__": cai})())
    assert view.ptr == d.ptr and view.shape == d.shape


def test_dlpack_roundtrip_through_our_own_import() -> None:
    d = cuda.DeviceArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert d.__dlpack_device__() == (2, d.device)

    class Producer:
        def __dlpack__(self, stream=None):
            return d.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return d.__dlpack_device__()

    view = cuda.as_device_array(Producer())
    assert view.ptr == d.ptr and view.shape == (2, 3) and view.dtype == np.int32
    np.testing.assert_array_equal(view.to_numpy(), np.arange(6).reshape(2, 3))
    del view  # calls our deleter through the keeper
    cap = d.__dlpack__()
    del cap  # an unconsumed capsule frees itself


@pytest.mark.real_gpu
def test_cupy_interop_without_copies() -> None:
    cp = pytest.importorskip("cupy")
    d = cuda.DeviceArray.from_numpy(np.arange(10.0))
    c = cp.asarray(d)
    assert c.data.ptr == d.ptr
    c2 = cp.from_dlpack(d)
    assert c2.data.ptr == d.ptr
    x = cp.random.standard_normal((64, 48)).astype(cp.float32)
    out = fast_gpu.correlate(x, np.ones((3, 3)) / 9, mode="nearest")
    assert isinstance(out, cuda.DeviceArray)
    ndi = pytest.importorskip("cupyx.scipy.ndimage")
    ref = ndi.correlate(x, cp.asarray(np.ones((3, 3), np.float32) / 9), mode="nearest")
    np.testing.assert_allclose(cp.asnumpy(cp.asarray(out)), cp.asnumpy(ref), rtol=1e-5, atol=1e-5)
    with cp.cuda.Stream() as s:
        y = cp.ones((256,), cp.float64)
        z = _gpu_kernels.evaluate("y * 2 + 1", {"y": y}, stream=s)
        s.synchronize()
    np.testing.assert_array_equal(z.to_numpy(), np.full(256, 3.0))


@pytest.mark.real_gpu
def test_torch_interop_without_copies() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    d = cuda.DeviceArray.from_numpy(np.arange(10, dtype=np.float32))
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.device.type == "cuda"
    x = torch.randn(32, 40, device="cuda", dtype=torch.float64)
    out = fast_gpu.uniform_filter(x, 3, mode="wrap")
    import scipy.ndimage as ndi

    np.testing.assert_allclose(
        out.to_numpy(), ndi.uniform_filter(x.cpu().numpy(), 3, mode="wrap"), rtol=1e-12, atol=1e-12
    )
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ones(1000, device="cuda", dtype=torch.float32)
        r = _gpu_kernels.matmul(y.reshape(10, 100), y.reshape(100, 10), stream=s)
    s.synchronize()
    np.testing.assert_allclose(r.to_numpy(), np.full((10, 10), 100.0))


@pytest.mark.real_gpu
def test_allocations_leave_the_default_memory_pool_alone() -> None:
    # other libraries share the device's default pool: fastprof allocates from a pool of its
    # own and changes no setting of the default one (read through the driver API)
    import ctypes

    libcuda = ctypes.CDLL("libcuda.so.1")
    pool = ctypes.c_void_p()
    threshold = ctypes.c_uint64()
    assert libcuda.cuInit(0) == 0
    dev = ctypes.c_int()
    assert libcuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert libcuda.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev) == 0

    def release_threshold() -> int:
        assert libcuda.cuMemPoolGetAttribute(pool, 4, ctypes.byref(threshold)) == 0
        return threshold.value  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD

    before = release_threshold()
    with cuda._on_device(0):
        arrays = [cuda.DeviceArray.from_numpy(np.ones(1 << 16)) for _ in range(4)]
        del arrays
        cuda.synchronize()
    assert release_threshold() == before
