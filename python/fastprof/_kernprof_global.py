"""line_profiler's own ``profile`` (``from line_profiler import profile``, line_profiler 4.1
and later) under ``fastprof run --lines``: pointed at fastprof's ``builtins.profile``, as
``kernprof -l`` points it at its own profiler (its ``_kernprof_overwrite``), so that scripts
written in that style record under fastprof what they record under kernprof.

line_profiler is not imported for this (it takes tens of milliseconds, in every process of a
job): when the program has not imported it yet, a finder first on ``sys.meta_path`` waits for
the one name ``line_profiler`` and points its ``profile`` once the package has run, before the
program's own ``from line_profiler import profile`` reads it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, List, Optional

__all__ = ["redirect"]

NAME = "line_profiler"


def _point(builtin: Any, undo: List[Callable[[], None]], module: Any) -> None:
    """Points module.profile (line_profiler's GlobalProfiler) at builtin, when it has
    kernprof's hook; adds the step that puts it back to undo.  Returns nothing."""
    gp: Any = getattr(module, "profile", None)
    overwrite = getattr(gp, "_kernprof_overwrite", None)
    if overwrite is None:
        return
    saved = (getattr(gp, "_profile", None), getattr(gp, "enabled", None))

    def put_back() -> None:
        gp._profile, gp.enabled = saved

    overwrite(builtin)
    undo.append(put_back)


class _Finder:
    """sys.meta_path's hook for the name line_profiler: the spec the other finders give, with
    a loader that points its ``profile`` once it has run; None for every other name."""

    def __init__(self, builtin: Any, undo: List[Callable[[], None]]) -> None:
        self.builtin = builtin
        self.undo = undo

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != NAME:
            return None
        from ._after_import import spec_reporting

        self.remove()  # once: the package is being imported now
        done = functools.partial(_point, self.builtin, self.undo)
        return spec_reporting(self, name, path, target, done)

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def redirect(builtin: Any) -> Callable[[], None]:
    """Points line_profiler's ``profile`` at builtin (fastprof's kernprof builtin) now, or
    when the program imports line_profiler.  Returns the function that undoes it (the finder
    removed, the GlobalProfiler's profiler and state put back)."""
    undo: List[Callable[[], None]] = []
    finder: Optional[_Finder] = None
    module = sys.modules.get(NAME)
    if module is not None:
        _point(builtin, undo, module)
    else:
        finder = _Finder(builtin, undo)
        sys.meta_path.insert(0, finder)

    def restore() -> None:
        if finder is not None:
            finder.remove()
        for step in reversed(undo):
            step()
        undo.clear()

    return restore
