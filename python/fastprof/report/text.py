"""The text table of call-profile rows (pstats' columns plus each function's share of the
profiled time)."""

from __future__ import annotations

import collections
import os
from typing import Any, List, Optional, Sequence

from .escape import printable

__all__ = ["format_table", "format_location"]


def format_location(row: Any, strip_dirs: bool = True) -> str:
    """``file:line(name)`` of a row (its base name when ``strip_dirs``), or a builtin's label,
    with control characters escaped."""
    if row.is_builtin:
        return printable(row.location)
    f = os.path.basename(row.file) if strip_dirs else row.file
    return printable(f"{f}:{row.line}({row.name})")


def _secs(x: float) -> str:
    """Seconds with six decimals, however long (the columns widen)."""
    return f"{x:.6f}"


def _locations(rows: Sequence[Any], strip_dirs: bool) -> List[str]:
    """Each row's ``file:line(name)``; with strip_dirs, rows whose base names would print
    alike (``pk/a/__init__.py`` and ``pk/b/__init__.py`` defining ``helper`` at line 1) keep
    as much of their paths as tells them apart."""
    locs = [format_location(r, strip_dirs) for r in rows]
    if not strip_dirs:
        return locs
    seen = collections.Counter(locs)
    clash = [i for i, loc in enumerate(locs) if seen[loc] > 1 and not rows[i].is_builtin]
    if clash:
        from .display import short_paths

        paths = short_paths(rows[i].file for i in clash)
        for i in clash:
            r = rows[i]
            locs[i] = printable(f"{paths[r.file]}:{r.line}({r.name})")
    return locs


def format_table(
    rows: Sequence[Any],
    *,
    nrows: Optional[int] = None,
    total_calls: int,
    prim_calls: int,
    total_tt: float,
    sort_keys: Sequence[str] = (),
    filters: Sequence[str] = (),
    strip_dirs: bool = True,
    title: Optional[str] = None,
    seconds: Optional[str] = None,
) -> str:
    """The table of ``rows`` (``fastprof.stats.Row``) with a header line of totals.

    ``nrows`` is how many rows there are in all (to say "top N of M"); the totals are the
    whole profile's, ``filters`` the patterns that picked the rows.  ``seconds`` replaces the
    header's "in T seconds" (T the profiled time, ``total_tt``, which the %own column divides
    by either way).  Returns the text, ending with a newline.
    """
    nrows = len(rows) if nrows is None else nrows
    head = []
    if title:
        head.append(printable(title))
    calls = f"{total_calls} function calls"
    if prim_calls != total_calls:
        calls += f" ({prim_calls} primitive calls)"
    head.append(f"{calls} {seconds}" if seconds else f"{calls} in {total_tt:.6f} seconds")
    shown = f"{len(rows)} of {nrows} functions" if len(rows) < nrows else f"{nrows} functions"
    order = f", sorted by {', '.join(sort_keys)}" if sort_keys else ""
    where = "".join(f", matching {f!r}" for f in filters)
    head.append(f"{shown}{where}{order}")

    cols = ("ncalls", "tottime", "percall", "cumtime", "percall", "%own", "function")
    body = []
    for r, loc in zip(rows, _locations(rows, strip_dirs)):
        nc = str(r.ncalls) if r.ncalls == r.primcalls else f"{r.ncalls}/{r.primcalls}"
        tper = _secs(r.tottime / r.ncalls) if r.ncalls else "-"
        cper = _secs(r.cumtime / r.primcalls) if r.primcalls else "-"
        share = f"{100.0 * r.tottime / total_tt:.1f}" if total_tt > 0 else "-"
        body.append(
            (
                nc,
                _secs(r.tottime),
                tper,
                _secs(r.cumtime),
                cper,
                share,
                loc,
            )
        )
    widths = [max([len(cols[i])] + [len(b[i]) for b in body]) for i in range(len(cols) - 1)]

    def line(cells: Sequence[str]) -> str:
        left = "  ".join(c.rjust(w) for c, w in zip(cells[:-1], widths))
        return f"{left}  {cells[-1]}"

    out = head + ["", line(cols)] + [line(b) for b in body]
    return "\n".join(out) + "\n"
