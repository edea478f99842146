"""The structure check of a Chrome trace (the Trace Event Format's JSON object form) that
fastprof writes: what Perfetto and chrome://tracing need to draw it as meant."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple


def _ns(us: Any) -> int:
    """A microsecond float of the file back in integer nanoseconds (the writer keeps three
    decimals, so this is exact)."""
    return int(round(float(us) * 1000))


def chrome_trace_problems(trace: Any) -> List[str]:
    """Every structural problem of trace (empty when none): the object form with a
    traceEvents list and displayTimeUnit; each event a dict with ph, pid and name (flows:
    id); ts and dur numbers >= 0; every "X" span well nested in its track (pid, tid); every
    flow start ("s") with exactly one matching end ("f") at or after it, both landing on
    ("X") events of their tracks; every track with spans named by a thread_name event."""
    problems: List[str] = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not the JSON object form: no traceEvents list"]
    if trace.get("displayTimeUnit") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit is {trace.get('displayTimeUnit')!r}")
    tracks: Dict[Tuple[Any, Any], List[Tuple[int, int, str]]] = {}
    named = set()
    flows: Dict[Tuple[Any, Any], Dict[str, List[Dict[str, Any]]]] = {}
    for i, ev in enumerate(trace["traceEvents"]):
        if not isinstance(ev, dict) or "ph" not in ev or "pid" not in ev:
            problems.append(f"event {i} lacks ph or pid: {ev!r}")
            continue
        ph = ev["ph"]
        if ph == "M":
            if ev.get("name") == "thread_name":
                named.add((ev["pid"], ev.get("tid")))
            continue
        if "name" not in ev:
            problems.append(f"event {i} has no name")
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            problems.append(f"event {i} has ts {ts!r}")
            continue
        if ph == "X":
            dur = ev.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                problems.append(f"event {i} has dur {dur!r}")
                continue
            start = _ns(ts)
            tracks.setdefault((ev["pid"], ev.get("tid")), []).append(
                (start, start + _ns(dur), str(ev.get("name")))
            )
        elif ph in ("s", "f", "t"):
            if "id" not in ev:
                problems.append(f"flow event {i} has no id")
                continue
            key = (ev.get("cat"), ev["id"])
            flows.setdefault(key, {"s": [], "f": [], "t": []})[ph].append(ev)
    for track, spans in tracks.items():
        if track not in named:
            problems.append(f"track {track} has no thread_name")
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_: List[Tuple[int, int, str]] = []
        for s in spans:
            while open_ and open_[-1][1] <= s[0] and not (open_[-1][1] == s[0] == s[1]):
                open_.pop()
            if open_ and s[1] > open_[-1][1]:
                problems.append(f"track {track}: {s} overlaps {open_[-1]} without nesting")
            open_.append(s)
    for key, ends in flows.items():
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            problems.append(
                f"flow {key}: {len(ends['s'])} starts and {len(ends['f'])} ends (want one each)"
            )
            continue
        s, f = ends["s"][0], ends["f"][0]
        if _ns(f["ts"]) < _ns(s["ts"]):
            problems.append(f"flow {key} ends before it starts")
        for ev in (s, f):
            spans = tracks.get((ev["pid"], ev.get("tid")), [])
            t = _ns(ev["ts"])
            if not any(a <= t <= b for a, b, _ in spans):
                problems.append(f"flow {key}: its {ev['ph']!r} at {ev['ts']} lands on no event")
    return problems
