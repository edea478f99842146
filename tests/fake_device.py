"""A fake CUDA device in host memory, shared by the fake-device tests and tests/gpu.

The fake replaces fastprof's CUDA calls: "device" blocks are host buffers, copies are memmoves,
the filter launches run the device code on the host (fastprof's own host emulation of the
.cu kernels, so CUDA builds only), and the evaluate kernels NVRTC would compile are compiled
for the host with a C++ compiler. What runs for real is everything above the CUDA calls.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from typing import Any, Iterator

import numpy as np
import pytest

from fastprof import _fastprof
from fastprof.cuda import runtime as cuda
from fastprof.kernels import args as _kernel_args
from fastprof.kernels import gpu as _gpu_kernels

CXX = shutil.which("g++") or shutil.which("c++")

HOST_PRELUDE = r"""
#include <math.h>
#include <string.h>
struct fp_dim3 { unsigned x, y, z; };
static const fp_dim3 gridDim = {1, 1, 1}, blockDim = {1, 1, 1};
static const fp_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
#undef INFINITY
"""


class FakeDevice:
    """Stands in for fastprof._fastprof's CUDA functions on one fake device."""

    def __init__(self, tmp_path) -> None:
        self.real = _fastprof
        self.tmp = tmp_path
        self.blocks: dict[int, np.ndarray] = {}
        self.clock = 0.0
        self.events: dict[int, float] = {}
        self.next_event = 1
        self.kernels: dict[int, ctypes._CFuncPtr] = {}
        self.launches = 0
        self.correlations: list[tuple] = []
        self.exact_calls: list[int] = []  # the exact= of each correlation launch
        self.reads = 0  # input elements the device code loaded (its host emulation counts them)
        self.compiles = 0
        self.log: list[tuple] = []  # stream-ordered calls: (what, stream, ...)

    REAL = {
        "_cuda_built",
        "_cuda_tiled_ok",
        "_cuda_correlate_host",
        "_cuda_dlpack_export",
        "_cuda_dlpack_import",
    }

    def __getattr__(self, name: str):
        if name in self.REAL:  # functions that touch no device
            return getattr(self.real, name)
        raise AttributeError(f"the fake device has no {name}")

    # device and memory
    def _cuda_get_device(self) -> int:
        return 0

    def _cuda_set_device(self, dev: int) -> None:
        assert dev == 0

    def _cuda_pointer_device(self, ptr: int) -> int:
        return 0

    def _cuda_device_props(self, dev: int) -> dict:
        return {
            "index": 0,
            "name": "Fake",
            "compute_capability": (8, 0),
            "multiprocessors": 1,
            "total_memory": 1 << 30,
            "l2_cache_bytes": 1 << 16,
            "clock_khz": 1000,
            "memory_clock_khz": 1000,
            "memory_bus_bits": 64,
            "warp_size": 32,
            "max_threads_per_block": 1024,
            "shared_memory_per_block": 48 << 10,
            "pci_bus_id": 0,
            "integrated": 0,
        }

    def _cuda_malloc(self, n: int, stream: int) -> tuple[int, bool]:
        if n == 0:
            return 0, False
        buf = np.full(n, 0xFF, np.uint8)  # garbage: reads of unwritten memory show up as NaN
        ptr = buf.ctypes.data
        self.blocks[ptr] = buf
        return ptr, True

    def _cuda_free(self, ptr: int, stream: int, ordered: bool) -> None:
        assert ptr in self.blocks, "free of an unknown block"
        self.log.append(("free", stream, ptr))
        del self.blocks[ptr]

    def _cuda_release(self, ptr: int, device: int, fence: int, ordered: bool) -> None:
        assert device == 0
        if fence:
            self.log.append(("wait", 0, fence))
        self._cuda_free(ptr, 0, ordered)

    def check_range(self, ptr: int, n: int) -> None:
        for base, buf in self.blocks.items():
            if base <= ptr and ptr + n <= base + buf.size:
                return
        raise AssertionError(f"device access outside any block: {ptr:#x} + {n}")

    def _cuda_memcpy_htod(self, dst: int, src, stream: int) -> None:
        host = np.frombuffer(src, np.uint8)
        self.check_range(dst, host.size)
        ctypes.memmove(dst, host.ctypes.data, host.size)

    def _cuda_upload(self, ptrs, buffers, stream: int, event: int = 0) -> None:
        assert len(ptrs) == len(buffers)
        for dst, src in zip(ptrs, buffers):
            assert src.flags.c_contiguous
            if src.nbytes:
                self._cuda_memcpy_htod(dst, src, stream)
        if event:
            self._cuda_event_record(event, stream)

    def _cuda_download(self, dst, src: int, stream: int, before: int = 0, after: int = 0) -> None:
        assert dst.flags.c_contiguous and dst.flags.writeable
        if before:
            self._cuda_event_record(before, stream)
        if dst.nbytes:
            self._cuda_memcpy_dtoh(dst, src, stream)
        if after:
            self._cuda_event_record(after, stream)

    def _cuda_memcpy_dtoh(self, dst, src: int, stream: int) -> None:
        host = np.frombuffer(dst, np.uint8)
        self.check_range(src, host.size)
        ctypes.memmove(host.ctypes.data, src, host.size)

    def _cuda_memcpy_dtod(self, dst: int, src: int, n: int, stream: int) -> None:
        self.log.append(("dtod", stream))
        self.check_range(src, n)
        self.check_range(dst, n)
        ctypes.memmove(dst, src, n)

    def _cuda_synchronize(self) -> None:
        pass

    def _cuda_scrub(self, ptr: int, n: int, stream: int) -> None:
        self.check_range(ptr, n)

    def _cuda_stream_wait_event(self, stream: int, ev: int) -> None:
        self.log.append(("wait", stream, ev))

    # events
    def _cuda_event_create(self) -> int:
        self.next_event += 1
        return self.next_event

    def _cuda_event_record(self, ev: int, stream: int) -> None:
        self.log.append(("record", stream, ev))
        self.clock += 1.0
        self.events[ev] = self.clock

    def _cuda_event_elapsed(self, e0: int, e1: int) -> float:
        return self.events[e1] - self.events[e0]

    def _cuda_event_times(self, events: tuple) -> tuple:
        return tuple(self.events[b] - self.events[a] for a, b in zip(events, events[1:]))

    def _cuda_event_destroy(self, ev: int) -> None:
        pass

    # kernels
    def view(self, ptr: int, nbytes: int) -> np.ndarray:
        self.check_range(ptr, nbytes)
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr))

    def _cuda_correlate(
        self,
        code,
        inp,
        out,
        w,
        shape,
        strides,
        wshape,
        shift,
        mode,
        cval,
        boxw,
        stream,
        host_w,
        exact=0,
    ) -> None:
        self.log.append(("kernel", stream))
        item = 4 if code == 0 else 8
        witem = 8 if exact else item  # scipy's arithmetic reads float64 weights
        lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        size = int(np.prod(shape))
        in_buf = self.view(inp + lo * item, (hi - lo + 1) * item)
        out_buf = self.view(out, size * item)
        nw = int(np.prod(wshape))
        w_buf = self.view(w, nw * witem) if w else None
        # the weights' values on the host, which the per-element kernel takes in its
        # parameters, are the device weights' (none for a box)
        assert (host_w is None) == (w == 0)
        if w:
            assert bytes(memoryview(host_w).cast("B")) == bytes(w_buf)
        self.correlations.append((tuple(wshape), w == 0))
        self.exact_calls.append(exact)
        self.reads += self.real._cuda_correlate_host(
            code,
            in_buf,
            -lo,
            out_buf,
            w_buf,
            shape,
            strides,
            wshape,
            shift,
            mode,
            cval,
            boxw,
            0,
            exact,
        )

    def _cuda_nvrtc_compile(self, source, name, options, cubin, paths) -> bytes:
        if CXX is None:
            pytest.skip("no C++ compiler for the host build of generated kernels")
        self.compiles += 1
        src = self.tmp / f"k{self.compiles}.cpp"
        lib = self.tmp / f"k{self.compiles}.so"
        src.write_text(HOST_PRELUDE + source)
        run = subprocess.run(
            [CXX, "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        return str(lib).encode()

    def _cuda_library_load(self, image: bytes, name: str) -> tuple[int, int]:
        fn = getattr(ctypes.CDLL(image.decode()), name)
        handle = len(self.kernels) + 1
        self.kernels[handle] = fn
        return 0, handle

    def _cuda_launch(
        self, kernel: int, grid: int, block: int, fmt: str, args: tuple, stream
    ) -> None:
        conv = {"p": ctypes.c_void_p, "q": ctypes.c_longlong, "d": ctypes.c_double}
        self.log.append(("kernel", stream))
        self.launches += 1
        self.kernels[kernel](*[conv[c](a) for c, a in zip(fmt, args)])

    def _cuda_gemm(self, dtype, m, n, k, a, b, c, stream, paths) -> None:
        self.log.append(("kernel", stream))
        dt = np.float32 if dtype == 0 else np.float64
        item = np.dtype(dt).itemsize
        A = self.view(a, m * k * item).view(dt).reshape(m, k)
        B = self.view(b, k * n * item).view(dt).reshape(k, n)
        C = self.view(c, m * n * item).view(dt).reshape(m, n)
        C[...] = A @ B


def install(monkeypatch: pytest.MonkeyPatch, fake: FakeDevice, keep_kernels: bool = False) -> None:
    """Puts fake in place of fastprof's CUDA calls for one test (monkeypatch undoes it), with
    fresh caches (the compiled kernels kept when keep_kernels: fake must then be the same
    fake for every test)."""
    monkeypatch.setattr(cuda, "_C", fake)
    monkeypatch.setattr(_gpu_kernels, "_C", fake)
    monkeypatch.setattr(cuda, "_probe", lambda: (1, ""))
    monkeypatch.setattr(cuda, "_events", cuda._EventPool())
    monkeypatch.setattr(cuda, "_props_cache", {})
    monkeypatch.setattr(cuda, "_flush_buffers", {})
    monkeypatch.setattr(cuda, "_staging", cuda._StagingPool())
    monkeypatch.setattr(_gpu_kernels, "_cublas_loaded", None)
    if not keep_kernels:
        monkeypatch.setattr(_gpu_kernels, "_kernel_cache", {})
    monkeypatch.setattr(_gpu_kernels, "_weights_cache", {})
    monkeypatch.setattr(_gpu_kernels, "_plans", {})
    monkeypatch.setattr(_kernel_args, "_parsed", {})


@pytest.fixture
def dev(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[FakeDevice]:
    """A FakeDevice installed for one test (the test files import this fixture)."""
    fake = FakeDevice(tmp_path)
    install(monkeypatch, fake)
    yield fake
    _gpu_kernels._weights_cache.clear()
