"""The timeline's spans read back in C (Profile._timeline_records) and written as Chrome trace
text in C (_fastprof._chrome_x_events), each against a plain Python reference: the sort (by
thread, start, depth; ties in the ring's order), the nanosecond axis (Python's round half to
even), what the runner leaves out, every time's text against repr() of the float, the
chunks of a large export, and bad arguments."""

from __future__ import annotations

import json
import operator
import os
import random
import struct
import threading
from typing import Any, Dict, List, Tuple

import pytest

import fastprof
from fastprof import _fastprof
from fastprof.report import chrome
from fastprof.timeline import Timeline, trace
from timeline_helpers import chrome_trace_problems

RECORD = struct.Struct("=qqiii4x")
CLOCK = [0]


def clock() -> int:
    return CLOCK[0]


def tick(n: int) -> int:
    CLOCK[0] += n % 3  # many spans start at one tick
    return n


def nest(n: int) -> int:
    tick(n)
    return nest(n - 1) + tick(n) if n > 0 else 0


def reference(
    raw: List[Tuple[int, int, int, int, int]], m0: int, k0: int, scale: float
) -> List[Tuple[int, int, int, int, int]]:
    """What _timeline_records gives, in Python (as the Timeline's reading did before)."""
    kept = sorted(raw, key=operator.itemgetter(3, 0, 4))
    return [
        (m0 + round((t0 - k0) * scale), m0 + round((t1 - k0) * scale), f, th, d)
        for t0, t1, f, th, d in kept
    ]


def recorded(buffer: int) -> Any:
    """A profiler with a timeline of buffer spans over calls of tick and nest on a fake clock,
    in two threads (ties of start ticks, several depths, a wrapped ring when small)."""
    p = _fastprof.Profiler(timer=clock, timeunit=1e-6, builtins=True, timeline=buffer)
    p.enable()
    for i in range(40):
        nest(i % 5)
    t = threading.Thread(target=lambda: [nest(3) for _ in range(5)])
    t.start()
    t.join()
    p.disable()
    return p


@pytest.mark.parametrize("buffer", [7, 64, 10_000])
@pytest.mark.parametrize(
    "axis", [(0, 0, 1000.0), (10**15, 12345, 0.3), (-5, 3, 2.5), (77, 10**6, 1 / 3)]
)
def test_records_equal_the_python_reading(buffer: int, axis: Tuple[int, int, float]) -> None:
    p = recorded(buffer)
    _, raw, threads, _ = p._raw_timeline()
    assert len(threads) == 2 and len(raw) == min(buffer, len(raw))
    m0, k0, scale = axis
    records = p._timeline_records(m0, k0, scale)
    want = reference(raw, m0, k0, scale)
    assert list(RECORD.iter_unpack(records)) == want
    # the spans of one thread starting at one tick: sorted by depth, then the ring's order
    assert len({(s[3], s[0]) for s in want}) < len(want)


def test_half_ticks_round_to_even_as_python_does() -> None:
    p = recorded(10_000)
    _, raw, _, _ = p._raw_timeline()
    records = p._timeline_records(0, 0, 0.5)  # every odd tick is a half
    got = list(RECORD.iter_unpack(records))
    assert got == reference(raw, 0, 0, 0.5)
    odd = [s[0] for s in raw if s[0] % 2 == 1]  # halves, which round to the even neighbour
    assert odd and {t // 2 + (t // 2) % 2 for t in odd} <= {s[0] for s in got}


def test_bad_arguments_and_times_beyond_int64() -> None:
    p = recorded(100)
    with pytest.raises(OverflowError, match="64-bit nanoseconds"):
        p._timeline_records(0, 0, 1e300)
    with pytest.raises(OverflowError, match="64-bit nanoseconds"):
        p._timeline_records(2**63 - 10, 0, 1000.0)
    with pytest.raises(OverflowError, match="64-bit nanoseconds"):
        p._timeline_records(2**63 - 10, 0, 1.0)  # the exact path checks too
    with pytest.raises(TypeError):
        p._timeline_records(0, 0)
    assert _fastprof.Profiler()._timeline_records(0, 0, 1.0) is None


# -- the text -------------------------------------------------------------------------------


def x_events(spans: List[Tuple[int, int, int, int, int]], tids: List[int]) -> str:
    records = b"".join(RECORD.pack(*s) for s in spans)
    names = [b'"f"', b'"g\\u00e9"']
    args = [b',"args":{"file":"a.py","line":3}', b""]
    return _fastprof._chrome_x_events(records, 0, len(spans), names, args, tids, 42).decode()


def python_x_event(s: Tuple[int, int, int, int, int], tids: List[int]) -> str:
    name, args = (("f", {"file": "a.py", "line": 3}), ("g\u00e9", None))[s[2]]
    ev: Dict[str, Any] = {"ph": "X", "cat": "python", "name": name, "pid": 42}
    ev["tid"] = tids[s[3]] if s[3] < len(tids) else s[3] + 1
    ev["ts"] = s[0] / 1000.0
    ev["dur"] = (s[1] - s[0]) / 1000.0
    if args is not None:
        ev["args"] = args
    return json.dumps(ev, separators=(",", ":"))


EDGE_NS = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 1100, 123456789, 10**12, 10**15 - 1]
EDGE_NS += [10**15, 10**15 + 1, 2**53 - 1, 2**53, 2**53 + 1, 10**18 + 7, 2**62, 2**63 - 1]


def test_every_time_is_written_as_repr_of_its_float() -> None:
    rng = random.Random(5)
    values = EDGE_NS + [-v for v in EDGE_NS] + [-(2**63)]
    values += [rng.randrange(-(2**63), 2**63) for _ in range(2000)]
    values += [rng.randrange(0, 10**16) for _ in range(2000)]
    spans = [
        (v, v if v >= 2**62 or v < -(2**62) else v + 2 * i, i % 2, i % 3, 0)
        for i, v in enumerate(values)
    ]
    tids = [5, 6]
    got = x_events(spans, tids)
    assert got == ",".join(python_x_event(s, tids) for s in spans)


def test_a_range_of_the_records_and_bad_arguments() -> None:
    spans = [(1000 * i, 1000 * i + 500, i % 2, 0, 0) for i in range(10)]
    records = b"".join(RECORD.pack(*s) for s in spans)
    names, args = [b'"f"', b'"g"'], [b"", b""]
    got = _fastprof._chrome_x_events(records, 3, 6, names, args, [1], 2).decode()
    assert [e["ts"] for e in json.loads(f"[{got}]")] == [3.0, 4.0, 5.0]
    assert _fastprof._chrome_x_events(records, 4, 4, names, args, [1], 2) == b""
    with pytest.raises(ValueError, match="whole span records"):
        _fastprof._chrome_x_events(records[:-1], 0, 1, names, args, [1], 2)
    with pytest.raises(ValueError, match="whole span records"):
        _fastprof._chrome_x_events(records, 0, 11, names, args, [1], 2)
    with pytest.raises(ValueError, match="beyond names"):
        _fastprof._chrome_x_events(records, 0, 2, names[:1], args[:1], [1], 2)
    with pytest.raises(ValueError, match="one entry per function"):
        _fastprof._chrome_x_events(records, 0, 2, names, args[:1], [1], 2)
    with pytest.raises(TypeError, match="list of bytes"):
        _fastprof._chrome_x_events(records, 0, 2, ["f", "g"], args, [1], 2)
    # a span longer than int64 nanoseconds (only crafted records hold one)
    for t0, t1 in ((-(2**63), 1), (2**62 + 1, -(2**62))):
        wide = RECORD.pack(t0, t1, 0, 0, 0)
        with pytest.raises(OverflowError, match="shorter than 2\\*\\*63 ns"):
            _fastprof._chrome_x_events(wide, 0, 1, names, args, [1], 2)


def test_the_record_layout_is_the_one_c_writes() -> None:
    from fastprof import timeline

    assert RECORD.size == timeline._RECORD_SIZE == _fastprof.TIMELINE_RECORD_SIZE == 32
    assert chrome._RECORD_BYTES == _fastprof.TIMELINE_RECORD_SIZE


class SpansOnly:
    """A timeline seen only through its spans: the Python writer's path."""

    def __init__(self, tl: Timeline) -> None:
        self._tl = tl

    def __getattr__(self, name: str) -> Any:
        if name in ("_span_records", "_span_count"):
            raise AttributeError(name)
        return getattr(self._tl, name)


def test_the_c_writer_and_the_python_writer_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chrome, "_CHUNK", 50)  # several chunks of each writer
    with trace() as tr:
        for i in range(60):
            nest(i % 4)
        sorted(range(5), key=tick)
        t = threading.Thread(target=nest, args=(6,), name="w\udcfe")
        t.start()
        t.join()
    assert tr._spans is None  # nothing built at the block's exit
    fast = chrome.chrome_trace_text(tr, pid=3, process_name="p")
    assert tr._spans is None
    slow = chrome.chrome_trace_text(SpansOnly(tr), pid=3, process_name="p")
    assert fast == slow
    doc = json.loads(fast)
    assert chrome_trace_problems(doc) == []
    assert doc["otherData"]["python_spans"] == len(tr.spans) > 300
    assert fast == json.dumps(
        chrome.chrome_trace(tr, pid=3, process_name="p"), separators=(",", ":")
    )


def test_spans_are_built_once_when_read_and_match_the_call_profile() -> None:
    with trace(builtins=False) as tr:
        for i in range(30):
            nest(i % 3)
    assert tr._spans is None and tr._span_count() == 10 * (2 + 5 + 8)
    spans = tr.spans
    assert spans is tr.spans and len(spans) == tr._span_count()
    counts = {k: v[1] for k, v in tr.stats().to_dict().items()}
    assert tr.call_counts() == counts
    assert [s.thread for s in spans] == sorted(s.thread for s in spans)


def test_a_failing_extra_event_leaves_no_file(tmp_path: Any) -> None:
    with trace() as tr:
        nest(2)
    out = tmp_path / "t.json"
    bad = [{"ph": "i", "ts": object()}]
    with pytest.raises(TypeError):
        chrome.write_chrome_trace(out, chrome.chrome_trace_chunks(tr, extra_events=bad))
    assert not out.exists()
    assert fastprof.Profile  # the module is whole after the error


def test_a_write_failing_part_way_removes_the_half_file(tmp_path: Any) -> None:
    def pieces() -> Any:
        yield b'{"traceEvents":['
        raise MemoryError("made up")

    out = tmp_path / "t.json"
    out.write_text("an older trace")
    with pytest.raises(MemoryError, match="made up"):
        chrome.write_chrome_trace(out, pieces())
    assert not out.exists()
    # a symlink named as the path is the user's: it stays (its target keeps the half)
    target = tmp_path / "keep.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(MemoryError, match="made up"):
        chrome.write_chrome_trace(link, pieces())
    assert link.is_symlink() and target.exists()


def test_spans_built_in_c_equal_the_records_and_bad_input() -> None:
    from fastprof.timeline import Span

    spans = [(5, 9, 1, 0, 0), (-3, 2**62, 0, 7, 3)]
    records = b"".join(RECORD.pack(*s) for s in spans)
    keys: List[Any] = [("a.py", 1, "f"), ("~", 0, "<built-in method builtins.len>")]
    got = _fastprof._spans_of_records(records, keys, Span)
    assert got == [Span(5, 9, keys[1], 0, 0), Span(-3, 2**62, keys[0], 7, 3)]
    assert all(type(s) is Span for s in got) and got[0].duration_ns == 4
    with pytest.raises(ValueError, match="beyond keys"):
        _fastprof._spans_of_records(records, keys[:1], Span)
    with pytest.raises(ValueError, match="whole span records"):
        _fastprof._spans_of_records(records[:-1], keys, Span)
    with pytest.raises(TypeError, match="subclass of tuple"):
        _fastprof._spans_of_records(records, keys, dict)
    # a struct sequence has hidden fields a five-item tuple would not hold
    with pytest.raises(TypeError, match="not a struct sequence"):
        _fastprof._spans_of_records(records, keys, type(os.stat(".")))
    assert _fastprof._spans_of_records(b"", keys, Span) == []
    # the thread ids are ints exactly: an __index__ could free the texts being written
    freed: List[bytes] = [b'"f"', b'"g"']

    class Sly:
        def __index__(self) -> int:
            freed.clear()
            return 1

    with pytest.raises(TypeError, match="tids must be a list of int"):
        _fastprof._chrome_x_events(records, 0, 2, freed, [b"", b""], [Sly()] * 8, 1)


def test_a_timers_epoch_sized_nanoseconds_stay_exact() -> None:
    """time.time_ns-sized ticks (above 2**53) with timeunit=1e-9: every span exact, as
    cProfile keeps such a timer's values (a double would round them to multiples of 256)."""
    start = 1_763_000_000_000_000_001
    clock = [start]

    def tick() -> int:
        clock[0] += 1
        return clock[0]

    def inner() -> None:
        pass

    def outer() -> None:
        inner()

    with trace(timer=tick, timeunit=1e-9, builtins=False) as tr:
        outer()
    spans = sorted((s.start_ns - start, s.end_ns - start, s.func[2]) for s in tr.spans)
    assert spans == [(2, 5, "outer"), (3, 4, "inner")]


def test_a_wide_pid_is_written_whole() -> None:
    with trace() as tr:
        nest(1)
    for pid in (-(10**18), 2**63 - 1):
        text = chrome.chrome_trace_text(tr, pid=pid)
        assert "\x00" not in text
        assert json.loads(text) == json.loads(json.dumps(chrome.chrome_trace(tr, pid=pid)))


def test_the_export_holds_a_chunk_not_the_file(tmp_path: Any, monkeypatch: Any) -> None:
    """export_chrome_trace writes the chunks as they come: the whole text is never built."""
    monkeypatch.setattr(chrome, "_CHUNK", 10)
    with trace() as tr:
        for i in range(30):
            nest(i % 3)
    built: List[int] = []
    real = _fastprof._chrome_x_events

    def counting(*args: Any) -> bytes:
        out = real(*args)
        built.append(len(out))
        return out

    monkeypatch.setattr(_fastprof, "_chrome_x_events", counting)
    monkeypatch.setattr(chrome, "chrome_trace_text", None)  # not used by the export
    path = tr.export_chrome_trace(tmp_path / "t.json")
    assert len(built) > 5 and max(built) < 4000
    assert chrome_trace_problems(json.loads(open(path).read())) == []
