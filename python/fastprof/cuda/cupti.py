"""fastprof.cuda.cupti: CUPTI activity traces of kernels, copies and memsets.

    >>> with fastprof.cuda_trace() as tr:
    ...     run_kernels()
    >>> for r in tr.records: print(r.name, r.duration_ns)
    >>> print(tr.summary())

Timestamps are on time.monotonic_ns()'s axis (CUPTI's clock mapped onto CLOCK_MONOTONIC).
Kernel names are demangled (fastprof.cuda.demangle). libcupti is loaded on first use (the
toolkit's first: CUDA_HOME / CUDA_PATH / /usr/local/cuda, then the nvidia-cuda-cupti wheel of
CUDA 12 or the nvidia/cu13 one of CUDA 13, then the system's); one newer than the driver is
refused with the reason. One trace at a time per process; another profiler holding CUPTI
(Nsight Systems) makes the start fail with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .demangle import demangle
from .libs import library_candidates
from .timeline import CudaRecorder

__all__ = ["cuda_trace", "TraceRecord", "library_candidates"]

#: The short names of the copy kinds (nsys's long names are cuda_timeline.COPY_KINDS).
_COPY_ABBREV = {
    "Host-to-Device": "HtoD",
    "Device-to-Host": "DtoH",
    "Host-to-Array": "HtoA",
    "Array-to-Host": "AtoH",
    "Array-to-Array": "AtoA",
    "Array-to-Device": "AtoD",
    "Device-to-Array": "DtoA",
    "Device-to-Device": "DtoD",
    "Host-to-Host": "HtoH",
    "Peer-to-Peer": "PtoP",
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


def _from_gpu_record(r: Any) -> TraceRecord:
    """A TraceRecord from a cuda_timeline Kernel, Memcpy or Memset."""
    if hasattr(r, "copy_kind"):
        kind, name, nbytes = "memcpy", f"memcpy {_COPY_ABBREV.get(r.copy_kind, '?')}", r.bytes
    elif hasattr(r, "name"):
        kind, name, nbytes = "kernel", demangle(r.name), 0
    else:
        kind, name, nbytes = "memset", "memset", r.bytes
    return TraceRecord(
        kind, name, r.start_ns, r.end_ns, r.device, r.stream, r.correlation_id, nbytes
    )


class cuda_trace:
    """Context manager that records every kernel, copy and memset the block puts on the GPU.

    After the block: ``records`` (TraceRecord list sorted by start, times on
    time.monotonic_ns()'s axis), ``dropped`` (records CUPTI lost), ``kernels()``,
    ``copies()``, ``summary()`` (per name: count, total, mean, share), ``to_chrome_trace()``
    (events for chrome://tracing / Perfetto), and ``recorder``: the
    :class:`fastprof.cuda.timeline.CudaRecorder` behind it, with the API calls,
    synchronisations, NVTX ranges, the Python stack of each launch, nsys-style
    ``summary()`` and ``gpu_by_python()``.
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name
        self.records: list[TraceRecord] = []
        self.dropped = 0
        self.recorder = CudaRecorder()

    def __enter__(self) -> "cuda_trace":
        self.recorder.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.recorder.stop()
        self.records = [_from_gpu_record(r) for r in self.recorder.gpu_records()]
        self.dropped = self.recorder.dropped

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
