"""Fast CPU kernels for the hot spots profiles point to.

- :func:`convolve`, :func:`correlate`, :func:`uniform_filter`: scipy.ndimage's semantics
  (every boundary mode, origins, any rank and strides) in compiled code, with separable and
  box kernels done as streamed 1-D passes and the work split across a thread pool;
- :func:`evaluate`: a fused elementwise expression over arrays, in cache-sized blocks on the
  same number of threads;
- :func:`matmul`; :func:`set_num_threads` / :func:`get_num_threads`.

Each takes ``device=None``: ``"cuda"`` (or ``"gpu"``, ``"cuda:N"``) or a device array as
input runs the CUDA version from ``fastprof._gpu_kernels`` with the same arguments.  The
``_check_*`` functions check the arguments before either device runs, so a bad argument gets
the same error on both; the CPU path runs on what they normalise, the GPU path is handed the
arguments as given.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _expr, _fastprof, _ndimage_exact

__all__ = [
    "convolve",
    "correlate",
    "uniform_filter",
    "evaluate",
    "matmul",
    "set_num_threads",
    "get_num_threads",
]

#: Boundary mode names -> the codes the compiled kernels take.
MODE_CODES: Dict[str, int] = {
    "reflect": 0,
    "grid-mirror": 0,
    "constant": 1,
    "grid-constant": 1,
    "nearest": 2,
    "mirror": 3,
    "wrap": 4,
    "grid-wrap": 4,
}

_FLOAT_TYPES = (np.float32, np.float64)
_EPS = float(np.finfo(np.float64).eps)


# --- threads ---------------------------------------------------------------------------------


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (>= 1) in the kernels; the default is the usable cores."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if not 1 <= int(n) <= 256:
        raise ValueError(f"n must be between 1 and 256, got {n}")
    _fastprof._set_num_threads(int(n))


def get_num_threads() -> int:
    """The number of threads the kernels use."""
    return int(_fastprof._get_num_threads())


# --- device dispatch -------------------------------------------------------------------------


def _is_device_array(x: Any) -> bool:
    """True for arrays that live on a CUDA device (CUDA array interface or DLPack device 2)."""
    if hasattr(x, "__cuda_array_interface__"):
        return True
    if hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray):
        try:
            return int(x.__dlpack_device__()[0]) == 2
        except Exception:
            return False
    return False


def _wants_gpu(device: Any, *arrays: Any) -> bool:
    """Whether a call goes to the GPU: device names it, or an input lives there."""
    if device is None:
        return any(_is_device_array(a) for a in arrays)
    if isinstance(device, str):
        d = device.strip().lower()
        if d in ("cuda", "gpu") or (d.startswith("cuda:") and d[5:].isdigit()):
            return True
        if d == "cpu":
            if any(_is_device_array(a) for a in arrays):
                raise ValueError("device='cpu' but an input is a CUDA device array")
            return False
    raise ValueError(f"device must be None, 'cpu', 'cuda', 'gpu' or 'cuda:N', got {device!r}")


def _gpu(name: str) -> Callable[..., Any]:
    """The CUDA implementation of kernel ``name``; raises when the GPU part cannot load."""
    try:
        from . import _gpu_kernels
    except Exception as exc:  # ImportError, or the CUDA part failing to initialise
        err: type = RuntimeError
        try:
            from . import cuda as _cuda

            err = getattr(_cuda, "CudaUnavailableError", RuntimeError)
        except Exception:
            pass
        raise err(f"fastprof.kernels.{name}: the CUDA kernels are unavailable ({exc})") from exc
    return getattr(_gpu_kernels, name)


# --- argument checks (shared with the GPU part) ----------------------------------------------


def _dtype_of(x: Any) -> np.dtype:
    return np.dtype(x.dtype)


def _check_array(x: Any, name: str, allow_bool: bool = False) -> Any:
    """x as an ndarray (device arrays are returned as they are) with a numeric real dtype
    (or bool with allow_bool, as scipy.ndimage's filters take it); TypeError otherwise."""
    if not _is_device_array(x):
        x = np.asarray(x)
    dt = _dtype_of(x)
    if dt.kind not in ("biuf" if allow_bool else "iuf") or dt.itemsize > 8 or dt == np.float16:
        kinds = "a bool, integer" if allow_bool else "an integer"
        raise TypeError(f"{name} must have {kinds}, float32 or float64 dtype, got {dt}")
    return x


def _check_modes(mode: Any, ndim: int, allow_sequence: bool = False) -> Tuple[int, ...]:
    """One mode code per axis; ValueError for unknown names."""
    if isinstance(mode, str):
        modes = [mode] * ndim
    elif allow_sequence and isinstance(mode, (list, tuple)):
        modes = list(mode)
        if len(modes) != ndim:
            raise ValueError(f"mode: expected {ndim} modes (one per axis), got {len(modes)}")
    else:
        raise TypeError(f"mode must be a str, got {type(mode).__name__}")
    codes = []
    for m in modes:
        if not isinstance(m, str) or m not in MODE_CODES:
            raise ValueError(f"mode: unknown mode {m!r}; expected one of {', '.join(MODE_CODES)}")
        codes.append(MODE_CODES[m])
    return tuple(codes)


def _check_origins(origin: Any, sizes: Sequence[int], skip_unit: bool = False) -> Tuple[int, ...]:
    """One origin per axis, each with -(size // 2) <= origin <= (size - 1) // 2; with skip_unit
    an axis of size 1 takes any origin (scipy's uniform_filter leaves such axes out) and gets
    0."""
    ndim = len(sizes)
    if isinstance(origin, (int, np.integer)) and not isinstance(origin, bool):
        origins = [int(origin)] * ndim
    elif isinstance(origin, (list, tuple, np.ndarray)):
        origins = list(origin)
        if len(origins) != ndim:
            raise ValueError(f"origin: expected {ndim} values (one per axis), got {len(origins)}")
        for o in origins:
            if isinstance(o, bool) or not isinstance(o, (int, np.integer)):
                raise TypeError(f"origin must hold ints, got {o!r}")
        origins = [int(o) for o in origins]
    else:
        raise TypeError(f"origin must be an int or a sequence of ints, got {origin!r}")
    if skip_unit:
        origins = [0 if s == 1 else o for o, s in zip(origins, sizes)]
    for d, (o, s) in enumerate(zip(origins, sizes)):
        if not 0 <= s // 2 + o < s:
            raise ValueError(
                f"origin: {o} is invalid for a kernel of size {s} on axis {d}"
                f" (expected {-(s // 2)} <= origin <= {(s - 1) // 2})"
            )
    return tuple(origins)


def _check_cval(cval: Any) -> float:
    if isinstance(cval, (complex, np.complexfloating)):
        raise TypeError("cval must be a real number")
    try:
        return float(cval)
    except (TypeError, ValueError):
        raise TypeError(f"cval must be a real number, got {cval!r}") from None


def _check_axes(axes: Any, ndim: int) -> Tuple[int, ...]:
    """The filtered axes as scipy.ndimage (1.11+) takes them: None (all), an int, or a
    sequence of distinct ints in -ndim .. ndim-1; returned non-negative, in the given order."""
    if axes is None:
        return tuple(range(ndim))
    raw = [axes] if isinstance(axes, (int, np.integer)) else axes
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
        raise TypeError(f"axes must be None, an int or a sequence of ints, got {axes!r}")
    out = []
    for a in raw:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"axes must hold ints, got {a!r}")
        if not -ndim <= int(a) < ndim:
            raise ValueError(f"axes: axis {int(a)} is out of range for a {ndim}-d input")
        out.append(int(a) % ndim if ndim else int(a))
    if len(set(out)) != len(out):
        raise ValueError(f"axes must be distinct, got {axes!r}")
    return tuple(out)


def _per_axis(value: Any, n: int, name: str) -> List[Any]:
    """value repeated n times when it is a scalar (or str), else its n items; ValueError for
    another length."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, np.ndarray)):
        return [value] * n
    items = list(value)
    if len(items) != n:
        raise ValueError(f"{name}: expected {n} values (one per filtered axis), got {len(items)}")
    return items


def _check_output(output: Any, input: Any) -> Tuple[Any, np.dtype]:
    """(output array or None, output dtype) for an ``output=`` argument: None, a dtype, or an
    array of input's shape."""
    if output is None:
        return None, _dtype_of(input).newbyteorder("=")  # scipy allocates native order
    if isinstance(output, np.ndarray) or _is_device_array(output):
        if tuple(output.shape) != tuple(input.shape):
            raise ValueError(
                f"output has shape {tuple(output.shape)}, expected the input's"
                f" shape {tuple(input.shape)}"
            )
        dt = _dtype_of(output)
        if isinstance(output, np.ndarray) and not output.flags.writeable:
            raise ValueError("output is read-only")
    else:
        try:
            dt = np.dtype(output)
        except TypeError:
            raise TypeError(f"output must be None, a dtype or an array, got {output!r}") from None
        output = None
    if dt.kind not in "biuf" or dt.itemsize > 8 or dt == np.float16:
        raise TypeError(f"output must have a bool, integer, float32 or float64 dtype, got {dt}")
    return output, dt


class ConvArgs(NamedTuple):
    """Normalised arguments of a correlation: weights are float64 in correlation form (already
    flipped for convolve, taps with |w| <= eps zeroed as scipy drops them)."""

    input: Any
    weights: np.ndarray
    output: Any
    out_dtype: np.dtype
    modes: Tuple[int, ...]
    cval: float
    origins: Tuple[int, ...]


def _check_convolve_args(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: Any = "reflect",
    cval: Any = 0.0,
    origin: Any = 0,
    convolution: bool = False,
    axes: Any = None,
) -> ConvArgs:
    """Validates the arguments of convolve/correlate; returns them normalised to every axis of
    input (weights of size 1 and origin 0 on the axes that axes leaves out)."""
    input = _check_array(input, "input", allow_bool=True)
    w = weights
    if _is_device_array(w):
        raise TypeError("weights must be a host array (numpy or a sequence)")
    w = np.asarray(w)
    if w.dtype.kind not in "biuf" or w.dtype.itemsize > 8:
        raise TypeError(f"weights must be real numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    ax = _check_axes(axes, input.ndim)
    if w.ndim != len(ax):
        raise ValueError(
            f"weights has rank {w.ndim} but {len(ax)} axes are filtered"
            f" (input rank {input.ndim}, axes={axes!r})"
        )
    if w.size == 0:
        raise ValueError(f"weights must not be empty, got shape {w.shape}")
    output, out_dtype = _check_output(output, input)
    modes = _check_modes(mode, input.ndim)
    cval = _check_cval(cval)
    if len(ax) < input.ndim:
        # as scipy: the weights' axes go to the filtered axes in increasing order, the origins
        # to the axes in the order given; the other axes get size 1 and origin 0
        w = np.expand_dims(w, tuple(d for d in range(input.ndim) if d not in ax))
        given = _check_origins(origin, [w.shape[a] for a in ax])
        origins = [0] * input.ndim
        for o, a in zip(given, ax):
            origins[a] = o
    else:
        origins = list(_check_origins(origin, w.shape))
    if convolution:
        w = w[tuple(slice(None, None, -1) for _ in range(w.ndim))]
        origins = [-o - (1 if w.shape[d] % 2 == 0 else 0) for d, o in enumerate(origins)]
    w = np.where(np.abs(w) > _EPS, w, 0.0)
    return ConvArgs(input, np.ascontiguousarray(w), output, out_dtype, modes, cval, tuple(origins))


class UniformArgs(NamedTuple):
    """Normalised arguments of uniform_filter."""

    input: Any
    sizes: Tuple[int, ...]
    output: Any
    out_dtype: np.dtype
    modes: Tuple[int, ...]
    cval: float
    origins: Tuple[int, ...]
    axes: Tuple[int, ...]  # the filtered axes in the order scipy filters them


def _check_uniform_args(
    input: Any,
    size: Any = 3,
    output: Any = None,
    mode: Any = "reflect",
    cval: Any = 0.0,
    origin: Any = 0,
    axes: Any = None,
) -> UniformArgs:
    """Validates the arguments of uniform_filter; returns them normalised to one size, mode and
    origin per axis of input (size 1 on the axes that axes leaves out).  A sequence of sizes,
    modes or origins pairs with axes, as scipy's does."""
    input = _check_array(input, "input", allow_bool=True)
    ax = _check_axes(axes, input.ndim)
    ndim = len(ax)
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        sizes = [int(size)] * ndim
    elif isinstance(size, (list, tuple, np.ndarray)):
        sizes = list(size)
        if len(sizes) != ndim:
            raise ValueError(f"size: expected {ndim} values (one per axis), got {len(sizes)}")
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise TypeError(f"size must hold ints, got {s!r}")
        sizes = [int(s) for s in sizes]
    else:
        raise TypeError(f"size must be an int or a sequence of ints, got {size!r}")
    for s in sizes:
        if s < 1:
            raise ValueError(f"size must be >= 1, got {s}")
    output, out_dtype = _check_output(output, input)
    modes = _check_modes(mode, ndim, allow_sequence=True)
    origins = _check_origins(origin, sizes, skip_unit=True)
    full_sizes, full_modes, full_origins = [1] * input.ndim, [0] * input.ndim, [0] * input.ndim
    for a, s, m, o in zip(ax, sizes, modes, origins):
        full_sizes[a], full_modes[a], full_origins[a] = s, m, o
    return UniformArgs(
        input,
        tuple(full_sizes),
        output,
        out_dtype,
        tuple(full_modes),
        _check_cval(cval),
        tuple(full_origins),
        ax,
    )


# --- convolution on the CPU ------------------------------------------------------------------


def _rank1_factors(w: np.ndarray) -> Optional[List[np.ndarray]]:
    """1-D factors whose outer product is w (same zero pattern, equal to rounding), or None."""
    if w.ndim == 1:
        return [np.ascontiguousarray(w)]
    peak_at = np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
    peak = float(w[peak_at])
    if peak == 0.0:
        return [np.zeros(s) for s in w.shape]
    factors = []
    for d in range(w.ndim):
        index: List[Any] = list(peak_at)
        index[d] = slice(None)
        factors.append(np.array(w[tuple(index)], dtype=np.float64))
    factors[0] = factors[0] / peak ** (w.ndim - 1)
    outer = factors[0]
    for f in factors[1:]:
        outer = np.multiply.outer(outer, f)
    if not np.array_equal(outer != 0, w != 0):
        return None
    if np.max(np.abs(outer - w)) > 1e-14 * abs(peak):
        return None
    return [np.ascontiguousarray(f) for f in factors]


def _run_correlate(
    x: np.ndarray,
    target: np.ndarray,
    factors: Optional[List[np.ndarray]],
    w: Optional[np.ndarray],
    modes: Tuple[int, ...],
    cval: float,
    origins: Tuple[int, ...],
) -> None:
    """Runs the compiled kernel from float x into float target (same shape, no overlap)."""
    if factors is not None:
        _fastprof._correlate_separable(x, target, factors, modes, cval, origins)
    else:
        _fastprof._correlate_general(x, target, w, modes, cval, origins)


def _native_float(a: np.ndarray) -> bool:
    """True for an aligned, native-byte-order float32/float64 array (what the C code reads)."""
    return a.dtype.type in _FLOAT_TYPES and a.dtype.isnative and a.flags.aligned


def _float_input(x: np.ndarray) -> np.ndarray:
    if _native_float(x):
        return x
    return x.astype(x.dtype.newbyteorder("=") if x.dtype.type in _FLOAT_TYPES else np.float64)


def _finish(target: np.ndarray, output: Optional[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """Casts the float result into output (or a new array of out_dtype) as scipy's C cast does."""
    if output is None:
        return target if target.dtype == out_dtype else target.astype(out_dtype)
    if target is not output:
        np.copyto(output, target, casting="unsafe")
    return output


def _correlate_cpu(a: ConvArgs) -> np.ndarray:
    x = a.input
    output = a.output
    if x.ndim == 0:  # 0-d input, 0-d weights (ascontiguousarray made them (1,)): 0-d output
        res = np.asarray(x, dtype=np.float64) * a.weights.reshape(())
        return _finish(np.asarray(res, dtype=np.float64), output, a.out_dtype)
    if output is not None and np.may_share_memory(x, output):
        x = x.copy()
    if a.out_dtype.kind in "biu" and x.size:
        # a truncated result depends on every rounding step: scipy's own order and cast
        res = _ndimage_exact.correlate(x, a.weights, a.modes[0], a.cval, a.origins, a.out_dtype)
        return _finish(res, output, a.out_dtype)
    x = _float_input(x)
    if output is not None and _native_float(output):
        target = output
    else:
        target = np.empty(
            x.shape,
            dtype=a.out_dtype.newbyteorder("=") if a.out_dtype.type in _FLOAT_TYPES else np.float64,
        )
    if x.size:
        factors = _rank1_factors(a.weights)
        _run_correlate(x, target, factors, a.weights, a.modes, a.cval, a.origins)
    return _finish(target, output, a.out_dtype)


def correlate(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = None,
) -> Any:
    """Multidimensional correlation, as ``scipy.ndimage.correlate`` (``axes=`` as scipy
    1.11+: weights and origins over those axes only)."""
    args = _check_convolve_args(input, weights, output, mode, cval, origin, axes=axes)
    if _wants_gpu(device, input, output):
        return _gpu("correlate")(
            input, weights, output, mode, cval, origin, axes=axes, device=device
        )
    return _correlate_cpu(args)


def convolve(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = None,
) -> Any:
    """Multidimensional convolution, as ``scipy.ndimage.convolve`` (``axes=`` as scipy
    1.11+)."""
    args = _check_convolve_args(
        input, weights, output, mode, cval, origin, convolution=True, axes=axes
    )
    if _wants_gpu(device, input, output):
        return _gpu("convolve")(
            input, weights, output, mode, cval, origin, axes=axes, device=device
        )
    return _correlate_cpu(args)


def uniform_filter(
    input: Any,
    size: Any = 3,
    output: Any = None,
    mode: Any = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = None,
) -> Any:
    """Mean over a box of ``size`` (int or one per filtered axis), as
    ``scipy.ndimage.uniform_filter`` (``axes=`` as scipy 1.11+; sequences of sizes, modes and
    origins pair with axes).

    Float results are computed in one fused pass in double precision; integer outputs are
    scipy's exactly (its running sums, stored into the output dtype after each axis)."""
    a = _check_uniform_args(input, size, output, mode, cval, origin, axes)
    if _wants_gpu(device, input, output):
        return _gpu("uniform_filter")(
            input, size, output, mode, cval, origin, axes=axes, device=device
        )
    x = a.input
    output = a.output
    if x.ndim == 0 or x.size == 0 or all(s == 1 for s in a.sizes):
        res = np.array(x, copy=True)
        return _finish(res, output, a.out_dtype)
    if output is not None and np.may_share_memory(x, output):
        x = x.copy()
    boxes = [_long_box(x.shape[d], s, a.origins[d], a.modes[d]) for d, s in enumerate(a.sizes)]
    if a.out_dtype.kind in "biu" and all(b is None for b in boxes):
        cur = x
        for d in a.axes:  # scipy's uniform_filter1d chain, in the order of axes
            if a.sizes[d] > 1:
                cur = _ndimage_exact.uniform_filter1d(
                    cur, a.sizes[d], d, a.origins[d], a.modes[d], a.cval, a.out_dtype
                )
        return _finish(cur, output, a.out_dtype)
    if a.out_dtype.type in _FLOAT_TYPES and all(b is None for b in boxes):
        x = _float_input(x)
        if output is not None and _native_float(output):
            target = output
        else:
            target = np.empty(x.shape, dtype=a.out_dtype.newbyteorder("="))
        factors = [np.full(s, 1.0 / s) for s in a.sizes]
        _fastprof._correlate_separable(x, target, factors, a.modes, a.cval, a.origins)
        return _finish(target, output, a.out_dtype)
    # one axis at a time (scipy's uniform_filter1d chain): integer outputs are cast after each
    # axis as scipy casts them, and a box longer than its axis is folded to the axis' length
    cur = x
    for d in a.axes:
        s = a.sizes[d]
        if s == 1:
            continue
        cur = _box_along(_float_input(cur), d, s, a.origins[d], a.modes, a.cval, boxes[d])
        if a.out_dtype.type not in _FLOAT_TYPES:
            cur = cur.astype(a.out_dtype)
    return _finish(np.asarray(cur), output, a.out_dtype)


class _LongBox(NamedTuple):
    """A box of size ``size`` on an axis of length n, folded: its mean is
    ``(short * mean of the box of size short, origin origin) + extra) / size``, where extra is
    ``periods`` times one period of the extended axis (reflect, mirror, wrap), or
    ``left`` copies of the value beyond the start and ``right`` beyond the end (constant:
    cval; nearest: the first and last element)."""

    size: int
    short: int
    origin: int
    periods: int
    left: int
    right: int


def _long_box(n: int, size: int, origin: int, mode: int) -> Optional[_LongBox]:
    """The folded form of a box far longer than its axis (cost then bounded by the axis, not the
    box), or None when the box is short enough to run as it is."""
    if size <= 1 or n == 0:
        return None
    center = (
        size // 2 + origin
    )  # output i reads extended indices i - center ... i - center + size - 1
    if mode in (1, 2):  # constant, nearest: beyond one axis length out, every value is the same
        left, right = min(center, n), min(size - 1 - center, n)
        if left == center and right == size - 1 - center:
            return None
        short = left + right + 1
        return _LongBox(size, short, left - short // 2, 0, center - left, size - 1 - center - right)
    period = n if mode == 4 else 2 * n if mode == 0 else max(1, 2 * n - 2)  # wrap/reflect/mirror
    if size < 2 * period:
        return None
    short = period + size % period  # a window of this size shifted by whole periods
    c = center % period
    return _LongBox(size, short, c - short // 2, (size - short) // period, 0, 0)


def _box_along(
    x: np.ndarray,
    axis: int,
    size: int,
    origin: int,
    modes: Tuple[int, ...],
    cval: float,
    box: Optional[_LongBox],
) -> np.ndarray:
    """The float64 mean over a box of size along one axis of the float array x."""
    factors = [np.ones(1) for _ in range(x.ndim)]
    origins = [0] * x.ndim
    factors[axis] = np.full(
        size if box is None else box.short, 1.0 / (size if box is None else box.short)
    )
    origins[axis] = origin if box is None else box.origin
    out = np.empty(x.shape)
    _fastprof._correlate_separable(x, out, factors, modes, cval, tuple(origins))
    if box is None:
        return out
    out *= box.short / box.size
    mode = modes[axis]
    n = x.shape[axis]
    if box.periods:
        total = np.sum(x, axis=axis, keepdims=True, dtype=np.float64)
        if mode == 0 or (mode == 3 and n > 1):  # reflect: each element twice per period
            total = 2.0 * total
        if mode == 3 and n > 1:  # mirror: the two ends once per period
            total -= np.take(x, [0], axis=axis) + np.take(x, [n - 1], axis=axis)
        out += total * (box.periods / box.size)
    elif mode == 1:
        out += cval * ((box.left + box.right) / box.size)
    else:
        if box.left:
            out += np.take(x, [0], axis=axis).astype(np.float64) * (box.left / box.size)
        if box.right:
            out += np.take(x, [n - 1], axis=axis).astype(np.float64) * (box.right / box.size)
    return out


def matmul(a: Any, b: Any, *, device: Any = None) -> Any:
    """The matrix product ``a @ b`` (NumPy's on the CPU) after checking the operands."""
    if _wants_gpu(device, a, b):
        _check_matmul_args(a, b)
        return _gpu("matmul")(a, b, device=device)
    a, b = _check_matmul_args(a, b)
    return a @ b


def _check_matmul_args(a: Any, b: Any) -> Tuple[Any, Any]:
    """Both operands as arrays of a numeric real dtype with matching inner dimensions."""
    a = _check_array(a, "a")
    b = _check_array(b, "b")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: operands must have at least one dimension")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not align ({ka} != {kb})"
        )
    return a, b


# --- fused elementwise expressions -----------------------------------------------------------


_BLOCK = 16384  # elements per block: a few registers of it stay in L2
_SMALL = 1 << 16  # below this many elements a plain NumPy evaluation is as fast
_TREES_MAX = 512
_PLANS: "OrderedDict[tuple, Tuple[List[_Step], Tuple[str, Any]]]" = OrderedDict()
_pool_lock = threading.Lock()
_pool: Optional[ThreadPoolExecutor] = None
_pool_size = 0


def _tree_of(expr: str) -> _expr.Node:
    """The parsed tree of expr, compiled once per string (fastprof._expr's cache, which the
    GPU path reads too)."""
    return _expr.parse_cached(expr)


class EvalArgs(NamedTuple):
    """Normalised arguments of evaluate: the tree, the value of each name, out."""

    expr: str
    tree: _expr.Node
    values: Dict[str, Any]
    out: Any


def _check_evaluate_args(
    expr: str,
    local_dict: Optional[Dict[str, Any]],
    out: Any,
    frame_names: Optional[Dict[str, Any]] = None,
) -> EvalArgs:
    """Parses expr and looks its names up in local_dict (else frame_names); every value must be
    a bool/int/float scalar or array."""
    tree = _tree_of(expr)
    if local_dict is not None and not isinstance(local_dict, dict):
        raise TypeError(f"local_dict must be a dict, got {type(local_dict).__name__}")
    source = local_dict if local_dict is not None else (frame_names or {})
    values: Dict[str, Any] = {}
    for name in _expr.names(tree):
        if name not in source:
            raise ValueError(f"expr {expr!r}: unknown name {name!r}")
        v = source[name]
        if isinstance(v, (bool, int, float)):
            values[name] = v
            continue
        if not _is_device_array(v):
            v = np.asarray(v)
        dt = _dtype_of(v)
        if dt.kind not in "biuf":
            raise TypeError(
                f"expr {expr!r}: {name!r} has dtype {dt}; expected bool, integer or float"
            )
        values[name] = v
    if out is not None and not (isinstance(out, np.ndarray) or _is_device_array(out)):
        raise TypeError(f"out must be an array, got {type(out).__name__}")
    return EvalArgs(expr, tree, values, out)


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size != n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="fastprof-kernels")
            _pool_size = n
        return _pool


class _Step(NamedTuple):
    kind: str  # "ufunc" or "where"
    func: Any
    args: Tuple[Tuple[str, Any], ...]  # ("v", name) | ("c", value) | ("r", step)
    dtype: np.dtype
    in_dtypes: Tuple[np.dtype, ...]  # the dtypes the step reads its operands as


def _plan(tree: _expr.Node, probe: Dict[str, Any]) -> Tuple[List[_Step], Tuple[str, Any]]:
    """The steps computing tree in post-order and the reference of the result, from its typed
    tree (fastprof._expr.typed: NumPy's dtypes, applied once)."""
    steps: List[_Step] = []

    def visit(n: _expr.Typed) -> Tuple[str, Any]:
        if n.kind == "name":
            return ("v", n.value)
        if n.kind == "const":
            return ("c", n.value)
        refs = tuple(visit(a) for a in n.args)
        assert n.dtype is not None  # an operation's result is typed
        if n.kind == "where":
            steps.append(_Step("where", None, refs, n.dtype, n.in_dtypes))
        else:
            steps.append(_Step("ufunc", getattr(np, n.op), refs, n.dtype, n.in_dtypes))
        return ("r", len(steps) - 1)

    ref = visit(_expr.typed(tree, probe))
    return steps, ref


def _run_blocks(
    steps: List[_Step],
    views: Dict[str, Any],
    dest: np.ndarray,
    lo: int,
    hi: int,
    block: int,
    flat: bool,
    errstate: Mapping[str, Any],
) -> None:
    """Computes rows/elements [lo, hi) of the result into dest, block by block, with private
    registers, under the caller's floating-point error settings."""
    with np.errstate(**errstate):
        _run_blocks_inner(steps, views, dest, lo, hi, block, flat)


def _run_blocks_inner(
    steps: List[_Step],
    views: Dict[str, Any],
    dest: np.ndarray,
    lo: int,
    hi: int,
    block: int,
    flat: bool,
) -> None:
    # a register for each step but the last, which writes into dest
    regs = [
        np.empty(
            block * (1 if flat else int(np.prod(dest.shape[1:], dtype=np.int64))), dtype=st.dtype
        )
        for st in steps[:-1]
    ]
    last = len(steps) - 1
    start = lo
    while start < hi:
        stop = min(hi, start + block)
        shape = (stop - start,) + tuple(dest.shape[1:])
        size = int(np.prod(shape, dtype=np.int64))
        cur: List[Any] = [None] * len(steps)
        for i, st in enumerate(steps):
            args = []
            for kind, val in st.args:
                if kind == "v":
                    v = views[val]
                    args.append(v[start:stop] if isinstance(v, np.ndarray) and v.ndim else v)
                elif kind == "c":
                    args.append(val)
                else:
                    args.append(cur[val])
            target = dest[start:stop] if i == last else regs[i][:size].reshape(shape)
            if st.kind == "where":
                np.copyto(target, args[2], casting="unsafe")
                cond = args[0]
                if np.asarray(cond).dtype != np.bool_:  # np.where reads any condition's truth
                    cond = np.not_equal(cond, 0)
                np.copyto(target, args[1], casting="unsafe", where=cond)
            else:
                st.func(*args, out=target, casting="unsafe")
            cur[i] = target
        start = stop


_VM_TYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_))
# operations whose bool result the VM's 0.0/1.0 registers hold as NumPy does (bool + bool is
# NumPy's logical or, which a register holding 2.0 would not be)
_VM_BOOL_OPS = frozenset(
    "less less_equal greater greater_equal equal not_equal bitwise_and bitwise_or bitwise_xor"
    " invert where positive absolute minimum maximum".split()
)


def _vm_program(
    steps: List[_Step], views: Dict[str, Any], probe: Dict[str, Any]
) -> Optional[Tuple[list, list, list, int, int]]:
    """(steps, inputs, consts, nregs, result register) for the compiled evaluator, or None
    when some operand or step is outside what it handles (integers, other dtypes)."""
    opcodes = _expr.opcodes()
    inputs: List[np.ndarray] = []
    reg_of_name: Dict[str, int] = {}
    for name, v in views.items():
        if isinstance(v, np.ndarray):
            if v.dtype not in _VM_TYPES or not v.dtype.isnative or not v.flags.aligned:
                return None
            reg_of_name[name] = len(inputs)
            inputs.append(v.reshape(-1) if v.ndim else v.reshape(1))
        elif not isinstance(v, (bool, int, float)):
            return None

    program = []
    consts: List[float] = []
    for st in steps:
        name = "where" if st.kind == "where" else st.func.__name__
        op = opcodes.get(name)
        if (
            op is None
            or st.dtype not in _VM_TYPES
            or any(d not in _VM_TYPES for d in st.in_dtypes)
            or (st.dtype == np.bool_ and name not in _VM_BOOL_OPS)
            # the float32 floor quotient rounds differently through a double
            or (name == "floor_divide" and st.dtype == np.float32)
        ):
            return None
        refs = []
        for (kind, val), in_dt in zip(st.args, st.in_dtypes):
            if kind == "r":
                refs.append(("t", val))
            elif kind == "v" and val in reg_of_name:
                refs.append(("i", reg_of_name[val]))
            else:
                scalar = views[val] if kind == "v" else val
                try:  # the scalar as the step reads it (a Python float rounded to float32)
                    consts.append(float(in_dt.type(scalar)))
                except (OverflowError, ValueError, TypeError):
                    return None
                refs.append(("k", len(consts) - 1))
        program.append((op, refs, st.dtype == np.float32))
    nin, nk = len(inputs), len(consts)
    nregs = nin + nk + len(steps)

    def reg(ref: Tuple[str, int]) -> int:
        kind, i = ref
        return i if kind == "i" else nin + i if kind == "k" else nin + nk + i

    out_steps = []
    for i, (op, refs, r32) in enumerate(program):
        regs = [reg(r) for r in refs] + [0] * (3 - len(refs))
        out_steps.append((op, nin + nk + i, regs[0], regs[1], regs[2], int(r32)))
    if nregs > 512:
        return None
    return out_steps, inputs, consts, nregs, nin + nk + len(steps) - 1


def _reduce_cpu(a: EvalArgs) -> Any:
    """sum/prod of an expression: its elementwise value, then NumPy's reduction of it (so the
    result is np.sum's / np.prod's of that array, bit for bit)."""
    tree = a.tree
    inner = _evaluate_cpu(EvalArgs(a.expr, tree.args[0], a.values, None))
    inner = np.asarray(inner)
    axis = tree.value
    if axis is not None and not -inner.ndim <= axis < max(inner.ndim, 1):
        raise ValueError(
            f"expr {_expr._shown(a.expr)}: axis {axis} is out of range for the"
            f" {inner.ndim}-d value of {tree.op}()'s operand"
        )
    if axis is not None and inner.ndim == 0:
        raise ValueError(
            f"expr {_expr._shown(a.expr)}: {tree.op}() of a scalar takes no axis, got {axis}"
        )
    res = _expr.REDUCTIONS[tree.op].reduce(inner, axis=axis)
    out = a.out
    if out is None:
        return res
    res = np.asarray(res)
    if tuple(out.shape) != res.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {res.shape}")
    if not np.can_cast(res.dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"out has dtype {out.dtype}; the result's dtype {res.dtype} cannot be cast to it"
        )
    np.copyto(out, res, casting="same_kind")
    return out


def _evaluate_cpu(a: EvalArgs) -> Any:
    if a.tree.kind == "reduce":
        return _reduce_cpu(a)
    values = a.values
    out = a.out
    arrays = [v for v in values.values() if isinstance(v, np.ndarray)]
    shape = np.broadcast_shapes(*[v.shape for v in arrays]) if arrays else ()
    if out is not None and tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    probe = {
        k: (np.empty((0,) * v.ndim, v.dtype) if isinstance(v, np.ndarray) and v.ndim else v)
        for k, v in values.items()
    }
    signature = (a.expr,) + tuple(
        (k, v.dtype.str, v.ndim == 0) if isinstance(v, np.ndarray) else (k, type(v))
        for k, v in values.items()
    )
    planned = _PLANS.get(signature)
    if planned is None:
        try:
            planned = _plan(a.tree, probe)
        except TypeError as exc:  # e.g. ~ on floats, & on floats: NumPy has no such loop
            raise TypeError(f"expr {_expr._shown(a.expr)}: {exc}") from None
        _PLANS[signature] = planned
        if len(_PLANS) > _TREES_MAX:
            _PLANS.popitem(last=False)
    steps, ref = planned
    size = int(np.prod(shape, dtype=np.int64))
    res_dtype = (
        steps[-1].dtype if ref[0] == "r" else np.asarray(_expr.evaluate_numpy(a.tree, probe)).dtype
    )
    if out is not None and not np.can_cast(res_dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"out has dtype {out.dtype}; the result's dtype {res_dtype} cannot be cast to it"
        )
    nthreads = get_num_threads()
    if ref[0] != "r" or size < _SMALL or len(shape) == 0:
        res = _expr.evaluate_numpy(a.tree, values)
        if out is None:
            return res
        np.copyto(out, res, casting="same_kind")
        return out
    if out is not None and any(np.may_share_memory(out, v) for v in arrays):
        # reading and writing one buffer block by block is only safe elementwise-aligned
        if not all(
            v.shape == out.shape
            and v.strides == out.strides
            and v.__array_interface__["data"][0] == out.__array_interface__["data"][0]
            for v in arrays
            if np.may_share_memory(out, v)
        ):
            res = _evaluate_cpu(EvalArgs(a.expr, a.tree, values, None))
            np.copyto(out, res, casting="same_kind")
            return out
    flat = all((v.shape == shape and v.flags.c_contiguous) or v.size == 1 for v in arrays) and (
        out is None or out.flags.c_contiguous
    )
    if flat:
        views = {
            k: (v.reshape(-1) if v.shape == shape else v.reshape(()))
            if isinstance(v, np.ndarray)
            else v
            for k, v in values.items()
        }
        dest = np.empty(size, dtype=res_dtype) if out is None else out.reshape(-1)
        block = _BLOCK
        n = size
    else:
        views = {
            k: np.broadcast_to(v, shape) if isinstance(v, np.ndarray) else v
            for k, v in values.items()
        }
        dest = np.empty(shape, dtype=res_dtype) if out is None else out
        rowsize = max(1, size // shape[0])
        block = max(1, _BLOCK // rowsize)
        n = shape[0]
    if flat:
        prog = _vm_program(steps, views, probe)
        if prog is not None:
            vm_steps, inputs, consts, nregs, result = prog
            direct = (
                out is not None
                and out.dtype == res_dtype
                and out.dtype.isnative
                and out.flags.aligned
            )
            target = dest if (out is None or direct) else np.empty(size, dtype=res_dtype)
            _fastprof._evaluate_program(vm_steps, inputs, consts, nregs, result, target)
            if out is not None:
                if not direct:
                    np.copyto(out, target.reshape(shape), casting="same_kind")
                return out
            return target.reshape(shape)
    nblocks = -(-n // block)
    ntasks = min(nthreads, nblocks)
    if ntasks <= 1:
        _run_blocks_inner(steps, views, dest, 0, n, block, flat)
    else:
        per = -(-nblocks // ntasks)
        futures = []
        errstate = np.geterr()
        pool = _executor(nthreads)
        for t in range(ntasks):
            lo, hi = t * per * block, min(n, (t + 1) * per * block)
            if lo < hi:
                futures.append(
                    pool.submit(_run_blocks, steps, views, dest, lo, hi, block, flat, errstate)
                )
        for f in futures:
            f.result()
    if out is not None:
        return out
    return dest.reshape(shape)


def evaluate(
    expr: str, local_dict: Optional[Dict[str, Any]] = None, out: Any = None, *, device: Any = None
) -> Any:
    """Evaluates an elementwise expression of arrays and scalars in one blocked, threaded pass.

    Names come from ``local_dict``, else from the caller's locals and globals (as numexpr).
    The language is fastprof._expr's (operators with ``//``, ``%`` and ``**``, comparisons,
    ``& | ^ ~``, where, abs, sqrt, exp, log, trig, fmod, hypot ..., and ``sum``/``prod`` over
    the whole array or ``axis=`` as the outermost operation); results follow NumPy's dtypes
    and broadcasting.  ``out`` receives the result when given."""
    frame_names = None
    if local_dict is None:
        frame = sys._getframe(1)
        frame_names = dict(frame.f_globals)
        frame_names.update(frame.f_locals)
        del frame
    try:
        args = _check_evaluate_args(expr, local_dict, out, frame_names)
        if _wants_gpu(device, out, *args.values.values()):
            return _gpu("evaluate")(expr, args.values, out, device=device)
        return _evaluate_cpu(args)
    except RecursionError:  # the tree is within MAX_DEPTH, but the caller was deep already
        raise ValueError(
            f"expr {_expr._shown(expr)}: nested too deeply for the remaining recursion depth"
        ) from None
