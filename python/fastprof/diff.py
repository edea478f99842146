"""``fastprof diff A.prof B.prof``: what changed between two saved profiles, per function and
(when both have their call tree saved beside them) per call path: the change in calls, own
time and total time, sorted by what changed most.  ``--html OUT`` writes a differential flame
graph: B's call tree, each path coloured by how its total time changed from A (red: slower,
blue: faster)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from .report.options import positive_int as _positive_int
from .tree import CallTree, FuncKey, Node

__all__ = [
    "CallPaths",
    "function_changes",
    "interned_paths_of",
    "paths_of",
    "path_changes",
    "format_diff",
    "main",
]

Figures = Tuple[int, float, float]  # calls, own time, total time
Change = Tuple[Figures, Figures]  # before, after
V = TypeVar("V")


def function_changes(
    a: Dict[FuncKey, Figures], b: Dict[FuncKey, Figures]
) -> List[Tuple[FuncKey, Change]]:
    """Every function of either profile with its figures before and after (zeros where it is
    missing), the largest change in own or total time first."""
    zero: Figures = (0, 0.0, 0.0)
    out = [(k, (a.get(k, zero), b.get(k, zero))) for k in set(a) | set(b)]
    out.sort(key=lambda kv: (-_size(kv[1]), kv[0]))
    return out


def _size(c: Change) -> float:
    (_, ta, ca), (_, tb, cb) = c
    # to the nanosecond, so that equal changes tie whatever their rounding
    return round(max(abs(tb - ta), abs(cb - ca)), 9)


def match_files(a: Sequence[FuncKey], b: Sequence[FuncKey]) -> Dict[str, str]:
    """{file of A: file of B} for the files that only one profile names, matched to the
    other's by their longest common ending of path components (a script that cProfile
    recorded as typed, ``script.py``, and fastprof by its absolute path; two checkouts of one
    project), when the match is unique and the two hold a function of the same line and name.
    Builtins' pseudo-files (``~``) are never matched."""
    funcs_a: Dict[str, set] = {}
    funcs_b: Dict[str, set] = {}
    for keys, funcs in ((a, funcs_a), (b, funcs_b)):
        for file, line, name in keys:
            funcs.setdefault(file, set()).add((line, name))
    only_a = [f for f in funcs_a if f not in funcs_b and f != "~"]
    only_b = [f for f in funcs_b if f not in funcs_a and f != "~"]

    def parts(path: str) -> List[str]:
        return [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]

    def common(x: List[str], y: List[str]) -> int:
        n = 0
        while n < min(len(x), len(y)) and x[-1 - n] == y[-1 - n]:
            n += 1
        return n

    out: Dict[str, str] = {}
    taken: Dict[str, int] = {}
    for fa in only_a:
        pa = parts(fa)
        scored = [(common(pa, parts(fb)), fb) for fb in only_b if funcs_a[fa] & funcs_b[fb]]
        scored = [(n, fb) for n, fb in scored if n > 0]
        if not scored:
            continue
        best = max(n for n, _ in scored)
        winners = [fb for n, fb in scored if n == best]
        if len(winners) == 1:
            out[fa] = winners[0]
            taken[winners[0]] = taken.get(winners[0], 0) + 1
    return {fa: fb for fa, fb in out.items() if taken[fb] == 1}


def _renamed_figures(
    figures: Dict[FuncKey, Figures], files: Dict[str, str]
) -> Dict[FuncKey, Figures]:
    """figures with each key's file renamed by files."""
    return {(files.get(k[0], k[0]), k[1], k[2]): v for k, v in figures.items()}


# The object address cProfile's names of some C functions carry ("<built-in method __new__ of
# type object at 0x7f...>", a mypyc-compiled "<function f at 0x...>"): another in each run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")


def unaddressed(key: FuncKey) -> FuncKey:
    """key without the object address in a C function's name, so that one function's rows of
    two runs match (a builtin's key has the file "~")."""
    if key[0] == "~" and " at 0x" in key[2]:
        return (key[0], key[1], _ADDRESS.sub("", key[2]))
    return key


def by_unaddressed(rows: Dict[FuncKey, V], add: Callable[[V, V], V]) -> Dict[FuncKey, V]:
    """rows by unaddressed key: the rows of functions whose names differ only by the address
    (two objects' methods of one run) combined with add(earlier, later)."""
    out: Dict[FuncKey, V] = {}
    for k, v in rows.items():
        k = unaddressed(k)
        prev = out.get(k)
        out[k] = v if prev is None else add(prev, v)
    return out


def _add_figures(a: Figures, b: Figures) -> Figures:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _unaddress_tree(tree: CallTree) -> None:
    """Takes the object addresses out of every node's key in tree, in place."""
    for n in tree.nodes():  # (roots, keyed None, are not among them)
        if n.key is not None:
            n.key = unaddressed(n.key)


def _rename_tree(tree: CallTree, files: Dict[str, str]) -> None:
    """Renames the files of every node of tree by files, in place."""
    for n in tree.nodes():
        if n.key is not None and n.key[0] in files:
            n.key = (files[n.key[0]], n.key[1], n.key[2])


class CallPaths:
    """Call paths interned: path ``i`` is its caller's path ``parent[i]`` (-1: a top-level
    call) and its function ``key[i]``, so that a path costs one entry whatever its depth (a
    tuple of keys per path is quadratic in a deep tree's depth).  One ``CallPaths`` shared by
    two trees gives the same path the same id in both."""

    __slots__ = ("ids", "parent", "key", "depth", "_run", "_before_run")

    def __init__(self) -> None:
        # {(the caller's path id, -1 at the top; the function): the path's id}
        self.ids: Dict[Tuple[int, FuncKey], int] = {}
        self.parent: List[int] = []
        self.key: List[FuncKey] = []
        self.depth: List[int] = []
        # the length of the direct recursion (calls of one function in a row) that ends a
        # path, and the path before it (-1: none)
        self._run: List[int] = []
        self._before_run: List[int] = []

    def intern(self, up: int, key: FuncKey) -> int:
        """The id of path ``up`` (-1: the root) extended by ``key``, made when new."""
        i = self.ids.get((up, key))
        if i is None:
            i = self.ids[(up, key)] = len(self.parent)
            self.parent.append(up)
            self.key.append(key)
            self.depth.append(1 if up < 0 else self.depth[up] + 1)
            same = up >= 0 and self.key[up] == key
            self._run.append(self._run[up] + 1 if same else 1)
            self._before_run.append(self._before_run[up] if same else up)
        return i

    def path(self, i: int) -> Tuple[FuncKey, ...]:
        """The keys of path ``i``, outermost call first."""
        out: List[FuncKey] = []
        while i >= 0:
            out.append(self.key[i])
            i = self.parent[i]
        return tuple(reversed(out))

    def last_runs(self, i: int, n: int) -> Tuple[List[Tuple[FuncKey, int]], bool]:
        """The last ``n`` runs of path ``i`` (a function and how many calls of it in a row),
        outermost first, and whether more runs come before them; in O(n) whatever the
        depth."""
        out: List[Tuple[FuncKey, int]] = []
        while i >= 0 and len(out) < n:
            out.append((self.key[i], self._run[i]))
            i = self._before_run[i]
        out.reverse()
        return out, i >= 0

    def ranks(self) -> List[int]:
        """Each path's place among the paths of its depth in the order of their keys'
        tuples (the order of ``path``), found level by level from the callers' places."""
        levels: Dict[int, List[int]] = {}
        for i, d in enumerate(self.depth):
            levels.setdefault(d, []).append(i)
        rank = [0] * len(self.parent)

        def order(i: int) -> Tuple[int, FuncKey]:
            up = self.parent[i]
            return (rank[up] if up >= 0 else 0, self.key[i])

        for d in sorted(levels):
            ids = levels[d]
            ids.sort(key=order)
            for r, i in enumerate(ids):
                rank[i] = r
        return rank


def interned_paths_of(root: Node, paths: CallPaths) -> Dict[int, Figures]:
    """{path id in ``paths``: (calls, own, total)} of every node below ``root``, the nodes of
    one path summed; interns the paths into ``paths`` (linear in the tree's size)."""
    out: Dict[int, Figures] = {}
    stack: List[Tuple[Node, int]] = [(c, -1) for c in root.children]
    while stack:
        n, up = stack.pop()
        assert n.key is not None
        p = paths.intern(up, n.key)
        prev = out.get(p, (0, 0.0, 0.0))
        out[p] = (prev[0] + n.ncalls, prev[1] + n.tottime, prev[2] + n.cumtime)
        stack.extend((c, p) for c in n.children)
    return out


def paths_of(root: Node) -> Dict[Tuple[FuncKey, ...], Figures]:
    """{path: (calls, own, total)} of every node below ``root``, each path a tuple of keys
    (as large as the square of a deep tree's depth: ``interned_paths_of`` is not)."""
    paths = CallPaths()
    return {paths.path(i): f for i, f in interned_paths_of(root, paths).items()}


def path_changes(a: CallTree, b: CallTree) -> Tuple[CallPaths, List[Tuple[int, Change]]]:
    """Every call path of either tree (threads summed by path) with its figures before and
    after, the largest change in total or own time first (then the shorter path, then the
    order of the keys' tuples): the paths, and [(path id, change)]."""
    paths = CallPaths()
    pa = interned_paths_of(a.merged_threads(), paths)
    pb = interned_paths_of(b.merged_threads(), paths)
    zero: Figures = (0, 0.0, 0.0)
    out = [(p, (pa.get(p, zero), pb.get(p, zero))) for p in set(pa) | set(pb)]
    rank, depth = paths.ranks(), paths.depth
    out.sort(key=lambda kv: (-_size(kv[1]), depth[kv[0]], rank[kv[0]]))
    return paths, out


def _secs(x: float, sign: bool = False) -> str:
    s = f"{x:+.6f}" if sign else f"{x:.6f}"
    return s


def _name(key: FuncKey, paths: Dict[str, str]) -> str:
    from .report.display import key_label
    from .report.escape import printable

    if key[0] == "~":
        return printable(key_label(key))
    return printable(f"{paths.get(key[0], key[0])}:{key[1]}({key[2]})")


def _path_text(cp: CallPaths, i: int, paths: Dict[str, str], keep: int = 4) -> str:
    """Path ``i`` of ``cp`` as one line: its last ``keep`` functions, direct recursion shown
    once with its depth (``f x3``), "..." first when more came before them."""
    runs, more = cp.last_runs(i, keep)
    parts = [_name(k, paths) + (f" x{count}" if count > 1 else "") for k, count in runs]
    return " > ".join((["..."] if more else []) + parts)


def format_diff(
    a_stats: Dict[FuncKey, Figures],
    b_stats: Dict[FuncKey, Figures],
    a_tree: Optional[CallTree],
    b_tree: Optional[CallTree],
    *,
    top: int = 20,
    names: Tuple[str, str] = ("A", "B"),
) -> str:
    """The text of ``fastprof diff``: the totals, the ``top`` functions and (with both trees)
    the ``top`` call paths that changed most."""
    from .report.display import short_paths

    files = [k[0] for k in a_stats] + [k[0] for k in b_stats]
    paths = short_paths(files)
    ta = sum(v[1] for v in a_stats.values())
    tb = sum(v[1] for v in b_stats.values())
    from .report.escape import printable

    out = [
        f"fastprof diff: {printable(names[0])} -> {printable(names[1])}",
        f"profiled time {ta:.6f} s -> {tb:.6f} s ({tb - ta:+.6f} s"
        + (f", {100.0 * (tb - ta) / ta:+.1f}%)" if ta > 0 else ")"),
        "",
    ]
    names = (printable(names[0]), printable(names[1]))
    head = (
        f"{'calls':>9} {'d calls':>9} {'tottime':>10} {'d tottime':>10} {'cumtime':>10} "
        f"{'d cumtime':>10}  "
    )

    def line(c: Change, what: str) -> str:
        (na, ta_, ca), (nb, tb_, cb) = c
        return (
            f"{nb:>9} {nb - na:>+9} {_secs(tb_):>10} {_secs(tb_ - ta_, True):>10} "
            f"{_secs(cb):>10} {_secs(cb - ca, True):>10}  {what}"
        )

    fc = [x for x in function_changes(a_stats, b_stats) if x[1][0] != x[1][1]]
    out.append(
        f"functions that changed most ({min(top, len(fc))} of {len(fc)} that changed; "
        f"figures of {names[1]}, d: change from {names[0]})"
    )
    out.append(head + "function")
    for k, c in fc[:top]:
        tag = " (new)" if c[0] == (0, 0.0, 0.0) else " (gone)" if c[1] == (0, 0.0, 0.0) else ""
        out.append(line(c, _name(k, paths) + tag))
    if a_tree is not None and b_tree is not None:
        cp, changes = path_changes(a_tree, b_tree)
        pc = [x for x in changes if x[1][0] != x[1][1]]
        out.append("")
        out.append(f"call paths that changed most ({min(top, len(pc))} of {len(pc)})")
        out.append(head + "path")
        for p, c in pc[:top]:
            out.append(line(c, _path_text(cp, p, paths)))
    else:
        out.append("")
        out.append(
            "(per-path changes need both call trees: save the profiles with fastprof "
            "run -o, which writes FILE.tree.json beside FILE)"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str]) -> int:
    """``fastprof diff``: returns 0, or 2 when a file cannot be read."""
    p = argparse.ArgumentParser(
        prog="fastprof diff",
        description="What changed between two saved profiles (A "
        "before, B after), per function and per call path.",
    )
    p.add_argument("before", help="profile A (pstats file; FILE.tree.json beside it is used)")
    p.add_argument("after", help="profile B")
    p.add_argument(
        "--top",
        type=_positive_int,
        default=20,
        metavar="N",
        help="show the N functions and paths that changed most (default 20)",
    )
    p.add_argument(
        "--html",
        metavar="OUT",
        help="write a differential flame graph (B's tree coloured by the change "
        "from A) and the function table with its changes to OUT",
    )
    opts = p.parse_args(list(argv))
    from .report.source import load_profile, totals_of

    try:
        sa, ta = load_profile(opts.before)
        sb, tb = load_profile(opts.after)
    except (OSError, ValueError) as e:
        print(f"fastprof diff: {e}", file=sys.stderr)
        return 2
    fa = by_unaddressed(totals_of(sa), _add_figures)
    fb = by_unaddressed(totals_of(sb), _add_figures)
    for tree in (ta, tb):
        if tree is not None:
            _unaddress_tree(tree)
    files = match_files(list(fa), list(fb))
    if files:  # A's names for them become B's, so that a function is one row
        fa = _renamed_figures(fa, files)
        if ta is not None:
            _rename_tree(ta, files)
    try:
        if opts.html:
            from .report.html import write_html

            before = None
            if ta is not None and tb is not None:
                cp = CallPaths()
                figures = interned_paths_of(ta.merged_threads(), cp)
                before = (cp.ids, {i: (v[2], v[1], v[0]) for i, v in figures.items()})
            write_html(
                opts.html,
                sb,
                tb,
                title=f"fastprof diff: {opts.before} -> {opts.after}",
                before=before,
                before_funcs=fa,
            )
            print(f"fastprof: differential HTML report written to {opts.html}", file=sys.stderr)
            return 0
        sys.stdout.write(format_diff(fa, fb, ta, tb, top=opts.top, names=(opts.before, opts.after)))
    except BrokenPipeError:
        sys.stderr.close()
    except OSError as e:
        print(f"fastprof diff: {e}", file=sys.stderr)
        return 2
    return 0
