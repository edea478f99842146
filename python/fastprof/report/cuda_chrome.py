"""Trace Event Format events of a CUDA recording (chrome://tracing, Perfetto).

All events belong to the traced process ``pid``; the CUDA tracks are threads of it, named by
"thread_name" metadata and ordered after the Python threads by "thread_sort_index":

- ``API_TID + tid``: the runtime and driver API calls of host thread ``tid``;
- ``NVTX_TID + tid``: the NVTX ranges of host thread ``tid``;
- ``GPU_TID + n``: the kernels, copies and memsets of one (device, stream), n numbering the
  pairs in order of (device, stream).

A flow ("s" on the API call, "f" with "bp": "e" on the GPU work, one id per correlation id)
links each launching call to the work it put on the GPU. Timestamps are microseconds as
floats on time.monotonic_ns()'s axis.
"""

from __future__ import annotations

from typing import Any

from ..cuda.demangle import demangle

__all__ = ["chrome_events", "API_TID", "NVTX_TID", "GPU_TID"]

API_TID = 1 << 24
NVTX_TID = 2 << 24
GPU_TID = 3 << 24


def _us(ns: int) -> float:
    return ns / 1000.0


def _meta(pid: int, tid: int, name: str, order: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
        {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": pid,
            "tid": tid,
            "args": {"sort_index": order},
        },
    ]


def _gpu_name(r: Any) -> str:
    if hasattr(r, "copy_kind"):
        return f"[CUDA memcpy {r.copy_kind}]"
    if hasattr(r, "name"):
        return demangle(r.name)
    return "[CUDA memset]"


def _gpu_cat(r: Any) -> str:
    if hasattr(r, "copy_kind"):
        return "cuda_memcpy"
    if hasattr(r, "name"):
        return "cuda_kernel"
    return "cuda_memset"


def chrome_events(rec: Any, pid: int, origin: int = 0) -> list[dict[str, Any]]:
    """The events of a stopped CudaRecorder (see the module for the tracks); their times
    less origin nanoseconds (the Python spans' origin, report.chrome.trace_origin)."""
    if not isinstance(pid, int) or isinstance(pid, bool):
        raise TypeError(f"pid must be an int, got {type(pid).__name__}")
    events: list[dict[str, Any]] = []
    threads = sorted({a.tid for a in rec.api_calls})
    for tid in threads:
        events += _meta(pid, API_TID + tid, f"CUDA API (thread {tid})", API_TID + tid)
    for tid in sorted({n.tid for n in rec.nvtx_ranges}):
        events += _meta(pid, NVTX_TID + tid, f"NVTX (thread {tid})", NVTX_TID + tid)
    gpu = rec.gpu_records()
    lanes = {key: GPU_TID + n for n, key in enumerate(sorted({(r.device, r.stream) for r in gpu}))}
    for (device, stream), tid in lanes.items():
        events += _meta(pid, tid, f"GPU {device} stream {stream}", tid)
    for a in rec.api_calls:
        events.append(
            {
                "name": a.name,
                "cat": f"cuda_{a.domain}",
                "ph": "X",
                "ts": _us(a.start_ns - origin),
                "dur": _us(a.duration_ns),
                "pid": pid,
                "tid": API_TID + a.tid,
                "args": {"correlation": a.correlation_id, "return": a.return_value},
            }
        )
    calls = {a.correlation_id: a for a in rec.api_calls if a.domain == "runtime"}
    for a in rec.api_calls:
        calls.setdefault(a.correlation_id, a)
    orphan = False  # a sync whose API call was not recorded goes on a track of its own
    for s in rec.syncs:
        call = calls.get(s.correlation_id)
        tid = API_TID + (call.tid if call is not None else 0)
        if call is None and 0 not in threads and not orphan:
            orphan = True
            events += _meta(pid, API_TID, "CUDA API (thread unknown)", API_TID)
        events.append(
            {
                "name": f"sync: {s.type}",
                "cat": "cuda_sync",
                "ph": "X",
                "ts": _us(s.start_ns - origin),
                "dur": _us(s.duration_ns),
                "pid": pid,
                "tid": tid,
                "args": {"stream": s.stream, "correlation": s.correlation_id},
            }
        )
    for n in rec.nvtx_ranges:
        events.append(
            {
                "name": n.name,
                "cat": "nvtx",
                "ph": "X",
                "ts": _us(n.start_ns - origin),
                "dur": _us(n.duration_ns),
                "pid": pid,
                "tid": NVTX_TID + n.tid,
            }
        )
    flows = 0  # a flow id per launch -> work arrow: one launch (a CUDA graph's) may run several
    for r in gpu:
        lane = lanes[(r.device, r.stream)]
        args: dict[str, Any] = {
            "device": r.device,
            "stream": r.stream,
            "context": r.context,
            "correlation": r.correlation_id,
        }
        if hasattr(r, "bytes"):
            args["bytes"] = r.bytes
        events.append(
            {
                "name": _gpu_name(r),
                "cat": _gpu_cat(r),
                "ph": "X",
                "ts": _us(r.start_ns - origin),
                "dur": _us(r.duration_ns),
                "pid": pid,
                "tid": lane,
                "args": args,
            }
        )
        call = rec.api_call_of(r)
        if call is None:
            continue
        flows += 1
        flow = {"name": "launch", "cat": "cuda_flow", "id": flows, "pid": pid}
        events.append(
            {**flow, "ph": "s", "ts": _us(call.start_ns - origin), "tid": API_TID + call.tid}
        )
        events.append({**flow, "ph": "f", "bp": "e", "ts": _us(r.start_ns - origin), "tid": lane})
    return events
