"""fastprof.cuda: GPU timing that is right by construction, device arrays and interop.

GPU work is asynchronous: a host clock around a launch measures the launch. The timers here
record CUDA events on the stream and read them lazily. Nothing touches CUDA at import time;
every entry point first checks availability and raises :class:`CudaUnavailableError` with the
reason (built without CUDA, no driver, driver too old, no device) when it cannot run, and
:class:`CudaError` (code, name, message) when CUDA itself fails.

    >>> import fastprof
    >>> if fastprof.cuda.is_available():
    ...     with fastprof.cuda_timer() as t:
    ...         run_kernels()
    ...     print(t.elapsed_ms, t.cpu_ms)

The layer's modules: :mod:`~fastprof.cuda.runtime` (availability, devices, timers, benchmark,
device arrays; NumPy), :mod:`~fastprof.cuda.cupti` (``cuda_trace``, CUPTI activity traces),
:mod:`~fastprof.cuda.timeline` (the CUDA side of ``fastprof.trace``) with its
:mod:`~fastprof.cuda.summary` and :mod:`~fastprof.cuda.attribution`, :mod:`~fastprof.cuda.nvtx`,
:mod:`~fastprof.cuda.libs` (where the CUDA libraries are looked for) and
:mod:`~fastprof.cuda.demangle`.  This package's own import loads none of them: each public name
below loads its module on first use, so a CUPTI trace does not import NumPy.
"""

from typing import TYPE_CHECKING, Any, Dict, List

from ._base import CudaError, CudaUnavailableError

if TYPE_CHECKING:  # what the lazy names resolve to, for type checkers and IDEs
    from .cupti import cuda_trace
    from .runtime import (
        BenchmarkResult,
        DeviceArray,
        DeviceInfo,
        as_device_array,
        benchmark,
        cuda_timer,
        devices,
        is_available,
        is_device_array,
        status,
        synchronize,
    )

__all__ = [
    "CudaError",
    "CudaUnavailableError",
    "is_available",
    "status",
    "devices",
    "DeviceInfo",
    "synchronize",
    "cuda_timer",
    "benchmark",
    "BenchmarkResult",
    "DeviceArray",
    "as_device_array",
    "is_device_array",
    "cuda_trace",
]

#: The public names loaded on first use: name -> the module of this package that defines it.
_LAZY: Dict[str, str] = {name: "runtime" for name in __all__[2:-1]}
_LAZY["cuda_trace"] = "cupti"

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """Loads the module behind public name ``name`` on first access and keeps the value
        here; raises AttributeError for other names, and ImportError naming
        ``fastprof[kernels]`` when the name needs NumPy and NumPy cannot be imported."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'fastprof.cuda' has no attribute {name!r}")
        from importlib import import_module

        from .. import _numpy_hint

        try:
            value = getattr(import_module(f"{__name__}.{module}"), name)
        except ImportError as exc:
            hint = _numpy_hint(exc, f"cuda.{name}")
            if hint is None:
                raise
            raise hint from exc
        globals()[name] = value
        return value


def __dir__() -> List[str]:
    """The package's names, the lazy ones included before their first use."""
    return sorted(set(globals()) | set(_LAZY))
