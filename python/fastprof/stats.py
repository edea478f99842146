"""``fastprof.Stats``: call-profile results as plain rows you can sort, filter, print and
export (pstats, marshal files that snakeviz / gprof2dot / tuna open)."""

from __future__ import annotations

import marshal
import os
import re
import reprlib
import sys
from dataclasses import asdict, dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    TextIO,
    Tuple,
    Union,
)

from ._files import read_regular_file
from ._quiet import quiet
from .report.escape import printable

if TYPE_CHECKING:
    from .tree import CallTree

__all__ = ["Stats", "Row", "Caller", "ThreadInfo", "SORT_KEYS"]

if TYPE_CHECKING:
    FuncKey = Tuple[str, int, str]
    PstatsDict = Dict[FuncKey, Tuple[int, int, float, float, Dict[FuncKey, Tuple[Any, ...]]]]
else:  # plain types at run time: see keys.FuncKey
    FuncKey = tuple
    PstatsDict = dict


@dataclass(frozen=True)
class Caller:
    """One caller of a row's function, with the calls it made and the time they took."""

    name: str
    file: str
    line: int
    ncalls: int
    primcalls: int
    tottime: float
    cumtime: float


@dataclass(frozen=True)
class Row:
    """One function: its calls (total and primitive, i.e. not recursive), own time (tottime),
    time including callees (cumtime, counted at the outermost activation) and callers.

    Builtins have ``file == "~"`` and ``line == 0``, as in pstats.
    """

    name: str
    file: str
    line: int
    ncalls: int
    primcalls: int
    tottime: float
    cumtime: float
    callers: Tuple[Caller, ...]

    @property
    def key(self) -> FuncKey:
        """The pstats key (file, line, name)."""
        return (self.file, self.line, self.name)

    @property
    def is_builtin(self) -> bool:
        """True for builtins and C methods."""
        return self.file == "~" and self.line == 0

    @property
    def location(self) -> str:
        """``file:line(name)``, or the builtin's label, as pstats prints it: "<built-in method
        builtins.len>" shows as "{built-in method builtins.len}"."""
        if self.is_builtin:
            n = self.name
            return "{%s}" % n[1:-1] if n.startswith("<") and n.endswith(">") else n
        return f"{self.file}:{self.line}({self.name})"

    def as_dict(self) -> Dict[str, Any]:
        """The row as a dictionary of plain values (callers as a list of dictionaries)."""
        return asdict(self)


class ThreadInfo(NamedTuple):
    """One thread of a profile: its ident (``threading.get_ident()``, as the profile recorded
    it) and its name where it was known when the profile was read (``threading`` still knew
    the thread), else None."""

    ident: int
    name: Optional[str]


# Each sort key: (field of the row as a function, descending?).  Same names as pstats.
_FIELDS = {
    "ncalls": (lambda r: r.ncalls, True),
    "pcalls": (lambda r: r.primcalls, True),
    "tottime": (lambda r: r.tottime, True),
    "cumtime": (lambda r: r.cumtime, True),
    "file": (lambda r: r.file, False),
    "line": (lambda r: r.line, False),
    "name": (lambda r: r.name, False),
    "stdname": (lambda r: r.location, False),
}
_ALIASES = {
    "calls": ("ncalls",),
    "ncalls": ("ncalls",),
    "pcalls": ("pcalls",),
    "cumulative": ("cumtime",),
    "cumtime": ("cumtime",),
    "time": ("tottime",),
    "tottime": ("tottime",),
    "file": ("file",),
    "filename": ("file",),
    "module": ("file",),
    "line": ("line",),
    "name": ("name",),
    "nfl": ("name", "file", "line"),
    "stdname": ("stdname",),
}
# pstats' old integer sort arguments.
_LEGACY = {-1: "stdname", 0: "calls", 1: "time", 2: "cumulative"}
SORT_KEYS: Tuple[str, ...] = tuple(sorted(_ALIASES))
"""The sort keys ``Stats.sort`` accepts (pstats' names)."""


def _sort_fields(keys: Sequence[Union[str, int]]) -> List[str]:
    """The row fields for pstats-style sort keys; ValueError on an unknown key."""
    if len(keys) == 1 and isinstance(keys[0], int) and not isinstance(keys[0], bool):
        if keys[0] not in _LEGACY:
            raise ValueError(f"sort: integer keys are {sorted(_LEGACY)}, got {keys[0]}")
        keys = (_LEGACY[keys[0]],)
    fields: List[str] = []
    for k in keys:
        if not isinstance(k, str):
            raise TypeError(
                f"sort: keys are strings (one of {', '.join(SORT_KEYS)}), got {type(k).__name__}"
            )
        if k not in _ALIASES:
            raise ValueError(f"sort: unknown key {k!r}; expected one of {', '.join(SORT_KEYS)}")
        fields.extend(_ALIASES[k])
    return fields


class _Desc:
    """Wraps a value so that it sorts in reverse."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return bool(other.v < self.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v


def _add_edge(prev: Any, edge: Any) -> Any:
    """Sums two caller entries: (nc, cc, tt, ct) tuples, or profile.py's bare call counts."""
    if isinstance(edge, (int, float)):
        if prev is None or isinstance(prev, (int, float)):
            return edge if prev is None else prev + edge
        edge = (edge, edge, 0.0, 0.0)
    edge = tuple(edge)
    if prev is None:
        return edge
    if isinstance(prev, (int, float)):
        prev = (prev, prev, 0.0, 0.0)
    return tuple(a + b for a, b in zip(prev, edge))


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 60
_REPR.maxother = 60
_INF = float("inf")


def _is_key(key: Any) -> bool:
    """True for a pstats key (file, line, name)."""
    return (
        isinstance(key, tuple)
        and len(key) == 3
        and isinstance(key[0], str)
        and type(key[1]) is int
        and key[1] >= 0
        and isinstance(key[2], str)
    )


def _is_count(x: Any) -> bool:
    return type(x) is int and x >= 0


def _is_time(x: Any) -> bool:
    return type(x) in (int, float) and 0 <= x < _INF


def _entry_error(key: Any, value: Any) -> Optional[str]:
    """What is wrong with one pstats entry, or None when it is well formed (the message is
    formatted only for an entry that has a problem: files hold up to millions)."""
    if not _is_key(key):
        return f"key {_REPR.repr(key)} is not (file, line, name)"
    if not isinstance(value, tuple) or len(value) != 5:
        return (
            f"entry {_REPR.repr(key)}: expected (primitive calls, calls, tottime, cumtime, callers)"
        )
    cc, nc, tt, ct, callers = value
    if not (_is_count(cc) and _is_count(nc) and _is_time(tt) and _is_time(ct)):
        return (
            f"entry {_REPR.repr(key)}: counts and times must be non-negative finite numbers, "
            f"got {_REPR.repr(value[:4])}"
        )
    if not isinstance(callers, dict):
        return f"entry {_REPR.repr(key)}: callers are a {type(callers).__name__}, expected a dict"
    for ck, cv in callers.items():
        if not _is_key(ck):
            return f"entry {_REPR.repr(key)}: caller {_REPR.repr(ck)} is not (file, line, name)"
        if _is_count(cv):  # profile.py's bare call count
            continue
        if (
            not isinstance(cv, tuple)
            or len(cv) != 4
            or not _is_count(cv[0])
            or not _is_count(cv[1])
            or not _is_time(cv[2])
            or not _is_time(cv[3])
        ):
            return (
                f"entry {_REPR.repr(key)}: caller {_REPR.repr(ck)} has {_REPR.repr(cv)}, "
                f"expected (calls, primitive calls, tottime, cumtime)"
            )
    return None


def load_pstats_file(src: Union[str, "os.PathLike[str]"]) -> PstatsDict:
    """The pstats dictionary of a file written by ``dump_stats`` (fastprof's, cProfile's,
    profile.py's).  Raises OSError when it cannot be read, ValueError naming the file when it
    is not a well-formed profile (wrong types, negative or non-finite numbers).  The file is
    read by fastprof's own reader of marshal's format, which builds plain data only and no
    more of it than the file's size calls for: a file of ``python -m profile``, whose first
    entry is keyed by the script's code object, is refused with a ValueError that says how to
    read it through pstats."""
    path = os.fspath(src)
    raw = read_regular_file(path)
    what = f"{path}: not a profile file written by dump_stats"
    try:
        from . import _marshal_reader  # its struct loads here, not before a profiled script

        data = _marshal_reader.loads(raw)
    except ValueError as e:
        hint = ""
        if "type code 'c' " in str(e):
            hint = (
                "; `python -m profile` keys an entry by the script's code object, which this"
                " reader does not build: fastprof.Stats(pstats.Stats(path)) reads such a file"
                " through marshal, for a file you trust"
            )
        raise ValueError(f"{what} ({_one_line(e)}{hint})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} (it holds a {type(data).__name__}, expected a dict)")
    if _without_unknown_counts(data):
        import warnings  # loaded here, not before a profiled script (3.13 starts without it)

        warnings.warn(
            f"fastprof: {printable(path)} has no call counts (-1, as a sampling profiler such as "
            f"pyinstrument writes them); they are shown as 0",
            UserWarning,
            stacklevel=2,
        )
    for key, value in data.items():
        problem = _entry_error(key, value)
        if problem is not None:
            raise ValueError(f"{what}: {problem}")
    return data


def _without_unknown_counts(data: Dict[Any, Any]) -> bool:
    """Puts 0 for the call counts that a sampling profiler's file stubs out as -1 (both
    counts of an entry or of a caller; pstats reads them as numbers).  Returns whether there
    were any."""
    found = False
    for key, value in data.items():
        if not (isinstance(value, tuple) and len(value) == 5):
            continue
        cc, nc, tt, ct, callers = value
        if cc == nc == -1 and type(cc) is int and type(nc) is int:
            data[key] = value = (0, 0, tt, ct, callers)
            found = True
        if isinstance(callers, dict):
            for ck, cv in list(callers.items()):
                if isinstance(cv, tuple) and len(cv) == 4 and cv[0] == cv[1] == -1:
                    if type(cv[0]) is int and type(cv[1]) is int:
                        callers[ck] = (0, 0, cv[2], cv[3])
                        found = True
    return found


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Holder:
    """What pstats.Stats loads from: an object with create_stats() and .stats."""

    def __init__(self, stats: PstatsDict) -> None:
        self.stats = stats

    def create_stats(self) -> None:
        pass


if TYPE_CHECKING:
    Source = Union["Stats", PstatsDict, str, "os.PathLike[str]", Any]
else:
    Source = object


class Stats:
    """Call-profile results: ``Stats(*sources)`` where each source is a ``fastprof.Profile``
    (or ``cProfile.Profile``), a ``pstats.Stats``, a pstats dictionary, another ``Stats`` or
    the path of a file written by ``dump_stats`` (cProfile's too).  Several sources are summed.

    ``rows`` lists plain ``Row`` records; ``sort``, ``filter`` and ``top`` pick them;
    ``table``/``print`` show them; ``to_pstats``/``dump`` export them.  A Stats of one
    fastprof profile (a ``fastprof.Profile``, or a file with its call tree saved beside it)
    also has each thread's own table: ``threads()`` and ``for_thread(ident)``.
    """

    @quiet  # reading a live profiler records none of this reading
    def __init__(self, *sources: Source) -> None:
        self._stats: Dict[FuncKey, List[Any]] = {}
        self._order: Optional[List[FuncKey]] = None
        self.sort_keys: Tuple[str, ...] = ()
        # (total calls, primitive calls, total time) of the whole profile a filter came from
        self._whole: Optional[Tuple[int, int, float]] = None
        self._filters: Tuple[str, ...] = ()
        self._rx: Tuple["re.Pattern[str]", ...] = ()
        # the per-thread data: a CallTree, the path of a tree file not read yet, or None; and
        # how many sources were added (a sum of several has no per-thread tables)
        self._tree: Any = None
        self._stale_tree: Optional[str] = None  # a tree file found not to be this profile's
        self._nsources = 0
        for src in sources:
            self.add(src)

    # -- loading ----------------------------------------------------------------------------

    @staticmethod
    def _as_dict(src: Source) -> PstatsDict:
        """The pstats dictionary of a source; TypeError/ValueError when it is none."""
        if isinstance(src, Stats):
            return src.to_dict()
        if isinstance(src, (str, os.PathLike)):
            return load_pstats_file(src)
        if isinstance(src, dict):
            return src
        if hasattr(src, "snapshot_stats"):  # fastprof.Profile, cProfile.Profile: stays enabled
            src.snapshot_stats()
            return src.stats
        if hasattr(src, "create_stats"):  # profile.Profile
            src.create_stats()
            return src.stats
        if hasattr(src, "stats") and isinstance(src.stats, dict):  # pstats.Stats
            return src.stats
        raise TypeError(
            "Stats sources are a Profile, pstats.Stats, Stats, pstats dict or file "
            f"path; got {type(src).__name__}"
        )

    @staticmethod
    def _tree_of(src: Source) -> Any:
        """The per-thread data of a source: a CallTree, the path of the tree file saved beside
        a pstats file, a fastprof profiler (its tree is read when first asked for), or None
        (cProfile's profiles, pstats files without one)."""
        if isinstance(src, Stats):
            # a filtered Stats' table is not its tree's: no per-thread data goes with it
            return src._tree if src._nsources == 1 and not src._rx else None
        if isinstance(src, (str, os.PathLike)):
            from .tree import tree_path

            where = tree_path(src)
            return where if os.path.isfile(where) else None
        if hasattr(src, "_raw_tree") and hasattr(src, "tree"):  # fastprof.Profile: read later
            return src
        return None

    def add(self, *sources: Source) -> "Stats":
        """Adds the numbers of more sources (summing functions and callers); returns self."""
        for src in sources:
            data = self._as_dict(src)
            if isinstance(src, dict):  # the caller's own data: checked whole before any of it
                for key, value in data.items():  # is added, so an error changes nothing
                    problem = _entry_error(key, value)
                    if problem is not None:
                        raise ValueError(f"not a pstats dictionary: {problem}")
            self._nsources += max(1, src._nsources) if isinstance(src, Stats) else 1
            self._tree = self._tree_of(src) if self._nsources == 1 else None
            for key, value in data.items():
                try:
                    cc, nc, tt, ct, callers = value
                    key = (str(key[0]), int(key[1]), str(key[2]))
                except (TypeError, ValueError, IndexError):
                    raise ValueError(f"not a pstats entry: {key!r}: {value!r}") from None
                cur = self._stats.get(key)
                if cur is None:
                    cur = self._stats[key] = [0, 0, 0.0, 0.0, {}]
                cur[0] += cc
                cur[1] += nc
                cur[2] += tt
                cur[3] += ct
                mine = cur[4]
                for ck, cv in callers.items():
                    mine[ck] = _add_edge(mine.get(ck), cv)
        self._order = None
        self.sort_keys = ()
        self._whole = None
        self._filters = ()
        self._rx = ()
        return self

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "Stats":
        """Reads a file written by ``dump_stats`` (fastprof's or cProfile's)."""
        return cls(path)

    # -- rows -------------------------------------------------------------------------------

    def _keys(self) -> List[FuncKey]:
        return list(self._stats) if self._order is None else self._order

    @staticmethod
    def _row(key: FuncKey, value: List[Any]) -> Row:
        cc, nc, tt, ct, callers = value
        cl = []
        for (f, ln, n), cv in callers.items():
            if isinstance(cv, tuple) and len(cv) == 4:  # (nc, cc, tt, ct) as cProfile writes it
                cnc, ccc, ctt, cct = cv
            else:  # profile.py writes a bare call count
                cnc = ccc = int(cv)
                ctt = cct = 0.0
            cl.append(Caller(n, f, ln, cnc, ccc, ctt, cct))
        cl.sort(key=lambda c: (-c.ncalls, c.file, c.line, c.name))
        return Row(key[2], key[0], key[1], nc, cc, tt, ct, tuple(cl))

    @property
    def rows(self) -> List[Row]:
        """Every function, in the current order (insertion order until ``sort``)."""
        return [self._row(k, self._stats[k]) for k in self._keys()]

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self._stats)

    def row(self, name: str) -> Row:
        """The one row whose name is ``name`` (or whose location matches it exactly).

        KeyError when none matches, ValueError when several do.
        """
        found = [r for r in self.rows if r.name == name or r.location == name]
        if not found:
            raise KeyError(name)
        if len(found) > 1:
            raise ValueError(
                f"{len(found)} functions named {name!r}: " + ", ".join(r.location for r in found)
            )
        return found[0]

    @property
    def total_calls(self) -> int:
        """Calls of every function this Stats holds (of a filtered one, of its rows: its
        table's header shows the whole profile's)."""
        return sum(v[1] for v in self._stats.values())

    @property
    def prim_calls(self) -> int:
        """Primitive (non-recursive) calls of every function."""
        return sum(v[0] for v in self._stats.values())

    @property
    def total_tt(self) -> float:
        """The profiled time: the sum of every function's own time."""
        return sum(v[2] for v in self._stats.values())

    # -- picking rows -----------------------------------------------------------------------

    def sort(self, *keys: Union[str, int], strip_dirs: bool = False) -> "Stats":
        """Orders the rows by pstats sort keys ("cumulative", "tottime", "calls", "name",
        "file", "line", "nfl", "stdname", ...; times and counts descending); returns self.
        With ``strip_dirs`` the file keys compare base names, as pstats sorts after its
        ``strip_dirs()`` (``python -m cProfile -s filename`` does both)."""
        if not keys:
            keys = ("stdname",)
        fields = _sort_fields(keys)

        def sort_key(k: FuncKey) -> Tuple[Any, ...]:
            cc, nc, tt, ct, _ = self._stats[k]
            file = k[0]
            if strip_dirs and not (file == "~" and k[1] == 0):
                file = os.path.basename(file)
            r = Row(k[2], file, k[1], nc, cc, tt, ct, ())  # no callers: no key reads them
            out = []
            for fld in fields:
                get, desc = _FIELDS[fld]
                v = get(r)
                out.append(_Desc(v) if desc else v)
            return tuple(out)

        self._order = sorted(self._stats, key=sort_key)
        # pstats' legacy ints named as their keys ("sorted by stdname", not "by -1")
        self.sort_keys = tuple(
            _LEGACY.get(k, str(k)) if isinstance(k, int) else str(k) for k in keys
        )
        return self

    def filter(self, pattern: Union[str, "re.Pattern[str]"], *, flags: int = 0) -> "Stats":
        """A new Stats with the rows whose ``file:line(name)`` matches the regular expression
        (``re.search``), keeping the order; callers are kept whole.  Its table still shows the
        whole profile's totals, and each row's share of the whole profiled time."""
        if isinstance(pattern, str):
            try:
                rx = re.compile(pattern, flags)
            except re.error as e:
                raise ValueError(f"filter: bad regular expression {pattern!r}: {e}") from None
        elif isinstance(pattern, re.Pattern):
            rx = pattern
        else:
            raise TypeError(
                f"filter: pattern must be a str or re.Pattern, got {type(pattern).__name__}"
            )
        out = Stats()
        for k in self._keys():
            r = self._row(k, self._stats[k])
            if rx.search(r.location) or rx.search(r.name):
                v = self._stats[k]
                out._stats[k] = [v[0], v[1], v[2], v[3], dict(v[4])]
        if self._order is not None:
            out._order = list(out._stats)
        out.sort_keys = self.sort_keys
        out._whole = self._whole or (self.total_calls, self.prim_calls, self.total_tt)
        out._filters = self._filters + (rx.pattern,)
        out._rx = self._rx + (rx,)
        out._tree, out._nsources = self._tree, self._nsources
        return out

    def top(self, n: int) -> List[Row]:
        """The first ``n`` rows in the current order."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"top: n must be a non-negative int, got {n!r}")
        return self.rows[:n]

    # -- threads ----------------------------------------------------------------------------

    def call_tree(self) -> Optional["CallTree"]:
        """The calling-context tree behind the per-thread tables, or None when there is none
        (a cProfile profile, a pstats file without FILE.tree.json beside it, a sum of several
        profiles, a profiler with ``tree_nodes=0``).  A profiler's tree is read the first time
        it is asked for (once disabled, it holds what the table holds)."""
        if isinstance(self._tree, str):
            from .tree import CallTree

            where, self._tree = self._tree, CallTree.load(self._tree)
            if not self._tree.describes(
                {k: v[1] for k, v in self._stats.items()},
                {k: v[2] for k, v in self._stats.items()},
            ):
                # the pstats file was rewritten since (by cProfile, say): not its tree
                self._tree = None
                self._stale_tree = where
        elif self._tree is not None and not hasattr(self._tree, "threads"):  # a profiler
            tree = self._tree.tree()
            self._tree = tree if tree.threads or tree.merged else None
        return self._tree

    def _per_thread(self, what: str) -> "CallTree":
        tree = self.call_tree() if self._nsources == 1 else None
        if tree is None:
            stale = self._stale_tree
            if self._nsources > 1:
                why = f"it sums {self._nsources} profiles"
            elif stale is not None:
                why = (
                    f"{stale} is not this profile's call tree (their functions, call counts "
                    "or own times differ: the profile was rewritten since?)"
                )
            else:
                why = (
                    "its source recorded no call tree (a cProfile profile, or a pstats file "
                    "without the FILE.tree.json that fastprof writes beside it)"
                )
            raise ValueError(f"{what}: this Stats has no per-thread data: {why}")
        return tree

    def threads(self) -> List[ThreadInfo]:
        """The profile's threads, in the order they were first seen: each one's ident and its
        name where known.  ValueError when the Stats has no per-thread data (see
        ``call_tree``)."""
        tree = self._per_thread("threads")
        return [ThreadInfo(i, tree.names.get(i)) for i in tree.threads]

    def for_thread(self, ident: Union[int, str]) -> "Stats":
        """A Stats of thread ``ident`` alone (its ident, or its name when one thread has it):
        the functions it ran, with their calls, times and callers within that thread, derived
        from the call tree as pstats counts them.  The threads' tables sum to this Stats'
        table.  Keeps this Stats' order and filters.  ValueError when there is no per-thread
        data, no such thread, or when the call tree was capped (calls merged past the
        ``tree_nodes`` cap belong to no thread's table)."""
        tree = self._per_thread("for_thread")
        if isinstance(ident, str):
            named = [i for i, n in tree.names.items() if n == ident and i in tree.threads]
            if len(named) != 1:
                raise ValueError(
                    f"for_thread: {len(named) or 'no'} threads named {ident!r}; "
                    f"threads: {self._thread_list(tree)}"
                )
            ident = named[0]
        elif isinstance(ident, bool) or not isinstance(ident, int):
            raise TypeError(
                f"for_thread: ident must be a thread's ident (int) or name (str), "
                f"got {type(ident).__name__}"
            )
        if ident not in tree.threads:
            raise ValueError(
                f"for_thread: no thread {ident} in this profile; threads: {self._thread_list(tree)}"
            )
        if tree.merged:
            raise ValueError(
                f"for_thread: the call tree was capped ({tree.merged} calls merged past the "
                f"node cap of {tree.node_cap}); those calls belong to no thread's table, so "
                f"per-thread numbers would be wrong: profile with a larger tree_nodes="
            )
        from .tree import CallTree

        out = Stats(tree.thread_pstats(ident))
        names = {ident: tree.names[ident]} if ident in tree.names else {}
        out._tree = CallTree({ident: tree.threads[ident]}, 0, tree.node_cap, names)
        for rx in self._rx:
            out = out.filter(rx)
        if self.sort_keys:
            out.sort(*self._sort_args())
        return out

    def _sort_args(self) -> Tuple[Union[str, int], ...]:
        """The arguments ``sort`` was given (a legacy integer key back as the int)."""
        return tuple(
            int(k) if k.lstrip("-").isdigit() and len(self.sort_keys) == 1 else k
            for k in self.sort_keys
        )

    def threads_table(
        self,
        top: Optional[int] = None,
        *,
        wall: Optional[float] = None,
        strip_dirs: bool = True,
        title: Optional[str] = None,
    ) -> str:
        """Each thread's table (headed by the thread and its own time), then the merged table
        headed by the run's wall time: ``wall`` seconds, else the one ``fastprof run`` saved
        with the tree, else a note that it was not recorded (never a sum of the threads'
        times).  Sorted as this Stats is (by tottime when unsorted), ``top`` rows each.  The
        profiler's own ``disable()`` call is left out.  ValueError when there is no per-thread
        data."""
        from .report.threads_text import format_threads_report

        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise ValueError(f"top must be a non-negative int or None, got {top!r}")
        if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float))):
            raise TypeError(f"wall must be a number of seconds or None, got {wall!r}")
        tree = self._per_thread("threads_table")
        return format_threads_report(
            self,
            tree,
            wall=tree.wall if wall is None else float(wall),
            title=title,
            sort=tuple(_sort_fields(self._sort_args())) if self.sort_keys else ("tottime",),
            top=top,
            strip_dirs=strip_dirs,
        )

    def print_threads(
        self,
        top: Optional[int] = None,
        *,
        stream: Optional[TextIO] = None,
        wall: Optional[float] = None,
        strip_dirs: bool = True,
        title: Optional[str] = None,
    ) -> None:
        """Prints ``threads_table(...)`` to ``stream`` (stdout by default)."""
        out = sys.stdout if stream is None else stream
        out.write(self.threads_table(top, wall=wall, strip_dirs=strip_dirs, title=title))

    @staticmethod
    def _thread_list(tree: "CallTree") -> str:
        return ", ".join(
            f"{i} ({tree.names[i]})" if i in tree.names else str(i) for i in tree.threads
        )

    # -- showing ----------------------------------------------------------------------------

    def table(
        self,
        top: Optional[int] = None,
        *,
        strip_dirs: bool = True,
        title: Optional[str] = None,
        seconds: Optional[str] = None,
    ) -> str:
        """The text table of the first ``top`` rows (all when None); ``seconds`` replaces the
        header's "in T seconds" (say, with the run's wall time)."""
        from .report.text import format_table

        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise ValueError(f"top must be a non-negative int or None, got {top!r}")
        keys = self._keys()
        shown = keys if top is None else keys[:top]  # rows made for the rows shown only
        calls, prim, tt = self._whole or (self.total_calls, self.prim_calls, self.total_tt)
        return format_table(
            [self._row(k, self._stats[k]) for k in shown],
            nrows=len(keys),
            total_calls=calls,
            prim_calls=prim,
            total_tt=tt,
            sort_keys=self.sort_keys,
            filters=self._filters,
            strip_dirs=strip_dirs,
            title=title,
            seconds=seconds,
        )

    def print(
        self,
        top: Optional[int] = None,
        *,
        stream: Optional[TextIO] = None,
        strip_dirs: bool = True,
        title: Optional[str] = None,
    ) -> None:
        """Prints ``table(top)`` to ``stream`` (stdout by default; nothing when there is no
        stdout, as ``print()`` prints nothing then: a program run without a console)."""
        out = sys.stdout if stream is None else stream
        if out is not None:
            out.write(self.table(top, strip_dirs=strip_dirs, title=title))

    def __repr__(self) -> str:
        return (
            f"<fastprof.Stats: {len(self)} functions, {self.total_calls} calls, "
            f"{self.total_tt:.6f} s>"
        )

    # -- exporting --------------------------------------------------------------------------

    def to_dict(self) -> PstatsDict:
        """pstats' dictionary {(file, line, name): (cc, nc, tt, ct, callers)} (a copy)."""
        return {k: (v[0], v[1], v[2], v[3], dict(v[4])) for k, v in self._stats.items()}

    def _file_dict(self) -> PstatsDict:
        """to_dict as a file holds it: after a filter, each function's callers are limited to
        the functions the file has, as in every pstats file (its readers, pstats' own
        print_callers, snakeviz, gprof2dot, look each caller up)."""
        out = self.to_dict()
        if self._rx:
            for v in out.values():
                for caller in [c for c in v[4] if c not in out]:
                    del v[4][caller]
        return out

    def to_pstats(self) -> Any:
        """A ``pstats.Stats`` holding these numbers."""
        import pstats

        # typeshed names str | Profile only; pstats takes any object with create_stats() and
        # .stats (pstats.Stats.load_stats)
        return pstats.Stats(_Holder(self._file_dict()))  # type: ignore[arg-type]

    def to_callgrind(self, dest: Union[str, "os.PathLike[str]", TextIO]) -> None:
        """Writes a callgrind file (KCachegrind, QCachegrind) to a path or text stream."""
        from .report.callgrind import write_callgrind

        write_callgrind(self.to_dict(), dest)

    def dump(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes pstats' marshal file (read by pstats, snakeviz, gprof2dot, tuna), and the call
        tree beside it (FILE.tree.json, the per-thread data) when this Stats has one and is not
        filtered."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        with open(path, "wb") as f:
            marshal.dump(self._file_dict(), f)
        from .tree import save_tree

        whole = self._nsources == 1 and not self._rx  # a filtered table's tree would not match
        save_tree(path, self.call_tree() if whole else None)
