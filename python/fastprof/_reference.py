"""Plain NumPy references of every kernel in fastprof.kernels, used by the tests.

Slow and simple on purpose: each output is the sum of shifted views of an explicitly
extended copy of the input, so the boundary rules are written out once, readably.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
_ALIASES = {"grid-mirror": "reflect", "grid-constant": "constant", "grid-wrap": "wrap"}


def extend_index(j: int, n: int, mode: str) -> int:
    """The input index that extended index ``j`` reads on an axis of length ``n``, or -1 for cval."""
    mode = _ALIASES.get(mode, mode)
    if 0 <= j < n:
        return j
    if mode == "constant":
        return -1
    if mode == "nearest":
        return 0 if j < 0 else n - 1
    if mode == "wrap":
        return j % n
    if mode == "mirror":
        if n == 1:
            return 0
        p = j % (2 * n - 2)
        return p if p < n else 2 * n - 2 - p
    if mode == "reflect":
        p = j % (2 * n)
        return p if p < n else 2 * n - 1 - p
    raise ValueError(f"unknown mode {mode!r}")


def _per_axis(value: Any, ndim: int) -> list:
    if isinstance(value, (str, int, np.integer)):
        return [value] * ndim
    value = list(value)
    if len(value) != ndim:
        raise ValueError("expected one value per axis")
    return value


def correlate(
    input: np.ndarray,
    weights: np.ndarray,
    mode: Any = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
) -> np.ndarray:
    """scipy.ndimage.correlate in float64 (no output casting): sum of w[k] * in[i + k - c]."""
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != x.ndim:
        raise ValueError("weights rank differs from input rank")
    modes = _per_axis(mode, x.ndim)
    origins = _per_axis(origin, x.ndim)
    if x.size == 0:
        return np.zeros(x.shape)
    idx, masks = [], []
    for d in range(x.ndim):
        n, k = x.shape[d], w.shape[d]
        shift = k // 2 + origins[d]
        m = np.array([extend_index(e - shift, n, modes[d]) for e in range(n + k - 1)])
        idx.append(np.where(m < 0, 0, m))
        masks.append(m < 0)
    ext = x[np.ix_(*idx)].copy()
    outside = np.zeros(ext.shape, dtype=bool)
    for d in range(x.ndim):
        shape = [1] * x.ndim
        shape[d] = -1
        outside |= masks[d].reshape(shape)
    ext[outside] = cval
    out = np.zeros(x.shape)
    for k in itertools.product(*(range(s) for s in w.shape)):
        if abs(w[k]) <= np.finfo(np.float64).eps:  # scipy drops these taps
            continue
        view = ext[tuple(slice(k[d], k[d] + x.shape[d]) for d in range(x.ndim))]
        out += w[k] * view
    return out


def convolve(
    input: np.ndarray,
    weights: np.ndarray,
    mode: Any = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
) -> np.ndarray:
    """scipy.ndimage.convolve in float64: correlate with flipped weights and mirrored origin."""
    w = np.asarray(weights, dtype=np.float64)
    x = np.asarray(input)
    origins = _per_axis(origin, x.ndim)
    flipped = w[tuple(slice(None, None, -1) for _ in range(w.ndim))]
    new = [-o - (1 if w.shape[d] % 2 == 0 else 0) for d, o in enumerate(origins)]
    return correlate(x, flipped, mode, cval, new)


def uniform_filter(
    input: np.ndarray, size: Any = 3, mode: Any = "reflect", cval: float = 0.0, origin: Any = 0
) -> np.ndarray:
    """scipy.ndimage.uniform_filter in float64: the mean over a box of ``size``."""
    x = np.asarray(input)
    sizes = _per_axis(size, x.ndim)
    w = np.ones(sizes) / float(np.prod(sizes))
    return correlate(x, w, mode, cval, origin)


def evaluate(expr: str, names: dict) -> Any:
    """The NumPy value of an expression of the fastprof.kernels.evaluate language."""
    from .kernels import expr as _expr

    return _expr.evaluate_numpy(_expr.parse(expr), names)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The matrix product, by NumPy."""
    return np.asarray(a) @ np.asarray(b)
