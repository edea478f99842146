"""The profiled round's data: top rows by tottime, .prof files, and which functions grew."""

from __future__ import annotations

import marshal
import os
from typing import Any, Dict, List, Optional, Tuple

#: how many rows of the profiled round are kept in the JSON
TOP_ROWS = 25

_BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def short_path(filename: str, root: Optional[str] = None) -> str:
    """Return filename relative to root when under it, from its site-packages folder when
    installed, else unchanged: the same function keeps its label across checkouts."""
    if root:
        prefix = os.path.join(os.path.abspath(root), "")
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    marker = os.sep + "site-packages" + os.sep
    if marker in filename:
        return filename.rsplit(marker, 1)[1]
    return filename


def func_label(key: Tuple[str, int, str], root: Optional[str] = None) -> str:
    """Return pstats' "file:line(name)" label of a stats key (the bare name for built-ins),
    the file shortened by short_path()."""
    filename, line, name = key
    if filename == "~" and line == 0:
        return name
    return f"{short_path(filename, root)}:{line}({name})"


def _is_machinery(key: Tuple[str, int, str]) -> bool:
    """Return True for rows that belong to the benchmark machinery, not to the user's code: the
    profiler's own enable/disable calls (the profiled span holds nothing else of it now) and,
    in runs saved by earlier versions, frames of fastprof.bench."""
    filename, _, name = key
    if filename.startswith(_BENCH_DIR):
        return True
    return filename == "~" and ("disable' of" in name or "enable' of" in name)


def target_stats(stats: Dict[Any, Any]) -> Dict[Any, Any]:
    """Return a copy of a pstats dict without the machinery's rows (see _is_machinery), and
    without them among the callers of the others: what the .prof file of a benchmark holds."""
    out: Dict[Any, Any] = {}
    for key, value in stats.items():
        if _is_machinery(key):
            continue
        if len(value) > 4 and isinstance(value[4], dict):
            callers = {k: v for k, v in value[4].items() if not _is_machinery(k)}
            value = (*value[:4], callers, *value[5:])
        out[key] = value
    return out


def top_rows(
    stats: Dict[Any, Any], iterations: int, top: int = TOP_ROWS, root: Optional[str] = None
) -> Dict[str, Any]:
    """Return {"iterations", "rows"}: the `top` functions by tottime from a pstats dict
    (file names relative to root where they lie under it).

    Each row has func, ncalls, primcalls, tottime and cumtime (seconds, for the whole round).
    """
    rows: List[Dict[str, Any]] = []
    for key, value in stats.items():
        if _is_machinery(key):
            continue
        cc, nc, tt, ct = value[:4]
        rows.append(
            {
                "func": func_label(key, root),
                "ncalls": nc,
                "primcalls": cc,
                "tottime": tt,
                "cumtime": ct,
            }
        )
    rows.sort(key=lambda r: (-r["tottime"], r["func"]))
    return {"iterations": int(iterations), "rows": rows[:top]}


def write_prof(stats: Dict[Any, Any], path: str) -> str:
    """Write a pstats dict to path in the .prof format pstats/snakeviz read; return path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as fh:
        marshal.dump(stats, fh)
    return path


def growth(
    old: Optional[Dict[str, Any]], new: Optional[Dict[str, Any]], top: int = 5
) -> List[Dict[str, Any]]:
    """Return the functions whose tottime per iteration grew most from old to new.

    old and new are top_rows() results; rows are {"func", "old", "new", "delta"} (seconds per
    iteration, a function missing on one side counting as 0), largest growth first, growth > 0
    only.
    """
    if not new or not new.get("rows"):
        return []

    def per_iter(doc: Optional[Dict[str, Any]]) -> Dict[str, float]:
        if not doc:
            return {}
        n = max(1, int(doc.get("iterations", 1)))
        return {r["func"]: float(r["tottime"]) / n for r in doc.get("rows", [])}

    a, b = per_iter(old), per_iter(new)
    out: List[Dict[str, Any]] = []
    for func in set(a) | set(b):
        delta = b.get(func, 0.0) - a.get(func, 0.0)
        if delta > 0:
            out.append(
                {"func": func, "old": a.get(func, 0.0), "new": b.get(func, 0.0), "delta": delta}
            )
    out.sort(key=lambda r: (-r["delta"], r["func"]))
    return out[:top]
