"""The text table comparing two call profiles: per function, calls, own time (tottime) and
total time (cumtime) in A and in B and the change, the largest change first."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .display import key_label
from .escape import printable

__all__ = ["FunctionChange", "diff_profiles", "format_profile_diff"]

FuncKey = Tuple[str, int, str]
_BY = {
    "own": lambda c: c.own_change,
    "total": lambda c: c.total_change,
    "calls": lambda c: c.calls_change,
}


@dataclass(frozen=True)
class FunctionChange:
    """One function in A and B (None on the side where it does not appear)."""

    key: FuncKey
    calls_a: Optional[int]
    calls_b: Optional[int]
    own_a: Optional[float]
    own_b: Optional[float]
    total_a: Optional[float]
    total_b: Optional[float]

    @property
    def own_change(self) -> float:
        return (self.own_b or 0.0) - (self.own_a or 0.0)

    @property
    def total_change(self) -> float:
        return (self.total_b or 0.0) - (self.total_a or 0.0)

    @property
    def calls_change(self) -> int:
        return (self.calls_b or 0) - (self.calls_a or 0)


def diff_profiles(
    a: Dict[FuncKey, Any], b: Dict[FuncKey, Any], by: str = "own"
) -> List[FunctionChange]:
    """The functions of two pstats dictionaries, sorted by the size of their change in
    ``by`` ("own", "total" or "calls"), largest first (then by name)."""
    if by not in _BY:
        raise ValueError(f"by must be one of {', '.join(_BY)}, got {by!r}")
    out = []
    for key in set(a) | set(b):
        va, vb = a.get(key), b.get(key)
        out.append(
            FunctionChange(
                key,
                None if va is None else va[1],
                None if vb is None else vb[1],
                None if va is None else va[2],
                None if vb is None else vb[2],
                None if va is None else va[3],
                None if vb is None else vb[3],
            )
        )
    change = _BY[by]
    out.sort(key=lambda c: (-abs(change(c)), c.key))
    return out


def _label(key: FuncKey, strip_dirs: bool) -> str:
    file, line, name = key
    if file == "~" and line == 0:
        return printable(key_label(key))  # pstats' form: {built-in method builtins.len}
    f = os.path.basename(file) if strip_dirs else file
    return printable(f"{f}:{line}({name})")


def _secs(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.6f}"


def _delta(x: float) -> str:
    return f"{x:+.6f}"


def _percent(old: Optional[float], new: Optional[float]) -> str:
    if old is None:
        return "new"
    if new is None:
        return "gone"
    if old <= 0:
        return "-"
    return f"{100.0 * (new - old) / old:+.1f}%"


def format_profile_diff(
    changes: List[FunctionChange],
    *,
    label_a: str,
    label_b: str,
    totals: Tuple[Tuple[int, float], Tuple[int, float]],
    top: Optional[int] = None,
    strip_dirs: bool = True,
    by: str = "own",
) -> str:
    """The table of ``changes`` (the first ``top`` rows; all when None) under a header
    naming A and B with their (calls, profiled seconds) ``totals``.  Ends with a newline."""
    (calls_a, tt_a), (calls_b, tt_b) = totals
    shown = changes if top is None else changes[:top]
    count = (
        f"{len(shown)} of {len(changes)} functions"
        if len(shown) < len(changes)
        else f"{len(changes)} functions"
    )
    what = "calls" if by == "calls" else f"{by} time"
    head = [
        f"A: {printable(label_a)}: {calls_a} function calls in {tt_a:.6f} seconds",
        f"B: {printable(label_b)}: {calls_b} function calls in {tt_b:.6f} seconds",
        f"{count}, sorted by the change of {what}",
    ]
    cols = (
        "calls A",
        "calls B",
        "own A",
        "own B",
        "own B-A",
        "own %",
        "total A",
        "total B",
        "total B-A",
        "function",
    )
    body = []
    for c in shown:
        body.append(
            (
                "-" if c.calls_a is None else str(c.calls_a),
                "-" if c.calls_b is None else str(c.calls_b),
                _secs(c.own_a),
                _secs(c.own_b),
                _delta(c.own_change),
                _percent(c.own_a, c.own_b),
                _secs(c.total_a),
                _secs(c.total_b),
                _delta(c.total_change),
                _label(c.key, strip_dirs),
            )
        )
    widths = [max([len(cols[i])] + [len(r[i]) for r in body]) for i in range(len(cols) - 1)]

    def line(cells: Tuple[str, ...]) -> str:
        return "  ".join(x.rjust(w) for x, w in zip(cells[:-1], widths)) + "  " + cells[-1]

    return "\n".join(head + ["", line(cols)] + [line(r) for r in body]) + "\n"
