"""trace(): the Python call timeline.  Its call counts against the call profile of
the same run and against cProfile on the zoo of call shapes, the ring's drops, the minimum
duration and module filters (counted), exact timestamps under a fake clock, threads, the
Chrome trace's structure, the CUDA recorder's contract, and bad input."""

from __future__ import annotations

import cProfile
import gc
import json
import os
import sys
import threading
import time
import types
from typing import Any, Dict, Iterator, List

import pytest

import fastprof
from fastprof import _fastprof
from fastprof.cuda._base import CudaUnavailableError
from fastprof.timeline import Span, Timeline, trace
from profile_helpers import comparable
from test_profile_zoo import CASES, HERE, this_file_or_builtin
from timeline_helpers import chrome_trace_problems

ME = __file__
CLOCK = [0]


def clock() -> int:
    return CLOCK[0]


def fib(n: int) -> int:
    CLOCK[0] += 1
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def short(n: int) -> int:
    CLOCK[0] += n
    return n


def long_one() -> int:
    CLOCK[0] += 10
    return short(1) + short(5)


def profile_counts(tl: Timeline) -> Dict[Any, int]:
    """Calls per function in the call profile of the same run."""
    return {k: v[1] for k, v in tl.stats().to_dict().items()}


def well_nested(spans: List[Span], parents: bool = True) -> bool:
    """Every thread's spans nest: two spans of a thread at the same depth never overlap, and
    (parents) each span deeper than 0 lies within a span one less deep."""
    by_depth: Dict[Any, List[Span]] = {}
    for s in spans:
        by_depth.setdefault((s.thread, s.depth), []).append(s)
    for lst in by_depth.values():
        lst.sort(key=lambda s: (s.start_ns, s.end_ns))
        if any(a.end_ns > b.start_ns for a, b in zip(lst, lst[1:])):
            return False
    if parents:
        for s in spans:
            if s.depth > 0 and not any(
                p.start_ns <= s.start_ns and s.end_ns <= p.end_ns
                for p in by_depth.get((s.thread, s.depth - 1), [])
            ):
                return False
    return True


# -- counts: the same run's call profile, and cProfile ----------------------------------------


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("builtins", [True, False])
def test_zoo_counts_equal_the_call_profile_and_cprofile(name: str, builtins: bool) -> None:
    fn = CASES[name]
    # no collection inside either run: a weakref callback it runs (a WeakSet's discard) would
    # be one more builtin call in one of them
    gc.collect()
    gc.disable()
    try:
        with trace(builtins=builtins) as tr:
            fn()
        ref = cProfile.Profile(builtins=builtins)
        ref.enable()
        try:
            fn()
        finally:
            ref.disable()
    finally:
        gc.enable()
    assert tr.dropped == tr.filtered == tr.too_short == 0
    counts = tr.call_counts()
    assert counts == profile_counts(tr)
    assert sum(counts.values()) == len(tr.spans)
    ref.create_stats()
    want = {k: v[0][1] for k, v in comparable(ref.stats, this_file_or_builtin).items()}
    got = {k: n for k, n in counts.items() if this_file_or_builtin(k)}
    assert got == want
    assert any(k[0] == HERE for k in got)
    assert well_nested(tr.spans)


def test_nothing_of_fastprof_is_recorded() -> None:
    with trace() as tr:
        fib(3)
    names = {s.func for s in tr.spans}
    assert names == {(ME, fib.__code__.co_firstlineno, "fib")}
    assert len(tr.spans) == 5


def test_the_public_name() -> None:
    import subprocess

    code = (
        "import sys, fastprof\n"
        "assert 'fastprof.timeline' not in sys.modules\n"
        "from fastprof.timeline import trace\n"
        "assert fastprof.trace is trace, fastprof.trace\n"
        "assert 'trace' in fastprof.__all__ and 'trace' in dir(fastprof)\n"
        "assert 'numpy' not in sys.modules\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# -- the ring, the minimum duration, the module filter ------------------------------------------


def test_full_ring_drops_the_oldest_and_counts_them() -> None:
    with trace(buffer_size=10) as tr:
        fib(10)  # 177 calls
    assert len(tr.spans) == 10
    assert tr.dropped == 177 - 10
    assert sum(profile_counts(tr).values()) == 177
    # recorded at their end: the ten kept are the last ten to finish, the outermost among them
    assert max(tr.spans, key=lambda s: s.duration_ns).depth == 0
    top = [s for s in tr.spans if s.depth == 0]
    assert len(top) == 1 and all(s.end_ns <= top[0].end_ns for s in tr.spans)
    assert well_nested(tr.spans)
    assert not well_nested([Span(0, 5, top[0].func, 0, 1)])  # the helper can fail
    assert not well_nested([Span(0, 5, top[0].func, 0, 0), Span(4, 6, top[0].func, 0, 0)])


def test_min_duration_under_a_fake_clock() -> None:
    # one tick = one second: long_one lasts 16 ticks, short(1) 1 and short(5) 5
    with trace(min_duration=2.0, timer=clock, timeunit=1.0, builtins=False) as tr:
        long_one()
        short(2)
    durations = sorted((s.func[2], s.duration_ns) for s in tr.spans)
    assert durations == [("long_one", 16 * 10**9), ("short", 2 * 10**9), ("short", 5 * 10**9)]
    assert tr.too_short == 1  # short(1)
    assert tr.dropped == tr.filtered == 0


def test_fake_clock_timestamps_are_exact() -> None:
    CLOCK[0] = 1000
    with trace(timer=clock, timeunit=1e-6, builtins=False) as tr:
        long_one()
    got = [(s.func[2], s.start_ns, s.end_ns, s.depth) for s in tr.spans]
    # long_one enters at 1000 and adds 10, short(1) runs 1010-1011, short(5) 1011-1016
    assert got == [
        ("long_one", 1000_000, 1016_000, 0),
        ("short", 1010_000, 1011_000, 1),
        ("short", 1011_000, 1016_000, 1),
    ]
    # the file says which clock its times are on
    assert tr.chrome_trace()["otherData"]["clock"] == "timer"
    with trace() as wall:
        long_one()
    assert wall.chrome_trace()["otherData"]["clock"] == "CLOCK_MONOTONIC"


def test_exclude_leaves_builtins_out_and_counts_them() -> None:
    with trace(exclude="builtins") as tr:
        len([])
        sorted([3, 1])
        fib(2)
    assert {s.func[2] for s in tr.spans} == {"fib"}
    assert tr.filtered == 2
    assert sum(profile_counts(tr).values()) == len(tr.spans) + 2


def test_include_keeps_the_packages_named_and_their_submodules() -> None:
    import json.decoder

    with trace(include=["json"], builtins=False) as tr:
        json.loads("[1, 2]")
        fib(1)
    modules = {s.func[0] for s in tr.spans}
    assert modules and all("json" in m for m in modules)  # json/__init__.py, json/decoder.py
    assert any(m.endswith("decoder.py") for m in modules)
    assert tr.filtered >= 1  # fib
    assert json.decoder  # imported before the block: nothing of the import is in it


def test_a_prefix_is_no_package() -> None:
    mod = types.ModuleType("jsonx")
    exec("def g():\n    return 1\n", mod.__dict__)
    with trace(include=["json"], builtins=False) as tr:
        mod.g()
    assert tr.spans == [] and tr.filtered == 1


def test_builtins_belong_to_their_types_module() -> None:
    import collections

    d: Any = collections.OrderedDict()
    with trace(include="collections") as tr:
        d.setdefault(1, 2)  # a method of collections.OrderedDict (a C type)
        len(d)  # builtins
    names = [s.func[2] for s in tr.spans]
    assert len(names) == 1 and "setdefault" in names[0]
    assert tr.filtered == 1


def test_a_full_ring_keeps_the_last_spans_exactly_with_calls_left_out_between() -> None:
    # Every call is written to the slot after the newest span before the filters decide; a
    # call left out (too short, or of an excluded module) must never cost a kept span.
    mod = types.ModuleType("tlx")
    exec("def g():\n    return 1\n", mod.__dict__)
    CLOCK[0] = 0
    kept = []
    with trace(
        buffer_size=3, min_duration=2.0, timer=clock, timeunit=1.0, builtins=False, exclude="tlx"
    ) as tr:
        for i in range(10):
            t0 = CLOCK[0]
            short(3 + i)  # kept: 3 + i ticks
            kept.append((t0 * 10**9, CLOCK[0] * 10**9))
            short(1)  # too short
            mod.g()  # filtered
    assert [(s.start_ns, s.end_ns) for s in tr.spans] == kept[-3:]
    assert all(s.func[2] == "short" and s.depth == 0 for s in tr.spans)
    assert (tr.dropped, tr.too_short, tr.filtered) == (7, 10, 10)
    assert sum(profile_counts(tr).values()) == 30


@pytest.mark.parametrize("cap", [1, 2, 5, 7])
def test_the_ring_wraps_at_every_size(cap: int) -> None:
    CLOCK[0] = 0
    with trace(buffer_size=cap, timer=clock, timeunit=1.0, builtins=False) as tr:
        for i in range(1, 12):
            short(i)
    assert [s.duration_ns // 10**9 for s in tr.spans] == list(range(1, 12))[-cap:]
    assert tr.dropped == 11 - min(cap, 11) and tr.too_short == tr.filtered == 0


def test_counts_of_calls_left_out_restart_at_clear_and_hold_over_enables() -> None:
    mod = types.ModuleType("tlx")
    exec("def g():\n    return 1\n", mod.__dict__)
    CLOCK[0] = 0
    p = fastprof.Profile(
        timer=clock,
        timeunit=1.0,
        builtins=False,
        timeline=4,
        timeline_min=2.0,
        timeline_exclude="tlx",
    )
    for _ in range(2):  # the thresholds hold in a second enable of the same functions
        p.enable()
        short(1)
        short(3)
        mod.g()
        p.disable()
    _, spans, _, counts = p._raw_timeline()
    assert [s[1] - s[0] for s in spans] == [3, 3]
    assert (counts["too_short"], counts["filtered"], counts["dropped"]) == (2, 2, 0)
    p.clear()
    p.enable()
    short(2)
    mod.g()
    p.disable()
    _, spans, _, counts = p._raw_timeline()
    assert [s[1] - s[0] for s in spans] == [2]
    assert (counts["too_short"], counts["filtered"], counts["dropped"]) == (0, 1, 0)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="one fastprof profiler a thread below 3.12")
def test_a_timeline_beside_a_plain_profiler_records_every_call() -> None:
    # Both on the shared sys.monitoring tool (its hooks test for the timeline per profiler),
    # then the timeline's profiler alone again (its own hooks, the copy with the timeline).
    # the C profilers: fastprof.Profile allows one at a time, as cProfile does on 3.12+
    with_tl = _fastprof.Profiler(builtins=False, timeline=1000)
    plain = _fastprof.Profiler(builtins=False)
    with_tl.enable()
    plain.enable()
    fib(5)  # 15 calls
    plain.disable()
    fib(3)  # 5 calls
    with_tl.disable()
    _, spans, _, counts = with_tl._raw_timeline()
    funcs = [row[0] for row in with_tl._raw()[1]]
    assert [row[1] for row in with_tl._raw()[1]] == [20] and funcs == [fib.__code__]
    assert [row[1] for row in plain._raw()[1]] == [15]
    assert len(spans) == 20 and {s[2] for s in spans} == {0}
    assert counts == {"capacity": 1000, "dropped": 0, "filtered": 0, "too_short": 0}
    assert plain._raw_timeline() is None


# -- threads and open frames ------------------------------------------------------------------


def test_threads_get_their_own_tracks() -> None:
    def work() -> None:
        fib(5)

    with trace(builtins=False) as tr:
        t = threading.Thread(target=work, name="worker")
        t.start()
        t.join()
        fib(4)
    assert len(tr.threads) == 2
    main = [th for th in tr.threads if th.ident == threading.main_thread().ident]
    assert len(main) == 1 and main[0].name == "MainThread"
    other = [th.order for th in tr.threads if th is not main[0]]
    fibs = {(s.thread, s.func[2]) for s in tr.spans if s.func[2] == "fib"}
    assert fibs == {(main[0].order, "fib"), (other[0], "fib")}
    assert tr.call_counts() == profile_counts(tr)
    assert well_nested(tr.spans)


def test_open_frames_close_at_the_stop() -> None:
    started, release = threading.Event(), threading.Event()

    def blocked() -> None:
        CLOCK[0] += 1
        started.set()
        release.wait()

    t = threading.Thread(target=blocked)
    CLOCK[0] = 0
    with trace(timer=clock, timeunit=1.0, builtins=False) as tr:
        t.start()
        started.wait()
        CLOCK[0] = 50
    release.set()
    t.join()
    mine = [s for s in tr.spans if s.func[2] == "blocked"]
    assert len(mine) == 1 and mine[0].end_ns == 50 * 10**9
    assert well_nested(tr.spans)


def test_an_error_in_the_block_turns_the_hooks_off() -> None:
    with pytest.raises(KeyError):
        with trace() as tr:
            raise KeyError("x")
    assert not tr.profiler.enabled
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(2) is None
    else:
        assert sys.getprofile() is None


def test_a_timeline_records_once() -> None:
    tr = trace()
    with tr:
        pass
    with pytest.raises(RuntimeError, match="records once"):
        with tr:
            pass


def test_results_wait_for_the_end() -> None:
    tr = trace()
    with pytest.raises(RuntimeError, match="once its with block has ended"):
        tr.stats()


# -- the Chrome trace ---------------------------------------------------------------------------


def test_chrome_trace_structure(tmp_path: Any) -> None:
    def work() -> None:
        fib(6)

    with trace(exclude="threading", buffer_size=50) as tr:
        fib(7)  # 41 calls, most of them dropped
        t = threading.Thread(target=work)
        t.start()
        t.join()
        sorted(range(5), key=lambda v: -v)
    path = tr.export_chrome_trace(tmp_path / "out.json")
    data = json.loads(open(path).read())
    assert chrome_trace_problems(data) == []
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(tr.spans) == 50
    assert len({e["tid"] for e in spans}) == 2
    assert data["otherData"]["dropped"] == tr.dropped > 0
    assert data["otherData"]["filtered"] == tr.filtered > 0
    assert data["displayTimeUnit"] == "ns"
    # microseconds on the monotonic axis (less the origin, on a machine up for weeks), inside
    # the recording
    o = data["otherData"].get("ts_origin_ns", 0)
    assert all(tr.start_ns - o <= e["ts"] * 1000 <= tr.end_ns - o + 1 for e in spans)


class Box:
    def size(self) -> int:
        return 1


def test_spans_are_named_by_qualified_name() -> None:
    with trace() as tr:
        Box().size()
        len([])
    data = tr.chrome_trace()
    names = {e["name"] for e in data["traceEvents"] if e["ph"] == "X"}
    qual = "Box.size" if sys.version_info >= (3, 11) else "size"
    assert names == {qual, "<built-in method builtins.len>"}
    size = next(e for e in data["traceEvents"] if e.get("name") == qual)
    assert size["args"] == {"file": ME, "line": Box.size.__code__.co_firstlineno}


def _ünïcode_name() -> str:
    return "é".upper()


def test_exported_text_is_the_json_of_chrome_trace(tmp_path: Any) -> None:
    # the export writes span by span, without a dict per span: the same bytes as json.dumps
    def worker() -> None:
        Box().size()

    with trace() as tr:
        _ünïcode_name()
        sorted([2, 1])
        t = threading.Thread(target=worker, name='quote " and \\ backslash')
        t.start()
        t.join()
    from fastprof.report.chrome import chrome_trace, chrome_trace_text

    extra = [{"ph": "i", "name": "kernel \u00e9", "pid": 7, "tid": 99, "ts": 1.5, "s": "t"}]
    want = json.dumps(
        chrome_trace(tr, pid=7, process_name="p é", extra_events=extra), separators=(",", ":")
    )
    assert chrome_trace_text(tr, pid=7, process_name="p é", extra_events=extra) == want
    path = tmp_path / "t.json"
    tr.export_chrome_trace(path)
    assert path.read_text(encoding="utf-8") == json.dumps(tr.chrome_trace(), separators=(",", ":"))
    assert chrome_trace_problems(json.loads(path.read_text(encoding="utf-8"))) == []


def _x(tid: int, ts: float, dur: float) -> Dict[str, Any]:
    return {"ph": "X", "name": "a", "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _named(*events: Dict[str, Any]) -> Dict[str, Any]:
    meta = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": t, "args": {"name": "t"}}
        for t in (1, 2)
    ]
    return {"traceEvents": meta + list(events), "displayTimeUnit": "ns"}


def test_the_checker_finds_what_is_wrong() -> None:
    assert chrome_trace_problems(_named(_x(1, 0, 10), _x(1, 2, 3), _x(2, 5, 10))) == []
    assert chrome_trace_problems(_named(_x(1, 0, 10), _x(1, 5, 10)))  # overlap
    assert chrome_trace_problems(_named(_x(1, -1, 1)))
    assert chrome_trace_problems(_named(_x(1, 0, -1)))
    s = {"ph": "s", "id": 1, "cat": "c", "name": "f", "pid": 1, "tid": 1, "ts": 1}
    f = {"ph": "f", "id": 1, "cat": "c", "name": "f", "pid": 1, "tid": 2, "ts": 6, "bp": "e"}
    assert chrome_trace_problems(_named(_x(1, 0, 10), _x(2, 5, 10), s, f)) == []
    assert chrome_trace_problems(_named(_x(1, 0, 10), _x(2, 5, 10), s))  # no end
    assert chrome_trace_problems(_named(_x(1, 0, 10), _x(2, 7, 10), s, f))  # lands on nothing
    assert chrome_trace_problems({"traceEvents": [_x(3, 0, 1)], "displayTimeUnit": "ns"})


# -- the CUDA side's contract -------------------------------------------------------------------


class FakeRecorder:
    """The contract of fastprof.cuda.timeline.CudaRecorder, recording nothing."""

    log: List[str] = []
    fail_start = False

    def start(self) -> None:
        if FakeRecorder.fail_start:
            raise CudaUnavailableError("no device (fake)")
        self.log.append("start")

    def stop(self) -> None:
        self.log.append("stop")

    def chrome_events(self, pid: int, origin: int = 0) -> List[Dict[str, Any]]:
        self.log.append("events")
        return [
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": "stream 7",
                "args": {"name": "s7"},
            },
            {"ph": "X", "name": "k", "pid": pid, "tid": "stream 7", "ts": 1.0, "dur": 2.0},
        ]

    def summary(self) -> str:
        return "summary"

    def gpu_by_python(self, spans: Any) -> Any:
        return ("by python", spans)


@pytest.fixture
def fake_cuda(monkeypatch: Any) -> Iterator[List[str]]:
    mod = types.ModuleType("fastprof.cuda.timeline")
    mod.CudaRecorder = FakeRecorder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fastprof.cuda.timeline", mod)
    # the package attribute too: an earlier import of the real module set it
    monkeypatch.setattr(fastprof.cuda, "timeline", mod, raising=False)
    FakeRecorder.log = []
    FakeRecorder.fail_start = False
    yield FakeRecorder.log


def test_cuda_true_drives_the_recorder(fake_cuda: List[str], tmp_path: Any) -> None:
    with trace(cuda=True) as tr:
        fib(2)
    assert fake_cuda == ["start", "stop"]
    assert tr.summary() == "summary"
    kind, spans = tr.gpu_by_python()
    assert kind == "by python"
    assert spans == [
        {
            "tid": threading.get_native_id(),
            "start_ns": s.start_ns,
            "end_ns": s.end_ns,
            "filename": ME,
            "function": "fib",
            "firstlineno": fib.__code__.co_firstlineno,
        }
        for s in tr.spans
    ]
    assert len(spans) == 3
    data = json.load(open(tr.export_chrome_trace(tmp_path / "t.json")))
    assert any(e.get("name") == "k" for e in data["traceEvents"])
    assert chrome_trace_problems(data) == []


def test_cuda_recorder_that_cannot_start_leaves_no_hook(fake_cuda: List[str]) -> None:
    FakeRecorder.fail_start = True
    tr = trace(cuda=True)
    with pytest.raises(CudaUnavailableError, match="fake"):
        with tr:
            pass
    assert not tr.profiler.enabled
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(2) is None


def test_cuda_stops_when_the_block_raises(fake_cuda: List[str]) -> None:
    with pytest.raises(ZeroDivisionError):
        with trace(cuda=True):
            raise ZeroDivisionError("in the block")
    assert fake_cuda == ["start", "stop"]


def test_cuda_module_missing_says_why(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "fastprof.cuda.timeline", None)
    monkeypatch.delattr(fastprof.cuda, "timeline", raising=False)
    with pytest.raises(CudaUnavailableError, match="CUDA timeline"):
        with trace(cuda=True):
            pass
    if sys.version_info >= (3, 12):
        assert sys.monitoring.get_tool(2) is None


def test_summary_needs_cuda_true() -> None:
    with trace() as tr:
        pass
    with pytest.raises(RuntimeError, match=r"cuda=True"):
        tr.summary()
    with pytest.raises(RuntimeError, match=r"cuda=True"):
        tr.gpu_by_python()


def _epoch_program() -> None:
    def leaf() -> None:
        pass

    def mid() -> None:
        for _ in range(50):
            leaf()

    for _ in range(100):
        mid()


def test_an_epoch_timer_s_trace_is_written_less_an_origin_and_keeps_its_nesting(
    tmp_path: Any,
) -> None:
    from decimal import Decimal

    from fastprof.report.chrome import chrome_trace

    with trace(timer=time.time_ns, timeunit=1e-9) as tr:
        _epoch_program()
    data = json.loads(open(tr.export_chrome_trace(tmp_path / "e.json")).read())
    assert chrome_trace_problems(data) == []
    origin = data["otherData"]["ts_origin_ns"]
    first = min(s.start_ns for s in tr.spans)
    assert origin % 10**9 == 0 and 0 <= first - origin < 10**9
    # every span's exact nanoseconds, as written, and so properly nested
    want = sorted((s.start_ns - origin, s.end_ns - s.start_ns) for s in tr.spans)
    got = sorted(
        (int(Decimal(repr(e["ts"])) * 1000), int(Decimal(repr(e["dur"])) * 1000))
        for e in data["traceEvents"]
        if e["ph"] == "X"
    )
    assert got == want

    # the Python writer (any object with spans) writes the same
    class Plain:
        def __init__(self, tl: Any) -> None:
            self.spans = [tuple(s)[:5] for s in tl.spans]
            self.threads, self.capacity = tl.threads, tl.capacity
            self.dropped, self.filtered, self.too_short = tl.dropped, tl.filtered, tl.too_short
            self.min_duration, self.include, self.exclude = tl.min_duration, tl.include, tl.exclude
            self.name_of = tl.name_of

    plain = chrome_trace(Plain(tr), pid=1)
    assert plain["otherData"]["ts_origin_ns"] == origin
    assert [e["ts"] for e in plain["traceEvents"] if e["ph"] == "X"] == [
        e["ts"] for e in tr.chrome_trace()["traceEvents"] if e["ph"] == "X"
    ]


def test_a_trace_refused_inside_another_leaves_only_the_callers_calls_in_it() -> None:
    with trace() as outer:
        try:
            inner = trace()
            with inner:
                pass
        except ValueError as e:
            refused = e
    assert "already active" in str(refused)
    names = sorted(s.func[2] for s in outer.spans)
    # the caller's two calls and the refusing C call: none of fastprof's work behind them
    assert names == sorted(
        ["trace", "__enter__", "<method '_start' of 'fastprof._fastprof._Session' objects>"]
    ), names
    assert not inner.profiler.enabled and inner.spans == []


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"buffer_size": 0}, ValueError, "buffer_size"),
        ({"buffer_size": 1.5}, TypeError, "buffer_size"),
        ({"buffer_size": True}, TypeError, "buffer_size"),
        ({"min_duration": -1}, ValueError, "min_duration"),
        ({"min_duration": float("nan")}, ValueError, "min_duration"),
        ({"min_duration": "1"}, TypeError, "min_duration"),
        (
            {"include": b"json"},
            TypeError,
            "include must be a module name .str. or an iterable of them, not bytes",
        ),
        ({"exclude": bytearray(b"x")}, TypeError, "exclude must be .* not bytearray"),
        ({"include": 3}, TypeError, "include"),
        ({"exclude": [b"x"]}, TypeError, "exclude"),
        ({"exclude": [""]}, ValueError, "exclude"),
        ({"cuda": 1}, TypeError, "cuda"),
    ],
)
def test_bad_arguments_name_themselves(kwargs: Dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        trace(**kwargs)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"timeline": 0}, ValueError, "timeline must be"),
        ({"timeline": "10"}, TypeError, "timeline must be"),
        ({"timeline": 10, "timeline_min": -1.0}, ValueError, "timeline_min"),
        ({"timeline": 10, "timeline_include": 5}, TypeError, "timeline_include"),
        ({"timeline_min": 1.0}, ValueError, "need timeline"),
    ],
)
def test_profiler_timeline_arguments(kwargs: Dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        fastprof.Profile(**kwargs)


def test_profiler_without_timeline_has_none() -> None:
    p = fastprof.Profile()
    assert p.timeline is None and p._raw_timeline() is None
    p = fastprof.Profile(timeline=5)
    assert p.timeline == 5


def test_clear_forgets_the_spans() -> None:
    p = fastprof.Profile(timeline=100)
    p.enable()
    fib(3)
    p.disable()
    assert len(p._raw_timeline()[1]) > 0
    p.clear()
    _, spans, threads, counts = p._raw_timeline()
    assert spans == [] and threads == [] and counts["dropped"] == 0


class FailingDisable:
    """A profiler whose disable() turns the real one off, then raises (as a disable() that
    reports a hook's error does)."""

    def __init__(self, prof: Any) -> None:
        self.prof = prof

    def enable(self) -> None:
        self.prof.enable()

    def disable(self) -> None:
        self.prof.disable()
        raise RuntimeError("disable failed (test)")


def test_cuda_stops_when_disable_raises(fake_cuda: List[str]) -> None:
    tr = trace(cuda=True)
    real = tr.profiler
    tr.profiler = FailingDisable(real)
    with pytest.raises(RuntimeError, match="disable failed"):
        with tr:
            fib(1)
    assert fake_cuda == ["start", "stop"]
    assert not real.enabled


def test_spans_line_up_with_the_monotonic_clock() -> None:
    """A time.monotonic_ns() read inside a call lies within that call's span: the anchor
    between the profiler's ticks and the monotonic clock is the tightest of several reads
    (one cold read put every span of a short block up to 1.7 us late)."""
    marks: List[int] = []

    def stamp() -> None:
        marks.append(time.monotonic_ns())

    for _ in range(20):
        marks.clear()
        with fastprof.trace() as tr:
            for _ in range(20):
                stamp()
        spans = [s for s in tr.spans if s.func[2] == "stamp"]
        assert len(spans) == len(marks) == 20
        for s, m in zip(spans, marks):
            assert s.start_ns <= m <= s.end_ns, (s.start_ns - m, m - s.end_ns)
