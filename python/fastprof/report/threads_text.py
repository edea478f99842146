"""The per-thread view (``--threads``): each thread's table, headed by the thread's name, ident
and own time, then the table of all threads merged, headed by the run's wall time (never a sum
of the threads' times, which overlap)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Union

from .._runstats import is_disable
from .display import thread_label
from .escape import printable

if TYPE_CHECKING:
    from ..tree import CallTree, FuncKey, PstatsEntry

__all__ = ["format_threads_report", "without_runner"]


def without_runner(stats: Dict["FuncKey", "PstatsEntry"]) -> Dict["FuncKey", "PstatsEntry"]:
    """A pstats dictionary without the profiler's own top-level ``disable`` call (the one that
    ended the profile, which has no caller); calls of it from the profiled code are kept, as
    ``fastprof run`` keeps them."""
    out = dict(stats)
    for key in [k for k in out if is_disable(k)]:
        callers = out[key][4]
        if not callers:
            del out[key]
            continue
        calls = sum(e[0] for e in callers.values())
        prim = sum(e[1] for e in callers.values())
        tt = sum(e[2] for e in callers.values())
        ct = sum(e[3] for e in callers.values())
        out[key] = (prim, calls, tt, ct, callers)
    return out


def _merged_view(stats: Any) -> Any:
    """A copy of ``stats`` without the profiler's own top-level ``disable`` call, as each
    thread's table is shown, keeping its filters and whole totals (``stats`` is left as it
    is)."""
    out = type(stats)(without_runner(stats.to_dict()))
    out._whole, out._filters, out._rx = stats._whole, stats._filters, stats._rx
    return out


def format_threads_report(
    stats: Any,
    tree: "CallTree",
    *,
    wall: Optional[float] = None,
    title: Optional[str] = None,
    sort: Union[str, Sequence[str]] = "tottime",
    top: Optional[int] = None,
    strip_dirs: bool = True,
) -> str:
    """Each thread's table (in first-seen order; its header: the thread and its own time),
    then the merged table of ``stats`` (a ``fastprof.Stats`` of the whole profile; its header:
    the run's wall time ``wall`` in seconds, or that it was not recorded), each sorted by the
    pstats key(s) ``sort``.  The threads' tables are derived from ``tree`` and filtered as
    ``stats`` is; when the tree was capped they are left out, saying why.  ``stats`` is not
    changed.  Returns the text, ending with a newline."""
    Stats = type(stats)  # fastprof.Stats (not imported here: stats.py imports this module)
    keys = (sort,) if isinstance(sort, str) else tuple(sort)
    nthreads = len(tree.threads)
    out = []
    if title:
        out.append(printable(title))
    out.append(
        f"{nthreads} thread{'s' if nthreads != 1 else ''}: each thread's table (its own time), "
        f"then all threads merged (the run's wall time)"
    )
    if tree.merged:
        out.append(
            f"each thread's table is left out: the call tree was capped ({tree.merged} calls "
            f"merged past the node cap of {tree.node_cap}), and merged calls belong to no "
            f"thread, so per-thread numbers would be wrong; profile with a larger tree_nodes="
        )
    out.append("")
    if not tree.merged:
        for index, (ident, _) in enumerate(tree.threads.items()):
            st = Stats(without_runner(tree.thread_pstats(ident)))
            for rx in stats._rx:
                st = st.filter(rx)
            st.sort(*keys)
            whole = st._whole[2] if st._whole else st.total_tt
            name = printable(thread_label(ident, index, name=tree.names.get(ident)))
            out.append(
                st.table(
                    top,
                    strip_dirs=strip_dirs,
                    title=name,
                    seconds=f"in {whole:.6f} seconds (the thread's own time)",
                )
            )
    stats = _merged_view(stats)
    stats.sort(*keys)
    when = (
        f"in {wall:.6f} seconds of wall time (the run)"
        if wall is not None
        else "(the run's wall time was not recorded)"
    )
    label = f"all {nthreads} threads merged" if nthreads != 1 else "the one thread, as a whole"
    out.append(stats.table(top, strip_dirs=strip_dirs, title=label, seconds=when))
    return "\n".join(out)
