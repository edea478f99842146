"""Chrome's Trace Event Format (the JSON object form) from a fastprof timeline: what Perfetto
(ui.perfetto.dev) and chrome://tracing open.

One process; one track per Python thread ("X" complete events, a parent before its children,
named by thread_name metadata events); the CUDA recorder's events (its own tracks and the flow
arrows from each launch to its kernel) are added as they come.  ``ts`` and ``dur`` are
microseconds, as the format wants, from nanoseconds on ``time.monotonic_ns()``'s scale: three
decimals keep every nanosecond, so nesting survives the conversion.  The counts of what the
timeline left out go in ``otherData``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple, Union

from ..keys import FuncKey

__all__ = ["chrome_trace", "write_chrome_trace"]


class TimelineLike(Protocol):
    """What the writer reads of a fastprof.timeline.Timeline (named here, not imported: the
    timeline imports this module)."""

    @property
    def spans(self) -> Sequence[Any]: ...  # (start_ns, end_ns, func, thread, depth)
    @property
    def threads(self) -> Sequence[Any]: ...  # (order, ident, native_id, name)
    @property
    def dropped(self) -> int: ...
    @property
    def filtered(self) -> int: ...
    @property
    def too_short(self) -> int: ...
    @property
    def capacity(self) -> int: ...

    min_duration: float
    include: Tuple[str, ...]
    exclude: Tuple[str, ...]

    def name_of(self, key: FuncKey) -> str: ...


def _us(ns: int) -> float:
    """Nanoseconds as the format's microseconds (exact to the nanosecond)."""
    return ns / 1000.0


def _args(key: FuncKey) -> Dict[str, Any]:
    if key[0] == "~":
        return {}
    return {"file": key[0], "line": key[1]}


def chrome_trace(
    timeline: TimelineLike,
    *,
    pid: Optional[int] = None,
    process_name: Optional[str] = None,
    extra_events: Iterable[Dict[str, Any]] = (),
) -> Dict[str, Any]:
    """The trace of ``timeline`` as a JSON-ready dict; ``extra_events`` (the CUDA recorder's,
    on the same microsecond axis) are appended as they are."""
    from .._version import __version__

    pid = os.getpid() if pid is None else pid
    if process_name is None:
        argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        process_name = f"python {argv0}".strip()
    events: List[Dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process_name}},
    ]
    tids = {}
    for th in timeline.threads:
        tid = th.native_id or th.order + 1
        tids[th.order] = tid
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": th.name}}
        )
        events.append(
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": th.order},
            }
        )
    for s in timeline.spans:  # by thread, a parent before its children
        ev: Dict[str, Any] = {
            "ph": "X",
            "cat": "python",
            "name": timeline.name_of(s.func),
            "pid": pid,
            "tid": tids.get(s.thread, s.thread + 1),
            "ts": _us(s.start_ns),
            "dur": _us(s.end_ns - s.start_ns),
        }
        args = _args(s.func)
        if args:
            ev["args"] = args
        events.append(ev)
    events.extend(extra_events)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": f"fastprof {__version__}",
            "clock": "CLOCK_MONOTONIC",
            "python_spans": len(timeline.spans),
            "buffer_size": timeline.capacity,
            "dropped": timeline.dropped,
            "filtered": timeline.filtered,
            "too_short": timeline.too_short,
            "min_duration_s": timeline.min_duration,
            "include": list(timeline.include),
            "exclude": list(timeline.exclude),
        },
    }


def write_chrome_trace(path: Union[str, "os.PathLike[str]"], trace: Dict[str, Any]) -> str:
    """Writes ``trace`` (see :func:`chrome_trace`) as JSON to ``path``; returns the path.
    OSError says why it could not."""
    out = os.fspath(path)
    text = json.dumps(trace, separators=(",", ":"))  # one pass of the C encoder
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out
