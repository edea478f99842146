"""Where the CUDA libraries that fastprof opens with dlopen are: the search shared by NVRTC,
cuBLAS, CUPTI and libcufilt (fastprof.cuda.cupti re-exports :func:`library_candidates`).  Nothing
here imports NumPy or calls CUDA."""

from __future__ import annotations

import os
import sys

__all__ = ["library_candidates"]

_candidates_seen: dict[tuple, tuple[str, ...]] = {}


def library_candidates(stem: str, sonames: tuple[str, ...], wheel: str) -> tuple[str, ...]:
    """Paths and names to dlopen for one CUDA library, most specific first: the toolkit
    (CUDA_HOME, CUDA_PATH, /usr/local/cuda), the pip wheels (``nvidia/<wheel>/lib`` of CUDA 12,
    ``nvidia/cu13/lib`` of CUDA 13), the sonames.  The search runs once per library, settings
    and sys.path; a repeat call costs a lookup."""
    key = (
        stem,
        sonames,
        wheel,
        os.environ.get("CUDA_HOME"),
        os.environ.get("CUDA_PATH"),
        tuple(sys.path),
    )
    hit = _candidates_seen.get(key)
    if hit is None:
        hit = _candidates_seen[key] = _search(sonames, wheel)
    return hit


def _search(sonames: tuple[str, ...], wheel: str) -> tuple[str, ...]:
    """The candidates of library_candidates, searched on disk."""
    out: list[str] = []
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in homes:
        if not home:
            continue
        for sub in ("lib64", "lib", os.path.join("extras", "CUPTI", "lib64")):
            for name in sonames:
                p = os.path.join(home, sub, name)
                if os.path.exists(p) and p not in out:
                    out.append(p)
    for base in sys.path:
        # CUDA 12's wheels have one folder per library (nvidia/cublas/lib); CUDA 13's put
        # every library in one (nvidia/cu13/lib)
        for d in (
            os.path.join(base, "nvidia", wheel, "lib"),
            os.path.join(base, "nvidia", "cu13", "lib"),
        ):
            if os.path.isdir(d):
                for name in sonames:
                    p = os.path.join(d, name)
                    if os.path.exists(p) and p not in out:
                        out.append(p)
    out.extend(n for n in sonames if n not in out)
    return tuple(out)
