"""Complex input and weights in convolve, correlate and uniform_filter: scipy.ndimage's
results bit for bit (its combination of real filters over the parts, the weights conjugated
for correlate), on the CPU and through the GPU front end's host emulation of the device code;
scipy's output dtypes, and errors that name the argument."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from fastprof import _fastprof, kernels
from kernel_helpers import needs_scipy_axes, same_bits

ndi = pytest.importorskip("scipy.ndimage")
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap"]
CUDA = _fastprof._cuda_built()


def _complex(shape: Any, dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def same_complex(ref: np.ndarray, got: np.ndarray) -> None:
    """got equals ref bit for bit in both parts, with ref's dtype and shape."""
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if ref.dtype.kind != "c":
        same_bits(ref, got)
        return
    same_bits(np.ascontiguousarray(ref.real), np.ascontiguousarray(got.real))
    same_bits(np.ascontiguousarray(ref.imag), np.ascontiguousarray(got.imag))


def _inputs(seed: int) -> list:
    """Complex inputs of both widths in several layouts, and real ones (for complex weights)."""
    c = _complex((9, 8), np.complex128, seed)
    f = _complex((6, 7, 5), np.complex64, seed + 1)
    return [
        c,
        np.asfortranarray(c),
        c[::-2, 1:],
        f,
        f[:, ::-1, ::2],
        c.real.astype(np.float32),
        (c.imag * 50).astype(np.int16),
        c.real > 0,
    ]


@pytest.mark.parametrize("func", ["correlate", "convolve"])
@pytest.mark.parametrize("wdtype", [np.float64, np.complex64, np.complex128])
def test_correlate_and_convolve_equal_scipy_bit_for_bit(func: str, wdtype: Any) -> None:
    ours, theirs = getattr(kernels, func), getattr(ndi, func)
    for i, x in enumerate(_inputs(3)):
        if x.dtype.kind != "c" and np.dtype(wdtype).kind != "c":
            continue
        w = _complex((3,) * x.ndim, wdtype, i) if wdtype != np.float64 else np.ones((2,) * x.ndim)
        cval = 0.5 - 0.25j if x.dtype.kind == "c" else 0.5
        for mode in MODES:
            for origin in (0, -1):
                ref = theirs(x, w, mode=mode, cval=cval, origin=origin)
                same_complex(ref, ours(x, w, mode=mode, cval=cval, origin=origin))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_uniform_filter_equals_scipy_bit_for_bit(dtype: Any) -> None:
    x = _complex((11, 7, 4), dtype, 5)
    for view in (x, x[::-1, ::3], np.asfortranarray(x)):
        for size in (2, 3, (4, 1, 3)):
            for mode in MODES:
                for cval in (0.0, 1 - 2j):
                    ref = ndi.uniform_filter(view, size, mode=mode, cval=cval)
                    same_complex(ref, kernels.uniform_filter(view, size, mode=mode, cval=cval))


@needs_scipy_axes(ndi.correlate)
@needs_scipy_axes(ndi.uniform_filter)
def test_axes_origins_and_a_given_output() -> None:
    x = _complex((7, 6, 5), np.complex128, 9)
    w = _complex((3, 2), np.complex64, 10)
    out = np.zeros(x.shape, np.complex64)
    ref = ndi.correlate(x, w, axes=(2, 0), origin=(-1, 0), output=np.zeros_like(out))
    got = kernels.correlate(x, w, axes=(2, 0), origin=(-1, 0), output=out)
    assert got is out
    same_complex(ref, out)
    same_complex(
        ndi.uniform_filter(x, (3, 2), axes=(0, 2), mode=["wrap", "nearest"]),
        kernels.uniform_filter(x, (3, 2), axes=(0, 2), mode=["wrap", "nearest"]),
    )


def test_output_dtypes_are_scipy_s() -> None:
    w = np.array([1j, 2.0])
    for dt in (np.int8, np.int32, np.uint64, np.float32, np.float64, np.bool_):
        x = np.arange(5).astype(dt)
        assert kernels.correlate(x, w).dtype == ndi.correlate(x, w).dtype
    x = _complex((5,), np.complex64, 1)
    assert kernels.uniform_filter(x, 2).dtype == np.complex64
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = kernels.correlate(x, w, output=np.float32)
    assert got.dtype == np.complex64
    assert [str(s.message) for s in seen] == ["promoting specified output dtype to complex"]
    assert seen[0].filename == __file__  # the warning points at the caller, as scipy's


def test_output_overlapping_the_input_gives_the_copied_input_s_result() -> None:
    x = _complex((8, 9), np.complex128, 2)
    w = np.array([[1 + 1j, 2], [0.5j, 1]])
    ref = ndi.correlate(x.copy(), w)
    same_complex(ref, kernels.correlate(x, w, output=x))
    y = _complex((8, 9), np.complex64, 4)
    ref = ndi.uniform_filter(y.copy(), 3)
    same_complex(ref, kernels.uniform_filter(y, 3, output=y))


def test_weights_of_every_dtype_scipy_reads() -> None:
    """scipy reads weights as doubles (complex ones part by part): long double, float16,
    numbers in an object array and complex256 weights give its result too."""
    x = _complex((7, 6), np.complex128, 12)
    for w in (
        np.ones((2, 3), np.longdouble) / 3,
        np.ones((2, 3), np.float16) / 3,
        np.array([[1, 2.5, 3], [0.25, 1, 2]], dtype=object),
        (np.ones((2, 3)) * (1 - 2j) / 3).astype(np.clongdouble),
    ):
        for inp in (x, x.real.copy()):
            same_complex(ndi.correlate(inp, w), kernels.correlate(inp, w))
            same_complex(ndi.convolve(inp, w), kernels.convolve(inp, w))


def test_cval_as_numpy_scalars_and_0d_arrays() -> None:
    x = _complex((6, 5), np.complex128, 3)
    w = np.ones((2, 3)) / 6
    for cval in (np.complex64(1 + 2j), np.array(1 + 2j), np.array(2.5), np.float32(-1)):
        ref = ndi.correlate(x, w, mode="constant", cval=cval)
        same_complex(ref, kernels.correlate(x, w, mode="constant", cval=cval))
        ref = ndi.uniform_filter(x, 3, mode="constant", cval=cval)
        same_complex(ref, kernels.uniform_filter(x, 3, mode="constant", cval=cval))
    with pytest.raises(ValueError, match="cval: a complex value needs complex input"):
        kernels.correlate(x.real.copy(), w * 1j, cval=np.array(1 + 2j))


def test_bad_arguments_name_what_was_expected() -> None:
    x = _complex((5,), np.complex128, 0)
    with pytest.raises(TypeError, match="output must have a complex64 or complex128"):
        kernels.correlate(x, [1.0], output=np.zeros(5))
    with pytest.raises(TypeError, match="output must name a complex dtype"):
        kernels.uniform_filter(x, 2, output="float64")
    with pytest.raises(ValueError, match="output has shape"):
        kernels.convolve(x, [1.0], output=np.zeros(4, complex))
    with pytest.raises(ValueError, match="cval: a complex value needs complex input"):
        kernels.correlate(np.ones(5), [1j], cval=1j)
    with pytest.raises(TypeError, match="input must have a complex64 or complex128"):
        kernels.uniform_filter(np.ones(5, np.clongdouble), 2)
    with pytest.raises(ValueError, match="mode"):
        kernels.correlate(x, [1.0], mode="bogus")
    read_only = np.zeros(5, complex)
    read_only.flags.writeable = False
    before = x.copy()
    with pytest.raises(ValueError, match="read-only"):
        kernels.correlate(x, [1j], output=read_only)
    assert np.array_equal(x, before)


def test_exact_false_is_close() -> None:
    x = _complex((30, 20), np.complex128, 8)
    w = _complex((5, 5), np.complex128, 9)
    np.testing.assert_allclose(
        kernels.convolve(x, w, exact=False), ndi.convolve(x, w), rtol=1e-12, atol=1e-12
    )


@pytest.mark.skipif(not CUDA, reason="the GPU front end's emulation needs a CUDA build")
@pytest.mark.parametrize("emulate", [True, "direct"])
def test_gpu_front_end_equals_scipy_bit_for_bit(emulate: Any) -> None:
    from fastprof.kernels import gpu

    x = _complex((9, 7), np.complex64, 11)
    w = _complex((3, 2), np.complex128, 12)
    for mode in ("reflect", "constant", "wrap"):
        for fn in ("correlate", "convolve"):
            ref = getattr(ndi, fn)(x, w, mode=mode, cval=2 - 1j)
            same_complex(ref, getattr(gpu, fn)(x, w, mode=mode, cval=2 - 1j, _emulate=emulate))
        ref = ndi.uniform_filter(x, 3, mode=mode, cval=1j)
        same_complex(ref, gpu.uniform_filter(x, 3, mode=mode, cval=1j, _emulate=emulate))
