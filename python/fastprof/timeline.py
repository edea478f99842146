"""The Python call timeline: ``with fastprof.trace() as tr:`` records every call and return
(Python functions and builtins) with its start and end time, per thread.

The call profiler's own hooks record it, in C: each finished call becomes one span (start
tick, end tick, function, thread, depth) in a fixed-size ring that drops the oldest span first
and counts what it dropped.  A minimum duration and include/exclude by module keep the ring
for what matters; both are counted too.  The same run's call profile comes with it
(``tr.stats()``), and with nothing dropped or filtered the timeline's call counts equal it.

Times are nanoseconds on ``time.monotonic_ns()``'s scale (CLOCK_MONOTONIC), the axis the CUDA
side (``trace(cuda=True)``) puts GPU activity on, so one Chrome trace file
(``tr.export_chrome_trace(path)``) shows both.
"""

from __future__ import annotations

import collections
import os
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from . import _fastprof
from ._quiet import quiet
from ._threads import known_threads, profiled_thread_names
from .keys import FuncKey, is_disable, label
from .profile import Profile

__all__ = ["trace", "Timeline", "Span", "TimelineThread", "DEFAULT_BUFFER_SIZE"]

DEFAULT_BUFFER_SIZE = 1_000_000
"""The ring's default size in spans (32 bytes each: 32 MB)."""

# Anchors closer together than this convert ticks with the calibrated unit instead of the
# slope between them (whose read error would weigh too much).
_MIN_ANCHOR_SPAN_NS = 50_000_000

if TYPE_CHECKING:  # types for the checker alone: see keys.FuncKey
    Modules = Union[None, str, Iterable[str]]
else:
    Modules = object

# What `fastprof run --timeline` leaves out: fastprof's own functions (the runner's disable()
# among them), as its call profile leaves out the runner's frames.
_RUNNER_EXCLUDE = ("fastprof",)

# One span as Profile._timeline_records writes it (C's fp_span, _fastprof.TIMELINE_RECORD_SIZE
# bytes): start and end (ns), function index, thread, depth and a pad, in the machine's byte
# order; the function index is the fifth 32-bit field.
_RECORD_SIZE = _fastprof.TIMELINE_RECORD_SIZE
_FUNC_FIELD = 4


class Span(NamedTuple):
    """One finished call: ``start_ns``/``end_ns`` on ``time.monotonic_ns()``'s scale, the
    function's pstats key (``func``), the thread's index in ``Timeline.threads`` and its
    depth (open calls below it in its thread)."""

    start_ns: int
    end_ns: int
    func: FuncKey
    thread: int
    depth: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


class TimelineThread(NamedTuple):
    """A thread of the timeline: its order of first appearance (what ``Span.thread`` holds),
    ``threading`` ident, the operating system's thread id and its name (``threading``'s,
    when its Thread object was still alive at the end)."""

    order: int
    ident: int
    native_id: int
    name: str


def _modules(value: Modules, name: str) -> Tuple[str, ...]:
    """include/exclude as a tuple of module names, or TypeError/ValueError naming ``name``."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, (bytes, bytearray, memoryview)):  # iterated, it gives ints
        raise TypeError(
            f"{name} must be a module name (str) or an iterable of them, not "
            f"{type(value).__name__}: decode it first"
        )
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(
            f"{name} must be a module name or an iterable of module names, "
            f"not {type(value).__name__}"
        ) from None
    for m in names:
        if not isinstance(m, str):
            raise TypeError(f"{name} must hold module names (str), not {m!r}")
        if not m or m.startswith(".") or m.endswith("."):
            raise ValueError(
                f"{name} must hold module names such as 'numpy' or 'pkg.mod', not {m!r}"
            )
    return names


#: tries of an anchor: the pair read closest together is kept
_ANCHOR_READS = 25


def _anchor() -> Tuple[int, int]:
    """A (tick, monotonic ns) pair read back to back (the tick is the mean of two reads
    around the monotonic one), the tightest of _ANCHOR_READS tries: a single read, cold or
    interrupted, put every span of a short block up to 1.7 us late on the monotonic clock."""
    ticks, mono = _fastprof.ticks, time.monotonic_ns
    best = (0, 0, -1)  # (tick, monotonic ns, spread in ticks)
    for _ in range(_ANCHOR_READS):
        k0 = ticks()
        m = mono()
        k1 = ticks()
        if best[2] < 0 or k1 - k0 < best[2]:
            best = ((k0 + k1) // 2, m, k1 - k0)
    return best[0], best[1]


def _thread_names() -> Dict[int, str]:
    """threading's names of its threads, by operating system thread id: the live ones, and
    the finished ones whose Thread object is still alive (an ident is reused by a later
    thread far sooner than a native id is, so a finished thread keeps its own name)."""
    # loaded here: `run --timeline` loads nothing before the script that cProfile does not
    import threading

    names: Dict[int, str] = {}
    for t in [threading.main_thread()] + known_threads():
        native = getattr(t, "native_id", None)
        if native is not None and t.ident is not None:
            names[native] = t.name  # a live thread last: it wins a reused native id
    return names


def _cuda_unavailable(reason: str) -> Exception:
    from .cuda._base import CudaUnavailableError

    return CudaUnavailableError(reason)


def _cuda_recorder() -> Any:
    """A started-to-be CUDA recorder (fastprof.cuda.timeline.CudaRecorder), or
    CudaUnavailableError with the reason it cannot record here."""
    try:
        from .cuda import timeline as cuda_timeline
    except ImportError as e:
        raise _cuda_unavailable(f"trace(cuda=True): the CUDA timeline cannot load: {e}") from e
    return cuda_timeline.CudaRecorder()


class Timeline(_fastprof._Session):
    """What ``fastprof.trace(...)`` returns: a context manager that records the block's calls,
    then holds them.

    ``spans`` (each a :class:`Span`), ``threads``, ``dropped`` (spans the full ring
    overwrote), ``filtered`` (calls of modules left out), ``too_short`` (calls under
    ``min_duration``), ``call_counts()``, ``stats()`` (the call profile of the same run),
    ``export_chrome_trace(path)``; with ``cuda=True`` also ``summary()`` and
    ``gpu_by_python()``.  A timeline records once.
    """

    # Made quietly, as __enter__'s preparation: a trace begun inside another records its
    # caller's call of trace() and of __enter__, not fastprof's own work behind them.
    @quiet
    def __init__(
        self,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        min_duration: float = 0.0,
        include: Modules = None,
        exclude: Modules = None,
        cuda: bool = False,
        builtins: bool = True,
        timer: Any = None,
        timeunit: float = 0.0,
    ) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise TypeError(
                f"buffer_size must be an int (the ring's size in spans), "
                f"not {type(buffer_size).__name__}"
            )
        if buffer_size < 1 or buffer_size > 1 << 40:
            raise ValueError(f"buffer_size must be between 1 and 2**40 spans, not {buffer_size}")
        if isinstance(min_duration, bool) or not isinstance(min_duration, (int, float)):
            raise TypeError(
                f"min_duration must be a number of seconds, not {type(min_duration).__name__}"
            )
        if not 0 <= min_duration < float("inf"):
            raise ValueError(
                f"min_duration must be a finite number of seconds >= 0, not {min_duration!r}"
            )
        if not isinstance(cuda, bool):
            raise TypeError(f"cuda must be a bool, not {type(cuda).__name__}")
        inc = _modules(include, "include")
        exc = _modules(exclude, "exclude")
        self.profiler = Profile(
            timer,
            timeunit,
            builtins=builtins,
            timeline=buffer_size,
            timeline_min=float(min_duration),
            timeline_include=inc,
            timeline_exclude=exc,
        )
        self.min_duration = float(min_duration)
        self.include = inc
        self.exclude = exc
        self._want_cuda = cuda
        self._cuda: Any = None
        self._state = "new"  # new -> recording -> done
        self._anchors: List[Tuple[int, int]] = []
        self._spt = 0.0
        self._records = b""  # the spans as _timeline_records gives them
        self._spans: Optional[List[Span]] = None  # built from _records when first read
        self._threads: List[TimelineThread] = []
        self._counts: Dict[str, int] = {}
        self._func_keys: List[FuncKey] = []
        self._names: Dict[FuncKey, str] = {}
        self._runner = False  # the runner's own disable() call ends the recording

    # -- recording ------------------------------------------------------------------------

    def __enter__(self) -> "Timeline":
        if self._state != "new":
            raise RuntimeError("a Timeline records once: call fastprof.trace() again")
        self._prepare()
        try:
            self._start()  # the profiler's hooks go on here (in C): nothing of ours runs after
        except BaseException:
            self._unprepare()
            raise
        return self

    @quiet
    def _prepare(self) -> None:
        """What comes before the hooks go on: the CUDA recorder started (with cuda=True) and
        the clocks read (_begin).  Returns None."""
        if self._want_cuda:
            recorder = _cuda_recorder()
            recorder.start()
            self._cuda = recorder
        try:
            self._begin()
        except BaseException:
            self._unprepare()
            raise

    @quiet
    def _unprepare(self) -> None:
        """Undoes a failed __enter__ (a KeyboardInterrupt can land right after the hooks went
        on: off again, so that nothing is left on that the caller, with no `as` name bound,
        could turn off).  Returns None."""
        if self.profiler.enabled:
            try:
                self._stop()
            except Exception:  # the first error is the one to report
                pass
        self._stop_cuda()
        self._state = "new"

    # __exit__ is the C base's: it turns the profiler off without running any Python code of
    # fastprof first, then calls _block_ended (or _block_failed when disable() raised).

    def _block_ended(self) -> None:
        try:
            self._stop_cuda()
        finally:
            self._finish()

    def _block_failed(self) -> None:
        self._stop_cuda()
        self._state = "done"

    def _stop_cuda(self) -> None:
        if self._cuda is not None and self._state == "recording":
            self._cuda.stop()

    def _begin(self) -> None:
        """Marks the start of the recording (the profiler goes on next)."""
        self._state = "recording"
        self._anchors = [_anchor()]

    def _finish(self) -> None:
        """Reads the recording back from the (disabled) profiler: its threads, counts and
        function keys, and the spans as sorted records on the nanosecond axis (C), which
        ``spans`` turns into Span objects when first read."""
        self._anchors.append(_anchor())
        self._state = "done"
        spt, _spans, threads, counts = self.profiler._raw_timeline(spans=False)
        self._spt = spt
        self._counts = dict(counts)
        _, funcs, edges = self.profiler._raw()
        codes = [row[0] for row in funcs]
        self._func_keys = [label(c) for c in codes]
        self._names = {k: getattr(c, "co_qualname", k[2]) for k, c in zip(self._func_keys, codes)}
        names = {**profiled_thread_names(self.profiler, by="native"), **_thread_names()}
        self._threads = [
            TimelineThread(
                i,
                ident,
                native,
                names.get(native, f"Thread {native}"),
            )
            for i, (ident, native) in enumerate(t if t is not None else (0, 0) for t in threads)
        ]
        m0, k0, scale = self._affine()
        records = self.profiler._timeline_records(m0, k0, scale)
        self._records = records
        self._spans = None
        if self._runner:
            # the runner's own top-level calls of disable() (fastprof's, which its timeline
            # leaves out) are not the script's: not among the calls filtered out
            runner = {i: f[1] for i, f in enumerate(funcs) if is_disable(label(f[0]))}
            for _caller, callee, nc, *_ in edges:
                if callee in runner:
                    runner[callee] -= nc
            self._counts["filtered"] = max(0, self.filtered - sum(runner.values()))

    @classmethod
    def _of_run(cls, buffer_size: int, min_duration: float, builtins: bool) -> "Timeline":
        """The timeline of ``fastprof run --timeline``, over a profiler the runner enables and
        disables itself (``tl.profiler``); call ``_finish()`` once it is disabled.  fastprof's
        own functions are left out of its spans (the module filter), so the runner's call of
        ``disable()``, which ends the recording, takes no slot of the ring and is in none of
        its counts (it is not among those ``filtered``)."""
        tl = cls.__new__(cls)
        tl.profiler = Profile(
            builtins=builtins,
            timeline=buffer_size,
            timeline_min=float(min_duration),
            timeline_exclude=_RUNNER_EXCLUDE,
        )
        tl.min_duration = min_duration
        tl.include, tl.exclude = (), _RUNNER_EXCLUDE
        tl._want_cuda = False
        tl._cuda = None
        tl._records, tl._spans = b"", None
        tl._threads, tl._counts, tl._func_keys, tl._names = [], {}, [], {}
        tl._spt = 0.0
        tl._runner = True
        tl._begin()
        return tl

    def _affine(self) -> Tuple[int, int, float]:
        """(m0, k0, scale): a tick t is monotonic nanosecond m0 + round((t - k0) * scale),
        through the anchors on the wall clock, the timer's own scale (in ns) with a user
        timer."""
        spt = self._spt
        if self.profiler.clock != "wall":
            scale = spt * 1e9  # a timer's ns (1e-9 * 1e9 is 1 + 2**-52): made exact
            return 0, 0, float(round(scale)) if abs(scale - round(scale)) < 1e-9 else scale
        (k0, m0), (k1, m1) = self._anchors[0], self._anchors[-1]
        if m1 - m0 >= _MIN_ANCHOR_SPAN_NS and k1 > k0:
            return m0, k0, (m1 - m0) / (k1 - k0)
        return m0, k0, spt * 1e9

    def _require_done(self, what: str) -> None:
        if self._state != "done":
            raise RuntimeError(f"{what}: the timeline is read once its with block has ended")

    # -- results --------------------------------------------------------------------------

    @property
    def spans(self) -> List[Span]:
        """Every span kept, by thread, then by start (a parent before its children)."""
        if self._spans is None:  # built in C from the records, when first read
            self._spans = _fastprof._spans_of_records(self._records, self._func_keys, Span)
        return self._spans

    def _span_records(self) -> Tuple[bytes, List[FuncKey]]:
        """(records, keys): the spans as 32-byte records (start_ns, end_ns, function index,
        thread, depth, pad; native byte order), in the order of ``spans``, and the function
        keys the indices name: what the Chrome trace's writer reads."""
        return self._records, self._func_keys

    def _span_count(self) -> int:
        """``len(self.spans)``, without building the spans."""
        return len(self._records) // _RECORD_SIZE

    @property
    def threads(self) -> List[TimelineThread]:
        """The threads seen, in first-seen order (``Span.thread`` indexes them)."""
        return self._threads

    @property
    def dropped(self) -> int:
        """Spans the full ring overwrote (the oldest first)."""
        return int(self._counts.get("dropped", 0))

    @property
    def filtered(self) -> int:
        """Calls not recorded because include/exclude left their module out."""
        return int(self._counts.get("filtered", 0))

    @property
    def too_short(self) -> int:
        """Calls not recorded because they lasted less than ``min_duration``."""
        return int(self._counts.get("too_short", 0))

    @property
    def capacity(self) -> int:
        """The ring's size in spans."""
        return int(self.profiler.timeline or 0)

    @property
    def start_ns(self) -> int:
        """When the recording began (``time.monotonic_ns()``)."""
        return self._anchors[0][1] if self._anchors else 0

    @property
    def end_ns(self) -> int:
        """When the recording ended (``time.monotonic_ns()``)."""
        return self._anchors[-1][1] if len(self._anchors) > 1 else 0

    def name_of(self, key: FuncKey) -> str:
        """The name a span of the function ``key`` shows: its qualified name (3.11+, else its
        name), or a builtin's label."""
        return self._names.get(key, key[2])

    def call_counts(self) -> Dict[FuncKey, int]:
        """Calls per function (pstats key) among the spans kept."""
        keys = self._func_keys
        funcs = memoryview(self._records).cast("i")[_FUNC_FIELD :: _RECORD_SIZE // 4]
        counts: Dict[FuncKey, int] = {}
        for f, n in collections.Counter(funcs).items():  # two functions may share a key
            counts[keys[f]] = counts.get(keys[f], 0) + n
        return counts

    def stats(self) -> Any:
        """The call profile of the same run (a ``fastprof.Stats``): its call counts equal
        ``call_counts()`` when nothing was dropped, filtered or too short."""
        self._require_done("stats()")
        from .stats import Stats

        return Stats(self.profiler)

    def chrome_trace(self, process_name: Optional[str] = None) -> Dict[str, Any]:
        """The timeline as a Chrome trace (the Trace Event Format's JSON object form): the
        Python spans per thread, and with ``cuda=True`` the CUDA recorder's tracks."""
        self._require_done("chrome_trace()")
        from .report.chrome import chrome_trace, trace_origin

        pid, origin = os.getpid(), trace_origin(self)
        extra = self._cuda.chrome_events(pid, origin) if self._cuda is not None else []
        return chrome_trace(
            self, pid=pid, process_name=process_name, extra_events=extra, origin=origin
        )

    def export_chrome_trace(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Writes the Chrome trace to ``path`` (Perfetto and chrome://tracing open it);
        returns the path written."""
        self._require_done("export_chrome_trace()")
        from .report.chrome import chrome_trace_chunks, trace_origin, write_chrome_trace

        pid, origin = os.getpid(), trace_origin(self)
        extra = self._cuda.chrome_events(pid, origin) if self._cuda is not None else []
        # written a chunk at a time: the file's text is never whole in memory
        chunks = chrome_trace_chunks(self, pid=pid, extra_events=extra, origin=origin)
        return write_chrome_trace(path, chunks)

    def _cuda_or_error(self, what: str) -> Any:
        self._require_done(what)
        if self._cuda is None:
            raise RuntimeError(
                f"{what}: this trace recorded no CUDA activity; use fastprof.trace(cuda=True)"
            )
        return self._cuda

    def summary(self) -> Any:
        """The CUDA recorder's summary of the GPU activity (``trace(cuda=True)`` only)."""
        return self._cuda_or_error("summary()").summary()

    def gpu_by_python(self) -> Any:
        """GPU time by the Python code that launched it, with each function's host time from
        the timeline's spans (``trace(cuda=True)`` only)."""
        return self._cuda_or_error("gpu_by_python()").gpu_by_python(self.cuda_spans())

    def cuda_spans(self) -> List[Dict[str, Any]]:
        """The spans as the CUDA side reads them: ``tid`` (the operating system's thread id,
        ``threading.get_native_id()``), ``start_ns``, ``end_ns``, ``filename``, ``function``
        (qualified name, or a builtin's label), ``firstlineno``."""
        native = {th.order: th.native_id for th in self._threads}
        return [
            {
                "tid": native.get(s.thread, 0),
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                "filename": s.func[0],
                "function": self.name_of(s.func),
                "firstlineno": s.func[1],
            }
            for s in self.spans
        ]

    def __repr__(self) -> str:
        return (
            f"<fastprof.Timeline {self._state}: {self._span_count()} spans, "
            f"{len(self._threads)} threads, dropped={self.dropped}, "
            f"filtered={self.filtered}, too_short={self.too_short}>"
        )


def trace(
    *,
    buffer_size: int = DEFAULT_BUFFER_SIZE,
    min_duration: float = 0.0,
    include: Modules = None,
    exclude: Modules = None,
    cuda: bool = False,
    builtins: bool = True,
    timer: Any = None,
    timeunit: float = 0.0,
) -> Timeline:
    """Records a timeline of the ``with`` block: ``with fastprof.trace() as tr: ...``.

    ``buffer_size``: the ring's size in spans (the oldest are dropped first, and counted in
    ``tr.dropped``); ``min_duration``: calls shorter than this many seconds are not kept
    (``tr.too_short``); ``include``/``exclude``: module names (a package takes its
    submodules) whose calls are kept / left out (``tr.filtered``; a builtin belongs to the
    module of its type or function, ``builtins`` for ``len``); ``cuda``: record the GPU's
    activity too (CudaUnavailableError says why when it cannot); ``builtins``: record calls
    of builtins; ``timer``/``timeunit``: a clock as ``fastprof.Profile``'s (the spans are then
    on that clock's scale, not monotonic time).
    """
    return Timeline(
        buffer_size=buffer_size,
        min_duration=min_duration,
        include=include,
        exclude=exclude,
        cuda=cuda,
        builtins=builtins,
        timer=timer,
        timeunit=timeunit,
    )
