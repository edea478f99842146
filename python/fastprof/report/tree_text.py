"""The terminal view that answers first: the call tree of the hot paths, then the top
functions.

The tree shows each path's share of the run, its total and own time and its calls; rows under
``min_percent`` of the run are pruned (one line says how much was left out), direct recursion
is one row with its depth, and library internals fold into their entry point's row unless
``expand_libs``.  Colour (ANSI) only when asked: ``use_color`` decides from ``--color`` and
``NO_COLOR``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from ..tree import CallTree, FuncKey, Node
from .display import (
    Row,
    display_tree,
    is_runner_frame,
    key_label,
    roots_noun,
    short_paths,
    thread_label,
    thread_name,
)
from .escape import printable
from .options import COLOR_CHOICES, DEFAULT_MIN_PERCENT

__all__ = ["format_tree_report", "format_tree", "format_top", "use_color", "COLOR_CHOICES"]

DEFAULT_TOP = 15

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_DIM = "\x1b[2m"
_RED = "\x1b[31m"
_YELLOW = "\x1b[33m"
_GREEN = "\x1b[32m"
_CYAN = "\x1b[36m"


def use_color(choice: str, stream: Any) -> bool:
    """Whether to colour: ``always``, ``never``, or ``auto`` (a terminal, and NO_COLOR unset
    or empty, and TERM not "dumb").  ValueError for another choice."""
    if choice not in COLOR_CHOICES:
        raise ValueError(f"color must be one of {', '.join(COLOR_CHOICES)}; got {choice!r}")
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _Paint:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, *codes: str) -> str:
        if not self.on or not codes:
            return text
        return "".join(codes) + text + _RESET


def _secs(x: float) -> str:
    if x >= 100:
        return f"{x:.1f}s"
    if x >= 1:
        return f"{x:.3f}s"
    if x >= 1e-3:
        return f"{x * 1e3:.2f}ms"
    return f"{x * 1e6:.1f}us"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    -"


def _heat(share: float) -> Tuple[str, ...]:
    if share >= 0.2:
        return (_RED,)
    if share >= 0.05:
        return (_YELLOW,)
    return ()


def _location(key: FuncKey, paths: Dict[str, str]) -> str:
    if key[0] == "~":
        return ""
    return printable(f"{paths.get(key[0], key[0])}:{key[1]}")


def _pruned_note(kept: int, dropped: int, dropped_time: float, whole: float) -> str:
    return f"{dropped} more below the threshold ({_pct(dropped_time, whole).strip()} of the run)"


def format_tree(
    root: Node,
    *,
    total: float,
    min_percent: float = DEFAULT_MIN_PERCENT,
    expand_libs: bool = False,
    color: bool = False,
    paths: Optional[Dict[str, str]] = None,
    max_rows: int = 400,
) -> List[str]:
    """The lines of one thread's tree (without a header).  ``total`` is the run's time (the
    percentages' whole); rows below ``min_percent`` of it are pruned; at most ``max_rows``
    rows are printed (a last line says how many more)."""
    paint = _Paint(color)
    floor = total * min_percent / 100.0
    # the rows below the floor are only counted: none is made for the paths under them
    top = display_tree(root, expand_libs=expand_libs, floor=floor)
    if paths is None:
        paths = short_paths(r.key[0] for r in top.walk() if r.key is not None)
    out: List[str] = []
    # (row, prefix for its children, its own connector)
    work: List[Tuple[Any, str, str]] = []

    def push_children(r: Row, prefix: str) -> None:
        kids = [c for c in r.children if c.cumtime >= floor and c.cumtime > 0]
        small = [c for c in r.children if not (c.cumtime >= floor and c.cumtime > 0)]
        items: List[Tuple[Any, str, str]] = []
        for i, c in enumerate(kids):
            last = i == len(kids) - 1 and not small
            items.append(
                (c, prefix + ("   " if last else "│  "), prefix + ("└─ " if last else "├─ "))
            )
        if small:
            t = sum(c.cumtime for c in small)
            items.append((("note", len(small), t), "", prefix + "└─ "))
        work.extend(reversed(items))

    push_children(top, "")
    shown = 0
    left = 0
    while work:
        item, child_prefix, lead = work.pop()
        if shown >= max_rows:
            left += 1
            continue
        if isinstance(item, tuple):
            _, n, t = item
            note = f"({n} more below {min_percent:g}%: {_pct(t, total).strip()} together)"
            out.append(f"{'':>7} {'':>9} {'':>9} {'':>8}  {lead}{paint(note, _DIM)}")
            shown += 1
            continue
        r: Row = item
        assert r.key is not None
        share = r.cumtime / total if total > 0 else 0.0
        name = printable(key_label(r.key))
        if r.levels > 1:
            name += f" (recursion, {r.levels} levels)"
        loc = _location(r.key, paths)
        if r.library is not None:
            tag = f"[{printable(r.library)}]"
            if r.hidden:
                tag += f" +{r.hidden} frames"
            text = f"{paint(name, _CYAN)}  {paint(tag, _DIM)}"
            if loc:
                text += "  " + paint(loc, _DIM)
        else:
            text = f"{paint(name, _BOLD, *_heat(share))}  {paint(loc, _GREEN)}"
        out.append(
            f"{paint(_pct(r.cumtime, total).rjust(7), *_heat(share))} "
            f"{_secs(r.cumtime):>9} {_secs(r.tottime):>9} {r.ncalls:>8}  "
            f"{paint(lead, _DIM)}{text}"
        )
        shown += 1
        push_children(r, child_prefix)
    if left:
        out.append(f"... {left} more rows (raise --min-percent to see fewer)")
    return out


def format_top(
    totals: Dict[FuncKey, Tuple[int, float, float]],
    *,
    total: float,
    top: int = DEFAULT_TOP,
    color: bool = False,
) -> List[str]:
    """The flat table of the ``top`` functions by own time, with their total time and calls;
    file paths as long as it takes to tell apart files of the same name."""
    paint = _Paint(color)
    paths = short_paths(k[0] for k in totals)
    rows = sorted(totals.items(), key=lambda kv: (-kv[1][1], -kv[1][2], kv[0]))[:top]
    out = [f"{'self%':>7} {'self':>9} {'total':>9} {'calls':>8}  function"]
    for key, (nc, tt, ct) in rows:
        # pstats' file:line(name), with the file's path as long as it takes to be unique
        loc = _location(key, paths)
        text = f"{paint(loc, _GREEN)}({printable(key[2])})" if loc else printable(key_label(key))
        out.append(
            f"{paint(_pct(tt, total).rjust(7), *_heat(tt / total if total else 0))} "
            f"{_secs(tt):>9} {_secs(ct):>9} {nc:>8}  {text}"
        )
    return out


def _drop_runner_frames(root: Node) -> Node:
    """A copy of a root without the profiler's own top-level ``disable`` call."""
    if not any(
        c.key is not None and is_runner_frame(c.key) and not c.children for c in root.children
    ):
        return root
    out = Node(None)
    out.children = [
        c
        for c in root.children
        if not (c.key is not None and is_runner_frame(c.key) and not c.children)
    ]
    out.cumtime = sum(c.cumtime for c in out.children)
    return out


def format_tree_report(
    tree: CallTree,
    *,
    title: Optional[str] = None,
    min_percent: float = DEFAULT_MIN_PERCENT,
    expand_libs: bool = False,
    color: bool = False,
    top: int = DEFAULT_TOP,
    threads: str = "each",
    totals: Optional[Dict[FuncKey, Tuple[int, float, float]]] = None,
) -> str:
    """The whole report: a header, each thread's call tree (``threads="each"``, busiest first)
    or one tree of all threads summed by path (``"merged"``), then the top functions
    (from ``totals``, {key: (ncalls, tottime, cumtime)}, when given: the pstats records, which
    hold the calls merged past the node cap too; else derived from the tree).  Returns the
    text, ending with a newline."""
    if not 0 <= min_percent <= 100:
        raise ValueError(f"min_percent must be between 0 and 100; got {min_percent!r}")
    if threads not in ("each", "merged"):
        raise ValueError(f"threads must be 'each' or 'merged'; got {threads!r}")
    paint = _Paint(color)
    roots = [
        (ident, i, _drop_runner_frames(r)) for i, (ident, r) in enumerate(tree.threads.items())
    ]
    total = sum(r.cumtime for _, _, r in roots)
    if totals is None:
        totals = _totals(tree, roots)
    elif tree.merged:
        # merged calls made at the top level have no node: the tree is short of the table by
        # their time; the header and every share are of the table's (the run's) own time
        total = max(total, sum(v[1] for v in totals.values()))
    calls = sum(v[0] for v in totals.values())
    head = []
    if title:
        head.append(paint(printable(title), _BOLD))
    nthreads = len(roots)
    # the first words as cProfile's header says them
    head.append(
        f"{calls} function calls in {total:.6f} seconds ({roots_noun(nthreads, tree.processes)}); "
        f"the call tree of the paths above "
        f"{min_percent:g}% of the run"
        + ("" if expand_libs else ", library internals folded (--expand-libs shows them)")
    )
    if tree.merged:
        head.append(
            f"{tree.merged} calls merged (node cap {tree.node_cap}): counted in the "
            f"functions' totals, not in the tree"
        )
    out = head + [""]
    colhead = f"{'total%':>7} {'total':>9} {'self':>9} {'calls':>8}  call tree"
    # the files of the profile's functions: every file a tree row can name (walking the tree
    # for them would make a node object for each of its paths), the top table's too
    paths = short_paths(k[0] for k in totals)
    if threads == "merged" and nthreads > 1:
        merged = CallTree({ident: r for ident, _, r in roots}).merged_threads()
        every = "all processes" if tree.processes else "all threads"
        groups: Sequence[Tuple[str, Node]] = [(f"{every}, summed by path", merged)]
    else:
        order = sorted(roots, key=lambda t: -t[2].cumtime)
        groups = [
            (printable(thread_label(ident, i, tree.processes, thread_name(tree, ident))), r)
            for ident, i, r in order
        ]
    for label, r in groups:
        if nthreads > 1:
            out.append(paint(f"{label}: {_pct(r.cumtime, total).strip()} of the run", _BOLD))
        if r.cumtime < total * min_percent / 100.0 and nthreads > 1:
            out.append("  (below the threshold)")
            out.append("")
            continue
        out.append(colhead)
        out.extend(
            format_tree(
                r,
                total=total,
                min_percent=min_percent,
                expand_libs=expand_libs,
                color=color,
                paths=paths,
            )
        )
        out.append("")
    shown = min(top, len(totals))
    out.append(paint(f"top functions by own time ({shown} of {len(totals)} functions)", _BOLD))
    out.extend(format_top(totals, total=total, top=top, color=color))
    return "\n".join(out) + "\n"


def _totals(tree: CallTree, roots: List[Tuple[int, int, Node]]) -> Dict[FuncKey, Any]:
    """function_totals over the roots shown (without the runner's own frames)."""
    return CallTree(
        {ident: r for ident, _, r in roots}, tree.merged, tree.node_cap
    ).function_totals()


def print_tree_report(tree: CallTree, stream: TextIO, **kw: Any) -> None:
    """Writes ``format_tree_report(tree, **kw)`` to ``stream``."""
    stream.write(format_tree_report(tree, **kw))
