"""Line timing in the processes of a ``fastprof run --subprocesses`` job: the line profiler a
new interpreter of the job starts with, and how it finds the functions the job names.

A function is registered once its code exists in the process:

- ``module:qualname``: at start when the module is imported already, else right after the
  process imports it (a finder first on ``sys.meta_path`` watches for that one name and goes
  away once every watched name has been imported);
- ``path/file.py:qualname``: the module whose file that is, imported already or later under
  the file's own name;
- ``__main__:qualname`` (the script or ``-m`` module being run, however the command line
  named it): in multiprocessing's spawn and forkserver workers the script runs again as
  ``__mp_main__`` when the worker is prepared (``multiprocessing.spawn.prepare``), and the
  function is registered as soon as that is done;
- ``@profile`` (``--lines``): ``builtins.profile`` registers what it decorates and records
  it while enabled, as under kernprof -l (fastprof.lines.kernprof_builtin), and so does
  ``from line_profiler import profile`` (fastprof._kernprof_global).

Fork children need none of this: they keep their parent's line profiler with its counts
zeroed (fastprof.children).
"""

from __future__ import annotations

import builtins
import functools
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ._after_import import spec_reporting

__all__ = ["line_profiler", "Targets"]

MAIN = "__main__"


def _split(spec: str) -> Tuple[str, str]:
    where, _, qualname = spec.rpartition(":")
    return where, qualname


def _is_path(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or "/" in where


def _same_file(a: Optional[str], b: str) -> bool:
    if not a:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


class Targets:
    """The functions a job names for line timing, registered into lp as their modules appear
    in this process (see the module's docstring).  A name that cannot be resolved is passed
    over: other processes of the job may hold it."""

    def __init__(self, lp: Any, specs: Sequence[str]) -> None:
        self.lp = lp
        self.pending: Dict[str, List[str]] = {}  # module name (or a file's stem) -> qualnames
        self.files: Dict[str, str] = {}  # a file's stem -> its absolute path
        self.main: List[str] = []  # qualnames in the script being run
        self.done: Set[Tuple[int, str]] = set()  # (id of module, qualname) registered
        for spec in specs:
            where, qualname = _split(spec)
            if not where or not qualname:
                continue
            if where == MAIN:
                self.main.append(qualname)
            elif _is_path(where):
                stem = os.path.splitext(os.path.basename(where))[0]
                self.files[stem] = os.path.abspath(where)
                self.pending.setdefault(stem, []).append(qualname)
            else:
                self.pending.setdefault(where, []).append(qualname)

    # -- registering ----------------------------------------------------------------------

    def _register(self, module: Any, qualname: str) -> None:
        if (id(module), qualname) in self.done:
            return
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return
        try:
            self.lp.add_function(obj)
        except (TypeError, ValueError):
            return
        self.done.add((id(module), qualname))

    def _module_ran(self, name: str, module: Any) -> None:
        """The module imported as name has run: registers what it holds."""
        stem = name.rpartition(".")[2]
        if name in self.pending:
            key = name
        elif stem in self.files and _same_file(getattr(module, "__file__", None), self.files[stem]):
            key = stem
        else:
            return
        for qualname in self.pending.pop(key):
            self._register(module, qualname)
        if not self.pending and not self.main:
            self._unwatch()

    def main_ran(self) -> None:
        """The script being run is in this process (``__mp_main__``): registers its names."""
        module = sys.modules.get("__mp_main__")
        if module is None:
            return
        for qualname in self.main:
            self._register(module, qualname)

    def resolve_present(self) -> None:
        """Registers what the modules imported already hold."""
        for name, module in list(sys.modules.items()):
            if module is not None and (
                name in self.pending or name.rpartition(".")[2] in self.files
            ):
                self._module_ran(name, module)
        if self.main:
            self.main_ran()

    # -- watching imports -----------------------------------------------------------------

    def _watched(self, name: str) -> bool:
        return (
            name in self.pending
            or name.rpartition(".")[2] in self.files
            or (bool(self.main) and name == "multiprocessing.spawn")
        )

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """sys.meta_path's hook: for a watched name, the spec the other finders give, with a
        loader that reports when the module has run; None for every other name."""
        if not self._watched(name):
            return None
        return spec_reporting(self, name, path, target, functools.partial(self._imported, name))

    def _imported(self, name: str, module: Any) -> None:
        if name == "multiprocessing.spawn":
            self.wrap_prepare(module)
        self._module_ran(name, module)

    def wrap_prepare(self, spawn: Any) -> None:
        """Makes multiprocessing.spawn.prepare (which runs the script again as
        ``__mp_main__`` in a spawn or forkserver worker) register the script's names after."""
        real = getattr(spawn, "prepare", None)
        if real is None or getattr(real, "_fastprof_lines", False):
            return

        def prepare(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            try:
                self.main_ran()
            except Exception:  # a worker must run even when its lines cannot be timed
                pass
            return result

        prepare._fastprof_lines = True  # type: ignore[attr-defined]
        spawn.prepare = prepare

    def watch(self) -> None:
        """Starts watching imports for what is still pending."""
        if self.main and "multiprocessing.spawn" in sys.modules:
            self.wrap_prepare(sys.modules["multiprocessing.spawn"])
        if (self.pending or self.main) and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def _unwatch(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def line_profiler(specs: Sequence[str], *, kernprof: bool) -> Any:
    """A fastprof.lines.LineProfiler for a new process of the job (not yet enabled): the
    functions specs name registered now or as they appear, and ``builtins.profile`` set to
    register what it decorates when kernprof (``--lines``)."""
    from .lines import LineProfiler, kernprof_builtin

    lp = LineProfiler()
    if kernprof:
        from ._kernprof_global import redirect

        builtins.profile = kernprof_builtin(lp)  # type: ignore[attr-defined]
        redirect(builtins.profile)  # type: ignore[attr-defined]  # line_profiler's own too
    if specs:
        targets = Targets(lp, specs)
        targets.resolve_present()
        targets.watch()
    return lp
