"""The kernels' argument checks, shared by the CPU and GPU sides: each public kernel checks
and normalises its arguments here once, before either device runs, so a bad argument gets the
same error on both (``check_convolve_args``, ``check_uniform_args``, ``check_evaluate_args``,
``check_matmul_args``, whose results fastprof.kernels.cpu and fastprof.kernels.gpu run on).
Also the device choice (``wants_gpu``: ``device=`` or a device array as input), the boundary
mode codes and the rank-1 factorisation of weights (``rank1_factors``)."""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import expr as _expr

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


FLOAT_TYPES = (np.float32, np.float64)
MAX_NDIM = 32  # FP_MAXDIM of kernels/conv.h
_EPS = float(np.finfo(np.float64).eps)


def is_device_array(x: Any) -> bool:
    """True for arrays that live on a CUDA device (CUDA array interface or DLPack device 2).
    The interface is looked for on the type first: a property there (fastprof's DeviceArray,
    CuPy's) is not computed."""
    t = type(x)
    if t is np.ndarray:
        return False
    if hasattr(t, "__cuda_array_interface__") or hasattr(x, "__cuda_array_interface__"):
        return True
    if hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray):
        try:
            return int(x.__dlpack_device__()[0]) == 2
        except Exception:
            return False
    return False


def wants_gpu(device: Any, *arrays: Any) -> bool:
    """Whether a call goes to the GPU: device names it (any form
    fastprof.cuda.runtime.device_spec takes: "cuda", "gpu", "cuda:N", "gpu:N" in any case, an
    index N; "cpu" for the CPU), or an input lives there.  ValueError for another device."""
    if device is None:
        return any(is_device_array(a) for a in arrays)
    if type(device) is not str or device != "cpu":
        # the one reading of device names, fastprof.cuda's (loaded on the first device=)
        from ..cuda.runtime import device_spec

        if device_spec(device, allow_cpu=True) != "cpu":
            return True
    if any(is_device_array(a) for a in arrays):
        raise ValueError(f"device={device!r} but an input is a CUDA device array")
    return False


def _dtype_of(x: Any) -> np.dtype:
    return np.dtype(x.dtype)


class _CaiArray:
    """A device array that has a ``__cuda_array_interface__`` but no ``shape``/``dtype`` of
    its own, described by its interface (which it passes on, keeping the array alive)."""

    __slots__ = ("obj", "shape", "dtype", "ndim")

    def __init__(self, obj: Any, cai: Dict[str, Any]) -> None:
        self.obj = obj
        self.shape = tuple(int(n) for n in cai["shape"])
        self.dtype = np.dtype(cai["typestr"])
        self.ndim = len(self.shape)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return self.obj.__cuda_array_interface__


_described_types: set = set()  # device array types with shape, dtype and ndim of their own
# device array types every instance of which lives on a device with a shape, dtype and ndim of
# its own: fastprof's DeviceArray, added by fastprof.kernels.gpu (the checks take them as they are)
_own_device_types: set = set()


def _described(x: Any) -> Any:
    """x, or for a device array with no shape or dtype attribute of its own, a _CaiArray
    describing it by its CUDA array interface (TypeError for a malformed one)."""
    t = type(x)
    if t in _described_types:
        return x
    if hasattr(t, "dtype") and hasattr(t, "shape") and hasattr(t, "ndim"):
        _described_types.add(t)  # declared by the type (slots, properties): every instance
        return x
    if hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "ndim"):
        return x
    cai = getattr(x, "__cuda_array_interface__", None)
    if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai:
        return x
    try:
        return _CaiArray(x, cai)
    except (TypeError, ValueError):
        raise TypeError("__cuda_array_interface__ must give a shape and a typestr") from None


def _check_array(x: Any, name: str, allow_bool: bool = False) -> Any:
    """x as an ndarray (device arrays are returned as they are, described by their CUDA array
    interface when they have no shape or dtype of their own) with a numeric real dtype (or
    bool with allow_bool, as scipy.ndimage's filters take it); TypeError otherwise."""
    if not is_device_array(x):
        x = np.asarray(x)
    elif type(x) is not np.ndarray:
        x = _described(x)
    dt = _dtype_of(x)
    if dt.kind not in ("biuf" if allow_bool else "iuf") or dt.itemsize > 8 or dt == np.float16:
        kinds = "a bool, integer" if allow_bool else "an integer"
        raise TypeError(f"{name} must have {kinds}, float32 or float64 dtype, got {dt}")
    if len(x.shape) > MAX_NDIM:
        raise ValueError(f"{name} has {len(x.shape)} axes; the kernels take at most {MAX_NDIM}")
    return x


def _check_modes(mode: Any, ndim: int, allow_sequence: bool = False) -> Tuple[int, ...]:
    """One mode code per axis; ValueError for unknown names."""
    mode = _scalar0d(mode)
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


def _scalar0d(value: Any) -> Any:
    """value, or the scalar a 0-d array holds (scipy takes np.array(3) as it takes 3)."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def _check_origins(
    origin: Any, sizes: Sequence[int], skip_unit: bool = False, allow_bool: bool = False
) -> Tuple[int, ...]:
    """One origin per axis, each with -(size // 2) <= origin <= (size - 1) // 2; with skip_unit
    an axis of size 1 takes any origin (scipy's uniform_filter leaves such axes out) and gets
    0; with allow_bool a bool is the int it equals (scipy's uniform_filter takes True as 1)."""
    ndim = len(sizes)
    origin = _scalar0d(origin)
    if isinstance(origin, (int, np.integer)) and (allow_bool or not isinstance(origin, bool)):
        origins = [int(origin)] * ndim
    elif isinstance(origin, (list, tuple, np.ndarray)):
        origins = list(origin)
        if len(origins) != ndim:
            raise ValueError(f"origin: expected {ndim} values (one per axis), got {len(origins)}")
        for o in origins:
            if (isinstance(o, bool) and not allow_bool) or not isinstance(o, (int, np.integer)):
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
    """cval as a float; TypeError for what is not a real number (a str float() would read
    included)."""
    if isinstance(cval, (complex, np.complexfloating)):
        raise TypeError("cval must be a real number")
    if isinstance(cval, (str, bytes, bytearray)):
        raise TypeError(f"cval must be a real number, got {cval!r}")
    try:
        return float(cval)
    except (TypeError, ValueError):
        raise TypeError(f"cval must be a real number, got {cval!r}") from None


def _check_axes(axes: Any, ndim: int) -> Tuple[int, ...]:
    """The filtered axes as scipy.ndimage (1.11+) takes them: None (all), an int, or a
    sequence of distinct ints in -ndim .. ndim-1; returned non-negative, in the given order."""
    axes = _scalar0d(axes)
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
    value = _scalar0d(value)
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
    if isinstance(output, np.ndarray) or is_device_array(output):
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


def check_convolve_args(
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
    if is_device_array(w):
        raise TypeError("weights must be a host array (numpy or a sequence)")
    w = np.asarray(w)
    if w.dtype.kind not in "biufO":
        raise TypeError(f"weights must be real numbers, got dtype {w.dtype}")
    try:  # as scipy: any real dtype (long double, numbers in an object array) as float64
        w = w.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"weights must be real numbers, got dtype {w.dtype}") from None
    ax = _check_axes(axes, input.ndim)
    if w.ndim != len(ax):
        raise ValueError(
            f"weights must have one dimension per filtered axis ({len(ax)}), got {w.ndim}"
            f" (the input has rank {input.ndim}, axes={axes!r})"
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


def _uniform_size(s: Any) -> int:
    """One size of uniform_filter as scipy reads it: a real number (int, float, bool, NumPy's);
    one above 1 filters with int(s) taps, any other (0, -1, True, NaN) leaves the axis out
    (size 1).  TypeError for what is no real number, ValueError for an infinite size."""
    s = _scalar0d(s)
    if not isinstance(s, (int, float, np.integer, np.floating)):
        raise TypeError(f"size must be a number or a sequence of numbers, got {s!r}")
    if not s > 1:  # scipy filters only the axes whose size is > 1 (NaN included: skipped)
        return 1
    if not np.isfinite(s):
        raise ValueError(f"size must be finite, got {s!r}")
    return int(s)


def check_uniform_args(
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
    size = _scalar0d(size)
    if isinstance(size, (list, tuple, np.ndarray)):
        sizes = [_uniform_size(s) for s in size]
        if len(sizes) != ndim:
            raise ValueError(f"size: expected {ndim} values (one per axis), got {len(sizes)}")
    else:
        sizes = [_uniform_size(size)] * ndim
    output, out_dtype = _check_output(output, input)
    modes = _check_modes(mode, ndim, allow_sequence=True)
    origins = _check_origins(origin, sizes, skip_unit=True, allow_bool=True)
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


def rank1_factors(w: np.ndarray) -> Optional[List[np.ndarray]]:
    """1-D factors whose outer product is w (same zero pattern, equal to rounding), or None
    (also for weights holding inf or NaN, and where the factors' scale overflows or underflows
    a double: such weights run tap by tap)."""
    if w.ndim == 1:
        return [np.ascontiguousarray(w)]
    if not np.isfinite(w).all():
        return None
    peak_at = np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
    peak = float(w[peak_at])
    if peak == 0.0:
        return [np.zeros(s) for s in w.shape]
    factors = []
    for d in range(w.ndim):
        index: List[Any] = list(peak_at)
        index[d] = slice(None)
        factors.append(np.array(w[tuple(index)], dtype=np.float64))
    try:
        scale = peak ** (w.ndim - 1)
    except OverflowError:  # factors spanning beyond a double: the passes' products would too
        return None
    if not np.isfinite(scale) or abs(scale) < np.finfo(np.float64).tiny:
        return None
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        factors[0] = factors[0] / scale
        outer = factors[0]
        for f in factors[1:]:
            outer = np.multiply.outer(outer, f)
        err = float(np.max(np.abs(outer - w)))
    if not np.array_equal(outer != 0, w != 0):
        return None
    if not err <= 1e-14 * abs(peak):  # NaN (an overflow on the way) is no factorisation
        return None
    return [np.ascontiguousarray(f) for f in factors]


def check_matmul_args(a: Any, b: Any) -> Tuple[Any, Any]:
    """Both operands as arrays of a numeric real dtype with matching inner dimensions."""
    a = _check_array(a, "a")
    b = _check_array(b, "b")
    if not a.shape or not b.shape:
        raise ValueError("matmul: operands must have at least one dimension")
    ka = a.shape[-1]
    kb = b.shape[0] if len(b.shape) == 1 else b.shape[-2]
    if ka != kb:
        raise ValueError(
            f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not align ({ka} != {kb})"
        )
    return a, b


_PARSED_MAX = 512
_parsed: Dict[str, Tuple[_expr.Node, Tuple[str, ...]]] = {}
_parsed_lock = threading.Lock()  # held to add and evict (a lookup reads the dict unlocked)


def _parsed_names(expr: Any) -> Tuple[_expr.Node, Tuple[str, ...]]:
    """(tree, the names it reads in order of first appearance) of expr, found once per
    expression string through fastprof.kernels.expr's parse cache (which the GPU path reads
    too); raises as parse_cached does."""
    hit = _parsed.get(expr) if type(expr) is str else None
    if hit is None:
        tree = _expr.parse_cached(expr)
        hit = (tree, tuple(_expr.names(tree)))
        with _parsed_lock:  # two threads must not evict the same oldest key
            while len(_parsed) >= _PARSED_MAX:
                _parsed.pop(next(iter(_parsed)))
            _parsed[expr] = hit
    return hit


def _tree_of(expr: str) -> _expr.Node:
    """The parsed tree of expr (fastprof.kernels.expr's cache, which the GPU path reads too)."""
    return _parsed_names(expr)[0]


@functools.lru_cache(maxsize=_PARSED_MAX)
def scalar_parts(
    expr: str, scalars: Tuple[str, ...]
) -> Tuple[_expr.Node, Tuple[Tuple[str, _expr.Node], ...]]:
    """fastprof.kernels.expr.scalar_parts of expr's tree for the names (sorted) bound to Python
    scalars: the tree with its Python-scalar subexpressions as names, and those (name, subtree)
    pairs; computed once per expression and set of scalar names (both devices use it)."""
    return _expr.scalar_parts(_parsed_names(expr)[0], frozenset(scalars))


def bind_scalar_parts(
    expr: str, tree: _expr.Node, values: Dict[str, Any]
) -> Tuple[_expr.Node, Dict[str, Any]]:
    """(tree, values) with each subexpression of Python scalars in tree (names bound to Python
    bool/int/float, literals) a name bound to its value as Python computes it, so NumPy sees
    the weak Python scalar the equivalent Python code gives it; unchanged when there is none.
    Raises as fastprof.kernels.expr.scalar_value does."""
    scalars = tuple(sorted(k for k, v in values.items() if _expr.is_python_scalar(v)))
    if not scalars or type(expr) is not str:
        return tree, values
    bound, parts = scalar_parts(expr, scalars)
    if not parts:
        return tree, values
    values = dict(values)
    for name, sub in parts:
        values[name] = _expr.scalar_value(sub, values, expr)
    return bound, values


class EvalArgs(NamedTuple):
    """Normalised arguments of evaluate: the tree, the value of each name, out."""

    expr: str
    tree: _expr.Node
    values: Dict[str, Any]
    out: Any


def caller_names(
    local_dict: Optional[Dict[str, Any]], global_dict: Optional[Dict[str, Any]], depth: int
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(local_dict, global_dict) as numexpr fills them in: the locals and globals of the frame
    ``depth`` levels above the caller of this function (1: evaluate's caller) where not
    given.  TypeError for a global_dict that is no dict."""
    if global_dict is not None and not isinstance(global_dict, dict):
        raise TypeError(f"global_dict must be a dict, got {type(global_dict).__name__}")
    if local_dict is not None and global_dict is not None:
        return local_dict, global_dict
    frame = sys._getframe(depth + 1)
    try:
        return (
            dict(frame.f_locals) if local_dict is None else local_dict,  # 3.13: a proxy
            frame.f_globals if global_dict is None else global_dict,
        )
    finally:
        del frame


def check_evaluate_args(
    expr: str,
    local_dict: Optional[Dict[str, Any]],
    out: Any,
    frame_names: Optional[Dict[str, Any]] = None,
) -> EvalArgs:
    """Parses expr and looks its names up in local_dict, then in frame_names (numexpr's order:
    a name local_dict lacks comes from the globals); every value must be a bool/int/float
    scalar or array."""
    hit = _parsed.get(expr) if type(expr) is str else None
    tree, tree_names = hit if hit is not None else _parsed_names(expr)
    if local_dict is not None and not isinstance(local_dict, dict):
        raise TypeError(f"local_dict must be a dict, got {type(local_dict).__name__}")
    first = local_dict if local_dict is not None else {}
    then = frame_names if frame_names is not None else {}
    values: Dict[str, Any] = {}
    for name in tree_names:
        if name in first:
            v = first[name]
        elif name in then:
            v = then[name]
        else:
            raise ValueError(f"expr {expr!r}: unknown name {name!r}")
        t = type(v)
        if (
            t is bool
            or t is int
            or t is float
            or ((t is np.ndarray or t in _own_device_types) and v.dtype.kind in "biuf")
        ):
            values[name] = v  # the common cases, checked by their type alone
            continue
        if isinstance(v, (bool, int, float)):
            values[name] = v
            continue
        v = _described(v) if is_device_array(v) else np.asarray(v)
        dt = _dtype_of(v)
        if dt.kind not in "biuf":
            raise TypeError(
                f"expr {expr!r}: {name!r} has dtype {dt}; expected bool, integer or float"
            )
        values[name] = v
    if out is not None and not (isinstance(out, np.ndarray) or is_device_array(out)):
        raise TypeError(f"out must be an array, got {type(out).__name__}")
    tree, values = bind_scalar_parts(expr, tree, values)
    return EvalArgs(expr, tree, values, out)
