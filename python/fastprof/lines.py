"""Line-by-line timing: ``fastprof.LineProfiler``.

Only registered functions pay.  On Python 3.12+ the hooks are sys.monitoring LINE and frame
events set as *local* events on the registered code objects (plus the global PY_UNWIND and
PY_THROW, which sys.monitoring cannot set locally), so other code runs at full speed.  On
3.9-3.11 a C trace function is installed and line events are switched off in frames of code
that is not registered.  Results have line_profiler's shape: ``get_stats().timings`` is
``{(filename, first_lineno, name): [(lineno, hits, time), ...]}`` with ``.unit`` seconds
per time unit.
"""

from __future__ import annotations

import _thread
import dis
import functools
import importlib
import importlib.util
import inspect
import io
import os
import reprlib
import sys
import types
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
)

from . import _fastprof
from ._files import read_regular_file
from ._lines_explicit import ExplicitProfiler
from ._lines_wrap import (
    Wrapping,
    is_c_callable,
    is_compiled_wrapper,
    same_module,
    underlying,
    warn,
)
from .keys import FuncKey
from .report.lines_text import show_text

__all__ = [
    "LineProfiler",
    "LineStats",
    "code_key",
    "load_stats",
    "kernprof_builtin",
    "resolve_function",
    "profile",
]

_MONITORING = sys.version_info >= (3, 12)
_T = TypeVar("_T")  # what the decorator takes and gives back: a function stays its type
_TOOL_NAME = "fastprof-lines"
# Code objects of comprehensions and generator expressions are not registered on their own:
# their time is charged to the line of the registered function that runs them, as 3.12+
# does anyway where comprehensions are inlined (the functions and lambdas defined inside them
# are registered).
_SKIPPED_NESTED = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

Key = FuncKey  # a function's pstats key
if TYPE_CHECKING:  # a type for the checker alone: see keys.FuncKey
    LineTiming = Tuple[int, int, int]
else:
    LineTiming = tuple


def code_key(code: types.CodeType) -> Key:
    """The key of code's timings, line_profiler 5.1's: (filename, first_lineno, name), the
    name being the qualified name (``co_qualname``, ``K.meth``, ``f.<locals>.inner``) on
    Python 3.11+ and the bare ``co_name`` below, where code objects have no qualified name."""
    return (code.co_filename, code.co_firstlineno, getattr(code, "co_qualname", code.co_name))


class LineStats:
    """Line timings: ``timings`` maps (filename, first_lineno, name) to [(lineno, hits,
    time)], time in units of ``unit`` seconds (line_profiler's LineStats shape)."""

    def __init__(self, timings: Dict[Key, List[LineTiming]], unit: float) -> None:
        self.timings = timings
        self.unit = unit

    def __repr__(self) -> str:
        return f"LineStats({len(self.timings)} functions, unit={self.unit:g})"

    def __eq__(self, other: object) -> bool:
        """Equal timings and unit; any object with both (line_profiler's LineStats) compares."""
        try:
            return bool(self.timings == other.timings and self.unit == other.unit)  # type: ignore[attr-defined]
        except AttributeError:
            return NotImplemented

    def total_time(self, key: Key) -> float:
        """Seconds charged to the lines of one function."""
        return sum(t[2] for t in self.timings.get(key, ())) * self.unit

    def __add__(self, other: Any) -> "LineStats":
        """The two added up (line_profiler's ``+``): hits add, times too, in the coarser of
        the two units.  other may be any object with ``timings`` and ``unit`` (a
        line_profiler LineStats)."""
        if not _stats_like(other):
            return NotImplemented
        return LineStats.from_stats_objects(self, other)

    def __iadd__(self, other: Any) -> "LineStats":
        if not _stats_like(other):
            return NotImplemented
        total = LineStats.from_stats_objects(self, other)
        self.timings, self.unit = total.timings, total.unit
        return self

    @classmethod
    def from_stats_objects(cls, stats: Any, *more: Any) -> "LineStats":
        """One LineStats adding up several (fastprof's, line_profiler's, or any object with
        ``timings`` and ``unit``): per (function, line), hits summed and times summed in the
        largest unit among them, rounded to whole units of it (line_profiler's aggregation)."""
        every = [stats, *more]
        for i, one in enumerate(every):
            if not _stats_like(one):
                raise TypeError(
                    f"stats[{i}] must be a LineStats (an object with timings and unit), "
                    f"not {type(one).__name__}"
                )
        unit = max(one.unit for one in every)
        merged: Dict[Key, Dict[int, List[Any]]] = {}
        for one in every:
            scale = one.unit / unit
            for key, rows in one.timings.items():
                lines = merged.setdefault(key, {})
                for lineno, nhits, time in rows:
                    acc = lines.setdefault(lineno, [0, 0])
                    acc[0] += nhits
                    acc[1] += time * scale if scale != 1 else time
        # as line_profiler's: times of several stats are whole units of the largest one
        whole: Callable[[Any], Any] = (lambda t: int(round(t))) if more else (lambda t: t)
        timings = {
            key: [(ln, h, whole(t)) for ln, (h, t) in sorted(lines.items())]
            for key, lines in merged.items()
        }
        return cls(timings, unit)

    @classmethod
    def from_files(
        cls, path: "str | os.PathLike[str]", *paths: "str | os.PathLike[str]"
    ) -> "LineStats":
        """The stats of one or more .lprof files added up (read as ``load_stats`` does:
        no code of the file runs)."""
        return cls.from_stats_objects(*(_load_one(p) for p in (path, *paths)))

    def to_file(self, path: "str | os.PathLike[str]") -> None:
        """Write these stats as a .lprof file: the pickle kernprof writes, a line_profiler
        ``LineStats`` of these timings and unit, so that line_profiler's readers load it
        without fastprof (and fastprof.lines.load_stats without line_profiler)."""
        from ._lprof_pickle import lprof_bytes

        with open(path, "wb") as f:
            f.write(lprof_bytes(self.timings, self.unit))

    def print(
        self,
        stream: Optional[IO[str]] = None,
        output_unit: Optional[float] = None,
        stripzeros: bool = False,
        details: bool = True,
        summarize: bool = False,
        sort: bool = False,
        rich: bool = False,
        *,
        config: Any = None,
    ) -> None:
        """Print kernprof's table (line_profiler's options; rich and config are accepted
        and the output stays plain text); nothing when there is no stdout (a program run
        without a console), as ``print()``."""
        if stream is None and sys.stdout is None:
            return
        show_text(
            self.timings,
            self.unit,
            output_unit,
            stream,
            stripzeros,
            summarize,
            details=details,
            sort=sort,
        )


def _stats_like(obj: Any) -> bool:
    """Whether obj has line_profiler's stats shape: a ``timings`` mapping and a ``unit``."""
    return isinstance(getattr(obj, "timings", None), Mapping) and isinstance(
        getattr(obj, "unit", None), (int, float)
    )


_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxstring = 60
_REPR.maxother = 60
# Line numbers and counts beyond this are not a real profile's.
_MAX_LINENO = 2**31 - 1


def _check_timings(timings: Any) -> Dict[Key, List[LineTiming]]:
    """timings as a fresh {(filename, first_lineno, name): [(lineno, hits, time)]}; raises
    ValueError saying what is wrong (times may be int or float, as line_profiler writes)."""
    if not isinstance(timings, dict):
        raise ValueError(f"timings is a {type(timings).__name__}, expected a dict")
    out: Dict[Key, List[LineTiming]] = {}
    for key, rows in timings.items():
        if (
            not isinstance(key, tuple)
            or len(key) != 3
            or not isinstance(key[0], str)
            or type(key[1]) is not int
            or not isinstance(key[2], str)
            or not 0 <= key[1] <= _MAX_LINENO
        ):
            raise ValueError(f"timings key {_short(key)} is not (filename, first_lineno, name)")
        if not isinstance(rows, (list, tuple)):
            raise ValueError(
                f"timings of {_short(key)} are a {type(rows).__name__}, "
                f"expected a list of (lineno, hits, time)"
            )
        checked: List[Any] = []
        for row in rows:
            if (
                not isinstance(row, (tuple, list))
                or len(row) != 3
                or type(row[0]) is not int
                or type(row[1]) is not int
                or type(row[2]) not in (int, float)
                or not 0 <= row[0] <= _MAX_LINENO
                or row[1] < 0
                or not 0 <= row[2] < float("inf")
            ):
                raise ValueError(
                    f"timings of {_short(key)}: {_short(row)} is not "
                    f"(lineno, hits, time) with non-negative numbers"
                )
            checked.append((row[0], row[1], row[2]))
        out[key] = checked
    return out


def _short(value: Any) -> str:
    """A short repr of value (nesting and lengths cut; control characters escaped)."""
    return _REPR.repr(value)


def load_stats(path: "str | os.PathLike[str]", *paths: "str | os.PathLike[str]") -> LineStats:
    """Read stats written by ``LineProfiler.dump_stats`` (or line_profiler's ``.lprof``);
    several files are added up (``LineStats.from_stats_objects``), as line_profiler's
    ``load_stats`` does.

    The file is a pickle, but it is read without running code: only a LineStats object
    (fastprof's or line_profiler's class name) or a {"timings", "unit"} dict of plain data is
    accepted.  Raises OSError when the file cannot be read, ValueError naming the file when it
    does not hold line timings."""
    if paths:
        return LineStats.from_stats_objects(*(_load_one(p) for p in (path, *paths)))
    return _load_one(path)


def _load_one(path: "str | os.PathLike[str]") -> LineStats:
    """load_stats of one file."""
    name = os.fspath(path)
    from ._lprof_pickle import PickledLineStats, unpickle

    with io.BytesIO(read_regular_file(name)) as f:
        try:
            data = unpickle(f)
        except RecursionError:
            raise ValueError(f"{name}: not a line timings file (nested too deeply)") from None
        except MemoryError:
            raise ValueError(f"{name}: not a line timings file (too large)") from None
        except Exception as e:  # UnpicklingError, EOFError, and what odd opcodes raise
            raise ValueError(f"{name}: not a line timings file ({_reason(e)})") from None
    if isinstance(data, PickledLineStats):
        data = data.state
    if not isinstance(data, dict) or "timings" not in data or "unit" not in data:
        raise ValueError(
            f"{name}: does not hold line timings (expected a LineStats with timings and unit)"
        )
    unit = data["unit"]
    if type(unit) not in (int, float) or not 0 < unit < float("inf"):
        raise ValueError(f"{name}: unit is {_short(unit)}, expected a positive number of seconds")
    try:
        timings = _check_timings(data["timings"])
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return LineStats(timings, float(unit))


def _reason(exc: BaseException) -> str:
    """One line saying why reading failed."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _code_start(code: types.CodeType) -> int:
    """Return the offset of code's first RESUME on 3.12+ (0 below): a generator or coroutine
    thrown into before its first step reports an offset before it, on no line of its body."""
    if sys.version_info < (3, 12):
        return 0
    return next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)


def _code_lines(code: types.CodeType) -> Tuple[int, int]:
    """The smallest and largest line number of code (its first line included)."""
    if hasattr(code, "co_lines"):
        lines = [ln for _, _, ln in code.co_lines() if ln is not None]
    else:
        lines = [ln for _, ln in dis.findlinestarts(code)]
    lines.append(code.co_firstlineno)
    return min(lines), max(lines)


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """The code objects of functions, lambdas and classes defined inside code, at any depth
    (inside comprehensions and generator expressions too, which are not yielded)."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name not in _SKIPPED_NESTED:
                yield const
            yield from _nested_codes(const)


def _unwrap(func: Any, argname: str = "func") -> List[types.FunctionType]:
    """The plain functions behind func: the function the user wrote under decorators,
    methods, classmethod/staticmethod, property accessors and functools.partial."""
    if isinstance(func, property):
        return [
            f
            for acc in (func.fget, func.fset, func.fdel)
            if acc is not None
            for f in _unwrap(acc, argname)
        ]
    if isinstance(func, (classmethod, staticmethod)):
        return _unwrap(func.__func__, argname)
    if isinstance(func, functools.partial):
        return _unwrap(func.func, argname)
    if isinstance(func, type):  # a class: the functions defined in its body
        found: List[types.FunctionType] = []
        for value in vars(func).values():
            try:
                found.extend(f for f in _unwrap(value, argname) if f not in found)
            except TypeError:
                continue
        return found
    if isinstance(func, types.MethodType):
        return _unwrap(func.__func__, argname)
    if isinstance(func, functools.cached_property):
        return _unwrap(func.func, argname)
    if not isinstance(func, types.FunctionType) and hasattr(func, "__wrapped__"):
        inner = _unwrap_wrapped(func, argname)
        if not inner:  # a C wrapper of C code (functools.lru_cache(math.sqrt))
            warn(
                f"{_short(func)} wraps only code implemented in C: it has no lines to time",
                stacklevel=3,
            )
        return inner
    if isinstance(func, types.FunctionType):
        # the function the user wrote, under decorators that set __wrapped__ (followed while
        # it leads to Python code: a wrapper made with functools.wraps(math.sqrt) is timed)
        return _unwrap_wrapped(func, argname) or [func]
    raise TypeError(
        f"{argname} must be a Python function, method, property, classmethod, "
        f"staticmethod or class (or a decorator's wrapper of one), not "
        f"{type(func).__name__}"
    )


def _unwrap_wrapped(func: Any, argname: str) -> List[types.FunctionType]:
    """The Python functions behind ``func.__wrapped__`` (followed down the chain, as
    inspect.unwrap does), [] when there is none or it leads to no Python code."""
    inner = getattr(func, "__wrapped__", None)
    if inner is None or inner is func:
        return []
    seen = {id(func)}
    while isinstance(inner, types.FunctionType):  # plain decorators: no recursion needed
        if id(inner) in seen:  # a __wrapped__ cycle: inspect.unwrap's ValueError
            raise ValueError(f"{argname}: wrapper loop when unwrapping {_short(func)}")
        seen.add(id(inner))
        deeper = getattr(inner, "__wrapped__", None)
        if deeper is None or deeper is inner:
            return [inner]
        if not isinstance(deeper, types.FunctionType):
            return _unwrap_wrapped(inner, argname) or [inner]
        inner = deeper
    try:
        return _unwrap(inner, argname)
    except TypeError:  # C code, or no callable at all
        return []


def _code_qualname_walk(code: types.CodeType, prefix: str) -> Iterator[Tuple[str, types.CodeType]]:
    """(qualname, code) of every function and class body code nested in a module's code."""
    for const in code.co_consts:
        if not isinstance(const, types.CodeType) or const.co_name in _SKIPPED_NESTED:
            continue
        qual = getattr(const, "co_qualname", None) or (prefix + const.co_name)
        yield qual, const
        is_function = bool(const.co_flags & inspect.CO_NEWLOCALS)
        yield from _code_qualname_walk(const, qual + (".<locals>." if is_function else "."))


def _check_scoping(policy: Any) -> None:
    """Raises ValueError unless policy is None (line_profiler's default scoping)."""
    if policy is not None:
        raise ValueError(
            f"scoping_policy must be None (the members of the class or module's "
            f"own module), not {_short(policy)}"
        )


class _LegacyState:
    """Below 3.12: the tracer whose C trace function is installed (it feeds the others enabled
    meanwhile) and the threading.settrace hook to put back when the last one is disabled.
    Only tracers are held, never a LineProfiler: one dropped while enabled is freed, and its
    ``__del__`` removes the hooks."""

    driver: Optional[Any] = None  # a _fastprof.LineTracer
    thread_prev: Any = None
    thread_hook: Any = None  # the bootstrap fastprof gave threading.settrace
    owner: Optional[int] = None  # the ident of the thread that installed the driver
    settrace_prev: Any = None  # sys.settrace as it was before the driver was installed
    settrace_hook: Any = None  # the sys.settrace fastprof put in its place meanwhile


def _threading() -> types.ModuleType:
    """The threading module, loaded on first use (below 3.12 only: there the profiler sets its
    hook for new threads)."""
    import threading

    return threading


def _threading_gettrace() -> Any:
    """threading's settrace hook (threading.gettrace() on 3.10+)."""
    threading = _threading()
    get = getattr(threading, "gettrace", None)
    return get() if get is not None else getattr(threading, "_trace_hook", None)


def _settrace_quiet(install: Callable[[], Any]) -> bool:
    """Runs install (a trace function's installation in a new thread); False when Python
    refused it: 3.11 and below refuse while another thread is inside sys.settrace with an
    audit hook on, and the thread then goes untraced rather than failing before its target
    runs."""
    try:
        install()
    except RuntimeError:
        return False
    return True


def _legacy_bootstrap(tracer: Any, prev: Any) -> Callable[[Any, str, Any], None]:
    """The threading.settrace hook below 3.12: in a new thread, installs the hook that was
    there before as threading would (the thread's trace function, seeing this first call:
    a user's hook, a coverage tool's); when that leaves the thread without a trace function,
    installs the C trace of tracer (a thread's trace function is never replaced)."""

    def bootstrap(frame: Any, event: str, arg: Any) -> Any:
        local = None
        if prev is not None:
            if not _settrace_quiet(lambda: sys.settrace(prev)):
                return None
            local = prev(frame, event, arg)
        current = sys.gettrace()
        if current is None or current is bootstrap:
            if tracer._active():
                _settrace_quiet(tracer._install_trace)
            elif current is not None:
                _settrace_quiet(lambda: sys.settrace(None))
            return None
        return local

    return bootstrap


def _settrace_unmuting(prev: Callable[[Any], None]) -> Callable[[Any], None]:
    """sys.settrace while a LineProfiler is on below 3.12: the trace function mutes the frames
    of code it does not time (f_trace_lines); before another trace function replaces it in a
    thread (pdb.set_trace(), breakpoint(), a coverage tool, sys.settrace(None)), their line
    events are turned back on, so that one stops or counts on the next line as without
    fastprof.  It is sys.settrace only while the profiler is on: nothing is left behind.  A C
    callable (a tracer being installed sees no frame of fastprof's), made once per prev: a
    decorated function turns the profiler on at every outermost call."""
    if _UNMUTING and _UNMUTING[0] is prev:
        return _UNMUTING[1]  # type: ignore[no-any-return,unused-ignore]
    settrace = _fastprof.LineTracer._settrace_unmuting(prev)
    _UNMUTING[:] = [prev, settrace]
    return settrace


# The state below outlives a reload of this module (importlib.reload while a profiler is on
# must not lose the hooks it has to take out).
# [prev, _settrace_unmuting(prev)] once made: compared by identity (any callable may be prev)
_UNMUTING: List[Any] = globals().get("_UNMUTING", [])
_LEGACY: _LegacyState = globals().get("_LEGACY") or _LegacyState()
# held to switch any LineProfiler on or off (its enable count, its tool id, _LEGACY): threads
# calling decorated functions at once switch one at a time
_SWITCH: "_thread.RLock" = globals().get("_SWITCH") or _thread.RLock()
# [switches under way]: only the thread holding _SWITCH can be inside one, so a count above 0
# seen under the lock means this thread called back into the switch (a signal handler)
_SWITCHING: List[int] = globals().get("_SWITCHING") or [0]


def _retried(step: Callable[[], Any]) -> Optional[BaseException]:
    """Runs step, a step of taking a hook out that must not be skipped; when an exception
    stops it (a KeyboardInterrupt that a signal raised inside it, say), runs it once more (that
    signal was handled).  Returns the first run's exception, or None when it finished."""
    try:
        step()
        return None
    except BaseException as exc:
        try:
            step()
        except BaseException:
            pass  # the first exception is the one to report
        return exc


def _switch(what: str, step: Callable[[], None]) -> None:
    """Runs step (the body of enable() or disable()) holding _SWITCH, with the mark of a
    switch under way set; RuntimeError when one is under way in this thread already (a signal
    handler calling enable() or disable() in the middle of another's).  Returns None."""
    with _SWITCH:
        if _SWITCHING[0]:
            raise RuntimeError(
                f"cannot {what} a LineProfiler while this thread is inside another's enable() "
                "or disable() (from a signal handler or a finalizer)"
            )
        _SWITCHING[0] += 1
        try:
            step()
        finally:
            _SWITCHING[0] -= 1


def _legacy_hook_lost(tracer: Any) -> Optional[str]:
    """Below 3.12, before tracer is stopped: how the thread that installed it as the driver
    lost its trace function ("removed", "taken by ..."), when this is that thread and it did;
    else None."""
    if _LEGACY.driver is not tracer or _LEGACY.owner != _thread.get_ident():
        return None
    current = sys.gettrace()
    if current is tracer:
        return None
    return "removed" if current is None else f"taken by {_short(current)}"


class LineProfiler(Wrapping):
    """Time each line of the registered functions.

    ``LineProfiler(*funcs)`` registers funcs; ``add_function`` and ``add_module`` add more.
    Use ``enable()``/``disable()``, ``with profiler:``, ``runcall``, or ``@profiler`` (which
    turns profiling on while the decorated function runs).  ``get_stats()`` gives
    line_profiler-shaped results, ``print_stats()`` kernprof's table.
    """

    def __init__(
        self, *funcs: Any, _timer: Optional[Callable[[], int]] = None, _timer_unit: float = 1e-9
    ) -> None:
        old = getattr(self, "_tracer", None)
        if old is not None and (old.enabled or self._tool is not None or _LEGACY.driver is old):
            # as Profile.__init__: a new tracer would leave the enabled one's hooks behind
            raise RuntimeError("cannot re-initialise an enabled LineProfiler: disable() it first")
        if _timer is not None and not callable(_timer):
            raise TypeError(
                f"_timer must be a callable returning an int, not {type(_timer).__name__}"
            )
        if not (_timer_unit > 0 and _timer_unit < float("inf")):
            raise ValueError(
                f"_timer_unit must be a positive number of seconds, not {_timer_unit!r}"
            )
        self._tracer = _fastprof.LineTracer(_timer)
        self._timer, self._timer_unit = _timer, _timer_unit
        if _timer is not None:
            self._unit = float(_timer_unit)
        else:
            self._unit = _fastprof.LineTracer.seconds_per_tick()
        self.functions: List[types.FunctionType] = []
        # the functions add_function took, in this profiler (a companion shares functions):
        # their code was registered then, so one whose code is not now was swapped
        self._added: List[types.FunctionType] = []
        self._enable_count = 0
        self._tool: Optional[int] = None
        # profilers whose timings this one reports with its own (kernprof_builtin's)
        self._companions: List["LineProfiler"] = []
        for func in funcs:
            self.add_function(func)

    # --- registration -------------------------------------------------------------------

    def _add_code(self, code: types.CodeType) -> bool:
        first, last = _code_lines(code)
        added = bool(self._tracer.add_code(code, first, last, _code_start(code)))
        if added and self._tool is not None:
            self._set_local_events(code)
        return added

    def add_function(self, func: Any) -> None:
        """Register func (and the functions and lambdas nested in it) for line timing.

        Decorated functions are unwrapped to the function the user wrote; methods,
        classmethods, staticmethods, properties and classes (every function defined in the
        class body) are accepted.  Each function is appended to ``functions`` (twice when
        added twice, as line_profiler does).  A C callable (``len``, ``math.sqrt``) has no
        lines: it adds nothing, with a warning, as line_profiler does."""
        if is_c_callable(func):
            self._warn_c_callable(func)
            return
        if is_compiled_wrapper(func):
            self._warn_nothing_to_time(func, 1)
        for f in _unwrap(func):
            self._add_code(f.__code__)
            self.functions.append(f)
            self._added.append(f)
            for nested in _nested_codes(f.__code__):
                self._add_code(nested)

    def add_callable(
        self, func: Any, guard: Optional[Callable[[Any], bool]] = None, name: Optional[str] = None
    ) -> int:
        """Register the Python functions behind func (what ``prof(func)`` registers: a
        function, method, classmethod, staticmethod, property, cached_property, partial,
        partialmethod, class, callable object).  Functions for which guard returns true are
        skipped (by default: this profiler's own wrappers).  Returns 1 when a function was
        added, else 0; a C callable adds nothing, with a warning.  name is accepted for
        line_profiler's signature.  Raises TypeError when func is not callable."""
        if is_c_callable(func):
            self._warn_c_callable(func)
            return 0
        added = self._add_callable(func, guard)
        self._warn_nothing_to_time(func, added)
        return added

    def _add_callable(self, func: Any, guard: Optional[Callable[[Any], bool]] = None) -> int:
        """add_callable without the warning for C callables."""
        skip = self._own_wrapper if guard is None else guard
        added = 0
        for impl in underlying(func):
            if skip(impl):
                continue
            self.add_function(impl)
            added = 1
        return added

    def add_class(self, cls: type, *, scoping_policy: Any = None, wrap: bool = False) -> int:
        """Register the functions of cls's body and of the classes nested in it (those of
        cls's module).  With wrap, the members are replaced by profiling wrappers.
        Returns how many members were added (line_profiler's count).  Only line_profiler's
        default scoping_policy (None) is supported."""
        if not isinstance(cls, type):
            raise TypeError(f"cls must be a class, not {type(cls).__name__}")
        _check_scoping(scoping_policy)
        return self._add_namespace(cls, set(), wrap)

    def add_module(
        self, module: types.ModuleType, *, scoping_policy: Any = None, wrap: bool = False
    ) -> int:
        """Register every function defined in module (classes' methods too; imported names
        and submodules are left out).  With wrap, the module's members are replaced by
        profiling wrappers.  Returns how many members were added (line_profiler's count).
        Only line_profiler's default scoping_policy (None) is supported."""
        if not isinstance(module, types.ModuleType):
            raise TypeError(f"module must be a module, not {type(module).__name__}")
        _check_scoping(scoping_policy)
        return self._add_namespace(module, set(), wrap)

    def _add_namespace(self, namespace: Any, seen: set, wrap: bool) -> int:
        """Register the members of a class or module defined in its module; returns how
        many members added a function."""
        count = 0
        to_wrap: Dict[str, Any] = {}

        def skip(f: Any) -> bool:
            return self._own_wrapper(f) or not same_module(namespace, f)

        for attr, value in list(vars(namespace).items()):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, types.ModuleType):
                continue
            if isinstance(value, type):
                if same_module(namespace, value) and self._add_namespace(value, seen, wrap):
                    count += 1
                continue
            try:
                if not self._add_callable(value, skip):
                    continue
            except TypeError:  # not callable
                continue
            count += 1
            if wrap:
                to_wrap[attr] = value
        for attr, value in to_wrap.items():
            try:
                setattr(namespace, attr, self.wrap_callable(value))
            except (TypeError, AttributeError):
                warn(f"cannot wrap {attr} of {_short(namespace)}", stacklevel=4)
        return count

    def add_from_code(self, module_code: types.CodeType, qualname: str) -> int:
        """Register the functions called qualname among the code objects nested in
        module_code (a compiled script, before it runs).  Returns how many were found."""
        found = 0
        for qual, code in _code_qualname_walk(module_code, ""):
            if qual == qualname:
                self._add_code(code)
                for nested in _nested_codes(code):
                    self._add_code(nested)
                found += 1
        return found

    def __call__(self, func: _T) -> _T:
        """Decorator: register func and return a wrapper of the same kind (a generator
        function stays one, a coroutine function, an async generator function, a
        classmethod, staticmethod, property, cached_property, partial, partialmethod or bound
        method too) that profiles while it runs.  A class is returned itself with the
        functions of its own body wrapped; this profiler's own wrapper and a C callable
        (with a warning) are returned unchanged."""
        if is_c_callable(func):
            self._warn_c_callable(func)
            return func
        added = self._add_callable(func)
        self._warn_nothing_to_time(func, added)
        if not added and not isinstance(func, type) and not underlying(func):
            return func  # no Python code behind it: as a C callable, returned unchanged
        return self.wrap_callable(func)

    @staticmethod
    def _warn_c_callable(func: Any) -> None:
        warn(f"{_short(func)} is implemented in C: it has no lines to time", stacklevel=3)

    def _warn_nothing_to_time(self, func: Any, added: int) -> None:
        """Warns when func (given to the decorator or add_callable) registered no function
        that is not one of this profiler's own wrappers, or when it is a compiled wrapper
        (jax.jit, numba), whose Python lines run only when it is traced or falls back."""
        if added and is_compiled_wrapper(func):
            warn(
                f"{_short(func)} runs compiled code: the lines of the Python function behind "
                f"it are timed only when that function runs as Python (traced, or a "
                f"fallback), not while its compiled code runs",
                stacklevel=3,
            )
        elif not added and not isinstance(func, type) and not underlying(func):
            # (a func whose functions are this profiler's own wrappers is timed by them)
            warn(
                f"{_short(func)} has no Python code to time (a callable implemented in C)",
                stacklevel=3,
            )

    # --- switching on and off -----------------------------------------------------------

    @property
    def enable_count(self) -> int:
        """How many enable_by_count() calls are not yet matched by disable_by_count()."""
        return self._enable_count

    @property
    def code_hash_map(self) -> Dict[types.CodeType, List[int]]:
        """The registered code objects (as keys; line_profiler's attribute of that name, for
        the tools that walk it)."""
        return {code: [] for code in self._tracer.codes()}

    @property
    def enabled(self) -> bool:
        """Whether the hooks are installed and counting."""
        return bool(self._tracer.enabled)

    def _set_local_events(self, code: types.CodeType) -> None:
        if sys.version_info < (3, 12):  # the type checker reads this check too
            raise RuntimeError("sys.monitoring needs Python 3.12+")
        assert self._tool is not None  # called only while the tool id is held
        sys.monitoring.set_local_events(self._tool, code, self._local_events())

    @staticmethod
    def _local_events() -> int:
        """The events turned on in each registered code."""
        if sys.version_info < (3, 12):  # the type checker reads this check too
            raise RuntimeError("sys.monitoring needs Python 3.12+")
        E = sys.monitoring.events
        return E.LINE | E.PY_START | E.PY_RESUME | E.PY_RETURN | E.PY_YIELD

    @staticmethod
    def _monitoring_events() -> int:
        """Every event the line profiler registers a callback for."""
        if sys.version_info < (3, 12):  # the type checker reads this check too
            raise RuntimeError("sys.monitoring needs Python 3.12+")
        E = sys.monitoring.events
        return (
            E.PY_START | E.PY_RESUME | E.PY_THROW | E.LINE | E.PY_RETURN | E.PY_YIELD | E.PY_UNWIND
        )

    def _enable_monitoring(self) -> None:
        if sys.version_info < (3, 12):  # the type checker reads this check too
            raise RuntimeError("sys.monitoring needs Python 3.12+")
        mon = sys.monitoring
        E = mon.events
        held = [i for i in range(6) if mon.get_tool(i) == _TOOL_NAME]
        try:
            # the call profiler's claim: one order of ids, one error when every id is held
            self._tool = _fastprof._monitoring_claim(_TOOL_NAME)
        except BaseException:
            # a KeyboardInterrupt after the claim and before the assignment: the id this
            # call took (others take theirs under _SWITCH only) is found and given back
            for i in range(6):
                if i not in held and mon.get_tool(i) == _TOOL_NAME:
                    _fastprof._monitoring_release(i, self._monitoring_events(), _TOOL_NAME, False)
            raise
        tool = self._tool
        t = self._tracer
        try:
            mon.register_callback(tool, E.PY_START, t._on_start)
            mon.register_callback(tool, E.PY_RESUME, t._on_resume)
            mon.register_callback(tool, E.PY_THROW, t._on_resume)
            mon.register_callback(tool, E.LINE, t._on_line)
            mon.register_callback(tool, E.PY_RETURN, t._on_leave)
            mon.register_callback(tool, E.PY_YIELD, t._on_leave)
            mon.register_callback(tool, E.PY_UNWIND, t._on_leave)
            t._start()
            t._set_local_events(mon.set_local_events, tool, self._local_events())
            mon.set_events(tool, E.PY_UNWIND | E.PY_THROW)
        except BaseException:
            t._stop()
            try:
                self._disable_monitoring()
            except Exception:
                pass  # the first error is the one to report
            raise

    def _disable_monitoring(self) -> None:
        """Clear this profiler's events and callbacks and free its tool id.  Every step is
        tried even when one fails; the first failure is raised at the end."""
        if sys.version_info < (3, 12):  # the type checker reads this check too
            raise RuntimeError("sys.monitoring needs Python 3.12+")
        mon = sys.monitoring
        tool = self._tool
        if tool is None:
            return
        self._tool = None
        steps: List[Callable[[], Any]] = []
        freed = mon.get_tool(tool) is None
        if freed:  # by another tool (its stop): fastprof's events stay there until cleared
            steps.append(functools.partial(mon.use_tool_id, tool, _TOOL_NAME))
        if freed or mon.get_tool(tool) == _TOOL_NAME:  # else another tool's: release warns
            steps.append(
                functools.partial(self._tracer._set_local_events, mon.set_local_events, tool, 0)
            )
        # the call profiler's release: global events, callbacks, the id (and the warning)
        steps.append(
            lambda: _fastprof._monitoring_release(
                tool, self._monitoring_events(), _TOOL_NAME, freed
            )
        )
        first: Optional[BaseException] = None
        for step in steps:  # keep going (past a KeyboardInterrupt too): the id must be freed
            first = first or _retried(step)
        if first is not None:
            raise first

    def _enable_legacy(self) -> None:
        driver = _LEGACY.driver
        if driver is not None:
            self._tracer._start()
            if driver is not self._tracer:
                # One trace function per thread: the installed tracer feeds this one too.
                try:
                    driver._add_passenger(self._tracer)
                except BaseException:
                    self._tracer._stop()
                    raise
            return
        try:
            self._tracer._start()
            _LEGACY.driver = self._tracer
            _LEGACY.owner = _thread.get_ident()
            # sys.settrace first: threads starting from now on call it (threading does, for
            # the hook below) and it retries where 3.11 refuses them during this switch
            _LEGACY.settrace_prev = sys.settrace
            _LEGACY.settrace_hook = _settrace_unmuting(sys.settrace)
            sys.settrace = _LEGACY.settrace_hook
            _LEGACY.thread_prev = _threading_gettrace()
            # Threads started from now on, then this thread and those running already.
            _LEGACY.thread_hook = _legacy_bootstrap(self._tracer, _LEGACY.thread_prev)
            _threading().settrace(_LEGACY.thread_hook)
            self._tracer._install_trace(True)
        except BaseException:
            # an error, or a KeyboardInterrupt between any two steps (threading.settrace is
            # Python code): every step taken is undone, so no driver is left that traces
            # nothing (later profilers would ride on it and count nothing)
            self._undo_legacy_driver()
            raise

    def _undo_legacy_driver(self) -> None:
        """Takes out what a failed _enable_legacy put in place as the driver; returns None."""
        if _LEGACY.thread_hook is not None and _threading_gettrace() is _LEGACY.thread_hook:
            _threading().settrace(_LEGACY.thread_prev)
        if _LEGACY.settrace_hook is not None and sys.settrace is _LEGACY.settrace_hook:
            sys.settrace = _LEGACY.settrace_prev
        if _LEGACY.driver is self._tracer:
            self._tracer._uninstall_trace()
        _LEGACY.driver = _LEGACY.owner = _LEGACY.thread_prev = _LEGACY.thread_hook = None
        _LEGACY.settrace_prev = _LEGACY.settrace_hook = None
        self._tracer._stop()

    def _disable_legacy(self) -> None:
        driver = _LEGACY.driver
        if driver is None:
            return
        if driver is not self._tracer:
            driver._remove_passenger(self._tracer)
        if not driver._active():
            _LEGACY.driver = None
            try:
                driver._uninstall_trace()
            finally:
                # a hook set for new threads while fastprof was on stays, and so does a
                # sys.settrace put in place of fastprof's meanwhile.
                # The hook for new threads first, the sys.settrace that retries a refused
                # installation (see _settrace_unmuting) last, so that a thread starting
                # meanwhile finds that one; threading.settrace is Python code, where a
                # KeyboardInterrupt can land: it is retried, and the rest done before it is
                # raised.
                stopped: Optional[BaseException] = None
                thread_hook, thread_prev = _LEGACY.thread_hook, _LEGACY.thread_prev
                if thread_hook is not None and _threading_gettrace() is thread_hook:
                    stopped = _retried(lambda: _threading().settrace(thread_prev))
                if _LEGACY.settrace_hook is not None and sys.settrace is _LEGACY.settrace_hook:
                    sys.settrace = _LEGACY.settrace_prev
                _LEGACY.thread_prev = _LEGACY.thread_hook = None
                _LEGACY.settrace_prev = _LEGACY.settrace_hook = None
                if stopped is not None:
                    raise stopped

    def _replaced_code(self) -> List[Any]:
        """The functions add_function took whose ``__code__`` is not registered: another line
        profiler (line_profiler's ``add_function``) or a reloader (IPython's autoreload) put
        other code in its place.  One C loop: it runs on every outermost call of a decorated
        function."""
        return list(self._tracer._unregistered(self._added))

    def enable(self) -> None:
        """Install the hooks and start counting (no-op when already on).  A function whose
        code another profiler replaced since it was added has its new code timed too (the
        two count as one function)."""
        _switch("enable", self._enable)

    def _enable(self) -> None:
        if self._tracer.enabled:
            return
        for f in self._replaced_code():
            self._add_code(f.__code__)
            for nested in _nested_codes(f.__code__):
                self._add_code(nested)
        if _MONITORING:
            self._enable_monitoring()
        else:
            self._enable_legacy()

    def disable(self) -> None:
        """Stop counting and remove the hooks.  Raises RuntimeError when a hook failed
        during the run (the counts gathered stay)."""
        _switch("disable", self._disable)

    def _disable(self) -> None:
        if not self._tracer.enabled and self._tool is None and _LEGACY.driver is not self._tracer:
            return
        lost = None if _MONITORING else _legacy_hook_lost(self._tracer)
        error = self._tracer._stop()
        if _MONITORING:
            self._disable_monitoring()
        else:
            self._disable_legacy()
        if lost is not None:
            # as the call profiler warns when its profile hook is taken (line_profiler says
            # nothing): the counts stopped there
            warn(
                f"fastprof: the trace hook of this thread was {lost} while the line profiler "
                "was on; lines run after that were not counted",
                RuntimeWarning,
                stacklevel=4,  # the caller of disable(): _disable, _switch, disable,
            )
        replaced = self._replaced_code()
        if replaced:
            # the code was swapped while on (line_profiler's add_function inside a run):
            # the calls of the new code were not counted; the next enable() times it
            names = ", ".join(sorted({f.__qualname__ for f in replaced}))
            warn(
                f"fastprof: the code of {names} was replaced while the line profiler was on "
                "(another line profiler's add_function does that); its calls after that were "
                "not counted",
                RuntimeWarning,
                stacklevel=4,  # the caller of disable(): _disable, _switch, disable,
            )
        if error is not None:
            raise RuntimeError(f"line profiling failed during the run: {error}") from error

    def __del__(self) -> None:
        # Dropped while enabled: give the tool id back (3.12+), remove the trace function
        # from every thread it was installed in (below 3.12).
        try:
            with _SWITCH:
                if getattr(self, "_tool", None) is not None:
                    self._tracer._stop()
                    self._disable_monitoring()
                elif not _MONITORING and getattr(self, "_tracer", None) is not None:
                    self._tracer._stop()
                    self._disable_legacy()
        except Exception:
            pass

    def enable_by_count(self) -> None:
        """enable(), counting nested calls: only the first call switches on."""
        with _SWITCH:
            if _SWITCHING[0] == 0 and self._enable_count == 0:
                self.enable()
            # (a switch under way in this thread, which a signal handler or a finalizer called
            # back into: the count only; that switch settles the state)
            self._enable_count += 1

    def disable_by_count(self) -> None:
        """disable() once every enable_by_count() has been matched."""
        with _SWITCH:
            if self._enable_count > 0:
                self._enable_count -= 1
                if self._enable_count == 0 and _SWITCHING[0] == 0:
                    self.disable()

    def __enter__(self) -> "LineProfiler":
        self.enable_by_count()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.disable_by_count()

    def runcall(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call func(*args, **kwargs) with profiling on; returns its result (func is
        positional only, so func= may be one of kwargs)."""
        self.enable_by_count()
        try:
            return func(*args, **kwargs)
        finally:
            self.disable_by_count()

    def runctx(self, cmd: str, globals: Dict[str, Any], locals: Any) -> "LineProfiler":
        """exec(cmd, globals, locals) with profiling on; returns self."""
        self.enable_by_count()
        try:
            exec(cmd, globals, locals)
        finally:
            self.disable_by_count()
        return self

    def run(self, cmd: str) -> "LineProfiler":
        """runctx(cmd) in __main__'s namespace; returns self."""
        import __main__

        main = __main__.__dict__
        return self.runctx(cmd, main, main)

    # --- results ------------------------------------------------------------------------

    def _companion(self) -> "LineProfiler":
        """A profiler of its own (same clock, the same ``functions`` list) whose timings
        this one's get_stats reports too, as long as this one does not time the same code
        itself; reset() zeroes both."""
        other = LineProfiler(_timer=self._timer, _timer_unit=self._timer_unit)
        other.functions = self.functions
        self._companions.append(other)
        return other

    @property
    def timer_unit(self) -> float:
        """Seconds per unit of the times in get_stats() (line_profiler's name)."""
        return self._unit

    def get_stats(self) -> LineStats:
        """The timings so far: LineStats(timings, unit)."""
        timings: Dict[Key, List[LineTiming]] = {}
        every = list(self._tracer.get_timings())
        if self._companions:
            own = {id(code) for code in self._tracer.codes()}
            for other in self._companions:
                every += [(c, t) for c, t in other._tracer.get_timings() if id(c) not in own]
        for code, lines in every:
            # a line begun before profiling (a generator's yield, resumed once on) has time
            # but no hit: left out, as line_profiler leaves it (readers divide by hits)
            lines = [t for t in lines if t[1] > 0]
            key = code_key(code)
            if key in timings:  # same source compiled twice: add up
                merged = {ln: [h, t] for ln, h, t in timings[key]}
                for ln, h, t in lines:
                    acc = merged.setdefault(ln, [0, 0])
                    acc[0] += h
                    acc[1] += t
                timings[key] = [(ln, h, t) for ln, (h, t) in sorted(merged.items())]
            else:
                timings[key] = list(lines)
        return LineStats(timings, self._unit)

    def reset(self) -> None:
        """Zero every count (registrations stay)."""
        self._tracer.reset()
        for other in self._companions:
            other.reset()

    def print_stats(
        self,
        stream: Optional[IO[str]] = None,
        output_unit: Optional[float] = None,
        stripzeros: bool = False,
        details: bool = True,
        summarize: bool = False,
        sort: bool = False,
        rich: bool = False,
        *,
        config: Any = None,
    ) -> None:
        """Print kernprof -l -v's table of every registered function (in microseconds
        unless output_unit, in seconds, says otherwise), with line_profiler's options:
        details (the per-line blocks), summarize (one line per function), sort (by total
        time), stripzeros (leave out functions that never ran); rich and config are accepted
        and the output stays plain text."""
        stats = self.get_stats()
        if output_unit is None:
            output_unit = 1e-6
        for f in self.functions:  # functions never run still get their (empty) block
            stats.timings.setdefault(code_key(f.__code__), [])
        stats.print(stream, output_unit, stripzeros, details, summarize, sort, rich, config=config)

    def dump_stats(self, path: "str | os.PathLike[str]") -> None:
        """Write the timings to path as a pickled LineStats, like line_profiler's .lprof
        files: fastprof.lines.load_stats reads it back, and so do line_profiler's readers
        (``python -m line_profiler path``) where fastprof is importable."""
        self.get_stats().to_file(path)


class _KernprofBuiltin:
    """What ``builtins.profile`` is under ``fastprof run --lines``: what kernprof -l puts
    there (line_profiler 5.1's LineProfiler), recording as kernprof does.

    Functions registered through it (``@profile``, ``profile.add_function``, ...) are timed
    only while it is enabled: while a function ``@profile`` wrapped runs, inside
    ``with profile:``, between ``profile.enable()`` / ``enable_by_count()`` and the matching
    disable, in ``profile.runcall``.  Its timings are reported with the run's profiler (lp),
    which times the functions registered in lp itself (``--lines-of``) whenever lp is on; a
    function registered in both is timed by lp."""

    def __init__(self, lp: LineProfiler) -> None:
        self._lp = lp  # the run's profiler: reports what this one records too
        self._own = lp._companion()  # records only while this is enabled

    def __call__(self, func: Any) -> Any:
        """Register func and return kernprof's profiling wrapper of it (enabled while it
        runs)."""
        return self._own(func)

    def __enter__(self) -> "_KernprofBuiltin":
        self._own.enable_by_count()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._own.disable_by_count()

    # results read from the run's profiler (which adds this one's up with its own)
    _RESULTS = frozenset({"get_stats", "print_stats", "dump_stats", "reset"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_lp", "_own"):
            raise AttributeError(name)
        return getattr(self._lp if name in self._RESULTS else self._own, name)


def kernprof_builtin(lp: LineProfiler) -> Callable[[Any], Any]:
    """The object to install as ``builtins.profile`` so kernprof scripts run unchanged and
    record what ``kernprof -l`` records (see _KernprofBuiltin); its timings are reported by
    lp's get_stats, print_stats and dump_stats."""
    if not isinstance(lp, LineProfiler):
        raise TypeError(f"lp must be a fastprof.LineProfiler, not {type(lp).__name__}")
    return _KernprofBuiltin(lp)


def _import_by_path(path: str) -> Any:
    """The module the file at path is imported as (imported now) when it lies under a
    sys.path folder under a name that finds it, so that the program's own ``import`` of it
    later gets the same module and its code is what was registered; else None."""
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if not path.startswith(folder + os.sep):
            continue
        parts = os.path.splitext(os.path.relpath(path, folder))[0].split(os.sep)
        if parts[-1] == "__init__":
            parts.pop()
        if not parts or not all(p.isidentifier() for p in parts):
            continue
        name = ".".join(parts)
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = getattr(found, "origin", None)
        if found is not None and origin and os.path.abspath(origin) == path:
            return importlib.import_module(name)
    return None


def resolve_function(spec: str) -> Any:
    """The object named by "module:qualname" or "path/to/file.py:qualname".

    A file already imported is looked up in sys.modules; otherwise it is imported (which runs
    its top level).  Raises ValueError for a malformed spec, ImportError / AttributeError
    when the module or name is missing."""
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str like 'module:function', not {type(spec).__name__}")
    where, sep, qualname = spec.rpartition(":")
    if not sep or not where or not qualname:
        raise ValueError(
            f"spec must look like 'module:qualname' or 'file.py:qualname', got {spec!r}"
        )
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ImportError(f"no such file: {where!r} (from spec {spec!r})")
        module = next(
            (
                m
                for m in list(sys.modules.values())
                if os.path.abspath(getattr(m, "__file__", None) or "") == path
            ),
            None,
        )
        if module is None:
            module = _import_by_path(path)
        if module is None:
            name = "_fastprof_lines_" + os.path.splitext(os.path.basename(path))[0]
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"cannot import {where!r}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    obj: Any = module
    for part in qualname.split("."):
        if part == "<locals>":
            raise ValueError(
                f"{spec!r}: functions local to another function cannot be "
                f"reached by name; register the enclosing function"
            )
        try:
            obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"{spec!r}: {where!r} has no {qualname!r}") from None
    return obj


# line_profiler's ``profile``: ``from fastprof.lines import profile``; off (a no-op decorator)
# unless FASTPROF_LINE_PROFILE / LINE_PROFILE or --line-profile switches it on.
profile = ExplicitProfiler(LineProfiler)
