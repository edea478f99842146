"""GPU versions of fastprof.kernels: convolve, correlate, uniform_filter, evaluate, matmul.

Same signatures as the CPU kernels plus ``device=`` ("cuda", "gpu", "cuda:N") and ``stream=``.
fastprof.kernels dispatches here for ``device="cuda"`` or device-array input.

- NumPy input is copied in and out; the result is a NumPy array (:class:`TimedArray`) whose
  ``.timings`` gives the host-to-device, kernel and device-to-host times separately (CUDA
  events), because the transfers usually dominate. :func:`last_timings` returns the same dict
  for any call.
- Device input (DeviceArray, ``__cuda_array_interface__``, CUDA ``__dlpack__``) is read in
  place, on its stream, and the result is a :class:`fastprof.cuda.DeviceArray`.

Filters follow scipy.ndimage (modes reflect, constant, nearest, mirror, wrap and the grid-*
synonyms; origin). evaluate compiles the expression to one fused kernel with NVRTC, cached
per expression, dtype and argument layout. matmul calls cuBLAS (row-major handled).

Every argument is checked before any CUDA call; then availability is checked and
:class:`fastprof.cuda.CudaUnavailableError` carries the reason when CUDA cannot run.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Optional

import numpy as np

from .. import _fastprof as _C
from ..cuda import runtime as _cuda
from ..cuda.libs import library_candidates
from . import expr as _expr
from . import expr_cuda as _expr_cuda
from . import ndimage_exact as _ndimage_exact

__all__ = [
    "convolve",
    "correlate",
    "uniform_filter",
    "evaluate",
    "matmul",
    "last_timings",
    "TimedArray",
    "generate_source",
]

_MAXDIM = 8
_F32, _F64 = 0, 1

# --- argument checks (kept apart so they can later call fastprof.kernels' shared checks) ------

_MODES = {
    "reflect": 0,
    "grid-mirror": 0,
    "constant": 1,
    "grid-constant": 1,
    "nearest": 2,
    "mirror": 3,
    "wrap": 4,
    "grid-wrap": 4,
}


def _check_mode(mode: Any, what: str = "mode") -> int:
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"{what} must be one of {sorted(_MODES)}, got {mode!r}")
    return _MODES[mode]


def _check_modes(mode: Any, ndim: int) -> list[int]:
    if isinstance(mode, str):
        return [_check_mode(mode)] * ndim
    modes = list(mode) if isinstance(mode, (list, tuple)) else None
    if modes is None or len(modes) != ndim:
        raise ValueError(f"mode must be a str or a sequence of {ndim} str, got {mode!r}")
    return [_check_mode(m, "mode[%d]" % i) for i, m in enumerate(modes)]


def _check_cval(cval: Any) -> float:
    if isinstance(cval, bool) or not isinstance(cval, (int, float, np.integer, np.floating)):
        raise TypeError(f"cval must be a real number, got {type(cval).__name__}")
    return float(cval)


def _check_origins(origin: Any, ndim: int) -> list[int]:
    if isinstance(origin, (int, np.integer)) and not isinstance(origin, bool):
        return [int(origin)] * ndim
    if (
        isinstance(origin, (list, tuple))
        and len(origin) == ndim
        and all(isinstance(o, (int, np.integer)) and not isinstance(o, bool) for o in origin)
    ):
        return [int(o) for o in origin]
    raise ValueError(f"origin must be an int or a sequence of {ndim} ints, got {origin!r}")


def _check_origin_range(size: int, origin: int, axis: int) -> None:
    if not 0 <= size // 2 + origin < size:
        raise ValueError(
            f"invalid origin {origin} for a filter of size {size} along axis {axis}: "
            f"expected {-(size // 2)} <= origin <= {(size - 1) // 2}"
        )


def _check_real_dtype(dtype: np.dtype, what: str) -> None:
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(
            f"{what} must have a real numeric dtype (bool, int, float up to 64 bit), got {dtype}"
        )


class _Operand:
    """An input checked without CUDA: host array, or device array to be viewed later."""

    __slots__ = ("host", "device", "obj", "shape", "dtype")

    def __init__(self, obj: Any, what: str) -> None:
        self.obj = obj
        self.device: Optional[_cuda.DeviceArray] = None
        self.host: Optional[np.ndarray] = None
        if _cuda.is_device_array(obj):
            self.shape: Optional[tuple[int, ...]] = None
            self.dtype: Optional[np.dtype] = None
            cai = (
                getattr(obj, "__cuda_array_interface__", None)
                if not isinstance(obj, _cuda.DeviceArray)
                else None
            )
            if isinstance(obj, _cuda.DeviceArray):
                self.shape, self.dtype = obj.shape, obj.dtype
            elif isinstance(cai, dict) and "shape" in cai and "typestr" in cai:
                self.shape, self.dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
        else:
            try:
                self.host = np.asarray(obj)
            except Exception as exc:
                raise TypeError(
                    f"{what} must be an array (NumPy or device), got {type(obj).__name__}"
                ) from exc
            if self.host.dtype.hasobject:
                raise TypeError(f"{what} must be a numeric array, got dtype object")
            self.shape, self.dtype = self.host.shape, self.host.dtype

    @property
    def on_device(self) -> bool:
        return self.host is None

    def view(self, stream: Any) -> _cuda.DeviceArray:
        """The device view (CUDA must be available)."""
        if self.device is None:
            self.device = _cuda.as_device_array(self.obj, stream)
            self.shape, self.dtype = self.device.shape, self.device.dtype
        return self.device


def _check_ndim(shape: tuple[int, ...], what: str) -> None:
    if not 1 <= len(shape) <= _MAXDIM:
        raise ValueError(f"{what} must have 1 to {_MAXDIM} dimensions on the GPU, got {len(shape)}")


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


# --- timings ------------------------------------------------------------------------------------


class TimedArray(np.ndarray):
    """A NumPy result of a GPU kernel on NumPy input; ``.timings`` holds h2d_ms, kernel_ms,
    d2h_ms (and total_ms) of the call that made it (None on arrays derived from it)."""

    timings: Optional[dict[str, float]]

    def __array_finalize__(self, obj: Any) -> None:
        self.timings = None


_local = threading.local()


def last_timings() -> Optional[dict[str, float]]:
    """Timings of this thread's last GPU kernel call: h2d_ms, kernel_ms, d2h_ms, total_ms."""
    return getattr(_local, "timings", None)


class _Timing:
    """Four events on one stream: before upload, before the kernel, after it, after download."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.events = _cuda._events.get_many(4)

    def mark(self, i: int) -> None:
        _C._cuda_event_record(self.events[i], self.stream)

    def finish(self) -> dict[str, float]:
        e = self.events
        try:
            t = {
                "h2d_ms": _C._cuda_event_elapsed(e[0], e[1]),
                "kernel_ms": _C._cuda_event_elapsed(e[1], e[2]),
                "d2h_ms": _C._cuda_event_elapsed(e[2], e[3]),
            }
        finally:
            _cuda._events.put_many(e)
        t["total_ms"] = t["h2d_ms"] + t["kernel_ms"] + t["d2h_ms"]
        _local.timings = t
        return t


def _finish_host(result: np.ndarray, timing: _Timing, output: Optional[np.ndarray]) -> np.ndarray:
    t = timing.finish()
    if output is not None:
        output[...] = result
        return output
    out = result.view(TimedArray)
    out.timings = t
    return out


def _check_host_output(
    output: Any, shape: tuple[int, ...], on_device: bool
) -> Optional[np.ndarray]:
    if output is None:
        return None
    if on_device:
        raise ValueError(
            "output= is only supported for NumPy input on the GPU; device input "
            "returns a new DeviceArray"
        )
    if not isinstance(output, np.ndarray) or output.shape != shape:
        raise ValueError(
            f"output must be a NumPy array of shape {shape}, got "
            f"{getattr(output, 'shape', type(output).__name__)}"
        )
    if not output.flags.writeable:
        raise ValueError("output must be writeable")
    return output


# --- plans --------------------------------------------------------------------------------------
# A repeat call with the same arguments (same shapes, dtypes, strides, modes, sizes, weights,
# expression) finds its plan here: the checks passed, the passes chosen, the kernel compiled;
# what is left per call is the allocations and launches.  Keys hold everything a plan depends
# on; the device is in the key of what is per device (compiled kernels, uploaded weights).

_PLANS_MAX = 256
_plans: dict[tuple, Any] = {}
_plan_builds = 0  # plans built (the tests count cache misses with it)


def _plan_get(key: Optional[tuple]) -> Any:
    """The cached plan for key, or None (always None for key None: arguments not cacheable)."""
    return None if key is None else _plans.get(key)


def _plan_put(key: Optional[tuple], plan: Any) -> Any:
    """Caches plan under key (when key is not None; the oldest plan goes when full) and
    returns it."""
    global _plan_builds
    _plan_builds += 1
    if key is not None:
        if len(_plans) >= _PLANS_MAX:
            _plans.pop(next(iter(_plans)))
        _plans[key] = plan
    return plan


def _hashable(v: Any) -> Any:
    """A hashable stand-in for an argument that tells apart every value the checks tell apart
    (the type included: 3, 3.0 and True differ), or raises TypeError."""
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_hashable(x) for x in v))
    if isinstance(v, np.ndarray):
        raise TypeError("arrays are keyed by their content elsewhere")
    hash(v)
    return (type(v), v)


def _input_key(obj: Any) -> Optional[tuple]:
    """What a plan depends on of a filter's input: shape, dtype and (device) strides; None for
    inputs the plans do not cover (other libraries' device arrays, sequences)."""
    if type(obj) is np.ndarray:
        return ("host", obj.shape, obj.dtype)
    if type(obj) is _cuda.DeviceArray:
        return ("device", obj.shape, obj.dtype, obj.strides)
    return None


def _filter_key(name: str, input: Any, output: Any, *args: Any) -> Optional[tuple]:
    """The plan key of a filter call, or None when it cannot be cached (integer results: they
    are computed as scipy's on the host where needed)."""
    ik = _input_key(input)
    if ik is None or (ik[0] == "host" and ik[2].kind in "biu") or ik[2].kind not in "biuf":
        return None
    try:
        if isinstance(output, np.ndarray):
            if output.dtype.kind not in "f":
                return None
            ok: Any = ("array", output.shape, output.dtype)
        else:
            ok = _hashable(output)
            if output is not None and np.dtype(output).kind not in "f":
                return None
        return (name, ik, ok) + tuple(_hashable(a) for a in args)
    except TypeError:
        return None


# --- filters ------------------------------------------------------------------------------------


def _separable(w: np.ndarray) -> Optional[list[np.ndarray]]:
    """1-D factors whose outer product is w (exactly up to rounding), or None."""
    if w.ndim < 2 or sum(n > 1 for n in w.shape) < 2:
        return None
    p = np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
    pivot = w[p]
    if pivot == 0:
        return None
    factors = []
    for d in range(w.ndim):
        idx: list[Any] = list(p)
        idx[d] = slice(None)
        factors.append(np.array(w[tuple(idx)], dtype=np.float64))
    factors[0] = factors[0] / pivot ** (w.ndim - 1)
    rebuilt = factors[0]
    for f in factors[1:]:
        rebuilt = np.multiply.outer(rebuilt, f)
    scale = float(np.abs(w).max())
    if not np.allclose(rebuilt, w, rtol=1e-12, atol=1e-14 * scale):
        return None
    return factors


_weights_cache: dict[tuple, _cuda.DeviceArray] = {}
_WEIGHTS_CACHE_MAX = 32


def _device_weights(w: np.ndarray, cdt: np.dtype, stream: int) -> _cuda.DeviceArray:
    """The weights on the current device, uploaded once per content, dtype and device (a small
    cache: re-uploading would make every call wait for the stream)."""
    host = np.ascontiguousarray(w, dtype=cdt)
    key = (host.tobytes(), host.shape, cdt.str, _C._cuda_get_device())
    hit = _weights_cache.get(key)
    if hit is None:
        if len(_weights_cache) >= _WEIGHTS_CACHE_MAX:
            _C._cuda_synchronize()  # the evicted block may still be read on another stream
            _weights_cache.pop(next(iter(_weights_cache)))
        hit = _weights_cache[key] = _cuda.DeviceArray.from_numpy(host, stream=stream)
    return hit


def _run_passes(
    src: _cuda.DeviceArray,
    out: _cuda.DeviceArray,
    cdt: np.dtype,
    passes: list[tuple[Optional[np.ndarray], tuple[int, ...], tuple[int, ...], int, float]],
    cval: float,
    stream: int,
    keep: list,
) -> None:
    """Runs correlation passes (weights or None for box, wshape, shift, mode, box weight) from
    src to out, through contiguous temporaries."""
    code = _F32 if cdt == np.float32 else _F64
    shape = src.shape
    cur_ptr, cur_strides = src.ptr, tuple(s // cdt.itemsize for s in src.strides)
    tmp: Optional[_cuda.DeviceArray] = None
    for i, (w, wshape, shift, mode, boxw) in enumerate(passes):
        last = i == len(passes) - 1
        if last:
            dst = out
        else:
            dst = _cuda._empty_here(shape, cdt, out.device, stream)
            keep.append(dst)
        wptr = 0
        if w is not None:
            wd = _device_weights(w, cdt, stream)
            keep.append(wd)
            wptr = wd.ptr
        _C._cuda_correlate(
            code,
            cur_ptr,
            dst.ptr,
            wptr,
            shape,
            cur_strides,
            wshape,
            shift,
            mode,
            cval,
            boxw,
            stream,
        )
        tmp = dst
        cur_ptr, cur_strides = tmp.ptr, tuple(s // cdt.itemsize for s in tmp.strides)


def _tiled_ok(cdt: np.dtype, shape: tuple[int, ...], wshape: tuple[int, ...]) -> bool:
    """Whether the device runs this correlation as one shared-memory tiled pass (2-D, 3-D)."""
    if not _C._cuda_built() or len(shape) not in (2, 3):
        return False
    return bool(_C._cuda_tiled_ok(_F32 if cdt == np.float32 else _F64, tuple(shape), tuple(wshape)))


class _Passes:
    """The passes of a filter for one input shape and compute dtype, as a plan: called as
    ``passes_for(shape, cdt)``, it gives the passes it holds (built once)."""

    __slots__ = ("shape", "cdt", "passes", "cval")

    def __init__(self, shape: tuple[int, ...], cdt: np.dtype, passes: list, cval: float) -> None:
        self.shape, self.cdt, self.passes, self.cval = shape, cdt, passes, cval

    def __call__(self, shape: tuple[int, ...], cdt: np.dtype) -> list:
        assert shape == self.shape and cdt == self.cdt  # the key holds shape and dtype
        return self.passes

    @staticmethod
    def caching(key: Optional[tuple], build: Any, cval: float) -> Any:
        """passes_for that builds the passes with build(shape, cdt) and caches them under key
        (nothing is cached for key None)."""

        def passes_for(shape: tuple[int, ...], cdt: np.dtype) -> list:
            passes = build(shape, cdt)
            _plan_put(key, _Passes(tuple(shape), np.dtype(cdt), passes, cval))
            return passes

        return passes_for


def _emulate_passes(host: np.ndarray, passes: list, cval: float, path: int) -> np.ndarray:
    """Runs the passes on the host with the device's own code (test hook): path 0 as the
    device would (tiled where it fits), 1 the direct per-element kernel."""
    cdt = _compute_dtype(host.dtype)
    code = _F32 if cdt == np.float32 else _F64
    cur = np.ascontiguousarray(host, dtype=cdt)
    for w, wshape, shift, mode, boxw in passes:
        dst = np.empty(host.shape, dtype=cdt)
        wbuf = None if w is None else np.ascontiguousarray(w, dtype=cdt)
        strides = tuple(st // cdt.itemsize for st in cur.strides)
        _C._cuda_correlate_host(
            code, cur, 0, dst, wbuf, host.shape, strides, wshape, shift, mode, cval, boxw, path
        )
        cur = dst
    return cur


def _filter(
    inp: _Operand,
    output: Any,
    passes_for: Any,
    cval: float,
    device: Any,
    stream: Any,
    emulate: Any = False,
) -> Any:
    """Shared driver: availability, device, upload, passes, download, timings."""
    index = _cuda.parse_device(device)
    handle = _cuda.stream_handle(stream)
    out_dtype = None
    if output is not None and not isinstance(output, np.ndarray):
        try:  # scipy also takes a dtype for output
            out_dtype = np.dtype(output)
        except TypeError:
            raise ValueError(
                f"output must be a NumPy array or a dtype, got {type(output).__name__}"
            ) from None
        _check_real_dtype(out_dtype, "output")
        output = None
    if output is not None and inp.on_device:
        raise ValueError(
            "output= is only supported for NumPy input on the GPU; device input "
            "returns a new DeviceArray"
        )
    host_out = None
    if output is not None:
        assert inp.shape is not None  # NumPy input: device input with output= raised above
        host_out = _check_host_output(output, inp.shape, False)
    if emulate:
        if inp.on_device:
            raise TypeError("host emulation takes NumPy input")
        if not _C._cuda_built():
            raise _cuda.CudaUnavailableError(_cuda.status())
        host = inp.host
        assert host is not None  # NumPy input (checked above)
        cdt = _compute_dtype(host.dtype)
        res = (
            _emulate_passes(
                host, passes_for(host.shape, cdt), cval, 1 if emulate == "direct" else 0
            )
            if host.size
            else np.empty(host.shape, _compute_dtype(host.dtype))
        )
        res = res.astype(out_dtype or host.dtype, copy=False)
        if host_out is not None:
            host_out[...] = res
            return host_out
        return res
    _cuda._require()
    if inp.on_device and index is None:
        index = inp.view(stream).device  # run where the data lives
    with _cuda._on_device(index):
        keep: list = []
        if inp.on_device:
            src = inp.view(stream)
            _check_ndim(src.shape, "input")
            if src.dtype not in (np.float32, np.float64):
                raise TypeError(f"device input must be float32 or float64, got {src.dtype}")
            if any(st % src.itemsize for st in src.strides):
                raise ValueError("device input strides must be multiples of the item size")
            if out_dtype is not None and out_dtype != src.dtype:
                raise TypeError(
                    f"output dtype {out_dtype} differs from the device input's {src.dtype}"
                )
            if stream is None:
                handle = src.stream
            _cuda._wait_for_operands((src,), handle)
            out = _cuda._empty_here(src.shape, src.dtype, src.device, handle)
            _cuda._kernel_start()
            if src.size:
                _run_passes(
                    src, out, src.dtype, passes_for(src.shape, src.dtype), cval, handle, keep
                )
            _cuda._fence_after([out, *keep], handle)
            return out
        host = inp.host
        assert host is not None
        cdt = _compute_dtype(host.dtype)
        timing = _Timing(handle)
        _cuda._kernel_start()
        timing.mark(0)
        src = _cuda.DeviceArray.from_numpy(host.astype(cdt, copy=False), stream=handle)
        out = _cuda._empty_here(host.shape, cdt, src.device, handle)
        timing.mark(1)
        if host.size:
            _run_passes(src, out, cdt, passes_for(host.shape, cdt), cval, handle, keep)
        timing.mark(2)
        result = out.to_numpy(stream=handle)
        timing.mark(3)
        if result.dtype != (out_dtype or host.dtype):
            result = result.astype(out_dtype or host.dtype)
        return _finish_host(result, timing, host_out)


# --- integer outputs ------------------------------------------------------------------------
# An integer result truncates a double, so it equals scipy's only where every double on the way
# equals scipy's.  The device runs the integer cases whose doubles are exact whatever the order
# (integer values and weights, sums below 2**53: one pass per axis of plain sums, divided and
# stored into the output dtype between axes, as scipy's chain of 1-D filters does); the rest
# run scipy's own order on the host (fastprof.kernels.ndimage_exact).

_EXACT_LIMIT = float(2**53)


def _int_out_dtype(inp: "_Operand", output: Any) -> Optional[np.dtype]:
    """The integer dtype of the result of a filter of host input, or None (float results,
    device input, or an output argument the shared checks will reject)."""
    if inp.host is None:
        return None
    if isinstance(output, np.ndarray):
        dt = output.dtype
    elif output is None:
        dt = inp.host.dtype
    else:
        try:
            dt = np.dtype(output)
        except TypeError:
            return None
    return dt if dt.kind in "biu" and dt.itemsize <= 8 else None


def _uniform_int(
    host: np.ndarray,
    size: Any,
    mode: Any,
    cval: float,
    origin: Any,
    axes: Any,
    dtype: np.dtype,
    device: Any,
    stream: Any,
    emulate: Any,
    parts: list,
) -> np.ndarray:
    """uniform_filter of host into the integer dtype, exactly as scipy: per filtered axis (in
    the order of axes) the box mean stored into dtype before the next axis reads it.  Appends
    the timings of each device call to parts."""
    ax = _check_axes(axes, host.ndim)
    n = len(ax)
    sizes = [int(size)] * n if isinstance(size, (int, np.integer)) else [int(v) for v in size]
    origins = _check_origins(origin, n)
    modes = _check_modes(mode, n)
    cur = host
    for a, sz, o, md in zip(ax, sizes, origins, modes):
        if sz == 1:
            continue
        exact = (  # a running sum holds one value more than the box for a moment
            cur.dtype.kind in "iu"
            and float(cval).is_integer()
            and (_max_abs(cur) + abs(cval)) * (sz + 1) < _EXACT_LIMIT
        )
        if not exact:
            cur = _ndimage_exact.uniform_filter1d(cur, sz, a, o, md, cval, dtype)
            continue
        wshape = tuple(sz if k == a else 1 for k in range(host.ndim))
        sh = tuple(sz // 2 + o if k == a else 0 for k in range(host.ndim))
        one_pass = [(None, wshape, sh, md, 1.0)]
        sums = _filter(
            _Operand(cur, "input"),
            np.float64,
            lambda shape, cdt, p=one_pass: p,
            cval,
            device,
            stream,
            emulate,
        )
        parts.append(getattr(sums, "timings", None))
        cur = _ndimage_exact.c_cast(np.asarray(sums, dtype=np.float64) / float(sz), dtype, False)
    return cur if cur is not host else host.astype(dtype)


def _store_int(result: np.ndarray, output: Any, parts: Optional[list]) -> np.ndarray:
    """result into output when it is an array (after the shared shape checks), else result as
    a TimedArray.  parts: the timings of the device calls that made it, summed (all zero when
    the host computed it), or None for host emulation (no timings)."""
    if parts is not None:
        keys = ("h2d_ms", "kernel_ms", "d2h_ms", "total_ms")
        _local.timings = {k: float(sum(t[k] for t in parts if t)) for k in keys}
    if isinstance(output, np.ndarray):
        _check_host_output(output, result.shape, False)
        output[...] = result
        return output
    if parts is None:
        return result
    out = result.view(TimedArray)
    out.timings = _local.timings
    return out


def _max_abs(host: np.ndarray) -> float:
    return float(np.max(np.abs(host.astype(np.float64)))) if host.size else 0.0


def _check_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """Axes as scipy.ndimage takes them: None (all), an int, or distinct ints (negative ok)."""
    if axes is None:
        return tuple(range(ndim))
    raw = [axes] if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool) else axes
    try:
        raw = list(raw)
    except TypeError:
        raise ValueError(f"axes must be an int, a sequence of ints or None, got {axes!r}") from None
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in raw):
        raise ValueError(f"axes must be an int, a sequence of ints or None, got {axes!r}")
    out = tuple(int(a) + ndim if a < 0 else int(a) for a in raw)
    if any(not 0 <= a < ndim for a in out) or len(set(out)) != len(out):
        raise ValueError(f"axes must be distinct axes of a {ndim}-d input, got {axes!r}")
    return out


def _as_zero_d(result: Any, output: Any) -> Any:
    """The result of a filter run on a 0-d input reshaped to (1,), back in 0-d form: output when
    one was given, else result reshaped (timings kept)."""
    if isinstance(output, np.ndarray):
        return output
    timings = getattr(result, "timings", None)
    out = result.reshape(())
    if timings is not None:
        out.timings = timings
    return out


def _zero_d_output(output: Any) -> Any:
    """output for the (1,)-shaped run of a 0-d input: a 0-d array as a (1,) view; ValueError for
    an array of another shape."""
    if isinstance(output, np.ndarray):
        if output.shape != ():
            raise ValueError(f"output must be a NumPy array of shape (), got {output.shape}")
        return output.reshape(1)
    return output


def _correlate_or_convolve(
    input: Any,
    weights: Any,
    output: Any,
    mode: Any,
    cval: Any,
    origin: Any,
    axes: Any,
    device: Any,
    stream: Any,
    flip: bool,
    emulate: Any,
) -> Any:
    key = None
    if type(weights) is np.ndarray and weights.dtype.kind in "biuf":
        wk = (weights.shape, weights.dtype, weights.tobytes())
        key = _filter_key(
            "convolve" if flip else "correlate", input, output, mode, cval, origin, axes
        )
        key = None if key is None else key + (wk,)
    cached = _plan_get(key)
    if cached is not None:
        return _filter(
            _Operand(input, "input"), output, cached, cached.cval, device, stream, emulate
        )
    inp = _Operand(input, "input")
    if inp.host is not None and inp.host.ndim == 0:
        # scipy.ndimage: 0-d input, 0-d weights, 0-d output; run as one element on one axis
        _check_real_dtype(inp.host.dtype, "input")
        w = np.asarray(weights) if not _cuda.is_device_array(weights) else None
        if w is None or w.ndim != 0:
            raise ValueError(
                "weights must have one dimension per filtered axis (0), got "
                f"{'a device array' if w is None else w.ndim}"
            )
        if axes not in (None, (), []):
            raise ValueError(f"axes must be empty for a 0-d input, got {axes!r}")
        _check_origins(origin, 0)
        res = _correlate_or_convolve(
            inp.host.reshape(1),
            w.reshape(1),
            _zero_d_output(output),
            mode,
            cval,
            0,
            None,
            device,
            stream,
            flip,
            emulate,
        )
        return _as_zero_d(res, output)
    modecode = _check_mode(mode)
    cval = _check_cval(cval)
    if _cuda.is_device_array(weights):
        raise TypeError("weights must be a host array (NumPy or sequence) on the GPU path")
    w0 = np.asarray(weights)
    _check_real_dtype(w0.dtype, "weights")
    w0 = w0.astype(np.float64)
    if w0.size == 0:
        raise ValueError("weights must not be empty")

    def prepare(ndim: int) -> tuple[np.ndarray, tuple[int, ...]]:
        """Weights over all ndim axes and their shifts, checked as scipy checks them."""
        ax = _check_axes(axes, ndim)
        if w0.ndim != len(ax):
            raise ValueError(
                f"weights must have one dimension per filtered axis ({len(ax)}), got {w0.ndim}"
            )
        w = w0
        if len(ax) < ndim:  # unfiltered axes get weights of size 1 and origin 0
            w = np.expand_dims(w0, tuple(a for a in range(ndim) if a not in ax))
        given = _check_origins(origin, len(ax))
        origins = [0] * ndim
        for o, a in zip(given, ax):
            origins[a] = o
        if flip:
            w = w[(slice(None, None, -1),) * w.ndim]
            origins = [-o - (1 if n % 2 == 0 else 0) for o, n in zip(origins, w.shape)]
        for d, (n, o) in enumerate(zip(w.shape, origins)):
            _check_origin_range(n, o, d)
        return np.ascontiguousarray(w), tuple(n // 2 + o for n, o in zip(w.shape, origins))

    if inp.shape is not None and inp.dtype is not None:  # set together
        _check_ndim(inp.shape, "input")
        _check_real_dtype(inp.dtype, "input")
        prepare(len(inp.shape))  # bad weights, axes or origin raise here, before any CUDA call
    int_dt = _int_out_dtype(inp, output)
    if int_dt is not None and inp.host is not None:
        host = inp.host
        parts: list = []
        w, shift = prepare(host.ndim)
        taps = np.where(np.abs(w) > np.finfo(np.float64).eps, w, 0.0)
        bound = _max_abs(host) * float(np.abs(taps).sum()) + abs(cval) * float(np.abs(taps).sum())
        if host.size == 0:
            res = np.empty(host.shape, int_dt)
        elif (
            host.dtype.kind in "iu"
            and np.all(taps == np.round(taps))
            and float(cval).is_integer()
            and bound < _EXACT_LIMIT
        ):
            # integer products and sums: exact in any order, one direct pass on the device
            direct = [(taps, taps.shape, shift, modecode, 0.0)]
            raw = _filter(inp, np.float64, lambda shape, cdt: direct, cval, device, stream, emulate)
            parts.append(getattr(raw, "timings", None))
            res = _ndimage_exact.c_cast(np.asarray(raw, dtype=np.float64), int_dt, True)
        else:
            origins = tuple(sh - n // 2 for sh, n in zip(shift, taps.shape))
            res = _ndimage_exact.correlate(host, taps, modecode, cval, origins, int_dt)
        return _store_int(res, output, None if emulate else parts)

    def passes(shape: tuple[int, ...], cdt: np.dtype) -> list:
        w, shift = prepare(len(shape))
        if _tiled_ok(cdt, shape, w.shape):  # one pass through shared memory beats 1-D passes
            return [(w, w.shape, shift, modecode, 0.0)]
        factors = _separable(w) if (modecode != 1 or cval == 0.0) else None
        if factors is None:
            return [(w, w.shape, shift, modecode, 0.0)]
        out: list[tuple[Optional[np.ndarray], tuple[int, ...], tuple[int, ...], int, float]] = []
        for d, f in enumerate(factors):
            if f.size == 1 and f[0] == 1.0:
                continue
            wshape = tuple(f.size if k == d else 1 for k in range(w.ndim))
            sh = tuple(shift[d] if k == d else 0 for k in range(w.ndim))
            if np.all(f == f[0]):
                out.append((None, wshape, sh, modecode, float(f[0])))
            else:
                out.append((f.reshape(wshape), wshape, sh, modecode, 0.0))
        if not out:  # a single weight of 1 everywhere
            out.append((w, w.shape, shift, modecode, 0.0))
        return out

    return _filter(inp, output, _Passes.caching(key, passes, cval), cval, device, stream, emulate)


def correlate(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
) -> Any:
    """scipy.ndimage.correlate on the GPU. ``_emulate=True`` (or "direct") runs the device code
    on the host instead (a test hook; CUDA builds only)."""
    return _correlate_or_convolve(
        input, weights, output, mode, cval, origin, axes, device, stream, False, _emulate
    )


def convolve(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
) -> Any:
    """scipy.ndimage.convolve on the GPU (the weights flipped, origins mirrored)."""
    return _correlate_or_convolve(
        input, weights, output, mode, cval, origin, axes, device, stream, True, _emulate
    )


def uniform_filter(
    input: Any,
    size: Any = 3,
    output: Any = None,
    mode: Any = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: bool = False,
) -> Any:
    """scipy.ndimage.uniform_filter on the GPU: one box pass per axis of size > 1."""
    key = _filter_key("uniform", input, output, size, mode, cval, origin, axes)
    cached = _plan_get(key)
    if cached is not None:
        return _filter(
            _Operand(input, "input"), output, cached, cached.cval, device, stream, _emulate
        )
    inp = _Operand(input, "input")
    if inp.host is not None and inp.host.ndim == 0:  # a 0-d copy, as scipy.ndimage gives
        _check_real_dtype(inp.host.dtype, "input")
        if axes not in (None, (), []):
            raise ValueError(f"axes must be empty for a 0-d input, got {axes!r}")
        res = uniform_filter(
            inp.host.reshape(1),
            1,
            _zero_d_output(output),
            mode,
            cval,
            0,
            device=device,
            stream=stream,
            _emulate=_emulate,
        )
        return _as_zero_d(res, output)
    cval = _check_cval(cval)

    def plan(shape: tuple[int, ...], cdt: np.dtype) -> list:
        ndim = len(shape)
        ax = list(_check_axes(axes, ndim))
        n = len(ax)
        if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
            sizes = [int(size)] * n
        elif isinstance(size, (list, tuple)) and len(size) == n:
            sizes = [int(s) for s in size]
        else:
            raise ValueError(f"size must be an int or a sequence of {n} ints, got {size!r}")
        if any(s < 1 for s in sizes):
            raise ValueError(f"size must be >= 1, got {size!r}")
        origins = _check_origins(origin, n)
        modes = _check_modes(mode, n)
        out = []
        for a, s, o, md in zip(ax, sizes, origins, modes):
            if s > 1:
                _check_origin_range(s, o, a)
                wshape = tuple(s if k == a else 1 for k in range(ndim))
                sh = tuple(s // 2 + o if k == a else 0 for k in range(ndim))
                out.append((None, wshape, sh, md, 1.0 / s))
        if not out:  # nothing to filter: a copy through a 1x...x1 identity
            out.append((None, (1,) * ndim, (0,) * ndim, 0, 1.0))
        same_mode = len({p[3] for p in out}) == 1
        if len(out) > 1 and same_mode and (out[0][3] != 1 or cval == 0.0):
            # one box pass over all axes equals scipy's 1-D passes (the boundary extension
            # is per axis), except for constant mode with cval != 0
            wshape = tuple(int(np.prod([p[1][k] for p in out])) for k in range(ndim))
            shift = tuple(sum(p[2][k] for p in out) for k in range(ndim))
            if _tiled_ok(cdt, shape, wshape):
                return [(None, wshape, shift, out[0][3], float(np.prod([p[4] for p in out])))]
        return out

    if inp.shape is not None and inp.dtype is not None:  # set together
        _check_ndim(inp.shape, "input")
        _check_real_dtype(inp.dtype, "input")
        plan(inp.shape, _compute_dtype(inp.dtype))  # bad size/origin/mode/axes raise here
    int_dt = _int_out_dtype(inp, output)
    if int_dt is not None and inp.host is not None and inp.host.size:
        parts: list = []
        res = _uniform_int(
            inp.host, size, mode, cval, origin, axes, int_dt, device, stream, _emulate, parts
        )
        return _store_int(res, output, None if _emulate else parts)
    elif isinstance(mode, str):
        _check_mode(mode)
    elif isinstance(mode, (list, tuple)):
        for i, md in enumerate(mode):
            _check_mode(md, "mode[%d]" % i)
    else:
        raise ValueError(f"mode must be a str or a sequence of str, got {mode!r}")
    return _filter(inp, output, _Passes.caching(key, plan, cval), cval, device, stream, _emulate)


# --- evaluate -----------------------------------------------------------------------------------


def generate_source(expr: str, operands: dict[str, Any]) -> _expr_cuda.Source:
    """The fused kernel ``fp_eval`` for expr (fastprof.kernels.expr_cuda.Source), given each name's
    operand: an array's dtype, or a scalar.  expr is parsed and typed as on the CPU
    (fastprof.kernels.expr), so both devices accept one language with one result dtype.  Raises
    ValueError for expressions outside the language, TypeError for operations NumPy has no
    loop for or the GPU cannot compute (e.g. float16 results)."""
    tree = _expr.parse_cached(expr)
    probe = {n: np.empty(0, v) if isinstance(v, np.dtype) else v for n, v in operands.items()}
    try:
        typed = _expr.typed(tree, probe)
    except TypeError as exc:
        raise TypeError(f"expr {_expr._shown(expr)}: {exc}") from None
    return _expr_cuda.generate(typed, operands)


_kernel_cache: dict[tuple, tuple[int, _expr_cuda.Source]] = {}
_nvrtc_names = ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")


def _nvrtc_paths() -> tuple[str, ...]:
    return library_candidates("nvrtc", _nvrtc_names, "cuda_nvrtc")


def compile_source(source: str, arch: str, cubin: bool = True) -> bytes:
    """NVRTC image (CUBIN for arch "sm_XY", else PTX for "compute_XY") of source. Needs NVRTC,
    not a device. Raises CudaUnavailableError without NVRTC, RuntimeError with the log."""
    return _C._cuda_nvrtc_compile(
        source,
        "fastprof_eval.cu",
        (f"--gpu-architecture={arch}", "--std=c++17"),
        cubin,
        _nvrtc_paths(),
    )


def evaluate(
    expr: str,
    local_dict: Optional[dict] = None,
    out: Any = None,
    *,
    global_dict: Optional[dict] = None,
    device: Any = "cuda",
    stream: Any = None,
    _frame_depth: int = 1,
) -> Any:
    """Evaluates an expression as one fused GPU kernel, with the CPU's language and dtypes.

    Arrays must share one shape (scalars broadcast); every operation computes in the dtypes
    NumPy's loop for it uses (fastprof.kernels.expr.typed); a sum/prod at the top reduces the whole
    array or one axis.  Names come from local_dict (and global_dict), else from the caller's
    frame.
    """
    names = _expr_names(expr)
    if local_dict is not None and not isinstance(local_dict, dict):
        raise TypeError(f"local_dict must be a dict or None, got {type(local_dict).__name__}")
    if local_dict is None and global_dict is None:
        frame = sys._getframe(_frame_depth)
        scopes: tuple[dict, ...] = (frame.f_locals, frame.f_globals)
    else:
        scopes = (local_dict or {}, global_dict or {})
    operands: dict[str, _Operand] = {}
    scalars: dict[str, Any] = {}
    sig: list[tuple] = []  # what the plan depends on: each name's kind, dtype and shape
    for n in names:
        for scope in scopes:
            if n in scope:
                v = scope[n]
                break
        else:
            raise KeyError(f"name {n!r} in expr is not defined")
        if isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_)):
            scalars[n] = v
            sig.append((n, _scalar_key(v)))
            continue
        op = _Operand(v, f"variable {n!r}")
        if op.host is not None and op.host.ndim == 0:
            _check_real_dtype(op.host.dtype, f"variable {n!r}")
            scalars[n] = op.host[()]
            sig.append((n, op.host.dtype))
            continue
        if op.dtype is not None:
            _check_real_dtype(op.dtype, f"variable {n!r}")
        operands[n] = op
        sig.append((n, op.dtype, op.shape, op.on_device))
    shapes = {op.shape for op in operands.values() if op.shape is not None}
    if len(shapes) > 1:
        raise ValueError(f"arrays in expr must share one shape on the GPU, got {sorted(shapes)}")
    on_device = any(op.on_device for op in operands.values())
    if out is not None and (on_device or not isinstance(out, np.ndarray)):
        raise TypeError("out must be a NumPy array, and only for NumPy input")
    index = _cuda.parse_device(device)
    handle = _cuda.stream_handle(stream)
    if not operands:
        raise ValueError("expr must reference at least one array on the GPU")
    planned = None
    if all(op.dtype is not None and op.shape is not None for op in operands.values()):
        # checked before any CUDA call; a repeat call finds its plan in the cache
        key = ("evaluate", expr, tuple(sig))
        planned = _plan_get(key)
        if planned is None:
            planned = _plan_put(key, _evaluate_plan(expr, operands, scalars))
        _check_out_shape(out, planned[3][0])
    _cuda._require()
    if index is None:
        for op in operands.values():
            if op.on_device:
                index = op.view(stream).device  # run where the data lives
                break
    with _cuda._on_device(index):
        if planned is None:
            for op in operands.values():
                op.view(stream)
            planned = _evaluate_plan(expr, operands, scalars)
            _check_out_shape(out, planned[3][0])
        src, shape, size, plan = planned
        res_shape = plan[0]
        dev = _C._cuda_get_device()
        kkey = (src.source, dev)  # the generated source holds the expression and dtypes
        hit = _kernel_cache.get(kkey)
        if hit is None:
            cc = _cuda._props(dev)["compute_capability"]
            image = compile_source(src.source, f"sm_{cc[0]}{cc[1]}")
            _lib, kernel = _C._cuda_library_load(image, "fp_eval")
            hit = _kernel_cache[kkey] = (kernel, src)
        kernel = hit[0]
        keep: list = []
        timing = None if on_device else _Timing(handle)
        _cuda._kernel_start()
        if timing:
            timing.mark(0)
        views: dict[str, _cuda.DeviceArray] = {}
        for n, op in operands.items():
            if op.on_device:
                v = op.view(stream)
                if not v.is_c_contiguous:
                    raise ValueError(f"device variable {n!r} must be C-contiguous")
                if stream is None and v.stream:
                    handle = v.stream
            else:
                assert op.host is not None  # not on the device
                v = _cuda.DeviceArray.from_numpy(op.host, stream=handle)
                keep.append(v)
            views[n] = v
        if any(v.shape != shape for v in views.values()):
            raise ValueError("arrays in expr must share one shape on the GPU")
        if on_device:  # device operands may come on other streams (CUDA Array Interface v3)
            _cuda._wait_for_operands(
                [views[n] for n, op in operands.items() if op.on_device], handle
            )
        _res_shape, nout, nred, inner = plan
        result = _cuda._empty_here((nout,), src.out_dtype, dev, handle)
        if timing:
            timing.mark(1)
        fmt = ""
        args: list[Any] = []
        for p in src.params:
            fmt += p.fmt
            if p.fmt == "p":
                args.append(views[p.name].ptr)
            else:
                value = scalars[p.name]
                args.append(float(value) if p.fmt == "d" else _as_long_long(int(value)))
        if src.reduce is None:
            fmt += "pq"
            args += [result.ptr, nout]
        else:
            fmt += "pqqqq"
            args += [result.ptr, nout, nred, inner, size]
        if nout:
            blocks = int(min((nout + 255) // 256, 65535 * 8))
            _C._cuda_launch(kernel, blocks, 256, fmt, tuple(args), handle)
        if on_device and src.reduce is None:
            _cuda._fence_after([result, *keep], handle)
            return _reshape_device(result, res_shape)
        if timing:
            timing.mark(2)
        host = result.to_numpy(stream=handle)
        if timing:
            timing.mark(3)
        if src.reduce is not None:
            host = _finish_reduce(host, src, res_shape, res_shape == () and nout != 1)
            if on_device:
                return _cuda.DeviceArray.from_numpy(np.ascontiguousarray(host), stream=handle)
        host = host.reshape(res_shape)
        assert timing is not None  # host input
        return _finish_host(host, timing, out)


_names_seen: dict[str, tuple[str, ...]] = {}


def _expr_names(expr: Any) -> tuple[str, ...]:
    """The names expr reads, in order of first appearance (found once per expression string,
    through fastprof.kernels.expr's parse cache; raises as parse_cached does)."""
    hit = _names_seen.get(expr) if type(expr) is str else None
    if hit is None:
        hit = tuple(_expr.names(_expr.parse_cached(expr)))
        if len(_names_seen) >= _PLANS_MAX:
            _names_seen.pop(next(iter(_names_seen)))
        _names_seen[expr] = hit
    return hit


def _scalar_key(v: Any) -> Any:
    """What an evaluate plan depends on of a scalar operand: its type, and for a Python int
    whether it is negative and its bit length (which integer dtypes can hold it: NumPy raises
    OverflowError for one outside an array's range)."""
    if type(v) is int:
        return (int, v < 0, (v if v >= 0 else ~v).bit_length())
    return type(v)


def _check_out_shape(out: Any, shape: tuple[int, ...]) -> None:
    """Raises ValueError when out (a NumPy array or None) has not the result's shape."""
    if out is not None and out.shape != shape:
        raise ValueError(f"out must have shape {shape}, got {out.shape}")


def _evaluate_plan(
    expr: str, operands: dict[str, _Operand], scalars: dict[str, Any]
) -> tuple[_expr_cuda.Source, tuple[int, ...], int, tuple[tuple[int, ...], int, int, int]]:
    """(kernel source, operand shape, its size, reduction plan) once every dtype is known;
    raises for what is outside the language or the GPU's dtypes."""
    kinds: dict[str, Any] = {n: np.dtype(op.dtype) for n, op in operands.items()}
    kinds.update(scalars)
    src = generate_source(expr, kinds)
    shape = next(iter(operands.values())).shape
    assert shape is not None  # known for host arrays, set by view() for device ones
    size = int(np.prod(shape, dtype=np.int64))
    plan = _reduce_plan(src, shape, expr)
    return src, shape, size, plan


_CHUNK = 4096  # elements a thread reduces before the host adds the partials


def _reduce_plan(
    src: _expr_cuda.Source, shape: tuple[int, ...], expr: str
) -> tuple[tuple[int, ...], int, int, int]:
    """(result shape, outputs the kernel writes, elements each reduces, inner stride)."""
    size = int(np.prod(shape, dtype=np.int64))
    if src.reduce is None:
        return shape, size, 1, 1
    tree_axis = src.axis
    if tree_axis is None:
        return (), max(1, -(-size // _CHUNK)), _CHUNK, 1
    ndim = len(shape)
    if not -ndim <= tree_axis < ndim:
        raise ValueError(
            f"expr {_expr._shown(expr)}: axis {tree_axis} is out of range for the {ndim}-d"
            f" value of {src.reduce}()'s operand"
        )
    axis = tree_axis % ndim
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    return shape[:axis] + shape[axis + 1 :], outer * inner, shape[axis], max(inner, 1)


def _finish_reduce(
    host: np.ndarray, src: _expr_cuda.Source, res_shape: tuple[int, ...], partials: bool
) -> np.ndarray:
    """The reduction's result in its dtype from the kernel's outputs (partials of the
    whole-array form are added here)."""
    ufunc = _expr.REDUCTIONS[src.reduce or "sum"]
    if partials:
        if host.size == 0:
            return np.asarray(ufunc.reduce(np.empty(0, src.dtype)))
        host = np.asarray(ufunc.reduce(host))
    return np.asarray(host.astype(src.dtype)).reshape(res_shape)


def _as_long_long(v: int) -> int:
    """v as the signed 64-bit value with its low 64 bits (a uint64 above 2**63 wraps)."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _reshape_device(result: _cuda.DeviceArray, shape: tuple[int, ...]) -> _cuda.DeviceArray:
    """The flat device result viewed with shape (C order)."""
    item = result.dtype.itemsize
    strides = tuple(int(np.prod(shape[i + 1 :], dtype=np.int64)) * item for i in range(len(shape)))
    return _cuda.DeviceArray(result.ptr, shape, result.dtype, strides, 0, result)


# --- matmul -------------------------------------------------------------------------------------


_CUBLAS_NAMES = ("libcublas.so", "libcublas.so.13", "libcublas.so.12")


def matmul(a: Any, b: Any, *, device: Any = "cuda", stream: Any = None) -> Any:
    """a @ b for 2-D float32/float64 arrays with cuBLAS (row-major handled)."""
    pa, pb = _Operand(a, "a"), _Operand(b, "b")
    for op, what in ((pa, "a"), (pb, "b")):
        if op.shape is not None and len(op.shape) != 2:
            raise ValueError(f"{what} must be 2-D, got {len(op.shape)}-d")
        if op.dtype is not None:
            _check_real_dtype(op.dtype, what)
    if pa.shape is not None and pb.shape is not None and pa.shape[1] != pb.shape[0]:
        raise ValueError(f"matmul shapes do not match: a {pa.shape} @ b {pb.shape}")
    index = _cuda.parse_device(device)
    handle = _cuda.stream_handle(stream)
    _cuda._require()
    if index is None and (pa.on_device or pb.on_device):
        index = (pa if pa.on_device else pb).view(stream).device  # run where the data lives
    with _cuda._on_device(index):
        on_device = pa.on_device or pb.on_device
        if on_device:
            va, vb = pa.view(stream), pb.view(stream)
            if va.dtype != vb.dtype or va.dtype not in (np.float32, np.float64):
                raise TypeError(
                    f"device a and b must both be float32 or float64, got {va.dtype}, {vb.dtype}"
                )
            if not (va.is_c_contiguous and vb.is_c_contiguous):
                raise ValueError("device a and b must be C-contiguous")
            if va.ndim != 2 or vb.ndim != 2 or va.shape[1] != vb.shape[0]:
                raise ValueError(f"matmul shapes do not match: a {va.shape} @ b {vb.shape}")
            if stream is None and va.stream:
                handle = va.stream
            _cuda._wait_for_operands((va, vb), handle)
            cdt = va.dtype
            timing = None
            _cuda._kernel_start()
        else:
            cdt = (
                np.dtype(np.float32)
                if (pa.dtype == np.float32 and pb.dtype == np.float32)
                else np.dtype(np.float64)
            )
            timing = _Timing(handle)
            _cuda._kernel_start()
            timing.mark(0)
            assert pa.host is not None and pb.host is not None  # neither is on the device
            va = _cuda.DeviceArray.from_numpy(pa.host.astype(cdt, copy=False), stream=handle)
            vb = _cuda.DeviceArray.from_numpy(pb.host.astype(cdt, copy=False), stream=handle)
        m, k = va.shape
        n = vb.shape[1]
        c = _cuda._empty_here((m, n), cdt, va.device, handle)
        if timing:
            timing.mark(1)
        if m and n:
            if k == 0:
                _C._cuda_memcpy_htod(c.ptr, np.zeros((m, n), cdt).data.cast("B"), handle)
            else:
                _C._cuda_gemm(
                    0 if cdt == np.float32 else 1,
                    m,
                    n,
                    k,
                    va.ptr,
                    vb.ptr,
                    c.ptr,
                    handle,
                    library_candidates("cublas", _CUBLAS_NAMES, "cublas"),
                )
        if timing is None:
            _cuda._fence_after([c, va, vb], handle)
            return c
        timing.mark(2)
        host = c.to_numpy(stream=handle)
        timing.mark(3)
        return _finish_host(host, timing, None)
