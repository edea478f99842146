"""Complex input, weights and output for the filters, as scipy.ndimage computes them: a
linear combination of real filters over the real and imaginary parts, each run by the real
kernels (on either device), in scipy's order of operations, so that the bits are scipy's.

``correlate`` with complex weights conjugates them first (as ``numpy.correlate`` does), then
for complex input and weights::

    out.real = f(in.real, w.real) - f(in.imag, w.imag)
    out.imag = f(in.real, w.imag) + f(in.imag, w.real)

(each term a real filter in the precision of the part, the sums in that precision), and with
one side real the two products alone.  ``uniform_filter`` filters each part on its own.  The
arrays are NumPy arrays (``device=`` still runs the real filters on the GPU); the output is
allocated as scipy allocates it (the input's complex dtype, or the complex type real input
promotes to), and an output that overlaps the input is computed as if the input had been
copied first, as the real filters do.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Tuple

import numpy as np

from .args import is_device_array

__all__ = ["is_complex", "correlate", "uniform_filter"]


def is_complex(x: Any) -> bool:
    """Whether ``x`` (an array, a device array, a sequence, None) holds complex numbers."""
    if x is None:
        return False
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        if isinstance(x, (str, bytes)):
            return False
        try:
            dtype = np.asarray(x).dtype
        except Exception:  # the real checks word the error
            return False
    try:
        return np.dtype(dtype).kind == "c"
    except TypeError:
        return False


def _host(x: Any, name: str, wide: bool = False) -> np.ndarray:
    """``x`` as a NumPy array of a complex or real dtype the parts can be filtered in;
    TypeError for a device array or (unless wide: weights, which scipy reads as double) a
    complex dtype wider than complex128."""
    if is_device_array(x):
        raise TypeError(
            f"{name}: complex device arrays are not supported; pass NumPy arrays (with "
            f"device='cuda' the real and imaginary parts are filtered on the GPU)"
        )
    a = np.asarray(x)
    if a.dtype.kind == "c" and a.dtype.itemsize > 16 and not wide:
        raise TypeError(f"{name} must have a complex64 or complex128 dtype, got {a.dtype}")
    return a


def _output(output: Any, input: np.ndarray) -> np.ndarray:
    """The complex array the result goes to, as scipy.ndimage's _get_output makes it for a
    complex result: None gives the complex type the input's dtype promotes to; a dtype that
    is not complex is promoted with scipy's warning; an array must be complex and of the
    input's shape."""
    if output is None:
        return np.zeros(input.shape, dtype=np.promote_types(input.dtype, np.complex64))
    if is_device_array(output):
        _host(output, "output")
    if isinstance(output, np.ndarray):
        if output.shape != input.shape:
            raise ValueError(
                f"output has shape {output.shape}, expected the input's shape {input.shape}"
            )
        if output.dtype.kind != "c" or output.dtype.itemsize > 16:
            raise TypeError(
                f"output must have a complex64 or complex128 dtype for complex input or "
                f"weights, got {output.dtype}"
            )
        if not output.flags.writeable:
            raise ValueError("output is read-only")
        return output
    try:
        dt = np.dtype(output)
    except TypeError:
        raise TypeError(f"output must be None, a dtype or an array, got {output!r}") from None
    if isinstance(output, str) and dt.kind != "c":
        raise TypeError(f"output must name a complex dtype for complex input or weights, got {dt}")
    if dt.kind != "c":
        warnings.warn("promoting specified output dtype to complex", stacklevel=4)
        dt = np.promote_types(dt, np.complex64)
    if dt.itemsize > 16:
        raise TypeError(f"output must have a complex64 or complex128 dtype, got {dt}")
    return np.zeros(input.shape, dtype=dt)


def _unshared(input: np.ndarray, output: np.ndarray) -> np.ndarray:
    """``input``, or a copy of it when ``output`` overlaps it (the first part written would
    change what the later parts read)."""
    return input.copy() if np.shares_memory(input, output) else input


def _cval_parts(cval: Any, real_input: bool) -> Tuple[Any, Any]:
    """(real part, imaginary part) of cval; ValueError for a complex cval with real input,
    as scipy.  Anything else goes on to the real filters' check."""
    if isinstance(cval, (str, bytes, bytearray)) or not np.iscomplexobj(cval):
        return cval, 0.0
    if real_input:
        raise ValueError("cval: a complex value needs complex input (the input is real)")
    return np.real(cval), np.imag(cval)  # a complex scalar, or one held in a 0-d array


def correlate(
    real: Callable[..., Any],
    input: Any,
    weights: Any,
    output: Any,
    cval: Any,
    convolution: bool,
    **kwargs: Any,
) -> np.ndarray:
    """The correlation (or with convolution, the convolution) of complex input or weights:
    ``real(input, weights, output=, cval=, **kwargs)`` filters one real part.  Returns the
    complex output."""
    inp = _host(input, "input")
    w = _host(weights, "weights", wide=True)
    complex_input = inp.dtype.kind == "c"
    complex_weights = w.dtype.kind == "c"
    if complex_weights and not convolution:
        w = w.conj()  # as numpy.correlate: the weights are conjugated, not the input
    c_re, c_im = _cval_parts(cval, not complex_input)
    out = _output(output, inp)
    inp = _unshared(inp, out)
    if complex_input and complex_weights:
        real(inp.real, w.real, output=out.real, cval=c_re, **kwargs)
        out.real -= real(inp.imag, w.imag, output=None, cval=c_im, **kwargs)
        real(inp.real, w.imag, output=out.imag, cval=c_re, **kwargs)
        out.imag += real(inp.imag, w.real, output=None, cval=c_im, **kwargs)
    elif complex_input:
        real(inp.real, w, output=out.real, cval=c_re, **kwargs)
        real(inp.imag, w, output=out.imag, cval=c_im, **kwargs)
    else:
        real(inp, w.real, output=out.real, cval=c_re, **kwargs)
        real(inp, w.imag, output=out.imag, cval=c_re, **kwargs)
    return out


def uniform_filter(
    real: Callable[..., Any], input: Any, output: Any, cval: Any, **kwargs: Any
) -> np.ndarray:
    """The box mean of complex input: ``real(part, output=, cval=, **kwargs)`` filters the
    real and the imaginary part each on its own, as scipy's uniform_filter1d does axis by
    axis.  Returns the complex output."""
    inp = _host(input, "input")
    c_re, c_im = _cval_parts(cval, False)
    out = _output(output, inp)
    inp = _unshared(inp, out)
    real(inp.real, output=out.real, cval=c_re, **kwargs)
    real(inp.imag, output=out.imag, cval=c_im, **kwargs)
    return out
