"""A module loader that reports when the module has run: what fastprof's finders on
``sys.meta_path`` (fastprof._child_lines, fastprof._kernprof_global) put around the loader the
other finders give, to act on a module right after its import."""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["Loader", "spec_reporting"]


class Loader:
    """A module's loader that calls ``done(module)`` once the module has run."""

    def __init__(self, loader: Any, done: Callable[[Any], None]) -> None:
        self._loader = loader
        self._done = done

    def create_module(self, spec: Any) -> Any:
        """What the wrapped loader creates (None: the default module)."""
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        """Runs the module with the wrapped loader, then done(module).  Returns nothing."""
        self._loader.exec_module(module)
        self._done(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def spec_reporting(me: Any, name: str, path: Any, target: Any, done: Callable[[Any], None]) -> Any:
    """For a finder ``me`` on sys.meta_path: the spec the other finders give for name, its
    loader wrapped to call done(module) once the module has run; None when none finds it."""
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(name, path, target)
        if spec is None:
            continue
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = Loader(spec.loader, done)  # type: ignore[assignment]
        return spec
    return None
