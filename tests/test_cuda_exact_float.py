"""exact=True on the GPU: scipy.ndimage's float results bit for bit, from the device code
(src/cuda/ndimage_exact.cu) run by fastprof's host emulation and by the fake device's launches.

The device sums as scipy does: correlate every nonzero tap of the whole kernel from 0.0 in C
order, a product then a sum each, in double; uniform_filter one running sum per line and axis,
stored in the output dtype between the axes.  Every case is compared with scipy itself on
random data, and the fast kernels are shown to differ where exact does not."""

from __future__ import annotations

import numpy as np
import pytest

import fake_device
from fastprof import _fastprof, kernels
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels
from kernel_helpers import same_bits

ndimage = pytest.importorskip("scipy.ndimage")
pytestmark = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
dev = fake_device.dev  # the fixture: a FakeDevice installed for one test

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
# (input dtype, output dtype): float32 runs in float32 only where both are
PAIRS = [
    (np.float32, np.float32),
    (np.float64, np.float64),
    (np.float32, np.float64),
    (np.float64, np.float32),
    (np.int16, np.float32),
    (np.uint8, np.float64),
]


def _data(rng: np.random.Generator, shape: tuple[int, ...], dt: type) -> np.ndarray:
    if np.dtype(dt).kind == "f":
        return (rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 3)).astype(dt)
    return rng.integers(0, 100, shape).astype(dt)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0].__name__}-{p[1].__name__}")
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_random_correlations_equal_scipy(pair, ndim) -> None:
    rng = np.random.default_rng(ndim * 7 + PAIRS.index(pair))
    hi = {1: 60, 2: 20, 3: 11, 4: 6}[ndim]
    for _ in range(4):
        shape = tuple(int(rng.integers(1, hi + 1)) for _ in range(ndim))
        wshape = tuple(int(rng.integers(1, 5)) for _ in range(ndim))
        w = rng.standard_normal(wshape)
        w.flat[int(rng.integers(w.size))] = 0.0  # left out of the sum, as scipy does
        origins = [int(rng.integers(-(k // 2), (k - 1) // 2 + 1)) for k in wshape]
        x = _data(rng, shape, pair[0])
        mode = MODES[int(rng.integers(len(MODES)))]
        for func in ("correlate", "convolve"):
            ref = getattr(ndimage, func)(x, w, output=pair[1], mode=mode, cval=0.3, origin=origins)
            got = getattr(_gpu_kernels, func)(
                x,
                w,
                output=pair[1],
                mode=mode,
                cval=0.3,
                origin=origins,
                exact=True,
                _emulate=True,
            )
            same_bits(ref, got)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0].__name__}-{p[1].__name__}")
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_random_boxes_equal_scipy(pair, ndim) -> None:
    rng = np.random.default_rng(ndim * 11 + PAIRS.index(pair))
    hi = {1: 80, 2: 25, 3: 12}[ndim]
    for _ in range(5):
        shape = tuple(int(rng.integers(1, hi + 1)) for _ in range(ndim))
        sizes = [int(rng.integers(1, 7)) for _ in range(ndim)]
        origins = [int(rng.integers(-(s // 2), (s - 1) // 2 + 1)) for s in sizes]
        modes = [MODES[int(rng.integers(len(MODES)))] for _ in range(ndim)]
        x = _data(rng, shape, pair[0])
        ref = ndimage.uniform_filter(
            x, sizes, output=pair[1], mode=modes, cval=-1.5, origin=origins
        )
        got = _gpu_kernels.uniform_filter(
            x,
            sizes,
            output=pair[1],
            mode=modes,
            cval=-1.5,
            origin=origins,
            exact=True,
            _emulate=True,
        )
        same_bits(ref, got)


def test_special_values_and_signed_zero() -> None:
    """NaN and inf travel along their lines as in scipy; a box of size 1 everywhere copies,
    keeping -0.0 (scipy filters no axis of size 1)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 30))
    x[3, 4], x[7, 20], x[0, 0] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((3, 3))
    same_bits(ndimage.correlate(x, w), _gpu_kernels.correlate(x, w, exact=True, _emulate=True))
    same_bits(
        ndimage.uniform_filter(x, 4),
        _gpu_kernels.uniform_filter(x, 4, exact=True, _emulate=True),
    )
    z = np.full((4, 5), -0.0)
    got = _gpu_kernels.uniform_filter(z, 1, exact=True, _emulate=True)
    assert np.signbit(got).all()


def test_the_fast_kernels_differ_where_exact_does_not() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 18, 40)).astype(np.float32)
    w = rng.random((5, 5, 5))
    ref = ndimage.correlate(x, w)
    assert not np.array_equal(ref, _gpu_kernels.correlate(x, w, exact=False, _emulate=True))
    same_bits(ref, _gpu_kernels.correlate(x, w, exact=True, _emulate=True))
    same_bits(ref, _gpu_kernels.correlate(x, w, _emulate=True))  # exact is the default
    ref = ndimage.uniform_filter(x, 5)
    assert not np.array_equal(ref, _gpu_kernels.uniform_filter(x, 5, exact=False, _emulate=True))
    same_bits(ref, _gpu_kernels.uniform_filter(x, 5, exact=True, _emulate=True))
    same_bits(ref, _gpu_kernels.uniform_filter(x, 5, _emulate=True))


def test_through_the_fake_device(dev) -> None:
    """The launches of the real call path (upload, one exact launch per pass with float64
    weights, download), for NumPy and device input, through the front end's device=."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((10, 12, 14)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3))
    same_bits(ndimage.correlate(x, w), kernels.correlate(x, w, exact=True, device="cuda"))
    assert dev.exact_calls == [1]
    got = kernels.uniform_filter(x, 3, output=np.float64, exact=True, device="cuda")
    same_bits(ndimage.uniform_filter(x, 3, output=np.float64), got)
    assert dev.exact_calls[1:] == [1, 1, 1]  # scipy's three passes, float64 between them
    d = cuda.DeviceArray.from_numpy(x)
    got = kernels.uniform_filter(d, 3, exact=True)
    same_bits(ndimage.uniform_filter(x, 3), got.copy_to_host())
    got = kernels.convolve(d, w, exact=True, mode="wrap")
    same_bits(ndimage.convolve(x, w, mode="wrap"), got.copy_to_host())
    dev.exact_calls.clear()
    x64 = x.astype(np.float64)
    got = kernels.uniform_filter(x64, [3, 4, 1], output=np.float32, exact=True, device="cuda")
    same_bits(ndimage.uniform_filter(x64, [3, 4, 1], output=np.float32), got)
    assert dev.exact_calls == [2, 2]  # rounded to float32 between the passes, as scipy stores
    dev.exact_calls.clear()
    kernels.uniform_filter(x, 3, exact=False, device="cuda")
    kernels.correlate(x, w, exact=False, device="cuda")
    assert set(dev.exact_calls) == {0}
    dev.exact_calls.clear()
    same_bits(ndimage.correlate(x, w), kernels.correlate(x, w, device="cuda"))
    same_bits(ndimage.uniform_filter(x, 3), kernels.uniform_filter(x, 3, device="cuda"))
    assert dev.exact_calls == [1, 1, 1, 1]  # exact is the default on the device too


def test_a_repeat_call_keeps_its_exact_plan(dev) -> None:
    """exact= is part of a plan's key: the fast and the exact plan of one call never mix."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 9, 30)).astype(np.float32)
    w = rng.random((3, 3, 3))
    for _ in range(2):
        fast = _gpu_kernels.correlate(x, w, exact=False)
        exact = _gpu_kernels.correlate(x, w)
        same_bits(ndimage.correlate(x, w), np.asarray(exact))
        assert not np.array_equal(np.asarray(fast), np.asarray(exact))
    assert dev.exact_calls == [0, 1, 0, 1]


def test_the_exact_launch_checks_its_code() -> None:
    x = np.zeros(4)
    with pytest.raises(ValueError, match="exact must be 0, 1 or 2"):
        _fastprof._cuda_correlate_host(
            1, x, 0, np.zeros(4), None, (4,), (1,), (3,), (1,), 0, 0.0, 1 / 3, 0, 3
        )


def _cuda_tool(name: str) -> str | None:
    """A CUDA binary tool from the nvidia-cuda-* wheels (the test extras) or PATH."""
    import glob
    import os
    import shutil
    import sys

    for site in sys.path:
        hits = glob.glob(os.path.join(site, "nvidia", "cu*", "bin", name))
        if hits:
            return hits[0]
    return shutil.which(name)


def test_the_device_code_never_fuses_a_product_into_a_sum(tmp_path) -> None:
    """The SASS of the exact correlation: its taps are DMUL then DADD, no DFMA (a fused
    multiply-add would round once where scipy rounds twice), for sm_90."""
    import os
    import shutil
    import subprocess

    nvcc, dump, disasm = shutil.which("nvcc"), _cuda_tool("cuobjdump"), _cuda_tool("nvdisasm")
    if nvcc is None or dump is None or disasm is None:
        pytest.skip(
            f"needs nvcc, cuobjdump and nvdisasm (nvcc: {nvcc}, cuobjdump: {dump},"
            f" nvdisasm: {disasm})"
        )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cubin = str(tmp_path / "exact.cubin")
    # the tools run none of fastprof: no sanitizer preload (.ci/sanitize sets one; nvcc's
    # front end crashes under it), and cuobjdump -sass runs nvdisasm, which lives in its own
    # wheel (another folder)
    drop = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["NVDISASM_PATH"] = os.path.dirname(disasm)
    subprocess.run(
        [nvcc, "-cubin", "-arch=sm_90", "-O3", "-std=c++17", "--expt-relaxed-constexpr"]
        + ["-I", os.path.join(root, "src"), "-o", cubin]
        + [os.path.join(root, "src", "cuda", "ndimage_exact.cu")],
        check=True,
        env=env,
    )
    sass = subprocess.run(
        [dump, "-sass", cubin], capture_output=True, text=True, check=True, env=env
    )
    kernels_seen = 0
    for block in sass.stdout.split("Function : ")[1:]:
        if "fp_cx_point_kernel" not in block.split("\n", 1)[0]:
            continue
        kernels_seen += 1
        assert "DMUL" in block and "DADD" in block
        assert "DFMA" not in block
    assert kernels_seen == 2  # float and double


@pytest.mark.parametrize("mode", MODES)
def test_inside_windows_and_border_windows_agree_with_scipy(mode) -> None:
    """The device code steps the offsets of a window inside the input and folds those of a
    window that crosses a border (correlate), and reads a box's entering and leaving values
    straight where both lie inside the line (uniform_filter): every origin, zero taps, and
    boxes as long as and longer than their line, all equal scipy's bits."""
    rng = np.random.default_rng(MODES.index(mode))
    x = rng.standard_normal((9, 14, 17))
    w = rng.standard_normal((3, 4, 5))
    w[1, 2, :] = 0.0
    for origin in ([-1, -2, -2], [0, 0, 0], [1, 1, 2], [0, -2, 1]):
        ref = ndimage.correlate(x, w, mode=mode, cval=0.7, origin=origin)
        same_bits(
            ref, _gpu_kernels.correlate(x, w, mode=mode, cval=0.7, origin=origin, _emulate=True)
        )
    line = rng.standard_normal((3, 40)).astype(np.float32)
    for size in (2, 5, 39, 40, 41, 90):
        for origin in sorted({-(size // 2), 0, (size - 1) // 2}):
            ref = ndimage.uniform_filter(line, (1, size), mode=mode, cval=0.7, origin=origin)
            got = _gpu_kernels.uniform_filter(
                line, (1, size), mode=mode, cval=0.7, origin=origin, _emulate=True
            )
            same_bits(ref, got)
