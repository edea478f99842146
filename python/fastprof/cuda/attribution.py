"""GPU time charged to Python: which line of the user's costs the GPU what.

Each kernel, copy and memset is joined by its CUPTI correlation id to the API call that
launched it, and so to the Python stack the launch callback noted on the launching thread.
fastprof's own frames are skipped (a launch made inside fastprof.kernels is charged to the
user's line that called it). Per line and per function:

- ``launches`` / ``gpu_ns``: GPU records (and their GPU time) with that line or function
  anywhere on the launching stack, counted once per record (a recursive function too);
- ``self_launches`` / ``self_gpu_ns``: those whose innermost frame it is;
- ``api_calls`` / ``api_ns``: the distinct launching API calls and their host duration;
- ``host_ns`` (functions, when timeline ``spans`` are given): the function's wall time on
  the host, the union of its spans per thread.

A launch from a thread that ran no Python (no GIL held at the launch) has no stack: with
``spans`` it is charged to the spans of that thread around the API call (the innermost as its own), else to
the row ``unknown (no Python frame)``.

``spans`` are the Python timeline's function spans: objects (or mappings) with ``tid``
(threading.get_native_id()), ``start_ns`` / ``end_ns`` (time.monotonic_ns()), ``filename``,
``function``, optional ``firstlineno`` and ``lineno``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

__all__ = ["LineRow", "FunctionRow", "GpuByPython", "attribute", "UNKNOWN"]

UNKNOWN = "unknown (no Python frame)"


@dataclass
class LineRow:
    filename: str
    function: str
    lineno: int
    launches: int = 0
    gpu_ns: int = 0
    self_launches: int = 0
    self_gpu_ns: int = 0
    api_calls: int = 0
    api_ns: int = 0


@dataclass
class FunctionRow:
    filename: str
    function: str
    firstlineno: int
    launches: int = 0
    gpu_ns: int = 0
    self_launches: int = 0
    self_gpu_ns: int = 0
    api_calls: int = 0
    api_ns: int = 0
    host_ns: Optional[int] = None


@dataclass
class GpuByPython:
    """``lines`` and ``functions`` (most GPU time first), ``total_gpu_ns``,
    ``total_launches``; ``str()`` prints both tables."""

    lines: list[LineRow]
    functions: list[FunctionRow]
    total_gpu_ns: int
    total_launches: int

    def line(self, filename: str, lineno: int) -> Optional[LineRow]:
        """The row of one line, or None."""
        for r in self.lines:
            if r.filename == filename and r.lineno == lineno:
                return r
        return None

    def function(self, name: str) -> Optional[FunctionRow]:
        """The row of the function with this (qualified) name, or None."""
        for r in self.functions:
            if r.function == name:
                return r
        return None

    @property
    def text(self) -> str:
        if not self.total_launches:
            return "GPU time by Python line: no data (no kernel, copy or memset recorded)"
        out = [
            f"GPU time by Python line ({self.total_launches:,} launches, {self.total_gpu_ns:,} ns):"
        ]
        out.append(f"{'GPU ns':>14} {'self ns':>14} {'launches':>9} {'API ns':>12}  line")
        for r in self.lines:
            where = (
                f"{os.path.basename(r.filename)}:{r.lineno} {r.function}"
                if r.filename
                else r.function
            )
            out.append(
                f"{r.gpu_ns:>14,} {r.self_gpu_ns:>14,} {r.launches:>9,} {r.api_ns:>12,}  {where}"
            )
        out.append("")
        out.append("GPU time by Python function:")
        out.append(f"{'GPU ns':>14} {'self ns':>14} {'launches':>9} {'host ns':>14}  function")
        for f in self.functions:
            host = "-" if f.host_ns is None else f"{f.host_ns:,}"
            where = (
                f"{f.function} ({os.path.basename(f.filename)}:{f.firstlineno})"
                if f.filename
                else f.function
            )
            out.append(f"{f.gpu_ns:>14,} {f.self_gpu_ns:>14,} {f.launches:>9,} {host:>14}  {where}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text


def _get(span: Any, name: str, default: Any = None) -> Any:
    if isinstance(span, Mapping):
        return span.get(name, default)
    return getattr(span, name, default)


def _own(filename: str, skip_dirs: Sequence[str]) -> bool:
    return any(filename.startswith(d + os.sep) for d in skip_dirs)


class _SpanIndex:
    """The spans of each thread, for "innermost span around t" and per-function host time."""

    def __init__(self, spans: Iterable[Any]) -> None:
        self.by_tid: dict[int, list[tuple[int, int, str, str, int, int]]] = {}
        for s in spans:
            row = (
                int(_get(s, "start_ns")),
                int(_get(s, "end_ns")),
                str(_get(s, "filename", "")),
                str(_get(s, "function", "?")),
                int(_get(s, "firstlineno", 0) or 0),
                int(_get(s, "lineno", 0) or 0),
            )
            self.by_tid.setdefault(int(_get(s, "tid")), []).append(row)

    def around(self, tid: int, t: int) -> list[tuple[int, int, str, str, int, int]]:
        """The spans of thread tid around time t, innermost (latest start) first."""
        rows = [row for row in self.by_tid.get(tid, ()) if row[0] <= t <= row[1]]
        return sorted(rows, key=lambda row: (-row[0], row[1]))

    def host_ns(self) -> dict[tuple[str, str, int], int]:
        """Per function: the union of its spans on each thread, summed over threads."""
        out: dict[tuple[str, str, int], int] = {}
        for rows in self.by_tid.values():
            per: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
            for s, e, fn, name, first, _line in rows:
                per.setdefault((fn, name, first), []).append((s, e))
            for key, ivs in per.items():
                total, cur_s, cur_e = 0, None, None
                for s, e in sorted(ivs):
                    if cur_e is None or s > cur_e:
                        if cur_e is not None and cur_s is not None:
                            total += cur_e - cur_s
                        cur_s, cur_e = s, e
                    else:
                        cur_e = max(cur_e, e)
                if cur_e is not None and cur_s is not None:
                    total += cur_e - cur_s
                out[key] = out.get(key, 0) + total
        return out


def attribute(
    rec: Any, spans: Optional[Sequence[Any]], skip_dirs: Sequence[str] = ()
) -> GpuByPython:
    """GPU time per Python line and function of a stopped CudaRecorder (see the module)."""
    index = _SpanIndex(spans) if spans is not None else None
    lines: dict[tuple[str, str, int], LineRow] = {}
    funcs: dict[tuple[str, str, int], FunctionRow] = {}
    line_api: dict[tuple[str, str, int], set[int]] = {}
    func_api: dict[tuple[str, str, int], set[int]] = {}
    api_ns: dict[int, int] = {}
    total_gpu = total_n = 0
    for r in rec.gpu_records():
        total_gpu += r.duration_ns
        total_n += 1
        launch = rec.launches.get(r.correlation_id)
        call = rec.api_call_of(r)
        frames: list[tuple[str, str, int, int]] = []
        if launch is not None and launch.stack:
            mine = [f for f in launch.stack if not _own(f.filename, skip_dirs)] or list(
                launch.stack
            )
            frames = [(f.filename, f.function, f.firstlineno, f.lineno) for f in mine]
        elif index is not None:
            tid = launch.tid if launch is not None else (call.tid if call is not None else None)
            t = call.start_ns if call is not None else r.start_ns
            around = index.around(tid, t) if tid is not None else []
            frames = [(sp[2], sp[3], sp[4], sp[5]) for sp in around]
        if not frames:
            frames = [("", UNKNOWN, 0, 0)]
        api_id = call.correlation_id if call is not None else None
        if call is not None:
            api_ns[call.correlation_id] = call.duration_ns
        seen_l: set[tuple[str, str, int]] = set()
        seen_f: set[tuple[str, str, int]] = set()
        for depth, (fn, name, first, line) in enumerate(frames):
            lk, fk = (fn, name, line), (fn, name, first)
            lrow = lines.get(lk) or lines.setdefault(lk, LineRow(fn, name, line))
            frow = funcs.get(fk) or funcs.setdefault(fk, FunctionRow(fn, name, first))
            if depth == 0:
                lrow.self_launches += 1
                lrow.self_gpu_ns += r.duration_ns
                frow.self_launches += 1
                frow.self_gpu_ns += r.duration_ns
            if lk not in seen_l:
                seen_l.add(lk)
                lrow.launches += 1
                lrow.gpu_ns += r.duration_ns
                if api_id is not None:
                    line_api.setdefault(lk, set()).add(api_id)
            if fk not in seen_f:
                seen_f.add(fk)
                frow.launches += 1
                frow.gpu_ns += r.duration_ns
                if api_id is not None:
                    func_api.setdefault(fk, set()).add(api_id)
    for lk, ids in line_api.items():
        lines[lk].api_calls = len(ids)
        lines[lk].api_ns = sum(api_ns[i] for i in ids)
    for fk, ids in func_api.items():
        funcs[fk].api_calls = len(ids)
        funcs[fk].api_ns = sum(api_ns[i] for i in ids)
    if index is not None:
        host = index.host_ns()
        for fk, frow in funcs.items():
            frow.host_ns = host.get(fk)

    def order(row: Any) -> tuple:
        return (
            -row.gpu_ns,
            -row.self_gpu_ns,
            row.filename,
            getattr(row, "lineno", 0),
            row.function,
        )

    return GpuByPython(
        sorted(lines.values(), key=order), sorted(funcs.values(), key=order), total_gpu, total_n
    )
