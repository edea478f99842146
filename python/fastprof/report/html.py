"""One self-contained HTML file to explore a profile: an icicle graph of the call tree on a
canvas (click to zoom, search that highlights, hover for exact figures), a sortable, filterable
function table with callers and callees, a thread selector, and the line timings when line
profiling ran.  No network: the script, the styles and the data (JSON) are inlined.

``render_html`` makes the page from a ``fastprof.Stats`` (the functions and their callers), a
``fastprof.tree.CallTree`` (the graph; None: the table alone) and ``LineStats``; ``diff`` pages
(made by ``fastprof.diff``) colour each path by how its time changed.

Every name, path, label and title reaches the page as the terminal views print it
(``escape.printable``): a control character or a lone surrogate (a file name that is not
UTF-8) is written as its Python escape, so the page is valid UTF-8 and the browser is given
only text it can show.
"""

from __future__ import annotations

import array
import html
import json
import linecache
import os
import stat
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..tree import CallTree, FuncKey, Node, unread
from .display import (
    is_runner_frame,
    key_label,
    library_of,
    short_paths,
    thread_label,
    thread_name,
)
from .escape import printable

__all__ = ["render_html", "write_html", "report_data"]


def _key_table(keys: Sequence[FuncKey]) -> List[List[Any]]:
    """The page's row of each function: [file, line, name, library, label, location], the
    strings escaped as the terminal views print them."""
    paths = short_paths(k[0] for k in keys)
    out = []
    for k in keys:
        loc = "" if k[0] == "~" else f"{paths.get(k[0], k[0])}:{k[1]}"
        out.append(
            [
                printable(k[0]),
                k[1],
                printable(k[2]),
                printable(library_of(k) or ""),
                printable(key_label(k)),
                printable(loc),
            ]
        )
    return out


BeforeFigures = Tuple[float, float, int]  # an earlier profile's total, own time and calls
# its call paths' ids: {(the caller's path id, -1 at the top; the function): the path's id}
PathIds = Dict[Tuple[int, FuncKey], int]
# a diff's earlier profile: its path ids (``fastprof.diff.CallPaths.ids``) and figures by
# path id, or its figures by the path's tuple of keys
Before = Union[Tuple[PathIds, Dict[int, BeforeFigures]], Dict[Tuple[FuncKey, ...], BeforeFigures]]


def _interned(before: Before) -> Tuple[PathIds, Dict[int, BeforeFigures]]:
    """``before`` as path ids and figures by id (a dict keyed by tuples is numbered)."""
    if isinstance(before, tuple):
        return before
    ids: PathIds = {}
    figures: Dict[int, BeforeFigures] = {}
    for keys, fig in before.items():
        i = -1
        for k in keys:
            i = ids.setdefault((i, k), len(ids))
        figures[i] = fig
    return ids, figures


class _Keys:
    def __init__(self) -> None:
        self.index: Dict[FuncKey, int] = {}
        self.keys: List[FuncKey] = []

    def __call__(self, key: FuncKey) -> int:
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.keys)
            self.keys.append(key)
        return i


class _ThreadColumns:
    """One thread's columns (see ``_tree_threads``), made by ``walk``."""

    def __init__(
        self,
        root: Node,
        keys: _Keys,
        keymaps: Callable[[Any], Any],
        before: Optional[Tuple[PathIds, Dict[int, BeforeFigures]]],
    ) -> None:
        self.root, self.keys, self.keymaps, self.before = root, keys, keymaps, before
        self.bids, self.bfigures = before if before is not None else ({}, {})
        self.parent: List[int] = []
        self.key: List[int] = []
        self.calls: List[int] = []
        self.own: List[float] = []
        self.total: List[float] = []
        self.levels: List[int] = []
        self.btotal: List[float] = []
        self.bown: List[float] = []
        self.bcalls: List[int] = []
        # a node's row, and how deep in a chain of direct recursion it is
        self.index: Dict[int, Tuple[int, int]] = {id(root): (-1, 0)}
        # a node's path id in bids (-1: the root, -2: a path the earlier profile lacks)
        self.pid: Dict[int, int] = {id(root): -1}

    def place(self, n: Node) -> bool:
        """Gives node n its row, or folds it into its caller's (direct recursion).  Returns
        whether to go on below it."""
        up = n.parent
        assert up is not None and n.key is not None
        if up is self.root and is_runner_frame(n.key) and not n.children:
            return False
        index, levels, calls, own = self.index, self.levels, self.calls, self.own
        row, level = index[id(up)]
        b: BeforeFigures = (0.0, 0.0, 0)
        if self.before is not None:
            p = self.pid[id(up)]
            p = self.pid[id(n)] = -2 if p == -2 else self.bids.get((p, n.key), -2)
            b = self.bfigures.get(p, b)
        if up.key == n.key and row >= 0:
            # direct recursion: folded into the outermost call's row
            index[id(n)] = (row, level + 1)
            levels[row] = max(levels[row], level + 1)
            calls[row] += n.ncalls
            own[row] += n.tottime
            if self.before is not None:
                self.bown[row] += b[1]
                self.bcalls[row] += b[2]
            return True
        index[id(n)] = (len(self.parent), 1)
        self.parent.append(row)
        self.key.append(self.keys(n.key))
        calls.append(n.ncalls)
        own.append(n.tottime)
        self.total.append(n.cumtime)
        levels.append(1)
        if self.before is not None:
            self.btotal.append(b[0])
            self.bown.append(b[1])
            self.bcalls.append(b[2])
        return True

    def walk(self) -> None:
        """Places every node below the root, depth first in order (``Node.walk``'s order).
        Returns None."""
        stack: List[Node] = [self.root]
        cols = (self.parent, self.key, self.calls, self.own, self.total, self.levels)
        while stack:
            n = stack.pop()
            if n.key is not None and not self.place(n):
                continue
            # a node of a live profiler's tree whose children were never read: the rows below
            # it are made from the core's records in C, with no node made for each
            records = unread(n) if self.before is None else None
            if records is not None:
                snap, slot = records
                row, level = self.index[id(n)]
                snap.columns(slot, row, level, self.keymaps(snap), self.keys, cols)
                continue
            stack.extend(reversed(n.children))


def _tree_threads(
    tree: CallTree,
    keys: _Keys,
    before: Optional[Before] = None,
) -> List[Dict[str, Any]]:
    """Each thread as columns: parent (index into the thread's nodes, -1 for top level),
    key, calls, own and total time, and the levels of direct recursion folded into the node
    (a chain f -> f -> f is drawn as one frame, as the terminal view shows it); with
    ``before`` (a diff), the earlier profile's total, own time and calls of the same path
    (each node's path found from its caller's path id: linear in the tree's size)."""
    out = []
    # each snapshot's cache of its functions' key indices (see _fastprof._tree_columns)
    maps: Dict[int, Tuple[Any, Any]] = {}

    def keymaps(snap: Any) -> Any:
        got = maps.get(id(snap))
        if got is None:
            got = maps[id(snap)] = (snap, array.array("q", bytes(8 * len(snap.keys))))
        return got[1]

    interned = _interned(before) if before is not None else None  # once for every thread
    for ti, (ident, root) in enumerate(tree.threads.items()):
        c = _ThreadColumns(root, keys, keymaps, interned)
        c.walk()
        t: Dict[str, Any] = {
            "ident": ident,
            "label": printable(thread_label(ident, ti, tree.processes, thread_name(tree, ident))),
            "parent": c.parent,
            "key": c.key,
            "calls": c.calls,
            "self": c.own,
            "total": c.total,
        }
        if any(x > 1 for x in c.levels):
            t["levels"] = c.levels
        if before is not None:
            t.update(btotal=c.btotal, bself=c.bown, bcalls=c.bcalls)
        out.append(t)
    return out


def _functions(stats: Any, keys: _Keys) -> Tuple[List[List[Any]], List[List[Any]]]:
    """The function rows (key, calls, primitive calls, own, total) and the caller edges
    (caller, callee, calls, own, total) of a ``fastprof.Stats``."""
    funcs = []
    edges = []
    for r in stats.rows:
        if is_runner_frame(r.key) and not r.callers:
            continue
        k = keys(r.key)
        funcs.append([k, r.ncalls, r.primcalls, r.tottime, r.cumtime])
        for c in r.callers:
            edges.append([keys((c.file, c.line, c.name)), k, c.ncalls, c.tottime, c.cumtime])
    return funcs, edges


def _lines(line_stats: Any) -> List[Dict[str, Any]]:
    """Each function's line timings with their source, escaped as the lines view prints
    them (tabs kept)."""
    out = []
    for (file, first, name), rows in sorted(line_stats.timings.items()):
        linecache.checkcache(file)
        rs = [
            [
                ln,
                hits,
                t * line_stats.unit,
                printable(linecache.getline(file, ln).rstrip("\n").rstrip("\r"), keep="\t"),
            ]
            for ln, hits, t in sorted(rows)
        ]
        out.append({"file": printable(file), "line": first, "name": printable(name), "rows": rs})
    return out


def report_data(
    stats: Any = None,
    tree: Optional[CallTree] = None,
    line_stats: Any = None,
    *,
    title: str = "fastprof profile",
    before: Optional[Before] = None,
    before_funcs: Optional[Dict[FuncKey, Tuple[int, float, float]]] = None,
) -> Dict[str, Any]:
    """The JSON the page reads (see the module docstring)."""
    keys = _Keys()
    threads = _tree_threads(tree, keys, before) if tree is not None else []
    funcs, edges = _functions(stats, keys) if stats is not None else ([], [])
    data: Dict[str, Any] = {
        "title": printable(title),
        "threads": threads,
        "roots": "processes" if tree is not None and tree.processes else "threads",
        "funcs": funcs,
        "edges": edges,
        "lines": _lines(line_stats) if line_stats is not None else [],
        "merged": tree.merged if tree is not None else 0,
        "node_cap": tree.node_cap if tree is not None else None,
        "diff": before is not None,
    }
    if before_funcs is not None:
        data["bfuncs"] = [[keys(k), v[0], v[1], v[2]] for k, v in before_funcs.items()]
    data["keys"] = _key_table(keys.keys)
    return data


def _json(value: Any) -> str:
    """value as compact JSON (no NaN or infinity)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _floats_json(values: List[Any]) -> str:
    """A list as ``_json`` writes it; a list of floats (a thread's times) writes each distinct
    value's text once (a wide tree's times repeat: formatting is most of the page's cost)."""
    if not all(type(x) is float for x in values):
        return _json(values)
    memo: Dict[float, str] = {}
    out = []
    for x in values:
        text = memo.get(x)
        if text is None:
            if x != x or x in (_INF, -_INF):
                return _json(values)  # raises json's ValueError
            text = float.__repr__(x)
            if x != 0.0:  # 0.0 == -0.0: each zero is written as itself
                memo[x] = text
        out.append(text)
    return "[" + ",".join(out) + "]"


_INF = float("inf")
_FLOAT_COLUMNS = ("self", "total", "btotal", "bself")


def _thread_json(thread: Dict[str, Any]) -> str:
    """``_json(thread)`` (one of the page's threads), its time columns by ``_floats_json``."""
    parts = (
        _json(k) + ":" + (_floats_json(v) if k in _FLOAT_COLUMNS else _json(v))
        for k, v in thread.items()
    )
    return "{" + ",".join(parts) + "}"


def _data_json(data: Dict[str, Any]) -> str:
    """``_json(data)``, the threads written by ``_thread_json``."""
    parts = []
    for name, value in data.items():
        if name == "threads":
            text = "[" + ",".join(_thread_json(t) for t in value) + "]"
        else:
            text = _json(value)
        parts.append(_json(name) + ":" + text)
    return "{" + ",".join(parts) + "}"


def _inline_json(data: Dict[str, Any]) -> str:
    text = _data_json(data)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render_html(
    stats: Any = None,
    tree: Optional[CallTree] = None,
    line_stats: Any = None,
    *,
    title: str = "fastprof profile",
    **kw: Any,
) -> str:
    """The page, as one string."""
    from ._html_page import PAGE

    data = report_data(stats, tree, line_stats, title=title, **kw)
    head, tail = PAGE.split("__DATA__")
    return head.replace("__TITLE__", html.escape(printable(title))) + _inline_json(data) + tail


def write_html(
    path: Union[str, Any],
    stats: Any = None,
    tree: Optional[CallTree] = None,
    line_stats: Any = None,
    **kw: Any,
) -> None:
    """Writes ``render_html(...)`` to ``path`` (UTF-8).  The page is made and encoded before
    the file is opened, so an error there leaves no file; one while writing (a full disk)
    removes the partial file and is raised."""
    data = render_html(stats, tree, line_stats, **kw).encode("utf-8")
    f = open(path, "wb")
    try:
        with f:
            f.write(data)
    except BaseException:
        _remove_partial(path)
        raise


def _remove_partial(path: Union[str, Any]) -> None:
    """Removes the regular file ``path`` (a page left partly written); a device, a pipe or a
    link (``/dev/stdout``) is left alone.  Returns nothing, raises nothing."""
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass
