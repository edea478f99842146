"""The call profiler: ``Profile`` (a drop-in superset of ``cProfile.Profile``), ``run``,
``runctx`` and ``profile`` (decorator and context manager).

The C core (``fastprof._fastprof.Profiler``) keeps integer ticks in plain records; this module
turns them into cProfile's shapes: ``getstats()`` entries like ``_lsprof``'s and the pstats
dictionary ``{(file, line, name): (cc, nc, tt, ct, callers)}``.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
from types import CodeType, FunctionType, TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Literal,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from . import _fastprof
from ._quiet import quiet
from .keys import FuncKey, label

if TYPE_CHECKING:
    from .lines import LineProfiler
    from .tree import CallTree

__all__ = [
    "Profile",
    "ProfilerEntry",
    "ProfilerSubEntry",
    "label",
    "run",
    "runctx",
    "profile",
    "ProfileSession",
]

# The aliases are types for the checker alone: fastprof run loads this module before the
# script, and a subscript here would fill typing's caches, hiding the script's own first use
# of the same types from its profile (as cProfile shows it).
if TYPE_CHECKING:
    EdgeStats = Tuple[int, int, float, float]
    """A caller's calls of a function: (calls, primitive calls, tottime, cumtime)."""
else:
    EdgeStats = tuple

_F = TypeVar("_F", bound="Callable[..., Any]")
_R = TypeVar("_R")
if TYPE_CHECKING:
    SortArg = Union[str, int, Tuple[Union[str, int], ...]]
    """A pstats sort key (name or legacy integer), or a tuple of them."""
else:
    SortArg = object

_MONITORING = sys.version_info >= (3, 12)


class ProfilerSubEntry(NamedTuple):
    """One caller->callee edge, with the attributes of ``_lsprof.profiler_subentry``."""

    code: Union[CodeType, str]
    callcount: int
    reccallcount: int
    totaltime: float
    inlinetime: float


class ProfilerEntry(NamedTuple):
    """One function, with the attributes of ``_lsprof.profiler_entry``.

    ``calls`` lists the functions it called (``None`` when it called none), as in _lsprof.
    """

    code: Union[CodeType, str]
    callcount: int
    reccallcount: int
    totaltime: float
    inlinetime: float
    calls: Optional[List[ProfilerSubEntry]]


class Profile(_fastprof.Profiler):
    """Exact call profiler: ``Profile(timer=None, timeunit=0.0, subcalls=True, builtins=True, *,
    clock="wall", threads=True, prune_call_sites=False, tree_nodes=1_000_000)``.

    Everything ``cProfile.Profile`` offers (enable, disable, runcall, runctx, run, create_stats
    and ``.stats``, print_stats, dump_stats, getstats, context manager), with output that
    ``pstats.Stats`` reads.  ``clock`` picks the default clock ("wall", "cpu" for the thread's
    CPU time, "process_cpu"); ``threads`` profiles threads started while enabled.
    ``prune_call_sites=True`` (3.12+) is faster and loses builtins: a call site that once
    called a Python function stops reporting, so builtins called there later are not counted
    (``strict=False`` is its old name).  One ``Profile`` is enabled at a time, as with
    cProfile (see :meth:`enable`); the profilers of ``@fastprof.profile`` sessions nest.
    ``tree_nodes`` caps the calling-context tree (``tree()``), all threads together; calls
    past the cap are merged (still exact in pstats' view), 0 keeps no tree.
    """

    stats: Dict[FuncKey, Tuple[int, int, float, float, Dict[FuncKey, EdgeStats]]]
    _thread_names: Dict[int, str]
    """The names of the threads that were running when the profiler was enabled."""
    _nests: bool = False
    """True for a session's profiler: it may be enabled while other fastprof profilers are."""

    def _before_enable(self) -> None:
        """Run by ``enable()`` (the core's, so that a second ``enable()`` records as one C call,
        as cProfile's does) before it starts profiling, once it knows it may: the names of the
        threads running now, for the views.

        As ``cProfile.Profile`` on 3.12+, ``enable()`` raises ValueError while another fastprof
        call profiler is enabled (one at a time; it still runs beside cProfile, debuggers and
        coverage, taking another free sys.monitoring tool id when the profiler's is held); below
        3.12 it raises ValueError while any other profiler holds the thread's hook.  The
        profilers of ``@fastprof.profile`` sessions are the exception: sessions nest, every
        enabled one shares fastprof's one tool id, and this is not run for them (other
        sessions' profilers may be on, and would count it).
        """
        from ._threads import thread_names

        self._thread_names = {**getattr(self, "_thread_names", {}), **thread_names()}

    # -- reading the core's records ---------------------------------------------------------

    @quiet
    def tree(self) -> "CallTree":
        """The calling-context tree recorded so far: one node per distinct path of functions
        from each thread's root (see ``fastprof.tree.CallTree``)."""
        from .tree import CallTree

        return CallTree.from_profile(self)

    @quiet
    def getstats(self) -> List[ProfilerEntry]:
        """The records as ``_lsprof`` entries: times in seconds, one entry per function."""
        spt, funcs, edges = self._raw()
        calls: List[Optional[List[ProfilerSubEntry]]] = [None] * len(funcs)
        for caller, callee, nc, nrec, tt, it in edges:
            sub = ProfilerSubEntry(funcs[callee][0], nc, nrec, tt * spt, it * spt)
            lst = calls[caller]
            if lst is None:
                calls[caller] = [sub]
            else:
                lst.append(sub)
        return [
            ProfilerEntry(key, nc, nrec, tt * spt, it * spt, calls[i])
            for i, (key, nc, nrec, tt, it) in enumerate(funcs)
        ]

    @quiet
    def snapshot_stats(self) -> None:
        """Sets ``self.stats`` to pstats' dictionary, without disabling the profiler.

        Two functions with the same key (say two builtins of the same label) are summed.  A
        subclass that overrides ``getstats()`` gets the stats of what it returns, as
        cProfile's ``snapshot_stats`` builds them from ``getstats()``.
        """
        if type(self).getstats is not Profile.getstats:
            self.stats = _stats_of_entries(self.getstats())
            return
        spt, funcs, edges = self._raw()
        stats: Dict[FuncKey, Any] = {}
        keys: List[FuncKey] = []
        for key, nc, nrec, tt, it in funcs:
            fk = label(key)
            keys.append(fk)
            prev = stats.get(fk)
            if prev is None:
                stats[fk] = [nc - nrec, nc, it * spt, tt * spt, {}]
            else:
                prev[0] += nc - nrec
                prev[1] += nc
                prev[2] += it * spt
                prev[3] += tt * spt
        for caller, callee, nc, nrec, tt, it in edges:
            callers = stats[keys[callee]][4]
            ck = keys[caller]
            # pstats' callers values are (nc, cc, tt, ct): note the order differs.
            entry = (nc, nc - nrec, it * spt, tt * spt)
            prev_e = callers.get(ck)
            if prev_e is not None:
                entry = tuple(a + b for a, b in zip(prev_e, entry))
            callers[ck] = entry
        self.stats = {k: tuple(v) for k, v in stats.items()}

    def create_stats(self) -> None:
        """Disables the profiler and sets ``self.stats`` (pstats' dictionary)."""
        self.disable()
        self.snapshot_stats()

    # -- printing and saving ----------------------------------------------------------------

    def print_stats(self, sort: SortArg = -1) -> None:
        """Prints pstats' table sorted by ``sort`` (a pstats sort key, or a tuple of them)."""
        import pstats

        keys: Tuple[Any, ...] = sort if isinstance(sort, tuple) else (sort,)
        st = pstats.Stats(self)  # type: ignore[arg-type]  # pstats reads any create_stats()
        st.strip_dirs().sort_stats(*keys).print_stats()

    def dump_stats(self, file: Union[str, bytes, "os.PathLike[str]", int]) -> None:
        """Writes the stats to ``file`` in pstats' marshal format (snakeviz, gprof2dot read it),
        and the call tree beside it as FILE.tree.json (each thread's data, which pstats' format
        cannot hold: ``fastprof.Stats(file)`` and ``fastprof view`` read it)."""
        import marshal

        from ._tree_file import tree_text
        from .tree import save_tree

        with open(file, "wb") as f:
            self.create_stats()
            marshal.dump(self.stats, f)
        # from the core's records (no tree is built); none where a subclass's getstats()
        # made the table: the records are not what it holds
        own = type(self).getstats is Profile.getstats
        save_tree(file, tree_text(self) if own else None)

    # -- running code -----------------------------------------------------------------------

    def run(self, cmd: str) -> "Profile":
        """Profiles ``exec(cmd)`` in ``__main__``'s namespace; returns self."""
        import __main__

        dict_ = __main__.__dict__
        return self.runctx(cmd, dict_, dict_)

    def runctx(self, cmd: str, globals: Dict[str, Any], locals: Any) -> "Profile":
        """Profiles ``exec(cmd, globals, locals)``; returns self."""
        self.enable()
        try:
            exec(cmd, globals, locals)
        finally:
            self.disable()
        return self

    def runcall(self, func: Callable[..., _R], /, *args: Any, **kw: Any) -> _R:
        """Profiles ``func(*args, **kw)`` and returns its result."""
        self.enable()
        try:
            return func(*args, **kw)
        finally:
            self.disable()

    def __enter__(self) -> "Profile":
        self.enable()
        return self

    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.disable()


# -- module-level helpers, as in cProfile --------------------------------------------------


def _show(prof: Profile, filename: Optional[str], sort: SortArg) -> None:
    if filename is not None:
        prof.dump_stats(filename)
    else:
        prof.print_stats(sort)


def run(statement: str, filename: Optional[str] = None, sort: SortArg = -1) -> None:
    """Profiles ``exec(statement)`` in ``__main__``; saves to ``filename`` or prints the table.

    As ``cProfile.run``: a ``SystemExit`` raised by the statement ends the run quietly.
    """
    prof = Profile()
    try:
        prof.run(statement)
    except SystemExit:
        pass
    finally:
        _show(prof, filename, sort)


def runctx(
    statement: str,
    globals: Dict[str, Any],
    locals: Any,
    filename: Optional[str] = None,
    sort: SortArg = -1,
) -> None:
    """Profiles ``exec(statement, globals, locals)``; saves to ``filename`` or prints the table."""
    prof = Profile()
    try:
        prof.runctx(statement, globals, locals)
    except SystemExit:
        pass
    finally:
        _show(prof, filename, sort)


# -- the decorator / context manager -------------------------------------------------------

_REPORT_WHEN = ("exit", "call", "never")


# what sort_by takes (pstats' keys, its legacy ints -1 to 2, or a tuple of keys) and output
# (a path: str, bytes or os.PathLike)
if TYPE_CHECKING:
    _SortBy = Union[str, int, Tuple[Union[str, int], ...]]
    _Output = Optional[Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]]


class ProfileSession(_fastprof._Session):
    """What ``fastprof.profile(...)`` returns: a decorator and a context manager.

    Stats accumulate across calls (one profiler per session).  The report (a table of the
    ``top_n`` rows by ``sort_by``, or the line table with ``lines=True``) is printed to
    ``stream`` and, when ``output`` is set, the stats are written there:
    ``report="exit"`` when the program exits (decorator) or when the ``with`` block ends,
    ``report="call"`` after every call, ``report="never"`` only when asked (``.report()``).

    The switch itself (``_start``/``_stop``, ``__enter__``/``__exit__`` and the wrapper of a
    decorated function) is the C base class's: nested and concurrent calls keep the profiler
    on, none of fastprof's own frames runs while it is on, and every exit turns it off, a
    RecursionError on an exhausted stack included.
    """

    if TYPE_CHECKING:
        # the C base class's __enter__ gives the session's profiler (no Python frame runs)
        def __enter__(self) -> "Union[Profile, LineProfiler]": ...

    def __init__(
        self,
        *,
        sort_by: _SortBy = "cumulative",
        top_n: Optional[int] = 30,
        builtins: bool = True,
        lines: bool = False,
        output: _Output = None,
        report: str = "exit",
        clock: Literal["wall", "cpu", "process_cpu"] = "wall",
        threads: bool = True,
        stream: Any = None,
    ) -> None:
        _check_sort_by(sort_by)
        if top_n is not None and (
            isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1
        ):
            raise ValueError(f"top_n must be a positive int or None, got {top_n!r}")
        if report not in _REPORT_WHEN:
            raise ValueError(f"report must be one of {_REPORT_WHEN}, got {report!r}")
        if output is not None:
            if not isinstance(output, (str, bytes, os.PathLike)):
                raise TypeError(
                    f"output must be a path (str, bytes or os.PathLike), got {type(output).__name__}"
                )
            output = os.fsdecode(os.fspath(output))
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise TypeError(f"stream must have a write() method, got {type(stream).__name__}")
        if lines and (clock != "wall" or builtins is not True or threads is not True):
            raise ValueError(
                "clock, builtins and threads apply to call profiles; lines=True times the "
                "lines of the decorated functions (leave them out)"
            )
        self.sort_by = sort_by
        self.top_n = top_n
        self.lines = bool(lines)
        self.output = output
        self.when = report
        self.stream = stream
        if self.lines:
            self.profiler = _line_profiler()
        else:
            self.profiler = Profile(builtins=builtins, clock=clock, threads=threads)
            self.profiler._nests = True  # sessions nest (one shared tool id on 3.12+)
        self._atexit = False
        self._decorated: List[str] = []  # what the report's title names
        if report != "call":
            # nothing to do when a call ends: no frame of it under an outer session's profiler
            object.__setattr__(self, "_call_ended", None)  # the C base skips a None hook

    # -- what the C base calls once the last open call or block has ended ------------------

    def _call_ended(self) -> None:
        if self.when == "call":
            self.report()

    def _block_ended(self) -> None:
        if self.when != "never":
            self.report()

    def _register_exit_report(self) -> None:
        if not self._atexit and self.when == "exit":
            self._atexit = True
            atexit.register(self._exit_report)

    # -- decorator --------------------------------------------------------------------------

    def __call__(self, func: _F) -> _F:
        if not callable(func):
            raise TypeError(f"fastprof.profile decorates a callable, got {type(func).__name__}")
        if isinstance(func, type):  # as line_profiler's @profile: the class's own methods
            return self._wrap_class(func)  # type: ignore[return-value]
        if self.lines:
            self.profiler.add_function(func)

        # C: the switch runs no Python frame while the profiler is on.  A coroutine function's
        # calls return an awaitable (C too) that turns the profiler on at the coroutine's first
        # step and off at its last; other tasks that run while it awaits are profiled too.
        import inspect

        coroutine = inspect.iscoroutinefunction(func)
        wrapper: Any = functools.update_wrapper(_fastprof._Guarded(self, func, coroutine), func)
        if coroutine:
            _mark_coroutine_function(wrapper, func)
        elif inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            _mark_function_like(wrapper, func)  # a pytest yield fixture stays one, say
        wrapper.profiler = self.profiler
        self._decorated.append(_where(func))
        self._register_exit_report()
        return wrapper

    def _wrap_class(self, cls: type) -> type:
        """cls, with the functions of its own body (plain, static and class methods, property
        accessors) replaced in place by this session's wrappers, as line_profiler's
        ``@profile`` treats a class: it stays the class (``isinstance``, subclassing).
        Returns cls."""
        prefix = cls.__qualname__ + "."

        def own(f: Any) -> bool:
            return isinstance(f, FunctionType) and f.__qualname__.startswith(prefix)

        def wrap(f: Any) -> Any:
            return self(f) if own(f) else f

        for name, member in list(vars(cls).items()):
            if isinstance(member, (staticmethod, classmethod)):
                new: Any = type(member)(wrap(member.__func__)) if own(member.__func__) else None
            elif isinstance(member, property):
                accessors = (member.fget, member.fset, member.fdel)
                new = None
                if any(own(a) for a in accessors):
                    fget, fset, fdel = (wrap(a) for a in accessors)
                    new = type(member)(fget, fset, fdel, member.__doc__)
            else:
                new = self(member) if own(member) else None
            if new is not None:
                setattr(cls, name, new)
        self._register_exit_report()
        return cls

    # -- results ----------------------------------------------------------------------------

    @quiet
    def stats(self) -> Any:
        """The call stats so far as a ``fastprof.Stats`` (not with ``lines=True``)."""
        from .stats import Stats

        if self.lines:
            raise TypeError("stats() is for call profiles; with lines=True use .profiler")
        return Stats(self.profiler)

    def _exit_report(self) -> None:
        if self.when != "exit":
            return
        try:
            self.report()
        except OSError as exc:
            # at exit a traceback says less than this: the table was printed (report() prints
            # before it raises), only the file is missing
            print(f"fastprof: {exc}", file=sys.stderr)

    @quiet
    def report(self) -> None:
        """Prints the table and writes ``output`` when set, for what was profiled so far.
        When ``output`` cannot be written, the table is still printed, then OSError (naming
        ``output``) is raised."""
        stream = self.stream if self.stream is not None else sys.stdout  # None: no console
        if self.lines:
            failed = self._write(self.profiler.dump_stats)
            if stream is not None:
                if _accepts_stream(self.profiler.print_stats):
                    self.profiler.print_stats(stream=stream)
                else:
                    self.profiler.print_stats()
        else:
            st = self.stats()  # a snapshot: the profiler stays as it is
            failed = self._write(st.dump)
            if st.rows:
                sort = self.sort_by if isinstance(self.sort_by, tuple) else (self.sort_by,)
                # each exit report says whose it is, as profilehooks' does
                who = ", ".join(self._decorated)
                title = f"@fastprof.profile: {who}" if self._decorated else None
                st.sort(*sort).print(top=self.top_n, stream=stream, title=title)
        if failed is not None:
            raise OSError(
                failed.errno,
                f"output={os.fspath(self.output)!r} could not be written: "  # type: ignore[arg-type]
                f"{failed.strerror or failed}",
            ) from failed

    def _write(self, dump: Callable[[Any], Any]) -> Optional[OSError]:
        """dump(output) when output is set; returns the OSError it raised, or None."""
        if self.output is None:
            return None
        try:
            dump(self.output)
        except OSError as exc:
            return exc
        return None


def _stats_of_entries(entries: Sequence[Any]) -> Dict[FuncKey, Any]:
    """pstats' dictionary of ``_lsprof``-shaped entries (code, callcount, reccallcount,
    totaltime, inlinetime, calls): a function's callers from the sub-entries of the entries
    that call it; keys that repeat are summed."""
    stats: Dict[FuncKey, List[Any]] = {}
    for e in entries:
        key = label(e.code)
        row = stats.setdefault(key, [0, 0, 0.0, 0.0, {}])
        row[0] += e.callcount - e.reccallcount
        row[1] += e.callcount
        row[2] += e.inlinetime
        row[3] += e.totaltime
    for e in entries:
        caller = label(e.code)
        for sub in e.calls or ():
            callee = stats.get(label(sub.code))
            if callee is None:  # a callee the subclass left out: no row to list it under
                continue
            # pstats' callers values are (nc, cc, tt, ct)
            entry = (
                sub.callcount,
                sub.callcount - sub.reccallcount,
                sub.inlinetime,
                sub.totaltime,
            )
            prev = callee[4].get(caller)
            if prev is not None:
                entry = tuple(a + b for a, b in zip(prev, entry))
            callee[4][caller] = entry
    return {k: tuple(v) for k, v in stats.items()}


def _mark_coroutine_function(wrapper: Any, func: Any) -> None:
    """Makes ``asyncio.iscoroutinefunction`` and (3.10+) ``inspect.iscoroutinefunction`` true
    of the C wrapper of the coroutine function ``func``: the function-like attributes inspect
    reads (the code object says CO_COROUTINE), inspect's own mark on 3.12+, asyncio's mark
    below 3.10 (where inspect accepts real functions only)."""
    _mark_function_like(wrapper, func)
    if sys.version_info >= (3, 12):
        import inspect

        inspect.markcoroutinefunction(wrapper)
    elif sys.version_info < (3, 10):
        from asyncio import coroutines

        wrapper._is_coroutine = coroutines._is_coroutine  # type: ignore[attr-defined]


def _mark_function_like(wrapper: Any, func: Any) -> None:
    """Gives the C wrapper of func the function-like attributes inspect reads (3.10+), so that
    ``inspect.isgeneratorfunction`` / ``isasyncgenfunction`` say of it what they say of func
    (its code object's flags)."""
    code = getattr(func, "__code__", None)
    if isinstance(code, CodeType):
        wrapper.__code__ = code
        wrapper.__defaults__ = getattr(func, "__defaults__", None)
        wrapper.__kwdefaults__ = getattr(func, "__kwdefaults__", None)


def _where(func: Any) -> str:
    """func's name and place, as a report's title names it: ``qualname (file:line)``."""
    code = getattr(_unwrapped(func), "__code__", None)
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    if code is None:
        return str(name)
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _unwrapped(func: Any) -> Any:
    """func without the wrappers functools.wraps marks (``__wrapped__``)."""
    import inspect

    try:
        return inspect.unwrap(func)
    except ValueError:  # a cycle of __wrapped__
        return func


def _check_sort_by(sort_by: Any) -> None:
    """Raises TypeError or ValueError (naming sort_by) unless it is a pstats sort key (or one
    of pstats' legacy ints -1, 0, 1, 2) or a non-empty tuple of them."""
    from .stats import _LEGACY, SORT_KEYS

    keys = sort_by if isinstance(sort_by, tuple) else (sort_by,)
    if len(keys) == 1 and not isinstance(keys[0], bool) and keys[0] in _LEGACY:
        return
    if not keys or not all(isinstance(k, str) for k in keys):
        raise TypeError(
            f"sort_by must be a pstats sort key (str) or a tuple of them, got {sort_by!r}"
        )
    bad = [k for k in keys if k not in SORT_KEYS]
    if bad:
        raise ValueError(f"sort_by: unknown key {bad[0]!r}; expected one of {', '.join(SORT_KEYS)}")


def _accepts_stream(fn: Callable[..., Any]) -> bool:
    try:
        import inspect

        return "stream" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _line_profiler() -> Any:
    """A fresh ``fastprof.lines.LineProfiler``, or a clear error while it is unavailable."""
    try:
        from .lines import LineProfiler

        return LineProfiler()
    except NotImplementedError as e:  # the line profiler part is not built yet
        raise NotImplementedError(f"lines=True needs fastprof.lines: {e}") from None


# the options are ProfileSession's keywords: a misspelt one is a type error, not Any
@overload
def profile(
    func: _F,
    *,
    sort_by: _SortBy = ...,
    top_n: Optional[int] = ...,
    builtins: bool = ...,
    lines: bool = ...,
    output: _Output = ...,
    report: str = ...,
    clock: Literal["wall", "cpu", "process_cpu"] = ...,
    threads: bool = ...,
    stream: Any = ...,
) -> _F: ...


@overload
def profile(
    func: None = None,
    *,
    sort_by: _SortBy = ...,
    top_n: Optional[int] = ...,
    builtins: bool = ...,
    lines: bool = ...,
    output: _Output = ...,
    report: str = ...,
    clock: Literal["wall", "cpu", "process_cpu"] = ...,
    threads: bool = ...,
    stream: Any = ...,
) -> "ProfileSession": ...


def profile(func: Optional[_F] = None, **options: Any) -> Any:
    """Profile a function (``@profile`` or ``@profile(sort_by=..., top_n=..., builtins=...,
    lines=..., output=..., report=...)``) or a block (``with profile(...) as p:``).

    Stats accumulate across calls; see ``ProfileSession`` for the options.
    """
    if func is None:
        return ProfileSession(**options)
    if not callable(func):
        raise TypeError(
            f"fastprof.profile decorates a callable, got {type(func).__name__}; "
            f"pass options as keywords: profile(sort_by=...)"
        )
    return ProfileSession(**options)(func)
