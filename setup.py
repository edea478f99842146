"""Build of fastprof's one compiled module, ``fastprof._fastprof``.

Environment variables:

FASTPROF_DEBUG=1            -O0 -g, assertions on.
FASTPROF_SANITIZE=address,undefined
                            build with those sanitizers (run under LD_PRELOAD of libasan,
                            see .ci/sanitize).
FASTPROF_CUDA=0|1           force the CUDA part off or on (on fails when no toolkit is found);
                            unset: built when a toolkit is found.
"""

from __future__ import annotations

import os
import sys
from glob import glob

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _c_sources() -> list[str]:
    """Every C file under src/, in a stable order (relative paths, as setuptools wants)."""
    found = glob(os.path.join("src", "**", "*.c"), recursive=True)
    return sorted(p.replace(os.sep, "/") for p in found)


def _flags() -> tuple[list[str], list[str], list[tuple[str, str | None]]]:
    """Compile flags, link flags and macros from the FASTPROF_* environment variables."""
    cflags = ["-std=gnu11", "-Wall", "-Wextra", "-fvisibility=hidden"]
    ldflags: list[str] = []
    macros: list[tuple[str, str | None]] = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    if os.environ.get("FASTPROF_DEBUG", "0") not in ("", "0"):
        cflags += ["-O0", "-g3"]
        macros.append(("FP_DEBUG", "1"))
    else:
        cflags += ["-O3"]
        macros.append(("NDEBUG", None))
    sanitize = os.environ.get("FASTPROF_SANITIZE", "").strip()
    if sanitize:
        cflags += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g",
                   "-fno-sanitize-recover=undefined"]
        ldflags += [f"-fsanitize={sanitize}"]
    return cflags, ldflags, macros


# --- CUDA -------------------------------------------------------------------------------------
# The CUDA part (src/cuda/*.cu and the C files that call it) is added by _cuda_config() when a
# toolkit is found or FASTPROF_CUDA=1.  The CPU build never needs it.


def _cuda_config() -> dict | None:
    """The CUDA build settings, or None for a CPU-only build."""
    want = os.environ.get("FASTPROF_CUDA", "").strip()
    if want == "0":
        return None
    if want == "1":
        raise RuntimeError("FASTPROF_CUDA=1 but this build has no CUDA support yet")
    return None


class BuildExt(build_ext):
    """build_ext that compiles the CUDA sources first when the CUDA build is on."""

    def finalize_options(self) -> None:
        super().finalize_options()
        # Objects left in build/ by another configuration must not be reused.
        if os.environ.get("FASTPROF_SANITIZE") or os.environ.get("FASTPROF_DEBUG", "0") not in ("", "0"):
            self.force = True

    def build_extensions(self) -> None:
        super().build_extensions()


def _extension() -> Extension:
    cflags, ldflags, macros = _flags()
    cuda = _cuda_config()
    if cuda is not None:
        macros.append(("FP_HAVE_CUDA", "1"))
    return Extension(
        "fastprof._fastprof",
        sources=_c_sources(),
        include_dirs=["src", numpy.get_include()],
        define_macros=macros,
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=["m", "pthread"] if sys.platform != "win32" else [],
    )


setup(ext_modules=[_extension()], cmdclass={"build_ext": BuildExt})
