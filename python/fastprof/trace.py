"""fastprof.trace: CUPTI activity traces of kernels, copies and memsets.

    >>> with fastprof.cuda_trace() as tr:
    ...     run_kernels()
    >>> for r in tr.records: print(r.name, r.duration_ns)
    >>> print(tr.summary())

Timestamps are CUPTI's (ns, one clock for the whole trace). Kernel names are demangled
(fastprof._demangle). libcupti is loaded on first use (the toolkit's first: CUDA_HOME /
CUDA_PATH / /usr/local/cuda, then the nvidia-cuda-cupti wheel of CUDA 12 or the nvidia/cu13
one of CUDA 13, then the system's); one newer than the driver is refused with the reason. One trace at a time per process; another profiler holding CUPTI
(Nsight Systems) makes the start fail with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from . import _cuda_base
from . import _fastprof as _C
from ._demangle import demangle
from ._libsearch import library_candidates

__all__ = ["cuda_trace", "TraceRecord", "library_candidates"]

_KINDS = {0: "kernel", 1: "memcpy", 2: "memset"}
_COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}


@dataclass(frozen=True)
class TraceRecord:
    """One GPU activity: kind ("kernel", "memcpy", "memset"), name (kernel name, or e.g.
    "memcpy HtoD"), start/end (ns), device, stream, correlation id, bytes (copies, memsets)."""

    kind: str
    name: str
    start_ns: int
    end_ns: int
    device: int
    stream: int
    correlation_id: int
    bytes: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _record(t: tuple) -> TraceRecord:
    kind, name, start, end, device, stream, corr, nbytes, copy_kind = t
    k = _KINDS.get(kind, "other")
    if k == "memcpy":
        name = f"memcpy {_COPY_KINDS.get(copy_kind, '?')}"
    elif k == "memset":
        name = "memset"
    elif name:
        name = demangle(name)
    return TraceRecord(
        k, name or "?", int(start), int(end), int(device), int(stream), int(corr), int(nbytes)
    )


# CUPTI API versions (cuptiGetVersion) up to CUDA 12.9 and the CUDA version each came with;
# from CUDA 13 the API version is the CUDA version itself, as xxyyzz.
_CUPTI_CUDA = {
    13: 11000,
    14: 11010,
    15: 11020,
    16: 11050,
    17: 11060,
    18: 11080,
    19: 12000,
    20: 12020,
    21: 12030,
    22: 12040,
    23: 12050,
    24: 12060,
    25: 12070,
    26: 12080,
    27: 12090,
    28: 12090,
}
_CUPTI_NAMES = ("libcupti.so", "libcupti.so.13", "libcupti.so.12")


def _cuda_of_cupti(api: int) -> int:
    """The CUDA version (12040 = 12.4) a CUPTI API version belongs to; 0 when unknown."""
    if api >= 100000:
        return (api // 10000) * 1000 + (api // 100 % 100) * 10
    return _CUPTI_CUDA.get(api, 0)


def _check_cupti_driver(api: int, driver: int) -> None:
    """Raises CudaUnavailableError when the loaded libcupti belongs to a newer CUDA than the
    driver supports (CUPTI, unlike the runtime, does not work with an older driver)."""
    cupti = _cuda_of_cupti(api)
    if driver and cupti and cupti > driver:
        raise _cuda_base.CudaUnavailableError(
            f"the loaded libcupti is for CUDA {cupti // 1000}.{cupti % 1000 // 10}, newer than "
            f"the NVIDIA driver (it supports CUDA {driver // 1000}.{driver % 1000 // 10}): "
            f"install the CUPTI of CUDA {driver // 1000} (pip install "
            f"nvidia-cuda-cupti-cu{driver // 1000}, or point CUDA_HOME at that toolkit) or "
            "update the driver"
        )


_active: list["cuda_trace"] = []


class cuda_trace:
    """Context manager that records every kernel, copy and memset the block puts on the GPU.

    After the block: ``records`` (TraceRecord list sorted by start), ``dropped`` (records CUPTI
    lost), ``kernels()``, ``copies()``, ``summary()`` (per name: count, total, mean, share),
    ``to_chrome_trace()`` (events for chrome://tracing / Perfetto).
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name
        self.records: list[TraceRecord] = []
        self.dropped = 0

    def __enter__(self) -> "cuda_trace":
        _cuda_base._require()
        if _active:
            raise RuntimeError("a cuda_trace is already running (one at a time per process)")
        paths = library_candidates("cupti", _CUPTI_NAMES, "cuda_cupti")
        _check_cupti_driver(*_C._cuda_cupti_version(paths))
        _C._cuda_cupti_start(paths)
        _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            _C._cuda_synchronize()
        finally:
            _active.remove(self)
            raw, dropped = _C._cuda_cupti_stop()
            self.records = sorted((_record(t) for t in raw), key=lambda r: r.start_ns)
            self.dropped = int(dropped)

    def kernels(self) -> list[TraceRecord]:
        return [r for r in self.records if r.kind == "kernel"]

    def copies(self) -> list[TraceRecord]:
        return [r for r in self.records if r.kind == "memcpy"]

    def summary(self) -> str:
        """A table per name, most GPU time first: count, total ms, mean us, share."""
        return format_summary(self.records)

    def to_chrome_trace(self) -> list[dict[str, Any]]:
        """Complete events ("ph": "X", microseconds) on one row per device and stream."""
        t0 = min((r.start_ns for r in self.records), default=0)
        return [
            {
                "name": r.name,
                "cat": r.kind,
                "ph": "X",
                "ts": (r.start_ns - t0) / 1e3,
                "dur": r.duration_ns / 1e3,
                "pid": f"GPU {r.device}",
                "tid": f"stream {r.stream}",
                "args": {"bytes": r.bytes, "correlation": r.correlation_id},
            }
            for r in self.records
        ]


def format_summary(records: list[TraceRecord]) -> str:
    """The summary table of :meth:`cuda_trace.summary` for any list of records."""
    groups: dict[tuple[str, str], list[int]] = {}
    for r in records:
        groups.setdefault((r.kind, r.name), []).append(r.duration_ns)
    total = sum(sum(v) for v in groups.values()) or 1
    rows = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    lines = [f"{'share':>6} {'total ms':>10} {'count':>7} {'mean us':>10}  kind    name"]
    for (kind, name), durs in rows:
        s = sum(durs)
        lines.append(
            f"{100 * s / total:5.1f}% {s / 1e6:10.3f} {len(durs):7d} "
            f"{s / len(durs) / 1e3:10.2f}  {kind:7s} {name}"
        )
    return "\n".join(lines)
