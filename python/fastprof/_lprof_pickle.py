"""The .lprof file's pickle: written as line_profiler's dump_stats writes it, and read without
running code.  Loaded on first use, so that `fastprof run --lines` does not load pickle before
the script (a script's own ``import pickle`` shows in its profile, as under cProfile)."""

from __future__ import annotations

import pickle
from typing import IO, Any, Dict, List, Tuple

# The classes a .lprof file may name for its LineStats object: fastprof's and line_profiler's
# (5.x pickles line_profiler.line_profiler.LineStats, 4.x line_profiler._line_profiler's).
_LINESTATS_CLASSES = frozenset(
    {
        ("fastprof.lines", "LineStats"),
        ("line_profiler.line_profiler", "LineStats"),
        ("line_profiler._line_profiler", "LineStats"),
        ("line_profiler", "LineStats"),
    }
)


class PickledLineStats:
    """What a LineStats object of a .lprof file becomes while it is read: its state only.
    Building it runs no code of the class the file names (nor imports its module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.state: Any = kwargs or None

    def __setstate__(self, state: Any) -> None:
        self.state = state


def lprof_bytes(
    timings: Dict[Tuple[str, int, str], List[Tuple[int, int, Any]]], unit: float
) -> bytes:
    """The pickle of a ``line_profiler.line_profiler.LineStats`` whose state is timings and
    unit, as line_profiler's dump_stats writes it (the class built without arguments, then
    its state set), written without importing line_profiler: the class by name, the state
    as pickle writes a plain dict (protocol 2, no frames; its memo numbered from 0, the
    class taking no memo slot)."""
    state = pickle.dumps({"timings": timings, "unit": unit}, protocol=2)
    head = b"\x80\x02" + b"cline_profiler.line_profiler\nLineStats\n" + b")\x81"
    return head + state[2:-1] + b"b."


def _reconstruct(cls: Any, base: Any, state: Any) -> PickledLineStats:
    """copyreg._reconstructor as protocols 0 and 1 name it, for the LineStats class only;
    returns an empty PickledLineStats, or raises UnpicklingError for any other class."""
    if cls is not PickledLineStats or base is not object or state is not None:
        raise pickle.UnpicklingError("copyreg._reconstructor is only accepted for LineStats")
    return PickledLineStats()


class _LineStatsUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain data (dict, list, tuple, str, int, float, None,
    bool) and LineStats objects: every other global a file names is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _LINESTATS_CLASSES:
            return PickledLineStats
        if module in ("copyreg", "copy_reg") and name == "_reconstructor":
            return _reconstruct
        if module in ("builtins", "__builtin__") and name == "object":
            return object
        raise pickle.UnpicklingError(
            f"it names {module}.{name}; only LineStats and plain data are accepted"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("it holds a persistent id; only plain data is accepted")


def unpickle(f: IO[bytes]) -> Any:
    """The object f's pickle holds, built from plain data and LineStats objects only (a
    PickledLineStats for those); raises UnpicklingError (or what odd opcodes raise) else."""
    return _LineStatsUnpickler(f).load()
