"""The summary of a CUDA recording, with nsys stats' tables and semantics.

- ``cuda_api_sum``: per CUDA API function (runtime calls, and driver calls not made inside a
  runtime call on the same thread): Time (%), Total Time (ns), Num Calls, Avg, Med, Min, Max,
  StdDev (ns), Name.
- ``cuda_gpu_kern_sum``: per kernel (demangled name): Time (%), Total Time (ns), Instances,
  Avg, Med, Min, Max, StdDev (ns), Name.
- ``cuda_gpu_mem_time_sum``: per memory operation ("[CUDA memcpy Host-to-Device]",
  "[CUDA memset]", ...): Time (%), Total Time (ns), Count, Avg, Med, Min, Max, StdDev (ns),
  Operation.
- ``cuda_gpu_mem_size_sum``: per memory operation: Total (MB), Count, Avg, Med, Min, Max,
  StdDev (MB), Operation (MB = 10**6 bytes).

Rows go by total (time or size) descending, then name. Med is the median (the mean of the
two middle values for an even count), StdDev the sample standard deviation (0 for one
value). Time (%) is a row's share of its table's total. Below the tables: the GPU-busy share
of the traced wall time (the union of every kernel, copy and memset interval, all devices
and streams together, over the time from start to stop, widened to any record that the
clock mapping puts a little outside it) and the host time blocked in synchronising calls (CUPTI's
synchronisation records). A table with no rows says so.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .demangle import demangle

__all__ = ["Table", "CudaSummary", "summarize"]

_TIME_COLUMNS = (
    "Time (%)",
    "Total Time (ns)",
    "{count}",
    "Avg (ns)",
    "Med (ns)",
    "Min (ns)",
    "Max (ns)",
    "StdDev (ns)",
    "{name}",
)
_SIZE_COLUMNS = (
    "Total (MB)",
    "Count",
    "Avg (MB)",
    "Med (MB)",
    "Min (MB)",
    "Max (MB)",
    "StdDev (MB)",
    "Operation",
)


@dataclass
class Table:
    """One report: ``name`` (nsys's report name), ``title``, ``columns`` and ``rows`` (tuples
    of numbers, the last field the name)."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple] = field(default_factory=list)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    def text(self) -> str:
        head = f"** {self.title} ({self.name}):"
        if not self.rows:
            return f"{head}\n\n   (no data: nothing of this kind was recorded)"
        cells = [list(self.columns)] + [
            [_fmt(v, c) for v, c in zip(r, self.columns)] for r in self.rows
        ]
        widths = [max(len(row[k]) for row in cells) for k in range(len(self.columns))]
        lines = [head, ""]
        for n, row in enumerate(cells):
            parts = [row[k].rjust(widths[k]) for k in range(len(row) - 1)] + [row[-1]]
            lines.append(" " + "  ".join(parts))
            if n == 0:
                lines.append(" " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)


def _fmt(value: Any, column: str) -> str:
    if isinstance(value, str):
        return value
    if "(MB)" in column:
        return f"{value:,.3f}"
    if column == "Time (%)":
        return f"{value:.1f}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


@dataclass
class CudaSummary:
    """The four tables, ``wall_ns`` (traced wall time), ``gpu_busy_ns`` and ``gpu_busy_share``,
    ``sync_blocked_ns`` (host time in synchronising calls) and ``sync_by_type``;
    ``str()`` is the printable report."""

    tables: dict[str, Table]
    wall_ns: int
    gpu_busy_ns: int
    sync_blocked_ns: int
    sync_by_type: dict[str, tuple[int, int]]
    dropped: int = 0

    @property
    def gpu_busy_share(self) -> float:
        return self.gpu_busy_ns / self.wall_ns if self.wall_ns > 0 else 0.0

    @property
    def text(self) -> str:
        parts = [t.text() for t in self.tables.values()]
        lines = [
            f"GPU busy: {self.gpu_busy_ns:,} ns of {self.wall_ns:,} ns traced wall time "
            f"({100 * self.gpu_busy_share:.1f}%)",
        ]
        if self.sync_by_type:
            lines.append(f"Host blocked in synchronising calls: {self.sync_blocked_ns:,} ns")
            for kind, (count, ns) in sorted(self.sync_by_type.items(), key=lambda kv: -kv[1][1]):
                lines.append(f"  {kind}: {count:,} calls, {ns:,} ns")
        else:
            lines.append("Host blocked in synchronising calls: no data (no synchronisation)")
        if self.dropped:
            lines.append(f"CUPTI dropped {self.dropped:,} records: the tables undercount")
        parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.text


def _stats(values: Sequence[int]) -> tuple[int, float, float, int, int, float]:
    """(total, avg, median, min, max, sample stdev) of a non-empty list."""
    total = sum(values)
    n = len(values)
    med = float(statistics.median(values))
    sd = statistics.stdev(values) if n > 1 else 0.0
    return total, total / n, med, min(values), max(values), float(sd)


def _time_table(name: str, title: str, count: str, label: str, groups: dict) -> Table:
    columns = tuple(c.format(count=count, name=label) for c in _TIME_COLUMNS)
    grand = sum(sum(v) for v in groups.values())
    rows = []
    for key, durs in groups.items():
        total, avg, med, lo, hi, sd = _stats(durs)
        share = 100.0 * total / grand if grand else 0.0
        rows.append((share, total, len(durs), avg, med, lo, hi, sd, key))
    rows.sort(key=lambda r: (-r[1], r[-1]))
    return Table(name, title, columns, rows)


def _size_table(groups: dict) -> Table:
    rows = []
    for key, sizes in groups.items():
        total, avg, med, lo, hi, sd = _stats(sizes)
        rows.append(
            (total / 1e6, len(sizes), avg / 1e6, med / 1e6, lo / 1e6, hi / 1e6, sd / 1e6, key)
        )
    rows.sort(key=lambda r: (-r[0], r[-1]))
    return Table("cuda_gpu_mem_size_sum", "CUDA GPU MemOps Summary (by Size)", _SIZE_COLUMNS, rows)


def _api_name(name: str) -> str:
    """An API name without CUPTI's runtime version suffix (cudaLaunchKernel_v7000 ->
    cudaLaunchKernel); the driver's ABI suffixes (_v2) stay, as nsys shows them."""
    base, sep, ver = name.rpartition("_v")
    if sep and ver.isdigit() and len(ver) >= 4:
        return base
    return name


def _top_level_api(calls: Iterable[Any]) -> list[Any]:
    """Runtime calls, and driver calls not inside a runtime call of the same thread (the
    runtime calls of one thread follow one another, so the one that could hold a driver call
    is the last to start at or before it)."""
    calls = list(calls)
    runtime: dict[int, list[tuple[int, int]]] = {}
    for c in calls:
        if c.domain == "runtime":
            runtime.setdefault(c.tid, []).append((c.start_ns, c.end_ns))
    starts: dict[int, list[int]] = {}
    for tid, spans in runtime.items():
        spans.sort()
        starts[tid] = [s for s, _e in spans]
    out = []
    for c in calls:
        if c.domain == "driver" and c.tid in runtime:
            k = bisect.bisect_right(starts[c.tid], c.start_ns) - 1
            if k >= 0 and runtime[c.tid][k][1] >= c.end_ns:
                continue
        out.append(c)
    return out


def _memop(r: Any) -> str:
    if hasattr(r, "copy_kind"):
        return f"[CUDA memcpy {r.copy_kind}]"
    return "[CUDA memset]"


def _union_ns(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Length of the union of the intervals, clipped to [lo, hi]."""
    total = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def summarize(rec: Any) -> CudaSummary:
    """The summary of a stopped :class:`fastprof.cuda.timeline.CudaRecorder` (or anything
    with its record lists, ``start_ns``, ``stop_ns`` and ``dropped``)."""
    api: dict[str, list[int]] = {}
    for c in _top_level_api(rec.api_calls):
        api.setdefault(_api_name(c.name), []).append(c.duration_ns)
    kern: dict[str, list[int]] = {}
    for k in rec.kernels:
        kern.setdefault(demangle(k.name), []).append(k.duration_ns)
    mem_t: dict[str, list[int]] = {}
    mem_b: dict[str, list[int]] = {}
    for m in [*rec.memcpys, *rec.memsets]:
        mem_t.setdefault(_memop(m), []).append(m.duration_ns)
        mem_b.setdefault(_memop(m), []).append(m.bytes)
    tables = {
        "cuda_api_sum": _time_table("cuda_api_sum", "CUDA API Summary", "Num Calls", "Name", api),
        "cuda_gpu_kern_sum": _time_table(
            "cuda_gpu_kern_sum", "CUDA GPU Kernel Summary", "Instances", "Name", kern
        ),
        "cuda_gpu_mem_time_sum": _time_table(
            "cuda_gpu_mem_time_sum",
            "CUDA GPU MemOps Summary (by Time)",
            "Count",
            "Operation",
            mem_t,
        ),
        "cuda_gpu_mem_size_sum": _size_table(mem_b),
    }
    gpu = [(r.start_ns, r.end_ns) for r in [*rec.kernels, *rec.memcpys, *rec.memsets]]
    lo = min([int(rec.start_ns)] + [s for s, _e in gpu])
    hi = max([int(rec.stop_ns)] + [e for _s, e in gpu])
    wall = max(0, hi - lo)
    busy = _union_ns(gpu, lo, hi)
    by_type: dict[str, tuple[int, int]] = {}
    for s in rec.syncs:
        n, ns = by_type.get(s.type, (0, 0))
        by_type[s.type] = (n + 1, ns + s.duration_ns)
    blocked = sum(ns for _n, ns in by_type.values())
    return CudaSummary(tables, wall, busy, blocked, by_type, int(getattr(rec, "dropped", 0)))
