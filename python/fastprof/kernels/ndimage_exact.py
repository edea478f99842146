"""scipy.ndimage's arithmetic, operation for operation, for results that must equal its own.

A float result computed in another order differs from scipy's by rounding; an integer result
truncates that float, so one rounding step decides the integer.  These functions reproduce
scipy's order of operations and its casts (its ``ni_filters.c``/``ni_support.c``):

- ``uniform_filter1d``: the line extended by the boundary mode and converted to double, a
  running sum (the sum of the first ``size`` values, then ``sum += new - old`` per output),
  each output ``sum / size``, stored with a C cast into the output dtype;
- ``correlate``: per output, ``0.0`` plus each tap's ``value * weight`` in C order of the taps
  whose ``|weight| > DBL_EPSILON``, stored with scipy's cast (``tmp > -1 ? (T)tmp : -(T)(-tmp)``,
  so a negative result wraps in an unsigned dtype instead of being undefined).

The running sums run in C over line buffers as scipy's do (kernels/box_exact.c, about scipy's
speed); the tap sums in NumPy, whose elementwise ufuncs keep that order (no reassociation, no
fused multiply-add), a pass over a float64 copy per tap.  The results are scipy's bit for bit;
kernels.py takes these paths where the output dtype is an integer.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Tuple, TypeVar, cast

import numpy as np

from .. import _fastprof

#: mode codes of kernels.MODE_CODES -> np.pad's name for the same extension
_PAD_MODES = {0: "symmetric", 2: "edge", 3: "reflect", 4: "wrap"}
_EPS = float(np.finfo(np.float64).eps)


def bool_bytes(x: np.ndarray) -> np.ndarray:
    """x, a bool array read as scipy reads one (its bytes as unsigned chars: a bool that scipy
    stored may hold 2..255), else x."""
    return x.view(np.uint8) if x.dtype == np.bool_ else x


def _extend(x: np.ndarray, pads: Any, mode: int, cval: float) -> np.ndarray:
    """x as float64 extended by pads ((before, after) per axis) as the boundary mode extends
    it; returns a new array."""
    x64 = np.asarray(bool_bytes(x), dtype=np.float64)
    if mode == 1:
        return np.pad(x64, pads, mode="constant", constant_values=cval)
    return np.pad(x64, pads, mode=_PAD_MODES[mode])  # type: ignore[call-overload]


def c_cast(values: np.ndarray, dtype: np.dtype, wrap_negative: bool) -> np.ndarray:
    """float64 values stored into dtype as scipy's C code stores them: truncation toward zero
    (NumPy's cast is the same C cast); with wrap_negative, values <= -1 go to an unsigned
    dtype as ``-(T)(-v)`` (modulo 2**bits); bool is scipy's unsigned char.  Out-of-range
    values are undefined in C; these give what scipy's x86-64 build stores (uint32: the low 32
    bits of the int64 conversion; the other dtypes: NumPy's cast, the same instructions), and
    as C does, silently (no overflow or invalid-value warning).  Returns a new array."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":  # npy_bool is an unsigned char: the byte scipy stores, as it is
        return c_cast(values, np.dtype(np.uint8), wrap_negative).view(np.bool_)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype.kind != "u":
            return values.astype(dtype)
        if not wrap_negative:
            return _c_cast_unsigned(values, dtype)
        neg = values <= -1.0
        out = _c_cast_unsigned(np.where(neg, -values, values), dtype)
        np.negative(out, out=out, where=neg)
    return out


def _c_cast_unsigned(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 values stored into the unsigned dtype by a plain C cast on x86-64: a new array.
    (npy_uint)v is a 64-bit conversion, then its low 32 bits (NumPy's own cast differs beyond
    the range: 1e38 -> 2**31 where C stores 0); the other widths are NumPy's cast."""
    if dtype.itemsize == 4:
        return values.astype(np.int64).astype(dtype)
    return values.astype(dtype)


def uniform_filter1d(
    x: np.ndarray, size: int, axis: int, origin: int, mode: int, cval: float, dtype: np.dtype
) -> np.ndarray:
    """scipy.ndimage.uniform_filter1d(x, size, axis, output=dtype, mode, cval, origin): a new
    array of dtype, x's shape.  The running sums run in C (kernels/box_exact.c), line by line
    as scipy's do."""
    if x.shape[axis] == 0 or size == 1:
        return x.astype(dtype)
    # the lines contiguous (one copy, as float64): a line walked across rows would touch one
    # element per cache line, and with a power-of-two row the same cache sets every time
    x64 = np.moveaxis(bool_bytes(x), axis, -1).astype(np.float64, order="C")
    means = np.empty(x64.shape, dtype=np.float64)
    _fastprof._uniform_filter1d(x64, means, size, x.ndim - 1, mode, cval, origin)
    return np.ascontiguousarray(np.moveaxis(c_cast(means, dtype, False), -1, axis))


def uniform_filter(
    x: np.ndarray,
    sizes: Tuple[int, ...],
    origins: Tuple[int, ...],
    modes: Tuple[int, ...],
    cval: float,
    dtype: np.dtype,
) -> np.ndarray:
    """scipy.ndimage.uniform_filter with one size, origin and mode per axis of x: the 1-D
    filters in axis order, each stored into dtype before the next reads it."""
    cur = x
    done = False
    for axis, (s, o, m) in enumerate(zip(sizes, origins, modes)):
        if s > 1:
            cur = uniform_filter1d(cur, s, axis, o, m, cval, dtype)
            done = True
    return cur if done else x.astype(dtype)


_BLOCK = 1 << 16  # output elements per block of correlate: its float64 temporaries stay small


def _axis_map(n: int, before: int, after: int, mode: int) -> np.ndarray:
    """The input index each extended index -before .. n+after-1 of an axis of length n reads
    in mode (-1: cval), as scipy's extension."""
    return index_map(np.arange(-before, n + after), n, mode)


def index_map(j: np.ndarray, n: int, mode: int) -> np.ndarray:
    """The input index each extended index in j (integers, any range) of an axis of length n
    reads in mode (-1: cval), as scipy's extension."""
    if mode == 1:
        return np.where((j >= 0) & (j < n), j, -1)
    if mode == 2:
        return np.clip(j, 0, n - 1)
    if mode == 4:
        return j % n
    if mode == 3:
        if n == 1:
            return np.zeros_like(j)
        p = j % (2 * n - 2)
        return np.where(p < n, p, 2 * n - 2 - p)
    p = j % (2 * n)
    return np.where(p < n, p, 2 * n - 1 - p)


_F = TypeVar("_F", bound=Callable[..., Any])


def c_arithmetic(fn: _F) -> _F:
    """fn, run as scipy's C arithmetic and casts run: silently (an overflow, inf * 0 or a NaN
    stored into an integer warns in NumPy, not in C)."""

    @functools.wraps(fn)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(*args, **kwargs)

    return cast(_F, quiet)


@c_arithmetic
def correlate(
    x: np.ndarray,
    weights: np.ndarray,
    mode: int,
    cval: float,
    origins: Tuple[int, ...],
    dtype: np.dtype,
) -> np.ndarray:
    """scipy.ndimage.correlate of x with weights (float64, x's rank >= 1, correlation form) in
    scipy's tap order, stored into dtype with its cast: a new array.  Runs in blocks of rows
    of the first axis, each extended on its own, so the temporaries stay small; silently, as
    scipy's C arithmetic (inf * 0, an overflowing sum: no warning)."""
    x = bool_bytes(x)
    out = np.empty(x.shape, dtype=dtype)
    pads = []
    for n, o in zip(weights.shape, origins):
        before = n // 2 + o
        pads.append((before, n - 1 - before))
    taps = [
        (idx, float(weights[idx]))
        for idx in np.ndindex(*weights.shape)
        if abs(float(weights[idx])) > _EPS
    ]
    n0, k0 = x.shape[0], weights.shape[0]
    rows = max(1, _BLOCK // max(1, x.size // max(1, n0)))
    map0 = _axis_map(n0, pads[0][0], pads[0][1], mode)
    for lo in range(0, n0, rows):
        hi = min(n0, lo + rows)
        idx0 = map0[lo : hi + k0 - 1]
        block = np.take(x, np.maximum(idx0, 0), axis=0).astype(np.float64)
        if mode == 1:
            block[idx0 < 0] = cval
        ext = _extend(block, [(0, 0)] + pads[1:], mode, cval)
        shape = (hi - lo,) + x.shape[1:]
        acc = np.zeros(shape, dtype=np.float64)
        prod = np.empty_like(acc)
        for idx, w in taps:
            window = tuple(slice(i, i + n) for i, n in zip(idx, shape))
            np.multiply(ext[window], w, out=prod)
            acc += prod
        out[lo:hi] = c_cast(acc, dtype, True)
    return out
