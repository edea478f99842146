"""GPU versions of fastprof.kernels: convolve, correlate, uniform_filter, evaluate, matmul.

Same signatures as the CPU kernels plus ``device=`` ("cuda", "gpu", "cuda:N") and ``stream=``.
fastprof.kernels checks the arguments once (fastprof.kernels.args) and hands what the checks
normalised to :func:`correlate_args`, :func:`uniform_filter_args`, :func:`evaluate_args` and
:func:`matmul_args` for ``device="cuda"`` or device-array input; :func:`correlate`,
:func:`convolve`, :func:`uniform_filter`, :func:`evaluate` and :func:`matmul` called directly
take the arguments as given and check them through the same module, so both devices give a
bad argument the same error.

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

import functools
import math
import threading
from typing import Any, Optional, Sequence

import numpy as np

from .. import _fastprof as _C
from ..cuda import runtime as _cuda
from ..cuda.libs import library_candidates
from . import complex_parts as _complex
from . import expr as _expr
from . import expr_cuda as _expr_cuda
from . import ndimage_exact as _ndimage_exact
from .args import (
    ConvArgs,
    EvalArgs,
    UniformArgs,
    _own_device_types,
    bind_scalar_parts,
    caller_names,
    check_convolve_args,
    check_evaluate_args,
    check_matmul_args,
    check_uniform_args,
    rank1_factors,
)

__all__ = [
    "convolve",
    "correlate",
    "uniform_filter",
    "evaluate",
    "matmul",
    "correlate_args",
    "uniform_filter_args",
    "evaluate_args",
    "matmul_args",
    "last_timings",
    "TimedArray",
    "generate_source",
]

_MAXDIM = 8
_F32, _F64 = 0, 1
_F32_DT, _F64_DT = np.dtype(np.float32), np.dtype(np.float64)
_DeviceArray = _cuda.DeviceArray
_own_device_types.add(_DeviceArray)  # the shared checks take it as it is

# --- what only the GPU adds to the shared checks ------------------------------------------------


def _check_ndim(shape: tuple[int, ...], what: str) -> None:
    if not 1 <= len(shape) <= _MAXDIM:
        raise ValueError(f"{what} must have 1 to {_MAXDIM} dimensions on the GPU, got {len(shape)}")


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


def _exact_dtypes(input: Any, out_dtype: np.dtype, on_device: bool) -> tuple[int, np.dtype]:
    """The exact code (1, or 2 where results are rounded to float32 in float64 arrays) and the
    compute dtype of scipy's arithmetic on the device for a float out_dtype: float32 only where
    input and output both are (scipy reads every input into doubles, so float32 input for a
    float64 output is read as float64)."""
    if on_device:
        return 1, np.dtype(input.dtype)
    if np.dtype(input.dtype) == _F32_DT and out_dtype == _F32_DT:
        return 1, _F32_DT
    return (2 if out_dtype == _F32_DT else 1), _F64_DT


def _check_gpu_dtype(dtype: np.dtype, what: str) -> None:
    """TypeError for a dtype the shared checks take but the GPU cannot load (above 64 bits)."""
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(
            f"{what} must have a real numeric dtype (bool, int, float up to 64 bit), got {dtype}"
        )


def _check_filter_io(input: Any, output: Any, out_dtype: np.dtype) -> bool:
    """Whether a filter's (checked) input lives on the device; raises for what the GPU adds to
    the shared checks: rank 1 to 8, float32/float64 device input read as it is, output= (an
    array) for NumPy input only."""
    on_device = not isinstance(input, np.ndarray)
    _check_ndim(tuple(input.shape), "input")
    if output is not None and (on_device or not isinstance(output, np.ndarray)):
        raise ValueError(
            "output= is only supported for NumPy input on the GPU (a NumPy array or a dtype);"
            " device input returns a new DeviceArray"
        )
    if on_device:
        dt = np.dtype(input.dtype)
        if dt not in (np.float32, np.float64):
            raise TypeError(f"device input must be float32 or float64, got {dt}")
        if out_dtype != dt:
            raise TypeError(f"output dtype {out_dtype} differs from the device input's {dt}")
    return on_device


# --- timings ------------------------------------------------------------------------------------


class TimedArray(np.ndarray):
    """A NumPy result of a GPU kernel on NumPy input; ``.timings`` holds h2d_ms, kernel_ms,
    d2h_ms (and total_ms) of the call that made it (None on arrays derived from it: they read
    the class's).  Ufuncs and reductions that give a 0-d result give what they give on a plain
    ndarray: a NumPy scalar (``r.sum()``, ``r.max()``), or a 0-d plain ndarray where NumPy
    keeps an array."""

    timings: Optional[dict[str, float]] = None

    def __array_wrap__(
        self, arr: np.ndarray, context: Any = None, return_scalar: bool = False
    ) -> Any:
        """The result of a ufunc or reduction: a 0-d one as on a plain ndarray (the scalar
        with return_scalar, NumPy 2, or always for NumPy 1, which converts plain 0-d results
        itself), any other one a TimedArray without timings, as before."""
        if arr.ndim == 0:
            plain = arr.view(np.ndarray)
            return plain[()] if return_scalar or _NUMPY_1 else plain
        return arr if type(arr) is TimedArray else arr.view(TimedArray)


_NUMPY_1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"


_local = threading.local()


def last_timings() -> Optional[dict[str, float]]:
    """Timings of this thread's last GPU kernel call: h2d_ms, kernel_ms, d2h_ms, total_ms."""
    return getattr(_local, "timings", None)


# --- calls on NumPy operands --------------------------------------------------------------------
# Such a call takes a staging set from fastprof.cuda.runtime's pool (device buffers for the
# uploaded operands, temporaries and the result, and four timing events) with the first event
# recorded, uploads the operands and records the second event in one call, runs, records the
# third event, downloads the result straight into the NumPy array it returns and records the
# last one in one call, and waits for the events: then nothing queued on its stream uses the
# set any more, which the pool keeps for the next call of the same sizes.  A call that fails on
# the way abandons its set (its frees wait for the work queued so far).


def _host_finish(
    got: _cuda._Staged,
    dev: int,
    sizes: tuple[int, ...],
    total: int,
    handle: int,
    result: np.ndarray,
    output: Optional[np.ndarray],
) -> np.ndarray:
    """The result of a call on NumPy operands (its four events recorded): result as a
    TimedArray with the call's timings (also this thread's last_timings()), a NumPy scalar
    for a 0-d result (evaluate's whole-array reductions: the CPU's too), or output filled
    with it; waits for the events and gives the staging set back."""
    h2d, kernel, d2h = _cuda._staging.end(got, dev, sizes, total, handle)
    t = {"h2d_ms": h2d, "kernel_ms": kernel, "d2h_ms": d2h, "total_ms": h2d + kernel + d2h}
    _local.timings = t
    if output is not None:
        if output is not result:
            output[...] = result
        return output
    if result.ndim == 0:
        return result.view(np.ndarray)[()]
    out = result if type(result) is TimedArray else result.view(TimedArray)
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
# A direct call with the arguments as given is keyed by them too (a hit skips the checks).

_PLANS_MAX = 256
_plans: dict[tuple, Any] = {}
_plan_builds = 0  # plans built (the tests count cache misses with it)


def _plan_get(key: Optional[tuple]) -> Any:
    """The cached plan for key, or None (always None for key None: arguments not cacheable)."""
    return None if key is None else _plans.get(key)


def _plan_put(key: Optional[tuple], plan: Any, built: bool = True) -> Any:
    """Caches plan under key (when key is not None; the oldest plan goes when full) and
    returns it; built=False for a plan found under another key (not counted as built)."""
    global _plan_builds
    if built:
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
    inputs the plans do not cover (other libraries' device arrays, sequences, integer NumPy
    input: its results are computed as scipy's on the host where needed)."""
    if type(obj) is np.ndarray:
        return None if obj.dtype.kind not in "f" else ("host", obj.shape, obj.dtype)
    if type(obj) is _DeviceArray:
        return ("device", obj.shape, obj.dtype, obj.strides)
    return None


def _raw_filter_key(name: str, input: Any, output: Any, *args: Any) -> Optional[tuple]:
    """The plan key of a direct call with the arguments as given, or None when it cannot be
    cached (integer results, arguments without a hashable stand-in)."""
    t = type(input)  # as _input_key
    if t is np.ndarray:
        if input.dtype.kind != "f":
            return None
        ik: tuple = ("host", input.shape, input.dtype)
    elif t is _DeviceArray:
        ik = ("device", input.shape, input.dtype, input.strides)
    else:
        return None
    try:
        if output is None:
            ok: Any = None
        elif isinstance(output, np.ndarray):
            if output.dtype.kind not in "f":
                return None
            ok = ("array", output.shape, output.dtype)
        else:
            ok = _hashable(output)
            if np.dtype(output).kind not in "f":
                return None
        key: list[Any] = [name, ik, ok]
        for a in args:
            t = type(a)
            key.append((t, a) if t is int or t is float or t is str or a is None else _hashable(a))
        return tuple(key)
    except TypeError:
        return None


class _FilterPlan:
    """A filter's passes for one input shape and compute dtype (each: weights or None for a
    box, weights shape, shift, mode, box weight), its boundary value and result dtype; and,
    from its first run, the input's layout (:func:`_layout`; a plan is keyed by one).  exact:
    0 for the fast kernels, 1 for scipy's arithmetic, 2 for that with every pass's results
    rounded to float32 (the float32 arrays scipy stores between passes, kept in float64);
    cdt: the compute dtype NumPy input is converted to (None: float32 input stays float32)."""

    __slots__ = ("passes", "cval", "out_dtype", "layout", "exact", "cdt")

    def __init__(
        self,
        passes: list,
        cval: float,
        out_dtype: np.dtype,
        exact: int = 0,
        cdt: Optional[np.dtype] = None,
    ) -> None:
        self.passes, self.cval, self.out_dtype = passes, cval, out_dtype
        self.exact, self.cdt = exact, cdt
        self.layout: Optional[_Layout] = None


# (element type code, input strides in elements, C-contiguous strides in elements, elements,
# C-contiguous strides in bytes)
_Layout = tuple[int, tuple[int, ...], tuple[int, ...], int, tuple[int, ...]]


def _layout(shape: tuple[int, ...], strides: Optional[tuple[int, ...]], cdt: np.dtype) -> _Layout:
    """What the passes need of an input of shape in compute dtype cdt with byte strides
    (None: C-contiguous); raises ValueError for strides that are not multiples of the item
    size."""
    item = cdt.itemsize
    contiguous = _cuda._c_strides(shape, 1)
    c_bytes = _cuda._c_strides(shape, item)
    if strides is None or strides == c_bytes:
        in_strides = contiguous
    elif any(st % item for st in strides):
        raise ValueError("device input strides must be multiples of the item size")
    else:
        in_strides = tuple(st // item for st in strides)
    code = _F32 if cdt == np.float32 else _F64
    return (code, in_strides, contiguous, math.prod(shape), c_bytes)


# --- filters ------------------------------------------------------------------------------------


_weights_cache: dict[tuple, tuple[_cuda.DeviceArray, np.ndarray]] = {}
_WEIGHTS_CACHE_MAX = 32


def _device_weights(
    w: np.ndarray, cdt: np.dtype, stream: int
) -> tuple[_cuda.DeviceArray, np.ndarray]:
    """The weights on the current device, and the same values on the host (which the
    per-element kernel takes in its parameters where they fit), uploaded once per content,
    dtype and device (a small cache: re-uploading would make every call wait for the stream)."""
    host = np.ascontiguousarray(w, dtype=cdt)
    key = (host.tobytes(), host.shape, cdt.str, _C._cuda_get_device())
    hit = _weights_cache.get(key)
    if hit is None:
        if len(_weights_cache) >= _WEIGHTS_CACHE_MAX:
            _C._cuda_synchronize()  # the evicted block may still be read on another stream
            _weights_cache.pop(next(iter(_weights_cache)))
        hit = _weights_cache[key] = (_cuda.DeviceArray.from_numpy(host, stream=stream), host)
    return hit


def _run_passes(
    src: int,
    dsts: Sequence[int],
    shape: tuple[int, ...],
    lay: _Layout,
    cdt: np.dtype,
    passes: list[tuple[Optional[np.ndarray], tuple[int, ...], tuple[int, ...], int, float]],
    cval: float,
    stream: int,
    keep: list,
    exact: int = 0,
) -> None:
    """Runs correlation passes (weights or None for box, wshape, shift, mode, box weight) from
    the input at device pointer src (layout lay) into dsts, one C-contiguous block per pass (the
    last one the result), with scipy's arithmetic where exact (float64 weights).  The uploaded
    weights go to keep."""
    code, cur_strides, contiguous, _n, _c_bytes = lay
    cur_ptr = src
    for (w, wshape, shift, mode, boxw), dst in zip(passes, dsts):
        wptr, host_w = 0, None
        if w is not None:
            wd, host_w = _device_weights(w, _F64_DT if exact else cdt, stream)
            keep.append(wd)
            wptr = wd.ptr
        _C._cuda_correlate(
            code,
            cur_ptr,
            dst,
            wptr,
            shape,
            cur_strides,
            wshape,
            shift,
            mode,
            cval,
            boxw,
            stream,
            host_w,
            exact,
        )
        cur_ptr, cur_strides = dst, contiguous


def _tiled_ok(cdt: np.dtype, shape: tuple[int, ...], wshape: tuple[int, ...]) -> bool:
    """Whether the device runs this correlation as one shared-memory tiled pass (2-D, 3-D)."""
    if not _C._cuda_built() or len(shape) not in (2, 3):
        return False
    return bool(_C._cuda_tiled_ok(_F32 if cdt == np.float32 else _F64, tuple(shape), tuple(wshape)))


def _emulate_passes(host: np.ndarray, plan: _FilterPlan, path: int) -> np.ndarray:
    """Runs the plan's passes on the host with the device's own code (test hook): path 0 as the
    device would (tiled where it fits), 1 the direct per-element kernel."""
    cdt = plan.cdt or _compute_dtype(host.dtype)
    code = _F32 if cdt == np.float32 else _F64
    cur = np.ascontiguousarray(host, dtype=cdt)
    for w, wshape, shift, mode, boxw in plan.passes:
        dst = np.empty(host.shape, dtype=cdt)
        wdt = _F64_DT if plan.exact else cdt
        wbuf = None if w is None else np.ascontiguousarray(w, dtype=wdt)
        strides = tuple(st // cdt.itemsize for st in cur.strides)
        _C._cuda_correlate_host(
            code,
            cur,
            0,
            dst,
            wbuf,
            host.shape,
            strides,
            wshape,
            shift,
            mode,
            plan.cval,
            boxw,
            path,
            plan.exact,
        )
        cur = dst
    return cur


def _run_filter(
    input: Any,
    output: Optional[np.ndarray],
    plan: _FilterPlan,
    device: Any,
    stream: Any,
    emulate: Any,
) -> Any:
    """Shared driver of checked arguments: availability, device, upload, passes, download,
    timings.  output: a NumPy array of input's shape, or None."""
    index = None if device == "cuda" else _cuda.parse_device(device)
    handle = 0 if stream is None else _cuda.stream_handle(stream)
    out_dtype = plan.out_dtype
    if output is not None and not output.flags.writeable:
        raise ValueError("output must be writeable")
    if emulate:
        if not isinstance(input, np.ndarray):
            raise TypeError("host emulation takes NumPy input")
        if not _C._cuda_built():
            raise _cuda.CudaUnavailableError(_cuda.status())
        cdt = plan.cdt or _compute_dtype(input.dtype)
        res = (
            _emulate_passes(input, plan, 1 if emulate == "direct" else 0)
            if input.size
            else np.empty(input.shape, cdt)
        )
        res = res.astype(out_dtype, copy=False)
        if output is not None:
            output[...] = res
            return output
        return res
    _cuda._require()
    if not isinstance(input, np.ndarray):
        src = input if type(input) is _DeviceArray else _cuda.as_device_array(input, stream)
        lay = plan.layout
        if lay is None:  # the plan is keyed by the input's shape, dtype and strides
            lay = plan.layout = _layout(src.shape, src.strides, src.dtype)
        if not src.ptr and lay[3]:
            raise ValueError("input is a device array without memory (a null pointer): freed?")
        if stream is None:
            handle = src.stream
        if index is None:
            index = src.device  # run where the data lives
        if index == _C._cuda_get_device():
            return _filter_device(src, lay, plan, handle)
        with _cuda._on_device(index):
            return _filter_device(src, lay, plan, handle)
    if index is None:
        return _filter_host(input, output, plan, _C._cuda_get_device(), handle)
    with _cuda._on_device(index):
        return _filter_host(input, output, plan, _C._cuda_get_device(), handle)


def _filter_host(
    host: np.ndarray, output: Optional[np.ndarray], plan: _FilterPlan, dev: int, handle: int
) -> np.ndarray:
    """The filter of NumPy input host on device dev (current), queued on handle: a TimedArray,
    or output filled."""
    cdt = plan.cdt or (_F32_DT if host.dtype == _F32_DT else _F64_DT)
    if host.dtype != cdt or not host.flags.c_contiguous:
        host = np.ascontiguousarray(host, dtype=cdt)
    lay = plan.layout
    if lay is None:  # the plan is keyed by the input's shape and dtype
        lay = plan.layout = _layout(host.shape, None, cdt)
    passes = plan.passes
    nbytes = lay[3] * cdt.itemsize
    sizes = (nbytes,) * (len(passes) + 1)  # the input, one block per pass
    total = nbytes * len(sizes)
    got = _cuda._staging.begin(dev, sizes, total, handle)
    ptrs, events = got[0], got[2]
    try:
        _C._cuda_upload(ptrs[:1], (host,), handle, events[1])
        if lay[3]:
            _run_passes(
                ptrs[0], ptrs[1:], host.shape, lay, cdt, passes, plan.cval, handle, [], plan.exact
            )
        result: np.ndarray = TimedArray(host.shape, cdt)
        _C._cuda_download(result, ptrs[-1], handle, events[2], events[3])
        if cdt != plan.out_dtype:
            result = result.astype(plan.out_dtype)
    except BaseException:
        _cuda._staging.abandon(got, handle)
        raise
    return _host_finish(got, dev, sizes, total, handle, result, output)


def _filter_device(
    src: _cuda.DeviceArray, lay: _Layout, plan: _FilterPlan, handle: int
) -> _cuda.DeviceArray:
    """The filter of device array src (layout lay) on its device (current), queued on
    handle."""
    keep: list = []
    if src.stream != handle:
        _cuda._wait_for_operands((src,), handle)
    dev, shape, cdt = src.device, src.shape, src.dtype
    out = _cuda._empty_laid_out(shape, cdt, lay[4], lay[3] * cdt.itemsize, dev, handle)
    if _cuda._bench_start.pending is not None:
        _cuda._kernel_start()
    if lay[3]:
        passes = plan.passes
        dsts = [out.ptr]
        if len(passes) > 1:  # temporaries between the passes
            for _ in passes[1:]:
                keep.append(_cuda._empty_here(shape, cdt, dev, handle))
            dsts = [t.ptr for t in keep] + dsts
        _run_passes(src.ptr, dsts, shape, lay, cdt, passes, plan.cval, handle, keep, plan.exact)
    if handle:
        _cuda._fence_after([out, *keep], handle)
    return out


def _upload(host: np.ndarray, dev: int, handle: int) -> _cuda.DeviceArray:
    """A C-contiguous device copy of host on device dev (current), queued on handle."""
    if not host.flags.c_contiguous:
        host = np.ascontiguousarray(host)
    out = _cuda._empty_here(host.shape, host.dtype, dev, handle)
    _C._cuda_upload((out.ptr,), (host,), handle)
    return out


def _download(arr: _cuda.DeviceArray, handle: int) -> np.ndarray:
    """A NumPy copy of arr (C-contiguous, on the current device), queued on handle."""
    out = np.empty(arr.shape, dtype=arr.dtype)
    _C._cuda_download(out, arr.ptr, handle)
    return out


# --- integer outputs ------------------------------------------------------------------------
# An integer result truncates a double, so it equals scipy's only where every double on the way
# equals scipy's.  The device runs the integer cases whose doubles are exact whatever the order
# (integer values and weights, sums below 2**53: one pass per axis of plain sums, divided and
# stored into the output dtype between axes, as scipy's chain of 1-D filters does); the rest
# run scipy's own order on the host (fastprof.kernels.ndimage_exact).

_EXACT_LIMIT = float(2**53)


def _sums_on_device(
    host: np.ndarray, passes: list, cval: float, device: Any, stream: Any, emulate: Any
) -> np.ndarray:
    """The float64 result of passes over host (device or host emulation)."""
    return _run_filter(host, None, _FilterPlan(passes, cval, _F64_DT), device, stream, emulate)


def _uniform_int(a: UniformArgs, device: Any, stream: Any, emulate: Any, parts: list) -> np.ndarray:
    """uniform_filter of a.input (NumPy) into the integer a.out_dtype, exactly as scipy: per
    filtered axis (in the order of a.axes) the box mean stored into the dtype before the next
    axis reads it.  Appends the timings of each device call to parts."""
    host, dtype, cval = a.input, a.out_dtype, a.cval
    cur = host
    for ax in a.axes:
        sz, o, md = a.sizes[ax], a.origins[ax], a.modes[ax]
        if sz == 1:
            continue
        exact = (  # a running sum holds one value more than the box for a moment
            cur.dtype.kind in "iu"
            and float(cval).is_integer()
            and (_max_abs(cur) + abs(cval)) * (sz + 1) < _EXACT_LIMIT
        )
        if not exact:
            cur = _ndimage_exact.uniform_filter1d(cur, sz, ax, o, md, cval, dtype)
            continue
        wshape = tuple(sz if k == ax else 1 for k in range(host.ndim))
        sh = tuple(sz // 2 + o if k == ax else 0 for k in range(host.ndim))
        sums = _sums_on_device(cur, [(None, wshape, sh, md, 1.0)], cval, device, stream, emulate)
        parts.append(getattr(sums, "timings", None))
        cur = _ndimage_exact.c_cast(np.asarray(sums, dtype=np.float64) / float(sz), dtype, False)
    return cur if cur is not host else host.astype(dtype)


def _store_int(result: np.ndarray, output: Any, parts: Optional[list]) -> np.ndarray:
    """result into output when it is an array (checked by the shared checks), else result as
    a TimedArray.  parts: the timings of the device calls that made it, summed (all zero when
    the host computed it), or None for host emulation (no timings)."""
    if parts is not None:
        keys = ("h2d_ms", "kernel_ms", "d2h_ms", "total_ms")
        _local.timings = {k: float(sum(t[k] for t in parts if t)) for k in keys}
    if isinstance(output, np.ndarray):
        if not output.flags.writeable:
            raise ValueError("output must be writeable")
        output[...] = result
        return output
    if parts is None:
        return result
    out = result.view(TimedArray)
    out.timings = _local.timings
    return out


def _max_abs(host: np.ndarray) -> float:
    return float(np.max(np.abs(host.astype(np.float64)))) if host.size else 0.0


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


def _one_d(output: Any) -> Any:
    """output (None or a 0-d NumPy array) for the (1,)-shaped run of a 0-d input."""
    return output.reshape(1) if isinstance(output, np.ndarray) else output


# --- correlate and convolve -------------------------------------------------------------------


def _conv_passes(a: ConvArgs, shape: tuple[int, ...], cdt: np.dtype) -> list:
    """The passes of a checked correlation over input of shape in compute dtype cdt: one pass
    through shared memory where the tiled kernel takes it, else the rank-1 factors as 1-D
    passes (boxes where a factor is constant), else one direct pass."""
    w = a.weights
    mode = a.modes[0] if a.modes else 0  # one mode on every axis (mode is a str)
    shift = tuple(n // 2 + o for n, o in zip(w.shape, a.origins))
    direct = [(w, w.shape, shift, mode, 0.0)]
    if _tiled_ok(cdt, shape, w.shape):  # one pass through shared memory beats 1-D passes
        return direct
    if sum(n > 1 for n in w.shape) < 2 or not w.any() or (mode == 1 and a.cval != 0.0):
        return direct
    factors = rank1_factors(w)
    if factors is None:
        return direct
    out: list[tuple[Optional[np.ndarray], tuple[int, ...], tuple[int, ...], int, float]] = []
    for d, f in enumerate(factors):
        if f.size == 1 and f[0] == 1.0:
            continue
        wshape = tuple(f.size if k == d else 1 for k in range(w.ndim))
        sh = tuple(shift[d] if k == d else 0 for k in range(w.ndim))
        if np.all(f == f[0]):
            out.append((None, wshape, sh, mode, float(f[0])))
        else:
            out.append((f.reshape(wshape), wshape, sh, mode, 0.0))
    return out or direct  # a single weight of 1 everywhere: the direct pass


def _correlate_int(a: ConvArgs, device: Any, stream: Any, emulate: Any) -> np.ndarray:
    """A correlation of NumPy input into an integer dtype, as scipy's: on the device where its
    doubles are exact whatever the order, else in scipy's order on the host."""
    host, taps, cval, int_dt = a.input, a.weights, a.cval, a.out_dtype
    mode = a.modes[0] if a.modes else 0
    parts: list = []
    bound = (_max_abs(host) + abs(cval)) * float(np.abs(taps).sum())
    if host.size == 0:
        res = np.empty(host.shape, int_dt)
    elif (
        host.dtype.kind in "iu"
        and np.all(taps == np.round(taps))
        and float(cval).is_integer()
        and bound < _EXACT_LIMIT
    ):
        # integer products and sums: exact in any order, one direct pass on the device
        shift = tuple(n // 2 + o for n, o in zip(taps.shape, a.origins))
        raw = _sums_on_device(
            host, [(taps, taps.shape, shift, mode, 0.0)], cval, device, stream, emulate
        )
        parts.append(getattr(raw, "timings", None))
        res = _ndimage_exact.c_cast(np.asarray(raw, dtype=np.float64), int_dt, True)
    else:
        res = _ndimage_exact.correlate(host, taps, mode, cval, a.origins, int_dt)
    return _store_int(res, a.output, None if emulate else parts)


def correlate_args(
    a: ConvArgs,
    *,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
    _key: Optional[tuple] = None,
    exact: bool = True,
) -> Any:
    """The correlation of arguments checked by fastprof.kernels.args.check_convolve_args
    (convolve's come flipped into correlation form) on the GPU; with exact, float results are
    scipy's bit for bit (every nonzero tap in C order, a product then a sum each, in double).
    _key: the plan key of the arguments as given, which the plan is filed under too."""
    inp = a.input
    if isinstance(inp, np.ndarray) and inp.dtype == np.bool_:  # scipy reads a bool's byte
        inp = _ndimage_exact.bool_bytes(inp)
        a = a._replace(input=inp)
    if isinstance(inp, np.ndarray) and inp.ndim == 0:
        # scipy.ndimage: 0-d input, 0-d weights, 0-d output; run as one element on one axis
        one = a._replace(
            input=inp.reshape(1),
            weights=a.weights.reshape(1),
            output=_one_d(a.output),
            modes=(0,),
            origins=(0,),
        )
        return _as_zero_d(
            correlate_args(one, device=device, stream=stream, _emulate=_emulate, exact=exact),
            a.output,
        )
    on_device = _check_filter_io(inp, a.output, a.out_dtype)
    if not on_device and a.out_dtype.kind in "biu":
        return _correlate_int(a, device, stream, _emulate)
    cdt = np.dtype(inp.dtype) if on_device else _compute_dtype(inp.dtype)
    ik = _input_key(inp)
    key = None
    if ik is not None:
        w = a.weights
        key = ("conv", ik, a.out_dtype, a.modes, a.cval, a.origins, w.shape, w.tobytes(), exact)
    plan = _plan_get(key)
    if plan is None and exact:
        code, xdt = _exact_dtypes(inp, a.out_dtype, on_device)
        w = a.weights
        shift = tuple(n // 2 + o for n, o in zip(w.shape, a.origins))
        passes = [(w, w.shape, shift, a.modes[0] if a.modes else 0, 0.0)]
        plan = _plan_put(key, _FilterPlan(passes, a.cval, a.out_dtype, code, xdt))
    elif plan is None:
        plan = _plan_put(
            key, _FilterPlan(_conv_passes(a, tuple(inp.shape), cdt), a.cval, a.out_dtype)
        )
    if _key is not None:
        _plan_put(_key, plan, built=False)
    return _run_filter(inp, a.output, plan, device, stream, _emulate)


def _conv_raw(
    convolution: bool,
    input: Any,
    weights: Any,
    output: Any,
    mode: Any,
    cval: Any,
    origin: Any,
    axes: Any,
    device: Any,
    stream: Any,
    emulate: Any,
    exact: bool = True,
) -> Any:
    """correlate/convolve with the arguments as given: a repeat call finds its plan by them,
    the first is checked through fastprof.kernels.args; complex input or weights go through
    scipy's combination of real filters (fastprof.kernels.complex_parts)."""
    if _complex.is_complex(input) or _complex.is_complex(weights):
        part = functools.partial(
            convolve if convolution else correlate, mode=mode, origin=origin, axes=axes,
            exact=exact, device=device, stream=stream, _emulate=emulate,
        )  # fmt: skip
        return _complex.correlate(part, input, weights, output, cval, convolution=convolution)
    key = None
    if type(weights) is np.ndarray and weights.dtype.kind in "biuf":
        key = _raw_filter_key(
            "convolve" if convolution else "correlate", input, output, mode, cval, origin, axes
        )
        if key is not None:
            key += ((weights.shape, weights.dtype, weights.tobytes()), exact)
    plan = _plan_get(key)
    if plan is not None:
        out = output if isinstance(output, np.ndarray) else None
        return _run_filter(input, out, plan, device, stream, emulate)
    a = check_convolve_args(input, weights, output, mode, cval, origin, convolution, axes)
    return correlate_args(a, device=device, stream=stream, _emulate=emulate, _key=key, exact=exact)


def correlate(
    input: Any,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    exact: bool = True,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
) -> Any:
    """scipy.ndimage.correlate on the GPU: scipy's float bits by default (exact=True), the fast
    tiled kernels (within a few ulps) with exact=False.  ``_emulate=True`` (or "direct") runs
    the device code on the host instead (a test hook; CUDA builds only).  Complex input or
    weights: scipy's combination of real correlations (fastprof.kernels.complex_parts)."""
    return _conv_raw(
        False, input, weights, output, mode, cval, origin, axes, device, stream, _emulate, exact
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
    exact: bool = True,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
) -> Any:
    """scipy.ndimage.convolve on the GPU (the weights flipped, origins mirrored), exact= as
    correlate's; complex input or weights as correlate's."""
    return _conv_raw(
        True, input, weights, output, mode, cval, origin, axes, device, stream, _emulate, exact
    )


# --- uniform_filter -----------------------------------------------------------------------------


def _uniform_passes(
    a: UniformArgs, shape: tuple[int, ...], cdt: np.dtype, exact: bool = False
) -> list:
    """The passes of a checked uniform_filter over input of shape in compute dtype cdt: one box
    pass per filtered axis of size > 1 (scipy's own passes, all that exact takes), or one box
    over all of them where the tiled kernel takes it."""
    ndim = len(shape)
    out = []
    for ax in a.axes:
        s = a.sizes[ax]
        if s > 1:
            wshape = tuple(s if k == ax else 1 for k in range(ndim))
            sh = tuple(s // 2 + a.origins[ax] if k == ax else 0 for k in range(ndim))
            out.append((None, wshape, sh, a.modes[ax], 1.0 / s))
    if not out:  # nothing to filter: a copy through a 1x...x1 identity
        return [(None, (1,) * ndim, (0,) * ndim, 0, 1.0)]
    same_mode = len({p[3] for p in out}) == 1
    if len(out) > 1 and same_mode and not exact and (out[0][3] != 1 or a.cval == 0.0):
        # one box pass over all axes equals scipy's 1-D passes (the boundary extension
        # is per axis), except for constant mode with cval != 0
        wshape = tuple(math.prod(p[1][k] for p in out) for k in range(ndim))
        shift = tuple(sum(p[2][k] for p in out) for k in range(ndim))
        if _tiled_ok(cdt, shape, wshape):
            return [(None, wshape, shift, out[0][3], math.prod(p[4] for p in out))]
    return out


def uniform_filter_args(
    a: UniformArgs,
    *,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: Any = False,
    _key: Optional[tuple] = None,
    exact: bool = True,
) -> Any:
    """uniform_filter of arguments checked by fastprof.kernels.args.check_uniform_args on the
    GPU; with exact, float results are scipy's bit for bit (its running sums in double, one
    pass per axis, each stored in the output dtype).  _key: the plan key of the arguments as
    given, which the plan is filed under too."""
    inp = a.input
    if isinstance(inp, np.ndarray) and inp.dtype == np.bool_:  # scipy reads a bool's byte
        inp = _ndimage_exact.bool_bytes(inp)
        a = a._replace(input=inp)
    if isinstance(inp, np.ndarray) and inp.ndim == 0:  # a 0-d copy, as scipy.ndimage gives
        one = a._replace(
            input=inp.reshape(1),
            sizes=(1,),
            output=_one_d(a.output),
            modes=(0,),
            origins=(0,),
            axes=(),
        )
        res = uniform_filter_args(one, device=device, stream=stream, _emulate=_emulate, exact=exact)
        return _as_zero_d(res, a.output)
    on_device = _check_filter_io(inp, a.output, a.out_dtype)
    if not on_device and a.out_dtype.kind in "biu" and inp.size:
        parts: list = []
        res = _uniform_int(a, device, stream, _emulate, parts)
        return _store_int(res, a.output, None if _emulate else parts)
    cdt = np.dtype(inp.dtype) if on_device else _compute_dtype(inp.dtype)
    ik = _input_key(inp)
    key = None
    if ik is not None and a.out_dtype.kind == "f":
        key = ("uniform", ik, a.out_dtype, a.sizes, a.modes, a.cval, a.origins, a.axes, exact)
    plan = _plan_get(key)
    if plan is None and exact:
        code, xdt = _exact_dtypes(inp, a.out_dtype, on_device)
        passes = _uniform_passes(a, tuple(inp.shape), xdt, exact=True)
        plan = _plan_put(key, _FilterPlan(passes, a.cval, a.out_dtype, code, xdt))
    elif plan is None:
        passes = _uniform_passes(a, tuple(inp.shape), cdt)
        plan = _plan_put(key, _FilterPlan(passes, a.cval, a.out_dtype))
    if _key is not None:
        _plan_put(_key, plan, built=False)
    return _run_filter(inp, a.output, plan, device, stream, _emulate)


def uniform_filter(
    input: Any,
    size: Any = 3,
    output: Any = None,
    mode: Any = "reflect",
    cval: float = 0.0,
    origin: Any = 0,
    *,
    axes: Any = None,
    exact: bool = True,
    device: Any = "cuda",
    stream: Any = None,
    _emulate: bool = False,
) -> Any:
    """scipy.ndimage.uniform_filter on the GPU: scipy's running sums, one pass per axis of size
    > 1, and its float bits by default (exact=True); exact=False takes the fast box kernels.
    A repeat call finds its plan by the arguments as given; the first is checked through
    fastprof.kernels.args.  Complex input: each part filtered on its own, as scipy does."""
    if _complex.is_complex(input):
        part = functools.partial(
            uniform_filter, size=size, mode=mode, origin=origin, axes=axes, exact=exact,
            device=device, stream=stream, _emulate=_emulate,
        )  # fmt: skip
        return _complex.uniform_filter(part, input, output, cval)
    key = _raw_filter_key("uniform", input, output, size, mode, cval, origin, axes, exact)
    plan = _plans.get(key) if key is not None else None
    if plan is not None:
        out = output if isinstance(output, np.ndarray) else None
        return _run_filter(input, out, plan, device, stream, _emulate)
    a = check_uniform_args(input, size, output, mode, cval, origin, axes)
    return uniform_filter_args(
        a, device=device, stream=stream, _emulate=_emulate, _key=key, exact=exact
    )


# --- evaluate -----------------------------------------------------------------------------------


def generate_source(expr: str, operands: dict[str, Any]) -> _expr_cuda.Source:
    """The fused kernel ``fp_eval`` for expr (fastprof.kernels.expr_cuda.Source), given each name's
    operand: an array's dtype, or a scalar.  expr is parsed and typed as on the CPU
    (fastprof.kernels.expr), so both devices accept one language with one result dtype.  Raises
    ValueError for expressions outside the language, TypeError for operations NumPy has no
    loop for or the GPU cannot compute (e.g. float16 results)."""
    tree = _expr.parse_cached(expr)
    # Python-scalar subexpressions are names bound to their Python values, as on the CPU
    tree, operands = bind_scalar_parts(expr, tree, operands)
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
    array or one axis.  Names come from local_dict (default: the caller's locals), then from
    global_dict (default: the caller's globals), as numexpr looks them up.  The arguments are
    checked through fastprof.kernels.args, as the front end's.
    """
    local_dict, names = caller_names(local_dict, global_dict, _frame_depth)
    a = check_evaluate_args(expr, local_dict, out, names)
    return evaluate_args(a, device=device, stream=stream)


class _EvalPlan:
    """What a repeat evaluate call with the same expression and operand layout runs: the
    kernel source, the result's shape, the kernel's outputs (and per output the elements it
    reduces, with their stride), the grid, the launch format and where each argument comes
    from, the device operands' names, the staging buffers of a call on NumPy operands, and
    the compiled kernel per device."""

    __slots__ = (
        "src",
        "size",
        "res_shape",
        "alloc_shape",
        "alloc_strides",
        "nout",
        "tail",
        "blocks",
        "fmt",
        "recipe",
        "kernels",
        "devs",
        "contiguous",
        "sizes",
        "total",
    )

    def __init__(
        self, src: _expr_cuda.Source, shape: tuple[int, ...], expr: str, values: dict[str, Any]
    ) -> None:
        self.src = src
        self.size = math.prod(shape)
        res_shape, nout, nred, inner = _reduce_plan(src, shape, expr)
        self.res_shape, self.nout = res_shape, nout
        # the kernel writes nout values: the result itself (C order) unless it reduces
        self.alloc_shape = res_shape if src.reduce is None else (nout,)
        item = np.dtype(src.out_dtype).itemsize
        self.alloc_strides = _cuda._c_strides(self.alloc_shape, item)
        fmt = "".join(p.fmt for p in src.params)
        self.tail: tuple[int, ...]
        if src.reduce is None:
            self.fmt, self.tail = fmt + "pq", (nout,)
        else:
            self.fmt, self.tail = fmt + "pqqqq", (nout, nred, inner, self.size)
        self.blocks = int(min((nout + 255) // 256, 65535 * 8))
        self.recipe = tuple((p.name, p.fmt) for p in src.params)
        self.kernels: dict[int, int] = {}
        arrays = [values[p.name] for p in src.params if p.fmt == "p"]
        self.devs = tuple(n for n, v in values.items() if type(v) is _DeviceArray)
        # on NumPy operands alone: one staging buffer per array operand, and the result's
        self.contiguous = all(a.flags.c_contiguous for a in arrays if type(a) is np.ndarray)
        out_bytes = math.prod(self.alloc_shape) * np.dtype(src.out_dtype).itemsize
        self.sizes = tuple(int(a.nbytes) for a in arrays) + (out_bytes,)
        self.total = sum(self.sizes)

    def kernel(self, dev: int) -> int:
        """The compiled kernel on device dev (current), compiled once per source and device."""
        k = self.kernels.get(dev)
        if k is None:
            kkey = (self.src.source, dev)  # the generated source holds the expression and dtypes
            hit = _kernel_cache.get(kkey)
            if hit is None:
                cc = _cuda._props(dev)["compute_capability"]
                image = compile_source(self.src.source, f"sm_{cc[0]}{cc[1]}")
                _lib, kern = _C._cuda_library_load(image, "fp_eval")
                hit = _kernel_cache[kkey] = (kern, self.src)
            k = self.kernels[dev] = hit[0]
        return k


def _eval_key(expr: str, values: dict[str, Any]) -> Optional[tuple]:
    """The plan key of an evaluate call: the expression, and per name its layout (dtype, shape
    and strides of an array, the kind of a scalar); None when an operand is another library's
    device array (viewed first)."""
    key: list[Any] = [expr]
    for v in values.values():
        t = type(v)
        if t is np.ndarray or t is _DeviceArray:
            key.append((t, v.dtype, v.shape, v.strides))
        elif t is float or t is bool:
            key.append(t)
        elif t is int:
            key.append((int, v < 0, (v if v >= 0 else ~v).bit_length()))  # as _scalar_key
        else:
            return None
    return tuple(key)


def _build_eval_plan(expr: str, values: dict[str, Any]) -> _EvalPlan:
    """The plan of an evaluate call once every operand is a NumPy array, a DeviceArray or a
    scalar; raises for what the GPU cannot run (arrays of different shapes, no array, device
    arrays not C-contiguous) or what is outside the language or the GPU's dtypes."""
    kinds: dict[str, Any] = {}
    shapes = set()
    for n, v in values.items():
        if isinstance(v, np.ndarray) and v.ndim == 0:
            _check_gpu_dtype(v.dtype, f"variable {n!r}")
            kinds[n] = v[()]
        elif isinstance(v, (np.ndarray, _DeviceArray)):
            _check_gpu_dtype(v.dtype, f"variable {n!r}")
            if type(v) is _DeviceArray and not v.is_c_contiguous:
                raise ValueError(f"device variable {n!r} must be C-contiguous")
            kinds[n] = np.dtype(v.dtype)
            shapes.add(v.shape)
        else:
            kinds[n] = v
    if not shapes:
        raise ValueError("expr must reference at least one array on the GPU")
    if len(shapes) > 1:
        raise ValueError(f"arrays in expr must share one shape on the GPU, got {sorted(shapes)}")
    src = generate_source(expr, kinds)
    return _EvalPlan(src, shapes.pop(), expr, values)


def evaluate_args(a: EvalArgs, *, device: Any = "cuda", stream: Any = None) -> Any:
    """evaluate of arguments checked by fastprof.kernels.args.check_evaluate_args on the GPU."""
    expr, values, out = a.expr, a.values, a.out
    index = None if device == "cuda" else _cuda.parse_device(device)
    handle = 0 if stream is None else _cuda.stream_handle(stream)
    key = _eval_key(expr, values)
    if key is None:  # another library's device arrays: viewed as DeviceArrays first
        _cuda._require()
        values = {
            n: _cuda.as_device_array(v, stream)
            if not isinstance(v, (np.ndarray, bool, int, float))
            else v
            for n, v in values.items()
        }
        key = _eval_key(expr, values)
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        plan = _plan_put(key, _build_eval_plan(expr, values))
    devs = plan.devs
    if out is not None:
        if devs or type(out) is not np.ndarray:
            raise TypeError("out must be a NumPy array, and only for NumPy input")
        if out.shape != plan.res_shape:
            raise ValueError(f"out must have shape {plan.res_shape}, got {out.shape}")
        if not out.flags.writeable:
            raise ValueError("out must be writeable")
    if devs:
        for n in devs:
            v = values[n]
            if not v.ptr and plan.size:
                raise ValueError(
                    f"device variable {n!r} is a device array without memory (a null"
                    " pointer): freed?"
                )
            if stream is None and v.stream:  # the operands' stream (the last not the default)
                handle = v.stream
        if index is None:
            index = values[devs[0]].device  # run where the data lives
    _cuda._require()
    dev = _C._cuda_get_device()
    run = _eval_device if devs else _eval_host
    if index is None or index == dev:
        return run(plan, values, out, dev, handle)
    with _cuda._on_device(index):
        return run(plan, values, out, index, handle)


def _eval_host(
    plan: _EvalPlan, values: dict[str, Any], out: Optional[np.ndarray], dev: int, handle: int
) -> np.ndarray:
    """evaluate on NumPy operands on device dev (current): the result as a TimedArray, or out
    filled."""
    src = plan.src
    kernel = plan.kernels.get(dev)
    if kernel is None:
        kernel = plan.kernel(dev)
    sizes, total = plan.sizes, plan.total
    got = _cuda._staging.begin(dev, sizes, total, handle)
    ptrs, events = got[0], got[2]
    try:
        args: list[Any] = []
        hosts: list[np.ndarray] = []
        i = 0
        for name, fmt in plan.recipe:
            v = values[name]
            if fmt == "p":
                args.append(ptrs[i])
                hosts.append(v)
                i += 1
            elif fmt == "d":
                args.append(float(v))
            else:
                args.append(_as_long_long(int(v)))
        if not plan.contiguous:
            hosts = [np.ascontiguousarray(h) for h in hosts]
        res_ptr = ptrs[i]
        _C._cuda_upload(ptrs[:i], hosts, handle, events[1])
        args.append(res_ptr)
        args.extend(plan.tail)
        if plan.nout:
            _C._cuda_launch(kernel, plan.blocks, 256, plan.fmt, tuple(args), handle)
        if src.reduce is not None:
            host = np.empty(plan.alloc_shape, src.out_dtype)
        elif out is not None and out.dtype == src.out_dtype and out.flags.c_contiguous:
            host = out  # straight into out
        else:
            host = TimedArray(plan.alloc_shape, src.out_dtype)
        _C._cuda_download(host, res_ptr, handle, events[2], events[3])
        if src.reduce is not None:
            res_shape = plan.res_shape
            host = _finish_reduce(host, src, res_shape, res_shape == () and plan.nout != 1)
    except BaseException:
        _cuda._staging.abandon(got, handle)
        raise
    return _host_finish(got, dev, sizes, total, handle, host, out)


def _eval_device(
    plan: _EvalPlan, values: dict[str, Any], out: Optional[np.ndarray], dev: int, handle: int
) -> Any:
    """evaluate with device operands on device dev (current): a DeviceArray; NumPy operands
    among them are uploaded into blocks of their own (freed after the kernel)."""
    src = plan.src
    kernel = plan.kernels.get(dev)
    if kernel is None:
        kernel = plan.kernel(dev)
    keep: list = []
    for n in plan.devs:
        if values[n].stream != handle:  # operands on other streams (CUDA Array Interface v3)
            _cuda._wait_for_operands([values[n] for n in plan.devs], handle)
            break
    if _cuda._bench_start.pending is not None:
        _cuda._kernel_start()
    args: list[Any] = []
    for name, fmt in plan.recipe:
        v = values[name]
        if fmt == "p":
            if type(v) is not _DeviceArray:
                v = _upload(v, dev, handle)
                keep.append(v)
            args.append(v.ptr)
        elif fmt == "d":
            args.append(float(v))
        else:
            args.append(_as_long_long(int(v)))
    shape, nbytes = plan.alloc_shape, plan.sizes[-1]
    result = _cuda._empty_laid_out(shape, src.out_dtype, plan.alloc_strides, nbytes, dev, handle)
    args.append(result.ptr)
    args.extend(plan.tail)
    if plan.nout:
        _C._cuda_launch(kernel, plan.blocks, 256, plan.fmt, tuple(args), handle)
    if src.reduce is None:
        if handle:
            _cuda._fence_after([result, *keep], handle)
        return result
    host = _download(result, handle)
    res_shape = plan.res_shape
    host = _finish_reduce(host, src, res_shape, res_shape == () and plan.nout != 1)
    return _cuda.DeviceArray.from_numpy(np.ascontiguousarray(host), stream=handle)


def _scalar_key(v: Any) -> Any:
    """What an evaluate plan depends on of a scalar operand: its type, and for a Python int
    whether it is negative and its bit length (which integer dtypes can hold it: NumPy raises
    OverflowError for one outside an array's range)."""
    if type(v) is int:
        return (int, v < 0, (v if v >= 0 else ~v).bit_length())
    return type(v)


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


# --- matmul -------------------------------------------------------------------------------------


_CUBLAS_NAMES = ("libcublas.so", "libcublas.so.13", "libcublas.so.12")


def matmul(a: Any, b: Any, *, device: Any = "cuda", stream: Any = None) -> Any:
    """a @ b for 2-D float32/float64 arrays with cuBLAS (row-major handled); the operands are
    checked through fastprof.kernels.args, as the front end's.  A repeat call finds its plan by
    the operands as given (which their checks depend on alone)."""
    key = _matmul_key(a, b)
    plan = _plans.get(key) if key is not None else None
    if plan is None:
        a, b = check_matmul_args(a, b)
        return matmul_args(a, b, device=device, stream=stream, _key=key)
    return _matmul_start(plan, a, b, device, stream)


def _matmul_key(a: Any, b: Any) -> Optional[tuple]:
    """The plan key of matmul's operands: both NumPy arrays or both DeviceArrays, by dtype,
    shape and strides; None for anything else."""
    ta = type(a)
    if ta is type(b) and (ta is np.ndarray or ta is _DeviceArray):
        return ("matmul", ta, a.dtype, a.shape, a.strides, b.dtype, b.shape, b.strides)
    return None


def _check_matmul_dtypes(a: np.dtype, b: np.dtype) -> None:
    """TypeError, naming a and b, when a @ b has an integer or bool result (NumPy's for both
    operands integer or bool): cuBLAS has no integer GEMM, and an exact product is not to
    become floats on the GPU."""
    if a.kind in "biu" and b.kind in "biu":
        raise TypeError(
            f"matmul on the GPU takes float32 or float64 operands, got a: {a}, b: {b}"
            " (cuBLAS has no integer GEMM; an exact integer product would come back as floats):"
            " cast a or b to float32/float64, or use device='cpu'"
        )


class _MatmulPlan:
    """What a repeat matmul with the same operand layout runs: where the operands are, the
    compute dtype, the sizes, and for NumPy operands whether they need a contiguous copy in
    that dtype and the staging buffers (a, b, the result)."""

    __slots__ = (
        "on_device",
        "cdt",
        "code",
        "m",
        "n",
        "k",
        "c_shape",
        "c_strides",
        "copy_a",
        "copy_b",
        "sizes",
        "total",
    )

    def __init__(self, a: Any, b: Any) -> None:
        self.on_device = type(a) is not np.ndarray
        _check_matmul_dtypes(np.dtype(a.dtype), np.dtype(b.dtype))
        if self.on_device:
            if a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
                raise TypeError(
                    "matmul of device arrays: a and b must both be float32 or both float64,"
                    f" got a: {a.dtype}, b: {b.dtype}"
                )
            if not (_c_contiguous(a) and _c_contiguous(b)):
                raise ValueError("device a and b must be C-contiguous")
            cdt = np.dtype(a.dtype)
        else:
            cdt = _F32_DT if (a.dtype == np.float32 and b.dtype == np.float32) else _F64_DT
        self.cdt, self.code = cdt, 0 if cdt == np.float32 else 1
        self.m, self.k = a.shape
        self.n = b.shape[1]
        self.c_shape = (self.m, self.n)
        self.c_strides = _cuda._c_strides(self.c_shape, cdt.itemsize)
        self.copy_a = not self.on_device and (a.dtype != cdt or not a.flags.c_contiguous)
        self.copy_b = not self.on_device and (b.dtype != cdt or not b.flags.c_contiguous)
        item = cdt.itemsize
        self.sizes = (self.m * self.k * item, self.k * self.n * item, self.m * self.n * item)
        self.total = sum(self.sizes)


def matmul_args(
    a: Any, b: Any, *, device: Any = "cuda", stream: Any = None, _key: Optional[tuple] = None
) -> Any:
    """a @ b on the GPU for operands checked by fastprof.kernels.args.check_matmul_args (NumPy
    or device arrays); the GPU takes 2-D operands only.  _key: the plan key of the operands as
    given, which the plan is filed under too."""
    for op, what in ((a, "a"), (b, "b")):
        if len(op.shape) != 2:
            raise ValueError(f"{what} must be 2-D, got {len(op.shape)}-d")
        _check_gpu_dtype(np.dtype(op.dtype), what)
    key = _matmul_key(a, b)
    if key is None:  # other libraries' device arrays (or NumPy beside a device array)
        _cuda.parse_device(device)
        _cuda.stream_handle(stream)
        _check_matmul_dtypes(np.dtype(a.dtype), np.dtype(b.dtype))
        _cuda._require()
        a, b = _device_operands(a, b, stream)
        plan = _MatmulPlan(a, b)
    else:
        hit = _plans.get(key)
        plan = hit if hit is not None else _plan_put(key, _MatmulPlan(a, b))
    if _key is not None and _key != key:
        _plan_put(_key, plan, built=False)
    return _matmul_start(plan, a, b, device, stream)


def _device_operands(a: Any, b: Any, stream: Any) -> tuple[Any, Any]:
    """a and b as DeviceArrays for a matmul with at least one device operand: device arrays
    viewed in place, a NumPy operand uploaded (as evaluate does) to the other's device, on
    stream or else the other's stream."""
    views = [
        None if isinstance(op, np.ndarray) else _cuda.as_device_array(op, stream) for op in (a, b)
    ]
    ref = views[0] if views[0] is not None else views[1]
    if ref is None:  # not reached: matmul_args runs NumPy pairs by their plan key
        raise TypeError("matmul: neither a nor b is a device array")
    handle = ref.stream if stream is None else _cuda.stream_handle(stream)
    out = []
    for op, view in zip((a, b), views):
        if view is None:
            view = _DeviceArray.from_numpy(op, device=ref.device, stream=handle)
        out.append(view)
    return out[0], out[1]


def _c_contiguous(arr: _cuda.DeviceArray) -> bool:
    """arr.is_c_contiguous, with NumPy's strides for its shape checked first."""
    return arr.strides == _cuda._c_strides(arr.shape, arr.dtype.itemsize) or arr.is_c_contiguous


_cublas_loaded: Optional[tuple[str, ...]] = None  # the candidates cuBLAS was loaded from


def _matmul_start(plan: _MatmulPlan, a: Any, b: Any, device: Any, stream: Any) -> Any:
    """a @ b by plan: the device chosen (where device arrays live unless device says), then
    run there."""
    index = None if device == "cuda" else _cuda.parse_device(device)
    handle = 0 if stream is None else _cuda.stream_handle(stream)
    if plan.on_device:
        if (not a.ptr and plan.m * plan.k) or (not b.ptr and plan.k * plan.n):
            raise ValueError("a or b is a device array without memory (a null pointer): freed?")
        if stream is None and a.stream:
            handle = a.stream
        if index is None:
            index = a.device  # run where the data lives
    _cuda._require()
    dev = _C._cuda_get_device()
    run = _matmul_device if plan.on_device else _matmul_host
    if index is None or index == dev:
        return run(plan, a, b, dev, handle)
    with _cuda._on_device(index):
        return run(plan, a, b, index, handle)


def _gemm(plan: _MatmulPlan, a: int, b: int, c: int, handle: int) -> None:
    """C = A @ B on the device pointers of plan's operands, queued on handle: cuBLAS (the
    library search only until it loaded: then the loaded library serves every call), or the
    zeros of an empty inner dimension."""
    global _cublas_loaded
    m, n, k = plan.m, plan.n, plan.k
    if not (m and n):
        return
    if k == 0:
        _C._cuda_upload((c,), (np.zeros((m, n), plan.cdt),), handle)
        return
    paths = _cublas_loaded
    if paths is None:
        paths = library_candidates("cublas", _CUBLAS_NAMES, "cublas")
    _C._cuda_gemm(plan.code, m, n, k, a, b, c, handle, paths)
    _cublas_loaded = paths


def _matmul_device(
    plan: _MatmulPlan, a: _cuda.DeviceArray, b: _cuda.DeviceArray, dev: int, handle: int
) -> _cuda.DeviceArray:
    """a @ b of device arrays on device dev (current), read in place: a DeviceArray."""
    if a.stream != handle or b.stream != handle:
        _cuda._wait_for_operands((a, b), handle)
    if _cuda._bench_start.pending is not None:
        _cuda._kernel_start()
    c = _cuda._empty_laid_out(plan.c_shape, plan.cdt, plan.c_strides, plan.sizes[2], dev, handle)
    _gemm(plan, a.ptr, b.ptr, c.ptr, handle)
    if handle:
        _cuda._fence_after([c, a, b], handle)
    return c


def _matmul_host(plan: _MatmulPlan, a: np.ndarray, b: np.ndarray, dev: int, handle: int) -> Any:
    """a @ b of NumPy arrays on device dev (current), copied in and out: a TimedArray."""
    cdt = plan.cdt
    if plan.copy_a:
        a = np.ascontiguousarray(a, dtype=cdt)
    if plan.copy_b:
        b = np.ascontiguousarray(b, dtype=cdt)
    sizes, total = plan.sizes, plan.total
    got = _cuda._staging.begin(dev, sizes, total, handle)
    ptrs, events = got[0], got[2]
    try:
        _C._cuda_upload(ptrs[:2], (a, b), handle, events[1])
        _gemm(plan, ptrs[0], ptrs[1], ptrs[2], handle)
        host = TimedArray(plan.c_shape, cdt)
        _C._cuda_download(host, ptrs[2], handle, events[2], events[3])
    except BaseException:
        _cuda._staging.abandon(got, handle)
        raise
    return _host_finish(got, dev, sizes, total, handle, host, None)
