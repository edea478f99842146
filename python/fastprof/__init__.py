"""fastprof: find where the time goes in numeric and ML Python, then make it go away.

The public names, re-exported from one module per concern:

- call profiling: Profile, run, runctx, profile (decorator and context manager), Stats
- line timing: LineProfiler
- kernels: fastprof.kernels (convolve, correlate, uniform_filter, evaluate, ...)
- GPU: fastprof.cuda, cuda_timer, cuda_trace, fastprof.nvtx
"""

from . import _fastprof
from .profile import Profile, profile, run, runctx
from .stats import Stats
from .lines import LineProfiler
from . import kernels, cuda, nvtx
from .cuda import cuda_timer, cuda_trace

__version__ = "0.1.0"

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
    "__version__",
]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext fastprof``: the magics %fastprof, %%fastprof and %flprun (IPython is
    imported only here)."""
    from .ipython import load_ipython_extension as load

    load(ipython)
