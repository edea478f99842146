"""What the views draw: a call tree folded for reading.

``display_tree`` turns a thread's ``fastprof.tree.Node`` into ``Row`` records: a chain of
direct recursion (f -> f -> f) becomes one row with its depth, and unless libraries are
expanded, the frames of a library (the standard library, a package in site-packages, builtins)
below its entry point are folded into that entry's row (user code a library calls back shows
again below it).  ``library_of`` says which library a function belongs to, ``short_paths``
gives each file the shortest path suffix that tells it apart from the others.
"""

from __future__ import annotations

import os
import re
import sysconfig
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..tree import CallTree, FuncKey, Node, unread

__all__ = ["Row", "display_tree", "library_of", "short_paths", "key_label"]

_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)")
_STDLIB_PATH = re.compile(r"[/\\]lib[/\\](?:pypy|python)\d+(?:\.\d+)?t?[/\\]")


def _stdlib_dirs() -> Tuple[str, ...]:
    out = set()
    for name in ("stdlib", "platstdlib"):
        try:
            p = sysconfig.get_paths().get(name)
        except Exception:  # a broken sysconfig never stops a report
            p = None
        if p:
            out.add(os.path.normcase(os.path.abspath(p)) + os.sep)
    return tuple(out)


_STDLIB_DIRS = _stdlib_dirs()


def _stdlib_names() -> frozenset:
    """The top-level names of the standard library's modules: ``sys.stdlib_module_names``
    (3.10+), else the builtin modules and those in the standard library's folders."""
    import sys

    names = getattr(sys, "stdlib_module_names", None)
    if names is not None:
        return frozenset(names)
    found = set(sys.builtin_module_names)
    for d in _STDLIB_DIRS:
        for sub in ("", "lib-dynload"):
            try:
                entries = os.listdir(os.path.join(d, sub))
            except OSError:
                continue
            found.update(e.split(".", 1)[0] for e in entries)
    return frozenset(found)


_STDLIB_NAMES: Optional[frozenset] = None
# a C function's or method's module, as its label names it: <built-in method mod.f>, <method
# 'f' of 'mod.Type' objects>, <built-in method f of mod.Type object at 0x...>
_C_OWNER = re.compile(
    r"^<(?:built-in method ([\w.]+)>|method '[^']*' of '([\w.]+)' objects>|"
    r"built-in method \w+ of ([\w.]+) object)"
)


def _c_library(name: str) -> str:
    """The library of a builtin or C method labelled ``name``: its module's top-level name
    when that is a package outside the standard library (``numpy`` for ``<method 'mean' of
    'numpy.ndarray' objects>``), else "builtins"."""
    global _STDLIB_NAMES
    m = _C_OWNER.match(name)
    owner = next((g for g in m.groups() if g), "") if m else ""
    if "." not in owner:
        return "builtins"
    top = owner.split(".", 1)[0]
    if _STDLIB_NAMES is None:
        _STDLIB_NAMES = _stdlib_names()
    if top in _STDLIB_NAMES or top.lstrip("_") in _STDLIB_NAMES or not top:
        return "builtins"
    return top


def library_of(key: Optional[FuncKey]) -> Optional[str]:
    """The library a function belongs to: "builtins" for builtins and C methods (a C
    function or method of a package outside the standard library: that package's name, as
    ``numpy`` for ndarray.mean), the package's top-level name for site-packages, "stdlib" for the standard library (and
    frozen modules), "fastprof" for this package; None for the user's own code."""
    if key is None:
        return None
    file = key[0]
    if file == "~":
        return _c_library(key[2])
    if file.startswith("<frozen "):
        return "stdlib"
    m = _SITE.search(file)
    if m is not None:
        name = m.group(1)
        for suffix in (".py", ".pyc"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        return name
    norm = os.path.normcase(file)
    if norm.startswith(_STDLIB_DIRS) or _STDLIB_PATH.search(file):
        return "stdlib"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    if os.path.normcase(file).startswith(os.path.normcase(here)):
        return "fastprof"
    return None


def key_label(key: FuncKey) -> str:
    """A function's name as the views print it: the builtin's label, or its name."""
    if key[0] == "~":
        n = key[2]
        return "{%s}" % n[1:-1] if n.startswith("<") and n.endswith(">") else n
    return key[2]


# the separators of this system's paths: a backslash is part of a POSIX file name
_SEPS = re.compile("|".join(re.escape(s) for s in (os.sep, os.altsep) if s))


def short_paths(files: Iterable[str]) -> Dict[str, str]:
    """For each file, the shortest suffix of its path (whole components, split at this
    system's separators: ``os.sep`` and ``os.altsep``) that no other file shares; a package's
    ``__init__.py`` or ``__main__.py`` keeps at least its folder."""
    uniq = sorted(set(files))
    parts = {f: _SEPS.split(f) for f in uniq}
    out: Dict[str, str] = {}
    for f in uniq:
        p = parts[f]
        if f == "~" or f.startswith("<"):
            out[f] = f
            continue
        k = 2 if p[-1] in ("__init__.py", "__main__.py") and len(p) > 1 else 1
        while k < len(p):
            tail = p[-k:]
            if not any(q is not p and q[-k:] == tail for q in parts.values()):
                break
            k += 1
        out[f] = "/".join(p[-k:]) if k < len(p) else f
    return out


class Row:
    """One row of a folded tree: the function (``key``), whose library it is (None: user
    code), the calls, own and total time summed over the paths folded into it, the levels of
    direct recursion folded (1: none), and how many library frames were folded into it."""

    __slots__ = (
        "key",
        "library",
        "ncalls",
        "tottime",
        "cumtime",
        "levels",
        "hidden",
        "children",
        "parent",
        "_index",
    )

    def __init__(
        self, key: Optional[FuncKey], library: Optional[str], parent: Optional["Row"] = None
    ) -> None:
        self.key = key
        self.library = library
        self.ncalls = 0
        self.tottime = 0.0
        self.cumtime = 0.0
        self.levels = 1
        self.hidden = 0
        self.children: List[Row] = []
        self.parent = parent
        self._index: Dict[Tuple[Optional[FuncKey], bool], Row] = {}

    def child(self, key: FuncKey, library: Optional[str]) -> "Row":
        """The child row of ``key`` (made when there is none)."""
        ident = (key, library is None)
        r = self._index.get(ident)
        if r is None:
            r = Row(key, library, self)
            self.children.append(r)
            self._index[ident] = r
        return r

    def walk(self) -> List["Row"]:
        """This row and all below it, parents first (iterative)."""
        out: List[Row] = []
        stack = [self]
        while stack:
            r = stack.pop()
            out.append(r)
            stack.extend(reversed(r.children))
        return out

    def __repr__(self) -> str:
        return (
            f"Row({self.key!r}, ncalls={self.ncalls}, tottime={self.tottime:.6g}, "
            f"cumtime={self.cumtime:.6g}, levels={self.levels}, hidden={self.hidden})"
        )


def display_tree(
    root: Node,
    *,
    expand_libs: bool = False,
    fold_recursion: bool = True,
    floor: Optional[float] = None,
) -> Row:
    """The folded rows of the tree below ``root`` (a thread's root, or any node: its
    children become the result's children).  Returns a root ``Row`` (key None) whose
    ``cumtime`` is root's; children are sorted by total time, largest first.

    A row gathers the nodes that map to it (the node that made it, and those folded into it:
    recursion of its function, library internals below a library frame), so it is complete
    once its parent row has been worked through.  With ``floor`` only rows whose total time is
    at least floor (and above 0) are worked through: the others keep their total time and
    calls (what a view says of the rows it leaves out) but no children, own time, folded
    frames or levels.  A view that shows the rows above a share of the run reads the same
    numbers as from the whole tree, without making a row for every path below its threshold."""
    top = Row(None, None)
    top.cumtime = root.cumtime
    top.ncalls = root.ncalls
    lib_cache: Dict[FuncKey, Optional[str]] = {}

    def lib_of(key: FuncKey) -> Optional[str]:
        lib = lib_cache.get(key, "?")
        if lib == "?":
            lib = lib_cache[key] = library_of(key)
        return lib

    def is_lib(key: FuncKey) -> bool:
        return lib_of(key) is not None

    # the nodes each row's children hang below: Nodes, or (snapshot, index) for the records of
    # a live profiler's tree that no node was made for (folded in C, see _Snapshot.fold)
    members: Dict[int, List[Any]] = {id(top): [root]}

    def below(m: Any, level: int, row: Row, recursion: bool, libraries: bool) -> List[Any]:
        """The nodes under m to walk at level; those of records without nodes are folded
        here instead (into row's sums, and the rows they make, with their members)."""
        # (snapshot, record) pairs, and nodes whose children were never made: the records
        records = m if type(m) is tuple else unread(m)
        if records is None:
            return [(c, level) for c in reversed(m.children)]
        snap, slot = records
        for k in snap.fold(slot, level, row, recursion, libraries, is_lib):
            key, ncalls, own, total = snap.record(k)
            child = row.child(key, lib_of(key))
            child.ncalls += ncalls
            child.tottime += own
            child.cumtime += total
            members.setdefault(id(child), []).append((snap, k))
        return []

    rows: List[Row] = [top]
    while rows:
        row = rows.pop()
        recursion = fold_recursion and row.parent is not None
        libraries = not expand_libs and row.library is not None and row.parent is not None
        for m in members.pop(id(row), ()):
            # m's subtree, depth first, down to the nodes that make rows of their own
            work = below(m, 1, row, recursion, libraries)
            while work:
                n, level = work.pop()
                key = n.key
                assert key is not None
                lib = lib_of(key)
                if recursion and row.key == key:
                    level += 1
                    row.levels = max(row.levels, level)
                    row.ncalls += n.ncalls
                    row.tottime += n.tottime
                elif libraries and lib is not None:
                    row.hidden += 1
                    row.tottime += n.tottime
                    level = 1
                else:
                    child = row.child(key, lib)
                    child.ncalls += n.ncalls
                    child.tottime += n.tottime
                    child.cumtime += n.cumtime
                    members.setdefault(id(child), []).append(n)
                    continue
                work.extend(below(n, level, row, recursion, libraries))
        row.children.sort(key=lambda c: -c.cumtime)
        row._index = {}
        for c in reversed(row.children):
            if floor is None or (c.cumtime >= floor and c.cumtime > 0):
                rows.append(c)
            else:
                members.pop(id(c), None)
    return top


def is_runner_frame(key: FuncKey) -> bool:
    """The profiler's own ``disable`` call, which a run records as a top-level frame."""
    return (
        key[0] == "~"
        and key[2].startswith("<method 'disable' of '")
        and ("fastprof" in key[2] or "Profiler" in key[2])
    )


def roots_noun(n: int, processes: bool = False) -> str:
    """``n`` roots of a call tree in words: "1 thread", "3 threads", or for a job's merged
    tree "2 processes"."""
    if processes:
        return f"{n} process{'es' if n != 1 else ''}"
    return f"{n} thread{'s' if n != 1 else ''}"


def thread_label(
    ident: int, index: int, processes: bool = False, name: Optional[str] = None
) -> str:
    """How the views name a root of the call tree: a thread by its first-seen order and its
    ident, after its name where known ("MainThread: thread 1 (id 42)"), or (``processes``: a
    job's merged tree) a process by its order and its pid.  Not escaped: a view that prints
    it escapes it (``escape.printable``)."""
    if processes:
        label = f"process {index + 1} (pid {ident})"
    else:
        label = f"thread {index + 1} (id {ident})"
    return f"{name}: {label}" if name else label


def thread_name(tree: CallTree, ident: int) -> Optional[str]:
    """The name of the thread ``ident`` of ``tree`` where the tree has it (None for a root of
    a job's merged tree, which is a process)."""
    return None if tree.processes else tree.names.get(ident)
