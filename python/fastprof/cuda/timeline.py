"""fastprof.cuda.timeline: the CUDA side of the timeline, from CUPTI.

``CudaRecorder`` records, between ``start()`` and ``stop()``, every runtime and driver API
call (with its host duration and thread), synchronisation, NVTX range, kernel, copy and
memset, and the Python stack active at each launch (by CUPTI correlation id). Every
timestamp is on ``time.monotonic_ns()``'s axis: CUPTI's clock is mapped onto CLOCK_MONOTONIC
by a line through two samples of both clocks, one at start and one at stop.

    >>> rec = CudaRecorder()
    >>> rec.start(); run(); rec.stop()
    >>> print(rec.summary())          # nsys stats' tables
    >>> print(rec.gpu_by_python())    # GPU time per Python function and line
    >>> events = rec.chrome_events(pid=os.getpid())

CUPTI is detached at ``stop()``, so the program runs at full speed after a trace.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from .. import _fastprof as _C
from . import _base as _cuda_base
from .libs import library_candidates

__all__ = [
    "ApiCall",
    "Kernel",
    "Memcpy",
    "Memset",
    "Sync",
    "NvtxRange",
    "Frame",
    "Launch",
    "CudaRecorder",
    "map_clock",
    "COPY_KINDS",
]

# Record kinds of _cuda_cupti_stop (src/cuda/cupti_int.h).
_KERNEL, _MEMCPY, _MEMSET, _RUNTIME, _DRIVER, _SYNC, _MARKER = range(7)
_MARKER_START, _MARKER_END = 2, 4

#: CUPTI's memcpy kinds, as nsys names them.
COPY_KINDS = {
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
}
SYNC_TYPES = {
    0: "unknown",
    1: "event synchronize",
    2: "stream wait event",
    3: "stream synchronize",
    4: "context synchronize",
}


class _Interval:
    """What every record with a start and an end has: its duration."""

    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ApiCall(_Interval):
    """A CUDA runtime (``domain == "runtime"``) or driver API call on a host thread."""

    domain: str
    name: str
    start_ns: int
    end_ns: int
    tid: int
    correlation_id: int
    cbid: int
    return_value: int


@dataclass(frozen=True)
class Kernel(_Interval):
    """A kernel execution on a device and stream (``name`` as CUPTI gives it, mangled)."""

    name: str
    start_ns: int
    end_ns: int
    device: int
    context: int
    stream: int
    correlation_id: int


@dataclass(frozen=True)
class Memcpy(_Interval):
    """A copy: ``copy_kind`` as nsys names it (e.g. "Host-to-Device"), ``bytes``."""

    copy_kind: str
    bytes: int
    start_ns: int
    end_ns: int
    device: int
    context: int
    stream: int
    correlation_id: int


@dataclass(frozen=True)
class Memset(_Interval):
    """A memset of ``bytes`` bytes on a device and stream."""

    bytes: int
    start_ns: int
    end_ns: int
    device: int
    context: int
    stream: int
    correlation_id: int


@dataclass(frozen=True)
class Sync(_Interval):
    """Host time blocked in a synchronising call (``type`` e.g. "stream synchronize")."""

    type: str
    start_ns: int
    end_ns: int
    context: int
    stream: int
    correlation_id: int


@dataclass(frozen=True)
class NvtxRange(_Interval):
    """An NVTX push/pop or start/end range on a host thread (from fastprof.nvtx or any
    other NVTX user)."""

    name: str
    start_ns: int
    end_ns: int
    tid: int
    id: int


Record = Union[ApiCall, Kernel, Memcpy, Memset, Sync, NvtxRange]
GpuRecord = Union[Kernel, Memcpy, Memset]


@dataclass(frozen=True)
class Frame:
    """One Python frame at a launch: file, function (qualified name), first line of the
    function, the line running."""

    filename: str
    function: str
    firstlineno: int
    lineno: int


@dataclass(frozen=True)
class Launch:
    """A launch, copy or memset API call as the callback saw it: the thread and the Python
    stack (innermost first; empty when the thread held no GIL, i.e. ran no Python)."""

    correlation_id: int
    tid: int
    stack: tuple[Frame, ...]
    outer_correlation_id: int  # the runtime call a nested driver call belongs to, else itself


def map_clock(t: int, start: Sequence[int], stop: Sequence[int]) -> int:
    """CUPTI time ``t`` on CLOCK_MONOTONIC's axis, by the line through the two samples
    ``(cupti_ns, monotonic_ns, ...)`` taken at start and stop (an offset alone when CUPTI's
    clock did not move between them). Exact integer arithmetic."""
    c0, m0 = int(start[0]), int(start[1])
    c1, m1 = int(stop[0]), int(stop[1])
    if c1 == c0:
        return m0 + (t - c0)
    num = (t - c0) * (m1 - m0)
    den = c1 - c0
    return m0 + (num + den // 2) // den  # rounded to the nearest ns


def _frame(code: Any, line: int) -> Frame:
    name = getattr(code, "co_qualname", None) or code.co_name
    return Frame(code.co_filename, name, int(code.co_firstlineno), int(line))


def _synchronize() -> None:
    """Waits for the GPU before the final flush (replaced in the tests, which have no GPU)."""
    _C._cuda_synchronize()


def cupti_library_candidates() -> tuple[str, ...]:
    """Where libcupti is looked for, most specific first (see fastprof.cuda.libs)."""
    return library_candidates(
        "cupti", ("libcupti.so", "libcupti.so.13", "libcupti.so.12"), "cuda_cupti"
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


def cuda_of_cupti(api: int) -> int:
    """The CUDA version (12040 = 12.4) a CUPTI API version belongs to; 0 when unknown."""
    if api >= 100000:
        return (api // 10000) * 1000 + (api // 100 % 100) * 10
    return _CUPTI_CUDA.get(api, 0)


def check_cupti_driver(api: int, driver: int) -> None:
    """Raises CudaUnavailableError when the loaded libcupti belongs to a newer CUDA than the
    driver supports (CUPTI, unlike the runtime, does not work with an older driver)."""
    cupti = cuda_of_cupti(api)
    if driver and cupti and cupti > driver:
        raise _cuda_base.CudaUnavailableError(
            f"the loaded libcupti is for CUDA {cupti // 1000}.{cupti % 1000 // 10}, newer than "
            f"the NVIDIA driver (it supports CUDA {driver // 1000}.{driver % 1000 // 10}): "
            f"install the CUPTI of CUDA {driver // 1000} (pip install "
            f"nvidia-cuda-cupti-cu{driver // 1000}, or point CUDA_HOME at that toolkit) or "
            "update the driver"
        )


#: fastprof's own folder: its frames are skipped when charging GPU time to Python lines.
# fastprof's own package (fastprof/, not only fastprof/cuda/): a launch made inside
# fastprof.kernels is charged to the user's line that called it
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_lock = threading.Lock()
_running: list["CudaRecorder"] = []


class CudaRecorder:
    """Records the CUDA side of a timeline between :meth:`start` and :meth:`stop`.

    After ``stop()``: ``records`` (every record, by start time), ``api_calls``, ``kernels``,
    ``memcpys``, ``memsets``, ``syncs``, ``nvtx_ranges``, ``launches`` (correlation id ->
    :class:`Launch`), ``dropped`` (records CUPTI lost), ``start_ns`` / ``stop_ns`` (the traced
    wall interval on time.monotonic_ns()'s axis), ``library`` (the libcupti used).
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.api_calls: list[ApiCall] = []
        self.kernels: list[Kernel] = []
        self.memcpys: list[Memcpy] = []
        self.memsets: list[Memset] = []
        self.syncs: list[Sync] = []
        self.nvtx_ranges: list[NvtxRange] = []
        self.launches: dict[int, Launch] = {}
        self.dropped = 0
        self.start_ns = 0
        self.stop_ns = 0
        self.library = ""
        self.enabled_kinds: tuple[int, ...] = ()
        self.clock_start: tuple[int, int, int] = (0, 0, 0)
        self.clock_stop: tuple[int, int, int] = (0, 0, 0)
        self._running = False

    # --- recording ---------------------------------------------------------------------

    def start(self) -> "CudaRecorder":
        """Starts recording. Raises CudaUnavailableError when CUDA or CUPTI cannot run (a
        libcupti newer than the driver included), RuntimeError when a trace is already running
        or CUPTI is held by another tool (Nsight Systems, torch.profiler); nothing stays
        enabled after an error."""
        _cuda_base._require()
        with _lock:
            if _running:
                raise RuntimeError("a CUDA trace is already running (one at a time per process)")
            paths = cupti_library_candidates()
            check_cupti_driver(*_C._cuda_cupti_version(paths))
            path, kinds, clock = _C._cuda_cupti_start(paths)
            _running.append(self)
        self._running = True
        self.library = str(path)
        self.enabled_kinds = tuple(int(k) for k in kinds)
        self.clock_start = (int(clock[0]), int(clock[1]), int(clock[2]))
        self.start_ns = self.clock_start[1]
        return self

    def stop(self) -> "CudaRecorder":
        """Waits for the GPU, ends the recording and detaches CUPTI; the records are then
        ready. Raises RuntimeError when not started."""
        if not self._running:
            raise RuntimeError("CudaRecorder.stop() without a start()")
        failed: Optional[BaseException] = None
        try:
            _synchronize()
        except BaseException as e:  # a kernel's fault surfaces here: the trace is kept for it
            failed = e
        self._running = False
        with _lock:
            _running.remove(self)
            raw, dropped, launches, ldropped, c0, c1 = _C._cuda_cupti_stop()
        self.clock_start = (int(c0[0]), int(c0[1]), int(c0[2]))
        self.clock_stop = (int(c1[0]), int(c1[1]), int(c1[2]))
        self.start_ns = self.clock_start[1]
        self.stop_ns = self.clock_stop[1]
        self.dropped = int(dropped) + int(ldropped)
        self._take_launches(launches)
        self._take_records(raw)
        if failed is not None:
            raise failed  # after the records are read: the trace of a faulting run is kept
        return self

    def __enter__(self) -> "CudaRecorder":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _t(self, t: int) -> int:
        return map_clock(int(t), self.clock_start, self.clock_stop)

    def _take_launches(self, raw: list) -> None:
        by_corr: dict[int, tuple] = {}
        for corr, tid, _domain, _cbid, alias, stack in raw:
            by_corr[int(corr)] = (
                int(tid),
                int(alias),
                tuple(_frame(code, line) for code, line in stack),
            )
        out: dict[int, Launch] = {}
        for corr, (tid, alias, stack) in by_corr.items():
            outer = corr
            if alias and alias in by_corr:
                outer = alias
                stack = by_corr[alias][2]
            out[corr] = Launch(corr, tid, stack, outer)
        self.launches = out

    def _take_records(self, raw: list) -> None:
        api, kern, cpy, mset, syncs = [], [], [], [], []
        opened: dict[int, tuple[str, int, int]] = {}
        ranges = []
        for t in raw:
            kind, name, start, end, device, ctx, stream, corr, nbytes, extra, tid, ident = t
            s, e = self._t(start), self._t(end)
            if kind == _KERNEL:
                kern.append(Kernel(name or "?", s, e, device, ctx, stream, corr))
            elif kind == _MEMCPY:
                kname = COPY_KINDS.get(extra, f"kind {extra}")
                cpy.append(Memcpy(kname, nbytes, s, e, device, ctx, stream, corr))
            elif kind == _MEMSET:
                mset.append(Memset(nbytes, s, e, device, ctx, stream, corr))
            elif kind in (_RUNTIME, _DRIVER):
                domain = "runtime" if kind == _RUNTIME else "driver"
                api.append(ApiCall(domain, name or f"cbid {ident}", s, e, tid, corr, ident, extra))
            elif kind == _SYNC:
                syncs.append(Sync(SYNC_TYPES.get(extra, "unknown"), s, e, ctx, stream, corr))
            elif kind == _MARKER:
                if extra & _MARKER_START:
                    opened[ident] = (name or "", s, tid)
                elif extra & _MARKER_END and ident in opened:
                    mname, ms, mtid = opened.pop(ident)
                    ranges.append(NvtxRange(mname, ms, s, mtid, ident))
        for ident, (mname, ms, mtid) in opened.items():  # still open at stop
            ranges.append(NvtxRange(mname, ms, self.stop_ns, mtid, ident))

        def by_start(r: Any) -> tuple:
            return (r.start_ns, r.end_ns)

        self.api_calls = sorted(api, key=by_start)
        self.kernels = sorted(kern, key=by_start)
        self.memcpys = sorted(cpy, key=by_start)
        self.memsets = sorted(mset, key=by_start)
        self.syncs = sorted(syncs, key=by_start)
        self.nvtx_ranges = sorted(ranges, key=by_start)
        every: list[Record] = [
            *self.api_calls,
            *self.kernels,
            *self.memcpys,
            *self.memsets,
            *self.syncs,
            *self.nvtx_ranges,
        ]
        self.records = sorted(every, key=by_start)

    # --- joins -------------------------------------------------------------------------

    def gpu_records(self) -> list[GpuRecord]:
        """Kernels, copies and memsets, by start time."""
        gpu: list[GpuRecord] = [*self.kernels, *self.memcpys, *self.memsets]
        return sorted(gpu, key=lambda r: (r.start_ns, r.end_ns))

    def api_call_of(self, record: GpuRecord) -> Optional[ApiCall]:
        """The API call that launched a GPU record (by correlation id; the outer runtime
        call when the record names the driver call nested in it), or None."""
        calls = self._api_by_corr()
        launch = self.launches.get(record.correlation_id)
        if launch is not None and launch.outer_correlation_id in calls:
            return calls[launch.outer_correlation_id]
        return calls.get(record.correlation_id)

    def _api_by_corr(self) -> dict[int, ApiCall]:
        cached = getattr(self, "_api_cache", None)
        if cached is None or cached[0] is not self.api_calls:
            table: dict[int, ApiCall] = {}
            for a in self.api_calls:
                if a.domain == "runtime" or a.correlation_id not in table:
                    table[a.correlation_id] = a
            cached = (self.api_calls, table)
            self._api_cache = cached
        return cached[1]

    # --- views -------------------------------------------------------------------------

    def summary(self) -> Any:
        """nsys stats' tables (CUDA API, GPU kernels, memory operations by time and by size),
        the GPU-busy share of the traced wall time and the host time blocked in synchronising
        calls: a :class:`fastprof.cuda.summary.CudaSummary` (``str()`` prints it)."""
        from .summary import summarize

        return summarize(self)

    def gpu_by_python(self, spans: Optional[Sequence[Any]] = None) -> Any:
        """GPU time and launches per Python function and per line, next to the host time of
        the launching API calls (and of the functions, when timeline ``spans`` are given):
        a :class:`fastprof.cuda.attribution.GpuByPython`."""
        from .attribution import attribute

        return attribute(self, spans, skip_dirs=(_PACKAGE_DIR,))

    def chrome_events(self, pid: int, origin: int = 0) -> list[dict[str, Any]]:
        """Trace Event Format events of the recording for process ``pid``: one track per host
        thread for its API calls, one per thread for its NVTX ranges, one per device and
        stream for kernels, copies and memsets, and flow events from each launching API call
        to its GPU work. Timestamps are microseconds (floats) on time.monotonic_ns()'s axis.
        Track ids: API tracks ``API_TID + tid``, NVTX tracks ``NVTX_TID + tid``, GPU tracks
        ``GPU_TID + n`` (n numbering the (device, stream) pairs by first use).  With origin,
        the times are less origin nanoseconds (a Python timeline's, see
        fastprof.report.chrome.trace_origin)."""
        from ..report.cuda_chrome import chrome_events

        return chrome_events(self, pid, origin)
