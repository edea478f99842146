"""Where fastprof looks for the CUDA libraries it dlopens (CUPTI, NVRTC, cuBLAS)."""

from __future__ import annotations

import os
import sys

__all__ = ["library_candidates"]


def library_candidates(stem: str, sonames: tuple[str, ...], wheel: str) -> tuple[str, ...]:
    """Paths and names to dlopen for one CUDA library, most specific first: the toolkit
    (CUDA_HOME, CUDA_PATH, /usr/local/cuda), the pip wheel ``nvidia/<wheel>/lib``, the sonames."""
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
        d = os.path.join(base, "nvidia", wheel, "lib")
        if os.path.isdir(d):
            for name in sonames:
                p = os.path.join(d, name)
                if os.path.exists(p) and p not in out:
                    out.append(p)
    out.extend(n for n in sonames if n not in out)
    return tuple(out)
