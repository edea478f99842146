"""exact=True on the device: scipy.ndimage's float results bit for bit, from the kernels of
src/cuda/ndimage_exact.cu (on a real GPU their __dmul_rn/__dadd_rn/__ddiv_rn arithmetic; on the
fake device the same code on the host), for NumPy and device input."""

from __future__ import annotations

import numpy as np
import pytest

from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as gk
from kernel_helpers import same_bits

ndimage = pytest.importorskip("scipy.ndimage")
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, wshape", [((200,), (7,)), ((40, 50), (5, 3)), ((17, 20, 33), (5, 5, 5))]
)
def test_correlate_and_convolve_bits(dt, shape, wshape) -> None:
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dt)
    w = rng.standard_normal(wshape)
    for mode in MODES:
        ref = ndimage.correlate(x, w, mode=mode, cval=0.25)
        same_bits(ref, np.asarray(gk.correlate(x, w, mode=mode, cval=0.25, exact=True)))
        ref = ndimage.convolve(x, w, mode=mode, cval=0.25)
        got = gk.convolve(cuda.DeviceArray.from_numpy(x), w, mode=mode, cval=0.25, exact=True)
        same_bits(ref, got.copy_to_host())


@pytest.mark.parametrize(
    "in_dt, out_dt",
    [
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.float64, np.float32),
        (np.uint8, np.float32),
    ],
)
@pytest.mark.parametrize("size", [3, 5, (4, 1, 6)])
def test_uniform_filter_bits(in_dt, out_dt, size) -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((24, 30, 36)) * 50 + 100).astype(in_dt)
    for mode in MODES:
        ref = ndimage.uniform_filter(x, size, output=out_dt, mode=mode, cval=-2.0)
        got = gk.uniform_filter(x, size, output=out_dt, mode=mode, cval=-2.0, exact=True)
        same_bits(ref, np.asarray(got))


@pytest.mark.parametrize("dt", [np.complex64, np.complex128])
def test_complex_input_and_weights_bits(dt) -> None:
    """Complex data on the device: scipy's combination of real filters over the parts, each
    run by the device's exact kernels, gives scipy's bits."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((20, 17)) + 1j * rng.standard_normal((20, 17))).astype(dt)
    w = rng.standard_normal((3, 4)) - 1j * rng.standard_normal((3, 4))
    for mode in MODES:
        for ours, theirs in ((gk.correlate, ndimage.correlate), (gk.convolve, ndimage.convolve)):
            ref = theirs(x, w, mode=mode, cval=0.5 + 2j)
            got = np.asarray(ours(x, w, mode=mode, cval=0.5 + 2j, exact=True))
            same_bits(np.ascontiguousarray(ref.real), np.ascontiguousarray(got.real))
            same_bits(np.ascontiguousarray(ref.imag), np.ascontiguousarray(got.imag))
        ref = ndimage.uniform_filter(x, (3, 2), mode=mode, cval=1j)
        got = np.asarray(gk.uniform_filter(x, (3, 2), mode=mode, cval=1j, exact=True))
        same_bits(np.ascontiguousarray(ref.real), np.ascontiguousarray(got.real))
        same_bits(np.ascontiguousarray(ref.imag), np.ascontiguousarray(got.imag))
