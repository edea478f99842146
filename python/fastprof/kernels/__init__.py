"""Fast kernels for the hot spots profiles point to, on the CPU and on CUDA devices.

- :func:`convolve`, :func:`correlate`, :func:`uniform_filter`: scipy.ndimage's semantics
  (every boundary mode, origins, any rank and strides) in compiled code, with separable and
  box kernels done as streamed 1-D passes and the work split across a thread pool;
- :func:`evaluate`: a fused elementwise expression over arrays, in cache-sized blocks on the
  same number of threads;
- :func:`matmul`; :func:`set_num_threads` / :func:`get_num_threads`.

Each takes ``device=None``: ``"cuda"`` (or ``"gpu"``, ``"cuda:N"``) or a device array as
input runs the CUDA version (:mod:`fastprof.kernels.gpu`) with the same arguments.  This
module is the one front end: :mod:`fastprof.kernels.args` checks the arguments once, before
either device runs, so a bad argument gets the same error on both; :mod:`fastprof.kernels.cpu`
and :mod:`fastprof.kernels.gpu` both run on what the checks normalise.  The expression
language of :func:`evaluate` is :mod:`fastprof.kernels.expr`, read by both devices.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional

try:
    import numpy  # noqa: F401  (every kernel needs it: say how to get it when it is missing)
except ImportError as _exc:
    from .. import _numpy_hint

    _hint = _numpy_hint(_exc, "kernels")
    if _hint is None:
        raise
    raise _hint from _exc

from . import complex_parts as _complex
from . import cpu as _cpu
from .args import (
    caller_names,
    check_convolve_args,
    check_evaluate_args,
    check_matmul_args,
    check_uniform_args,
    wants_gpu,
)
from .cpu import get_num_threads, set_num_threads
from .expr import _shown

__all__ = [
    "convolve",
    "correlate",
    "uniform_filter",
    "evaluate",
    "matmul",
    "set_num_threads",
    "get_num_threads",
]


def _gpu(name: str) -> Callable[..., Any]:
    """The CUDA implementation of kernel ``name``; raises when the GPU part cannot load."""
    try:
        from . import gpu
    except Exception as exc:  # ImportError, or the CUDA part failing to initialise
        err: type = RuntimeError
        try:
            from ..cuda._base import CudaUnavailableError

            err = CudaUnavailableError
        except Exception:
            pass
        raise err(f"fastprof.kernels.{name}: the CUDA kernels are unavailable ({exc})") from exc
    return getattr(gpu, name)


def _exact_flag(exact: Any) -> bool:
    """The ``exact=`` argument, checked: a bool.  Returns it."""
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be True or False, got {exact!r}")
    return exact


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
    device: Any = None,
) -> Any:
    """Multidimensional correlation, as ``scipy.ndimage.correlate`` (``axes=`` as scipy
    1.11+: weights and origins over those axes only).  Results are scipy's bit for bit, on
    either device: every tap summed in scipy's order, in double, without FMA and without
    separating the kernel.  ``exact=False`` takes the fast kernels instead (a separable kernel
    in passes, fused multiply-adds, float32 arithmetic on the GPU): results within a few units
    of rounding of scipy's, faster (docs/kernels.md)."""
    exact = _exact_flag(exact)
    if _complex.is_complex(input) or _complex.is_complex(weights):
        part = functools.partial(
            correlate, mode=mode, origin=origin, axes=axes, exact=exact, device=device
        )
        return _complex.correlate(part, input, weights, output, cval, convolution=False)
    args = check_convolve_args(input, weights, output, mode, cval, origin, axes=axes)
    if wants_gpu(device, input, output):
        return _gpu("correlate_args")(args, device=device, exact=exact)
    return _cpu.correlate(args, exact=exact)


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
    device: Any = None,
) -> Any:
    """Multidimensional convolution, as ``scipy.ndimage.convolve`` (``axes=`` as scipy
    1.11+); scipy's bits, or with ``exact=False`` the fast kernels, as for :func:`correlate`."""
    if _complex.is_complex(input) or _complex.is_complex(weights):
        part = functools.partial(
            convolve, mode=mode, origin=origin, axes=axes, exact=_exact_flag(exact), device=device
        )
        return _complex.correlate(part, input, weights, output, cval, convolution=True)
    args = check_convolve_args(
        input, weights, output, mode, cval, origin, convolution=True, axes=axes
    )
    exact = _exact_flag(exact)
    if wants_gpu(device, input, output):  # the weights come flipped
        return _gpu("correlate_args")(args, device=device, exact=exact)
    return _cpu.correlate(args, exact=exact)


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
    device: Any = None,
) -> Any:
    """Mean over a box of ``size`` (int or one per filtered axis), as
    ``scipy.ndimage.uniform_filter`` (``axes=`` as scipy 1.11+; sequences of sizes, modes and
    origins pair with axes).

    Results are scipy's bit for bit, on either device: its running sums in double, one axis
    after the other, each stored in the output dtype (on the CPU all axes in one pass through
    memory).  ``exact=False`` takes the fast fused passes for float outputs instead (within a
    few units of rounding of scipy's; integer outputs stay scipy's exactly)."""
    exact = _exact_flag(exact)
    if _complex.is_complex(input):
        part = functools.partial(
            uniform_filter, size=size, mode=mode, origin=origin, axes=axes, exact=exact,
            device=device,
        )  # fmt: skip
        return _complex.uniform_filter(part, input, output, cval)
    a = check_uniform_args(input, size, output, mode, cval, origin, axes)
    if wants_gpu(device, input, output):
        return _gpu("uniform_filter_args")(a, device=device, exact=exact)
    return _cpu.uniform_filter(a, exact=exact)


def matmul(a: Any, b: Any, *, device: Any = None) -> Any:
    """The matrix product ``a @ b`` (NumPy's on the CPU) after checking the operands."""
    a, b = check_matmul_args(a, b)
    if wants_gpu(device, a, b):
        return _gpu("matmul_args")(a, b, device=device)
    return a @ b


def evaluate(
    expr: str,
    local_dict: Optional[Dict[str, Any]] = None,
    out: Any = None,
    *,
    global_dict: Optional[Dict[str, Any]] = None,
    device: Any = None,
) -> Any:
    """Evaluates an elementwise expression of arrays and scalars in one blocked, threaded pass.

    Names come from ``local_dict`` (default: the caller's locals), then from ``global_dict``
    (default: the caller's globals), as numexpr looks them up.
    The language is fastprof.kernels.expr's (operators with ``//``, ``%`` and ``**``, comparisons,
    ``& | ^ ~``, where, abs, sqrt, exp, log, trig, fmod, hypot ..., and ``sum``/``prod`` over
    the whole array or ``axis=`` as the outermost operation); results follow NumPy's dtypes
    and broadcasting.  ``out`` receives the result when given."""
    local_dict, names = caller_names(local_dict, global_dict, 1)
    try:
        args = check_evaluate_args(expr, local_dict, out, names)
        if wants_gpu(device, out, *args.values.values()):
            return _gpu("evaluate_args")(args, device=device)
        return _cpu.evaluate(args)
    except RecursionError:  # the tree is within MAX_DEPTH, but the caller was deep already
        raise ValueError(
            f"expr {_shown(expr)}: nested too deeply for the remaining recursion depth"
        ) from None
