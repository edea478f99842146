"""The ground floor of the GPU modules: CUDA's two error types and whether CUDA can run here.

fastprof.cuda.cupti and fastprof.cuda.timeline (CUPTI traces) build on this module alone;
fastprof.cuda.runtime (timers, arrays) builds on it and on cupti, whose cuda_trace the package
re-exports: the imports go one way, with no cycle.
Nothing here imports NumPy or calls CUDA at import.
"""

from __future__ import annotations

import functools

from .. import _fastprof as _C

__all__ = ["CudaError", "CudaUnavailableError"]


class CudaError(RuntimeError):
    """A CUDA call failed: ``code`` (the cudaError_t), ``name`` (e.g. cudaErrorMemoryAllocation),
    ``message`` (CUDA's words) and ``context`` (the call that failed, when known)."""

    __module__ = "fastprof.cuda"  # its public home

    def __init__(self, code: int, name: str, message: str) -> None:
        super().__init__(f"{name} ({code}): {message}")
        self.code = int(code)
        self.name = name
        self.message = message
        self.context: str | None = None

    def __str__(self) -> str:
        where = f"{self.context}: " if self.context else ""
        return f"{where}{self.name} ({self.code}): {self.message}"


class CudaUnavailableError(RuntimeError):
    """CUDA cannot run here; ``reason`` says why (the same text as :func:`fastprof.cuda.status`)."""

    __module__ = "fastprof.cuda"  # its public home

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_C._cuda_register_errors(CudaError, CudaUnavailableError)


@functools.lru_cache(maxsize=None)
def _probe() -> tuple[int, str]:
    """(device count, reason) from the first CUDA call; cached for the process."""
    if not _C._cuda_built():
        return 0, (
            "fastprof was built without CUDA (no CUDA toolkit at build time, or FASTPROF_CUDA=0)"
        )
    count, _err, reason = _C._cuda_probe()
    return count, reason


def _require() -> None:
    """Raises CudaUnavailableError with the reason unless CUDA can run."""
    count, reason = _probe()
    if count == 0:
        raise CudaUnavailableError(reason)
