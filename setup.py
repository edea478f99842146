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

import functools
import hashlib
import os
import re
import shutil
import subprocess
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


def _c_headers() -> list[str]:
    """Every C header under src/: a change to one rebuilds the extension."""
    found = glob(os.path.join("src", "**", "*.h"), recursive=True)
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
        cflags += [
            f"-fsanitize={sanitize}",
            "-fno-omit-frame-pointer",
            "-g",
            "-fno-sanitize-recover=undefined",
        ]
        ldflags += [f"-fsanitize={sanitize}"]
    return cflags, ldflags, macros


# --- CUDA -------------------------------------------------------------------------------------
# The CUDA part (src/cuda/*.cu) is compiled by nvcc into objects linked into the one extension,
# with the CUDA runtime linked statically: the built module names no libcuda, libcudart, libcublas
# or libcupti among its load-time dependencies, so it imports on machines without a driver.
# cuBLAS, CUPTI and NVRTC are dlopen'ed on first use.  The .cu sources include no Python header,
# so their objects are compiled once per build tree (cached under build/cuda-<hash>/) and shared
# by every Python version.

_CUDA_ARCHS = ("70", "75", "80", "86", "90")  # SASS wanted; compute_90 PTX on top
_CUDA_PTX = "90"


def _find_cuda_home() -> str | None:
    """The CUDA toolkit root from CUDA_HOME, CUDA_PATH, nvcc on PATH or /usr/local/cuda."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
            return home
    return None


def _nvcc_version(nvcc: str) -> tuple[int, int]:
    """(major, minor) of the toolkit nvcc belongs to, (0, 0) when it cannot say."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return (0, 0)
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _nvcc_codes(nvcc: str) -> set[str]:
    """The sm_/compute_ names this nvcc can generate (empty when it cannot say)."""
    codes: set[str] = set()
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        try:
            out = subprocess.run([nvcc, flag], capture_output=True, text=True, timeout=60)
            codes.update(out.stdout.split())
        except (OSError, subprocess.SubprocessError):
            pass
    return codes


@functools.lru_cache(maxsize=None)
def _cuda_config() -> dict | None:
    """The CUDA build settings, or None for a CPU-only build.

    FASTPROF_CUDA=0: None.  FASTPROF_CUDA=1: the settings, or RuntimeError when no usable
    toolkit is found.  Unset: the settings when a toolkit is found, else None.
    """
    want = os.environ.get("FASTPROF_CUDA", "").strip()
    if want == "0":
        return None
    home = _find_cuda_home()
    problem = None
    if home is None:
        problem = "no CUDA toolkit found (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda)"
    else:
        libdirs = [
            os.path.join(home, d)
            for d in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib"))
        ]
        static = [os.path.join(d, "libcudart_static.a") for d in libdirs]
        static = [p for p in static if os.path.isfile(p)]
        include = os.path.join(home, "include")
        if not static:
            problem = f"no libcudart_static.a under {home}"
        elif not os.path.isfile(os.path.join(include, "cuda_runtime_api.h")):
            problem = f"no cuda_runtime_api.h under {include}"
    if problem is not None:
        if want == "1":
            raise RuntimeError(f"FASTPROF_CUDA=1 but {problem}")
        return None
    nvcc = os.path.join(home, "bin", "nvcc")
    version = _nvcc_version(nvcc)
    if version < (12, 0):
        if want == "1":
            raise RuntimeError(
                f"FASTPROF_CUDA=1 but {nvcc} is CUDA {version}; 12.0 or later needed"
            )
        return None
    codes = _nvcc_codes(nvcc)
    archs = [a for a in _CUDA_ARCHS if not codes or f"sm_{a}" in codes]
    if not archs:
        if want == "1":
            raise RuntimeError(f"FASTPROF_CUDA=1 but {nvcc} supports none of sm_{_CUDA_ARCHS}")
        return None
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    gencode.append(f"-gencode=arch=compute_{_CUDA_PTX},code=compute_{_CUDA_PTX}")
    return {
        "home": home,
        "nvcc": nvcc,
        "include": include,
        "cudart_static": static[0],
        "archs": archs,
        "gencode": gencode,
    }


def _cu_sources() -> list[str]:
    """Every .cu file under src/ (relative paths, stable order)."""
    found = glob(os.path.join("src", "**", "*.cu"), recursive=True)
    return sorted(p.replace(os.sep, "/") for p in found)


def _compile_cuda(cuda: dict, build_temp: str) -> list[str]:
    """Compiles the .cu sources with nvcc, once per content: returns the object paths.

    Objects go to build/cuda-<hash>/ where the hash covers the sources, their headers, the
    nvcc flags and nvcc's version, so rebuilding for another Python version reuses them.
    """
    sources = _cu_sources()
    headers = sorted(
        glob(os.path.join("src", "cuda", "*.cuh")) + glob(os.path.join("src", "cuda", "*.h"))
    )
    flags = [
        "-O3",
        "-std=c++17",
        "--compiler-options",
        "-fPIC,-fvisibility=hidden",
        "-Xcompiler",
        "-fno-exceptions",
        "--expt-relaxed-constexpr",
        "-I",
        "src",
        "-cudart",
        "static",
        *cuda["gencode"],
    ]
    if os.environ.get("FASTPROF_DEBUG", "0") not in ("", "0"):
        flags += ["-g", "-lineinfo"]
    digest = hashlib.sha256()
    try:
        version = subprocess.run([cuda["nvcc"], "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    digest.update(version.encode())
    digest.update(" ".join(flags).encode())
    for path in sources + headers:
        digest.update(path.encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    outdir = os.path.join(HERE, "build", "cuda-" + digest.hexdigest()[:16])
    os.makedirs(outdir, exist_ok=True)
    objects = []
    for src in sources:
        obj = os.path.join(outdir, os.path.basename(src)[:-3] + ".o")
        if not os.path.isfile(obj):
            tmp = obj + ".tmp"
            cmd = [cuda["nvcc"], "-c", src, "-o", tmp, *flags]
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
            os.replace(tmp, obj)
        objects.append(obj)
    return objects


class BuildExt(build_ext):
    """build_ext that compiles the CUDA sources first when the CUDA build is on, and rebuilds
    the module whenever what goes into it changed (CUDA on/off, other CUDA objects), which
    file times alone do not show."""

    def finalize_options(self) -> None:
        super().finalize_options()
        # Objects left in build/ by another configuration must not be reused.
        if os.environ.get("FASTPROF_SANITIZE") or os.environ.get("FASTPROF_DEBUG", "0") not in (
            "",
            "0",
        ):
            self.force = True

    def build_extensions(self) -> None:
        cuda = _cuda_config()
        objects: list[str] = []
        if cuda is not None:
            objects = _compile_cuda(cuda, self.build_temp)
            for ext in self.extensions:
                ext.extra_objects = (
                    list(ext.extra_objects or []) + objects + [cuda["cudart_static"]]
                )
                ext.depends = list(ext.depends or []) + objects
        # the sanitizer and debug settings too: a plain build after a sanitized one in the same
        # tree must not link the sanitized objects
        flags = (os.environ.get("FASTPROF_SANITIZE", ""), os.environ.get("FASTPROF_DEBUG", "0"))
        state = "\n".join(objects if objects else ["cpu-only"]) + "\nflags %s %s" % flags
        for ext in self.extensions:
            stamp = self._link_stamp(ext)
            try:
                with open(stamp) as f:
                    same = f.read() == state
            except OSError:
                same = False
            if not same:
                self.force = True
                os.makedirs(os.path.dirname(stamp), exist_ok=True)
                with open(stamp, "w") as f:
                    f.write(state)
        super().build_extensions()

    def _link_stamp(self, ext: Extension) -> str:
        """Where the inputs of ext's last build are noted (one file per target path)."""
        target = os.path.abspath(self.get_ext_fullpath(ext.name))
        key = hashlib.sha256(target.encode()).hexdigest()[:16]
        return os.path.join(HERE, "build", f"link-{key}")


def _extension() -> Extension:
    cflags, ldflags, macros = _flags()
    cuda = _cuda_config()
    include_dirs = ["src", numpy.get_include()]
    # dl: the kernels look up libmvec with dlopen (in libc itself only from glibc 2.34)
    libraries = ["m", "pthread", "dl"] if sys.platform != "win32" else []
    if cuda is not None:
        macros.append(("FP_HAVE_CUDA", "1"))
        include_dirs.append(cuda["include"])
        # the static CUDA runtime needs these (and libstdc++ for its C++ runtime support)
        libraries += ["rt", "stdc++"]
    return Extension(
        "fastprof._fastprof",
        sources=_c_sources(),
        depends=_c_headers(),
        include_dirs=include_dirs,
        define_macros=macros,
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        libraries=libraries,
    )


setup(ext_modules=[_extension()], cmdclass={"build_ext": BuildExt})
