"""The CUDA libraries fastprof opens and what it makes of them, without a GPU: the library
search (CUDA 12's and CUDA 13's pip wheels), kernel-name demangling (libcufilt, else the small
demangler, else the raw name), NVRTC failures whose log cannot be read, and a libcupti newer
than the driver.  Stand-in libraries are built with the C compiler and opened in a child
process (the extension keeps the first library it opens for the life of the process)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from fastprof import _fastprof
from fastprof.cuda import _base as _cuda_base
from fastprof.cuda import cupti
from fastprof.cuda import demangle as _demangle
from fastprof.cuda import timeline as cuda_timeline

CC = shutil.which("gcc") or shutil.which("cc")
needs_cuda_build = pytest.mark.skipif(
    not _fastprof._cuda_built(), reason="fastprof built without CUDA"
)
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler to build a stand-in library")


def build_library(tmp_path, name: str, source: str) -> str:
    """A shared library built from C source; returns its path."""
    src = tmp_path / (name + ".c")
    src.write_text(textwrap.dedent(source))
    out = tmp_path / name
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return str(out)


def run_child(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs code in a fresh interpreter that imports the fastprof under test."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(_fastprof.__file__)))
    full = {**os.environ, **(env or {})}
    full["PYTHONPATH"] = os.pathsep.join([pkg, full.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full
    )


# --- the library search ----------------------------------------------------------------------


def test_cuda_12_and_13_wheels_are_both_found(tmp_path, monkeypatch) -> None:
    for sub, name in (("cublas", "libcublas.so.12"), ("cu13", "libcublas.so.13")):
        d = tmp_path / "site" / "nvidia" / sub / "lib"
        d.mkdir(parents=True)
        (d / name).write_bytes(b"")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    names = ("libcublas.so", "libcublas.so.13", "libcublas.so.12")
    found = cupti.library_candidates("cublas", names, "cublas")
    site = tmp_path / "site" / "nvidia"
    assert str(site / "cublas" / "lib" / "libcublas.so.12") in found
    assert str(site / "cu13" / "lib" / "libcublas.so.13") in found
    assert found[-3:] == names  # the sonames last, for the system's search
    # the search is remembered per sys.path: a new entry is searched
    (tmp_path / "more" / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (tmp_path / "more" / "nvidia" / "cu13" / "lib" / "libcublas.so").write_bytes(b"")
    sys.path.append(str(tmp_path / "more"))
    again = cupti.library_candidates("cublas", names, "cublas")
    assert str(tmp_path / "more" / "nvidia" / "cu13" / "lib" / "libcublas.so") in again


# --- demangling ------------------------------------------------------------------------------

KNOWN = {  # mangled by g++, demangled by GNU c++filt
    "_Z5plainPfPKdi": "plain(float*, double const*, int)",
    "_Z16fp_cu_run_kernelIdEvPKT_PS0_xjbd": (
        "void fp_cu_run_kernel<double>(double const*, double*, long long, unsigned int, bool, "
        "double)"
    ),
    "_Z18fp_cu_tiled_kernelIfLi8ELi3EEvPKT_PS0_S2_": (
        "void fp_cu_tiled_kernel<float, 8, 3>(float const*, float*, float const*)"
    ),
    "_Z4litsILb1ELj7ELln3EEvv": "void lits<true, 7u, -3l>()",
    "_ZN12_GLOBAL__N_111anon_kernelIdEEvPT_": (
        "void (anonymous namespace)::anon_kernel<double>(double*)"
    ),
    "_ZN3cub18DeviceReduceKernelINS_6detail6PolicyIfLi4EEEfEEvPKT0_PS4_iT_": (
        "void cub::DeviceReduceKernel<cub::detail::Policy<float, 4>, float>(float const*, "
        "float*, int, cub::detail::Policy<float, 4>)"
    ),
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE": (
        "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float> >"
        "(cutlass::gemm::kernel::Gemm<float>::Params)"
    ),
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_": (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
    ),
    "_ZNSt6vectorIiSaIiEE9push_backERKi": (
        "std::vector<int, std::allocator<int> >::push_back(int const&)"
    ),
    "_Z5helloPKcRiOd": "hello(char const*, int&, double&&)",
    "_Z5saxpyifPKfPf.constprop.0.isra.1": (
        "saxpy(int, float, float const*, float*) [clone .constprop.0] [clone .isra.1]"
    ),
    "_Z1fv.cold": "f() [clone .cold]",
}


@pytest.mark.parametrize("mangled", sorted(KNOWN))
def test_small_demangler_writes_what_cxxfilt_writes(mangled) -> None:
    assert _demangle.demangle_itanium(mangled) == KNOWN[mangled]


def test_names_it_cannot_read_stay_as_they_are(monkeypatch) -> None:
    monkeypatch.setattr(_demangle, "_cufilt", [False])
    monkeypatch.setattr(_demangle, "_seen", {})
    for raw in (
        "fp_eval",  # extern "C"
        "_ZN2at6native18elementwise_kernelIZ3usevEUliE_EEviT_",  # a lambda
        "_Z3fooIJifEEvDpT_",  # a pack expansion
        "_Z3fo",  # cut short
        "_ZN3fooE9",
    ):
        assert _demangle.demangle(raw) == raw
    assert _demangle.demangle("_Z5plainPfPKdi") == KNOWN["_Z5plainPfPKdi"]


def test_trace_records_carry_demangled_kernel_names(monkeypatch) -> None:
    monkeypatch.setattr(_demangle, "_cufilt", [False])
    monkeypatch.setattr(_demangle, "_seen", {})
    rec = cupti._from_gpu_record(cuda_timeline.Kernel("_Z5plainPfPKdi", 10, 30, 0, 1, 7, 1))
    assert rec.name == KNOWN["_Z5plainPfPKdi"] and rec.duration_ns == 20
    assert rec.kind == "kernel"
    plain = cuda_timeline.Kernel("fp_eval", 0, 1, 0, 1, 7, 1)
    assert cupti._from_gpu_record(plain).name == "fp_eval"
    copy = cuda_timeline.Memcpy("Host-to-Device", 64, 0, 1, 0, 1, 7, 1)
    assert cupti._from_gpu_record(copy).name == "memcpy HtoD"


@needs_cuda_build
@needs_cc
def test_libcufilt_is_used_when_the_search_finds_it(tmp_path) -> None:
    lib = tmp_path / "cuda" / "lib64"
    lib.mkdir(parents=True)
    build_library(
        lib,
        "libcufilt.so",
        r"""
        #include <stdlib.h>
        #include <string.h>
        char *__cu_demangle(const char *id, char *buf, size_t *len, int *status) {
            char *out;
            if (strcmp(id, "_Z3barv") != 0) { *status = -2; return NULL; }
            out = malloc(32);
            strcpy(out, "bar() [cu++filt]");
            *status = 0;
            return out;
        }
        """,
    )
    res = run_child(
        """
        from fastprof.cuda import demangle as _demangle
        print(_demangle.demangle("_Z3barv"))
        print(_demangle.demangle("_Z5plainPfPKdi"))  # not cu++filt's: the small demangler
        print(_demangle.demangle("kernel"))
        """,
        {"CUDA_HOME": str(tmp_path / "cuda")},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["bar() [cu++filt]", KNOWN["_Z5plainPfPKdi"], "kernel"]


# --- NVRTC whose log cannot be read ----------------------------------------------------------

FAKE_NVRTC = r"""
#include <stdlib.h>
#include <string.h>
/* NVRTC whose compile always fails; FAKE_LOG says how reading its log goes */
static const char *mode(void) { const char *m = getenv("FAKE_LOG"); return m ? m : ""; }
int nvrtcCreateProgram(void **p, const char *s, const char *n, int k, const char *const *h,
                       const char *const *i) { *p = malloc(1); return 0; }
int nvrtcCompileProgram(void *p, int n, const char *const *o) { return 6; }
int nvrtcGetProgramLogSize(void *p, size_t *n) {
    if (!strcmp(mode(), "size fails")) return 7;
    if (!strcmp(mode(), "size 0")) { *n = 0; return 0; }
    if (!strcmp(mode(), "size huge")) { *n = (size_t)-1; return 0; }
    *n = 12; return 0;
}
int nvrtcGetProgramLog(void *p, char *b) {
    if (!strcmp(mode(), "read fails")) return 7;
    if (!strcmp(mode(), "not utf-8")) { memcpy(b, "bad \xff\xfe log", 12); return 0; }
    memcpy(b, "error: here", 12); return 0;
}
int nvrtcGetCUBINSize(void *p, size_t *n) { return 7; }
int nvrtcGetCUBIN(void *p, char *b) { return 7; }
int nvrtcGetPTXSize(void *p, size_t *n) { return 7; }
int nvrtcGetPTX(void *p, char *b) { return 7; }
int nvrtcDestroyProgram(void **p) { free(*p); *p = 0; return 0; }
"""


@needs_cuda_build
@needs_cc
def test_a_failing_nvrtc_log_read_raises_and_never_crashes(tmp_path) -> None:
    path = build_library(tmp_path, "libnvrtc.so", FAKE_NVRTC)
    res = run_child(
        f"""
        import os
        from fastprof import _fastprof
        for mode in ("ok", "size fails", "size 0", "size huge", "read fails", "not utf-8"):
            os.environ["FAKE_LOG"] = mode
            try:
                _fastprof._cuda_nvrtc_compile("x", "k.cu", ("-arch=sm_80",), True, ({path!r},))
            except RuntimeError as exc:
                print(mode, "|", str(exc).replace(chr(10), " "))
        """
    )
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" | ") for line in res.stdout.splitlines())
    assert lines["ok"] == "NVRTC could not compile k.cu (error 6): error: here"
    for mode in ("size fails", "size 0", "size huge", "read fails"):
        assert lines[mode] == "NVRTC could not compile k.cu (error 6; its log could not be read)"
    assert lines["not utf-8"].startswith("NVRTC could not compile k.cu (error 6): bad ")


# --- CUPTI and the driver --------------------------------------------------------------------


class FakeCupti:
    def __init__(self, api: int, driver: int) -> None:
        self.versions = (api, driver)
        self.started = False

    def _cuda_cupti_version(self, paths):
        return self.versions

    def _cuda_cupti_start(self, paths):
        self.started = True
        return ("libcupti.so", (10,), (0, 0, 0))

    def _cuda_cupti_stop(self):
        return [], 0, [], 0, (0, 0, 0), (0, 0, 0)

    def _cuda_synchronize(self):
        pass


@pytest.mark.parametrize(
    "api, driver, refused",
    [
        (130000, 12040, "CUDA 13.0, newer than the NVIDIA driver (it supports CUDA 12.4)"),
        (130100, 13000, "CUDA 13.1, newer than the NVIDIA driver (it supports CUDA 13.0)"),
        (24, 12040, "CUDA 12.6, newer than the NVIDIA driver (it supports CUDA 12.4)"),
        (24, 12060, None),
        (130000, 13020, None),
        (99, 12040, None),  # an API version it does not know: CUPTI itself decides
    ],
)
def test_a_libcupti_newer_than_the_driver_is_refused(monkeypatch, api, driver, refused) -> None:
    fake = FakeCupti(api, driver)
    monkeypatch.setattr(cuda_timeline, "_C", fake)
    monkeypatch.setattr(_cuda_base, "_probe", lambda: (1, ""))
    if refused:
        with pytest.raises(_cuda_base.CudaUnavailableError, match=re.escape(refused)):
            with cupti.cuda_trace():
                pass
        assert not fake.started and not cuda_timeline._running  # nothing left running
    else:
        with cupti.cuda_trace() as tr:
            pass
        assert fake.started and tr.records == []
