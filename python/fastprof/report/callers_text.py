"""``view --callers F`` / ``--callees F``: for each function matching F, who called it (or
whom it called), with the calls and the time of each edge, as pstats' print_callers and
print_callees show them."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from ..tree import FuncKey
from .display import key_label, short_paths
from .escape import printable

__all__ = ["format_callers"]


def _secs(x: float) -> str:
    return f"{x:.6f}" if x < 1000 else f"{x:.1f}"


def _where(key: FuncKey, paths: Dict[str, str]) -> str:
    if key[0] == "~":
        return printable(key_label(key))
    return printable(f"{paths.get(key[0], key[0])}:{key[1]}({key[2]})")


def format_callers(stats: Any, pattern: str, which: str, *, strip_dirs: bool = True) -> str:
    """The text for ``which`` ("callers" or "callees") of every function of ``stats`` (a
    ``fastprof.Stats``) whose ``file:line(name)`` (or builtin label) matches the regular
    expression ``pattern``.  ValueError for a bad pattern or ``which``."""
    if which not in ("callers", "callees"):
        raise ValueError(f"which must be 'callers' or 'callees'; got {which!r}")
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"--{which} {pattern!r}: not a regular expression: {e}") from None
    rows = stats.rows
    # edges: (caller, callee) -> (calls, primitive calls, tottime, cumtime)
    edges: Dict[Tuple[FuncKey, FuncKey], Tuple[int, int, float, float]] = {}
    for r in rows:
        for c in r.callers:
            edges[((c.file, c.line, c.name), r.key)] = (c.ncalls, c.primcalls, c.tottime, c.cumtime)
    files = [r.file for r in rows] + [k[0][0] for k in edges]
    paths = short_paths(files) if strip_dirs else {f: f for f in files}
    matched = [
        r for r in rows if rx.search(r.location) or rx.search(f"{r.file}:{r.line}({r.name})")
    ]
    if not matched:
        return f"no function matches {printable(repr(pattern))}\n"
    out: List[str] = []
    for r in sorted(matched, key=lambda r: -r.cumtime):
        nc = str(r.ncalls) if r.ncalls == r.primcalls else f"{r.ncalls}/{r.primcalls}"
        out.append(
            f"{which} of {_where(r.key, paths)}: {nc} calls, own {_secs(r.tottime)} s, "
            f"total {_secs(r.cumtime)} s"
        )
        if which == "callers":
            lst = [(ck, v) for (ck, fk), v in edges.items() if fk == r.key]
        else:
            lst = [(fk, v) for (ck, fk), v in edges.items() if ck == r.key]
        if not lst:
            out.append("    (none)" if which == "callees" else "    (none: a top-level call)")
        else:
            out.append(f"    {'ncalls':>10} {'tottime':>10} {'cumtime':>10}  function")
            for k, (enc, epc, ett, ect) in sorted(lst, key=lambda kv: -kv[1][3]):
                n = str(enc) if enc == epc else f"{enc}/{epc}"
                out.append(f"    {n:>10} {_secs(ett):>10} {_secs(ect):>10}  {_where(k, paths)}")
        out.append("")
    return "\n".join(out)
