"""Chrome's Trace Event Format (the JSON object form) from a fastprof timeline: what Perfetto
(ui.perfetto.dev) and chrome://tracing open.

One process; one track per Python thread ("X" complete events, a parent before its children,
named by thread_name metadata events); the CUDA recorder's events (its own tracks and the flow
arrows from each launch to its kernel) are added as they come.  ``ts`` and ``dur`` are
microseconds, as the format wants, from nanoseconds on ``time.monotonic_ns()``'s scale: three
decimals keep every nanosecond, so nesting survives the conversion.  The counts of what the
timeline left out go in ``otherData``.  Names, files and patterns keep their text, less lone
surrogates (a file name that is not UTF-8): those are written as the text views write them
(``\\udcff``), since strict JSON readers refuse the ``"\\udcff"`` escape.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from .. import _fastprof
from ..keys import FuncKey
from .escape import without_surrogates

__all__ = ["chrome_trace", "chrome_trace_chunks", "chrome_trace_text", "write_chrome_trace"]


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
    """Nanoseconds as the format's microseconds (exact to the nanosecond below 2**53 ns; see
    trace_origin)."""
    return ns / 1000.0


# Times from here on (in magnitude) are written less an origin: past 10**15 ns the C writer's
# exact text ends, past 2**53 ns the float the format's readers parse "ts" into drops
# nanoseconds (an epoch timer's spans then cross on their track).
_EXACT_NS = 9 * 10**14


def trace_origin(timeline: TimelineLike) -> int:
    """The nanoseconds every time of timeline's trace is written less: 0 for times below
    about 10**15 ns (the monotonic clock of a machine up for less than ten days), else the
    earliest span's start rounded down to a whole second (an epoch-sized ``timer=``, or a
    machine up for longer), which the file then gives as ``otherData.ts_origin_ns``."""
    got = _records(timeline)
    if got is not None:
        if not got[0]:
            return 0
        starts: Any = memoryview(got[0]).cast("q")[0 :: _RECORD_BYTES // 8]  # t0 first
    else:
        starts = [span[0] for span in timeline.spans]
        if not starts:
            return 0
    if abs(starts[0]) < _EXACT_NS:
        return 0
    return min(starts) // 10**9 * 10**9


_SEP = (",", ":")


def _dumps(value: Any) -> str:
    """value as the trace's compact JSON (one pass of the C encoder)."""
    return json.dumps(value, separators=_SEP)


def _head(
    timeline: TimelineLike, pid: Optional[int], process_name: Optional[str]
) -> Tuple[int, List[Dict[str, Any]], Dict[int, int]]:
    """(pid, the metadata events naming the process and the threads, {thread order: tid})."""
    pid = os.getpid() if pid is None else pid
    if process_name is None:
        argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        process_name = f"python {argv0}".strip()
    events: List[Dict[str, Any]] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": pid,
            "tid": 0,
            "args": {"name": without_surrogates(process_name)},
        },
    ]
    tids = {}
    for th in timeline.threads:
        tid = th.native_id or th.order + 1
        tids[th.order] = tid
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": without_surrogates(th.name)},
            }
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
    return pid, events, tids


def _spans(
    timeline: TimelineLike, tids: Dict[int, int]
) -> Iterator[Tuple[str, int, int, int, Optional[Tuple[str, int]]]]:
    """(name, tid, start_ns, end_ns, (file, line) or None for a builtin) of every span, by
    thread, a parent before its children; a name and a location per function, not per span
    (a trace holds up to millions)."""
    funcs: Dict[FuncKey, Tuple[str, Optional[Tuple[str, int]]]] = {}
    for start, end, func, thread, _depth in timeline.spans:
        got = funcs.get(func)
        if got is None:
            loc = None if func[0] == "~" else (without_surrogates(func[0]), func[1])
            got = funcs[func] = (without_surrogates(timeline.name_of(func)), loc)
        yield got[0], tids.get(thread, thread + 1), start, end, got[1]


def _on_wall_clock(timeline: TimelineLike) -> bool:
    """Whether the timeline's spans are on the monotonic clock (its profiler's wall clock);
    with a ``timer=`` they are on that timer's scale."""
    return getattr(getattr(timeline, "profiler", None), "clock", "wall") == "wall"


def _tail(timeline: TimelineLike, origin: int = 0) -> Dict[str, Any]:
    """The document's keys after ``traceEvents``."""
    from .._version import __version__

    tail: Dict[str, Any] = {
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": f"fastprof {__version__}",
            # a timeline over a timer= of the user's is on that clock's scale (timeline.md)
            "clock": "CLOCK_MONOTONIC" if _on_wall_clock(timeline) else "timer",
            "python_spans": _span_count(timeline),
            "buffer_size": timeline.capacity,
            "dropped": timeline.dropped,
            "filtered": timeline.filtered,
            "too_short": timeline.too_short,
            "min_duration_s": timeline.min_duration,
            "include": [without_surrogates(p) for p in timeline.include],
            "exclude": [without_surrogates(p) for p in timeline.exclude],
        },
    }
    if origin:
        tail["otherData"]["ts_origin_ns"] = origin  # every ts is less this
    return tail


def chrome_trace(
    timeline: TimelineLike,
    *,
    pid: Optional[int] = None,
    process_name: Optional[str] = None,
    extra_events: Iterable[Dict[str, Any]] = (),
    origin: Optional[int] = None,
) -> Dict[str, Any]:
    """The trace of ``timeline`` as a JSON-ready dict; ``extra_events`` (the CUDA recorder's,
    on the same microsecond axis, less the same origin) are appended as they are.  Times are
    written less origin nanoseconds (None: ``trace_origin(timeline)``)."""
    origin = trace_origin(timeline) if origin is None else origin
    pid, events, tids = _head(timeline, pid, process_name)
    append = events.append
    for name, tid, start, end, loc in _spans(timeline, tids):
        ev: Dict[str, Any] = {
            "ph": "X",
            "cat": "python",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": _us(start - origin),
            "dur": _us(end - start),
        }
        if loc is not None:
            ev["args"] = {"file": loc[0], "line": loc[1]}
        append(ev)
    events.extend(extra_events)
    doc = {"traceEvents": events}
    doc.update(_tail(timeline, origin))
    return doc


# Spans per chunk of the written text: the export holds one chunk's text at a time.
_CHUNK = 1 << 16
# The size of one span record (C's fp_span; fastprof.timeline reads its fields).
_RECORD_BYTES = _fastprof.TIMELINE_RECORD_SIZE


def _records(timeline: TimelineLike) -> Optional[Tuple[bytes, Sequence[FuncKey]]]:
    """A fastprof Timeline's spans as C records and the keys their function indices name
    (``Timeline._span_records``), or None for any other object with ``spans``."""
    get = getattr(timeline, "_span_records", None)
    return get() if callable(get) else None


def _span_count(timeline: TimelineLike) -> int:
    """How many spans ``timeline`` holds, without building them when it can."""
    count = getattr(timeline, "_span_count", None)
    return int(count()) if callable(count) else len(timeline.spans)


def _x_texts(timeline: TimelineLike, keys: Sequence[FuncKey]) -> Tuple[List[bytes], List[bytes]]:
    """(names, args): by function index, the JSON text of each function's name and of its
    ``,"args":{...}`` part (empty for a builtin), as _chrome_x_events takes them."""
    names: List[bytes] = []
    args: List[bytes] = []
    for func in keys:
        names.append(_dumps(without_surrogates(timeline.name_of(func))).encode())
        if func[0] == "~":
            args.append(b"")
        else:
            loc = {"file": without_surrogates(func[0]), "line": func[1]}
            args.append(f',"args":{_dumps(loc)}'.encode())
    return names, args


def _x_chunks_of_records(
    records: bytes,
    texts: Tuple[List[bytes], List[bytes]],
    pid: int,
    tids: List[int],
    origin: int,
) -> Iterator[bytes]:
    """The "X" events of the records (times less origin), written in C a chunk at a time,
    each chunk's events joined by commas."""
    count = len(records) // _RECORD_BYTES
    for lo in range(0, count, _CHUNK):
        hi = min(count, lo + _CHUNK)
        yield _fastprof._chrome_x_events(records, lo, hi, texts[0], texts[1], tids, pid, origin)


def _x_chunks_of_spans(
    timeline: TimelineLike, pid: int, tids: Dict[int, int], origin: int
) -> Iterator[bytes]:
    """The "X" events of ``timeline.spans`` (any TimelineLike; times less origin), a chunk at
    a time."""
    names: Dict[str, str] = {}
    locs: Dict[Tuple[str, int], str] = {}
    parts: List[str] = []
    for name, tid, start, end, loc in _spans(timeline, tids):
        jname = names.get(name)
        if jname is None:
            jname = names[name] = _dumps(name)
        args = ""
        if loc is not None:
            args = locs.get(loc, "")
            if not args:
                args = locs[loc] = f',"args":{_dumps({"file": loc[0], "line": loc[1]})}'
        parts.append(
            f'{{"ph":"X","cat":"python","name":{jname},"pid":{pid},"tid":{tid},'
            f'"ts":{_us(start - origin)!r},"dur":{_us(end - start)!r}{args}}}'
        )
        if len(parts) == _CHUNK:
            yield ",".join(parts).encode()
            parts = []
    if parts:
        yield ",".join(parts).encode()


def _joined(head: bytes, groups: Iterable[Iterable[bytes]], tail: bytes) -> Iterator[bytes]:
    """head, the non-empty pieces of groups separated by commas, then tail."""
    yield head
    sep = b""
    for group in groups:
        for piece in group:
            if piece:
                yield sep + piece
                sep = b","
    yield tail


def chrome_trace_chunks(
    timeline: TimelineLike,
    *,
    pid: Optional[int] = None,
    process_name: Optional[str] = None,
    extra_events: Iterable[Dict[str, Any]] = (),
    origin: Optional[int] = None,
) -> Iterator[bytes]:
    """The compact JSON text of :func:`chrome_trace` (the same bytes as ``json.dumps`` of it
    with ``(",", ":")`` separators, UTF-8), a piece at a time: a fastprof Timeline's spans
    are written in C from its records, without a dict or a Span per span.  Everything but
    the spans' text is made before this returns, so an error (a bad extra event) comes
    before a file is opened."""
    origin = trace_origin(timeline) if origin is None else origin
    pid, head, tids = _head(timeline, pid, process_name)
    meta = [",".join(_dumps(ev) for ev in head).encode()]
    got = _records(timeline)
    spans: Iterable[bytes]
    if got is not None:
        order = [tids.get(i, i + 1) for i in range(len(timeline.threads))]
        spans = _x_chunks_of_records(got[0], _x_texts(timeline, got[1]), pid, order, origin)
    else:
        spans = _x_chunks_of_spans(timeline, pid, tids, origin)
    extra = [_dumps(ev).encode() for ev in extra_events]
    tail = b"]," + _dumps(_tail(timeline, origin))[1:].encode()
    return _joined(b'{"traceEvents":[', (meta, spans, extra), tail)


def chrome_trace_text(
    timeline: TimelineLike,
    *,
    pid: Optional[int] = None,
    process_name: Optional[str] = None,
    extra_events: Iterable[Dict[str, Any]] = (),
) -> str:
    """The compact JSON text of :func:`chrome_trace` (the same text as ``json.dumps`` of it
    with ``(",", ":")`` separators), from :func:`chrome_trace_chunks`."""
    chunks = chrome_trace_chunks(
        timeline, pid=pid, process_name=process_name, extra_events=extra_events
    )
    return b"".join(chunks).decode("utf-8")


def write_chrome_trace(
    path: Union[str, "os.PathLike[str]"], trace: Union[str, Dict[str, Any], Iterable[bytes]]
) -> str:
    """Writes ``trace`` (see :func:`chrome_trace`, its text from :func:`chrome_trace_text`
    or its pieces from :func:`chrome_trace_chunks`) as JSON to ``path``; returns the path.
    OSError says why it could not.  A write that fails part way (a full disk, an error while
    the pieces are made) removes the regular file it began, so no half trace is left to
    load."""
    out = os.fspath(path)
    if isinstance(trace, dict):
        trace = _dumps(trace)
    if isinstance(trace, str):
        trace = (trace.encode("utf-8"),)
    f = open(out, "wb")
    try:
        with f:
            for piece in trace:
                f.write(piece)
    except BaseException:
        # only the regular file named itself: a symlink (to a file, /proc/self/fd/1), a
        # device or a FIFO is not this call's to remove
        try:
            regular = stat.S_ISREG(os.lstat(out).st_mode)
        except OSError:
            regular = False
        if regular:
            os.unlink(out)
        raise
    return out
