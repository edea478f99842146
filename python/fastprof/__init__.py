"""fastprof: find where the time goes in numeric and ML Python, then make it go away.

The public names, re-exported from one module per concern:

- call profiling: Profile, run, runctx, profile (decorator and context manager), Stats
- line timing: LineProfiler
- kernels: fastprof.kernels (convolve, correlate, uniform_filter, evaluate, ...)
- GPU: fastprof.cuda, cuda_timer, cuda_trace, fastprof.nvtx (fastprof.cuda.nvtx)
- timeline: trace (``with fastprof.trace() as tr:``, Python calls and, with cuda=True, the GPU)

The package: the profilers and what they return (profile, lines, stats, tree, timeline), the
processes of a job (children, merge), the reports (report/), the kernels with one front end
for both devices (kernels/: args, cpu, gpu, expr), the CUDA layer (cuda/), the benchmark
machinery (bench/), the command line (cli, compare, diff) and the pytest and IPython plugins.

``import fastprof`` loads the call profiler only, never NumPy: a profiled script's own
imports show in its profile as under cProfile, and each process of a profiled job starts
cheaply.  LineProfiler and Stats, the kernels, the GPU names and NVTX load on first use
(``fastprof.kernels`` and the arrays and timers of ``fastprof.cuda`` then import NumPy, which
comes with ``pip install 'fastprof[kernels]'``).

PYTEST_DONT_REWRITE: ``fastprof run -m pytest`` imports fastprof before pytest loads its
plugin, which pytest would otherwise warn about (an error under ``-W error``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

try:  # the compiled core loads first
    from . import _fastprof  # noqa: F401
except ImportError as _e:  # no build of it for this Python, or fastprof imported from a zip
    if "subinterpreter" in str(_e):  # an isolated interpreter (its own GIL): no reinstall helps
        _advice = (
            "It loads in the main interpreter and in subinterpreters that share its GIL "
            "(legacy ones), not in an isolated one: profile from the main interpreter"
        )
    else:
        _advice = (
            f"It must be built for this Python ({sys.implementation.cache_tag}) and loaded "
            "from a folder (a compiled extension cannot load from a zip file); reinstall "
            "fastprof with pip"
        )
    raise ImportError(
        f"fastprof's compiled core (fastprof._fastprof) could not be imported: {_e}. {_advice}",
        name="fastprof._fastprof",
    ) from _e
from ._quiet import quiet
from ._version import __version__
from .profile import Profile, profile, run, runctx

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from . import cuda, kernels
    from .cuda import cuda_timer, nvtx
    from .cuda.cupti import cuda_trace
    from .lines import LineProfiler
    from .stats import Stats
    from .timeline import trace

__all__ = [
    "Profile",
    "profile",
    "run",
    "runctx",
    "Stats",
    "LineProfiler",
    "kernels",
    "cuda",
    "nvtx",
    "cuda_timer",
    "cuda_trace",
    "trace",
    "__version__",
]

#: The names loaded on first use: name -> (module, attribute of it or None for the module).
_LAZY: Dict[str, Tuple[str, Optional[str]]] = {
    "LineProfiler": ("fastprof.lines", "LineProfiler"),
    "Stats": ("fastprof.stats", "Stats"),
    "kernels": ("fastprof.kernels", None),
    "cuda": ("fastprof.cuda", None),
    "nvtx": ("fastprof.cuda.nvtx", None),
    "cuda_timer": ("fastprof.cuda", "cuda_timer"),
    "cuda_trace": ("fastprof.cuda.cupti", "cuda_trace"),
    "trace": ("fastprof.timeline", "trace"),
}

_NUMPY_HINT = (
    "fastprof.{name} needs NumPy, which could not be imported; install it with "
    "pip install 'fastprof[kernels]'"
)


def _numpy_hint(exc: ImportError, name: str) -> Optional[ImportError]:
    """The error to raise instead of exc when loading public name ``name`` failed with it: an
    ImportError naming ``fastprof[kernels]`` when NumPy is what is missing, else None (exc
    itself already names it when a name of fastprof.cuda raised it)."""
    missing = exc.name or ""
    if "fastprof[kernels]" in str(exc):
        return None
    if missing == "numpy" or missing.startswith("numpy."):
        return ImportError(_NUMPY_HINT.format(name=name), name="numpy")
    return None


# Hidden from type checkers, which see the imports above instead and so still flag a
# misspelt name.
if not TYPE_CHECKING:

    @quiet  # fastprof's loading of its own parts is not recorded by a profiler running now
    def __getattr__(name: str) -> Any:
        """Imports the module behind a lazy public name on first access and keeps it here.

        Raises AttributeError for other names, and ImportError naming ``fastprof[kernels]`` when
        the name needs NumPy and NumPy cannot be imported."""
        target = _LAZY.get(name)
        if target is None:
            raise AttributeError(f"module 'fastprof' has no attribute {name!r}")
        from importlib import import_module

        module_name, attr = target
        try:
            module = import_module(module_name)
            value = module if attr is None else getattr(module, attr)
        except ImportError as exc:
            hint = _numpy_hint(exc, name)
            if hint is None:
                raise
            raise hint from exc
        globals()[name] = value
        return value


def __dir__() -> List[str]:
    """The module's names, the lazy ones included before their first use."""
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext fastprof``: the magics %fastprof, %%fastprof and %flprun (IPython is
    imported only here)."""
    from .ipython import load_ipython_extension as load

    load(ipython)
