"""The two builds: the CUDA build links no CUDA library at load time and embeds device code;
the CPU-only build (FASTPROF_CUDA=0) imports and says why for every GPU entry point; the
device code's indexing and boundary logic checked on the host against scipy.ndimage; NVRTC
compiles the generated evaluate kernels."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fastprof
from fastprof import _fastprof, kernels
from fastprof.cuda import runtime as cuda
from fastprof.kernels import gpu as _gpu_kernels
from fastprof.kernels.args import rank1_factors
from kernel_helpers import fast_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cuda_build = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
CUDA_LIBS = ("libcuda.", "libcudart", "libcublas", "libcupti", "libnvrtc", "libnvidia")


def elf_sections(path: str) -> dict[str, bytes]:
    """Section name -> contents of a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]
    out = {}
    for name, typ, _flags, _addr, off, size, _link, _info in heads:
        end = data.index(b"\0", strtab + name)
        out[data[strtab + name : end].decode()] = data[off : off + size] if typ != 8 else b""
    return out


def needed_libraries(path: str) -> list[str]:
    """The DT_NEEDED entries of a shared object (what readelf -d lists as NEEDED)."""
    secs = elf_sections(path)
    dyn, dynstr = secs[".dynamic"], secs[".dynstr"]
    names = []
    for off in range(0, len(dyn), 16):
        tag, val = struct.unpack_from("<qQ", dyn, off)
        if tag == 0:
            break
        if tag == 1:
            names.append(dynstr[val : dynstr.index(b"\0", val)].decode())
    return names


def fatbin_entries(path: str) -> list[tuple[str, int]]:
    """(kind "elf"/"ptx", sm number) of each image in the .nv_fatbin section."""
    fb = elf_sections(path).get(".nv_fatbin", b"")
    out, pos = [], 0
    while pos + 16 <= len(fb):
        magic, _ver, hsz, total = struct.unpack_from("<IHHQ", fb, pos)
        if magic != 0xBA55ED50:
            break
        e = pos + hsz
        while e < pos + hsz + total:
            kind, _flags, ehsz, size = struct.unpack_from("<HHIQ", fb, e)
            arch = struct.unpack_from("<I", fb, e + 28)[0]
            out.append(({1: "ptx", 2: "elf"}.get(kind, "?"), arch))
            e += ehsz + size
        pos += hsz + total
        pos = (pos + 7) & ~7
    return out


def test_needed_libraries_name_no_cuda_library() -> None:
    needed = needed_libraries(_fastprof.__file__)
    assert any(n.startswith("libc.") for n in needed)
    assert not [n for n in needed if n.startswith(CUDA_LIBS)], needed
    readelf = shutil.which("readelf")
    if readelf:
        out = subprocess.run(
            [readelf, "-d", _fastprof.__file__], capture_output=True, text=True
        ).stdout
        listed = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
        assert sorted(listed) == sorted(needed)


@cuda_build
def test_cuda_build_embeds_device_code() -> None:
    entries = fatbin_entries(_fastprof.__file__)
    elf = {a for k, a in entries if k == "elf"}
    ptx = {a for k, a in entries if k == "ptx"}
    assert elf and elf <= {70, 75, 80, 86, 90}, entries
    assert {80, 90} <= elf  # A100 and H100 class have their own SASS
    assert 90 in ptx  # and PTX for later devices


@cuda_build
def test_cuda_entry_points_exist_in_both_builds() -> None:
    names = {n for n in dir(_fastprof) if n.startswith("_cuda_")}
    assert {
        "_cuda_probe",
        "_cuda_correlate",
        "_cuda_gemm",
        "_cuda_nvrtc_compile",
        "_cuda_dlpack_export",
        "_cuda_cupti_start",
        "_cuda_nvtx_push",
    } <= names


CPU_ONLY_CHECK = textwrap.dedent("""
    import numpy as np, fastprof
    from fastprof import _fastprof
    from fastprof.cuda import runtime as cuda
    from fastprof.kernels import gpu as _gpu_kernels
    from fastprof.cuda import nvtx
    assert not _fastprof._cuda_built()
    reason = cuda.status()
    assert "built without CUDA" in reason, reason
    assert cuda.is_available() is False
    x = np.ones((4, 4), np.float32)
    calls = [cuda.devices, cuda.synchronize, lambda: cuda.cuda_timer().__enter__(),
             lambda: cuda.DeviceArray.empty(3), lambda: cuda.cuda_trace().__enter__(),
             lambda: cuda.benchmark(print, n_warmup=0, n_repeat=1),
             lambda: _gpu_kernels.correlate(x, np.ones((3, 3))),
             lambda: _gpu_kernels.uniform_filter(x, 3),
             lambda: _gpu_kernels.evaluate("a*2", {"a": x}),
             lambda: _gpu_kernels.matmul(x, x),
             lambda: _fastprof._cuda_malloc(16), lambda: _fastprof._cuda_probe()]
    for call in calls:
        try:
            call()
        except cuda.CudaUnavailableError as e:
            assert "built without CUDA" in str(e), e
        else:
            raise AssertionError(f"{call} did not raise")
    with nvtx.range("free"):
        pass
    print("names", " ".join(sorted(n for n in dir(_fastprof) if n.startswith("_cuda_"))))
""")


@pytest.mark.skipif(not os.path.isfile(os.path.join(ROOT, "setup.py")), reason="no source tree")
def test_cpu_only_build_imports_and_says_why(tmp_path) -> None:
    pytest.importorskip("setuptools", reason="building the CPU-only variant needs setuptools")
    # -O0 (FASTPROF_DEBUG) and two jobs keep this build quick; behaviour is the same
    env = dict(os.environ, FASTPROF_CUDA="0", FASTPROF_DEBUG="1")
    env.pop("FASTPROF_SANITIZE", None)
    lib, tmp = tmp_path / "lib", tmp_path / "tmp"
    build = subprocess.run(
        [
            sys.executable,
            "setup.py",
            "-q",
            "build_ext",
            "-j",
            "2",
            "--build-lib",
            str(lib),
            "--build-temp",
            str(tmp),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    built = [p for p in os.listdir(lib / "fastprof") if p.startswith("_fastprof")]
    assert len(built) == 1
    so = str(lib / "fastprof" / built[0])
    assert ".nv_fatbin" not in elf_sections(so)
    assert not [n for n in needed_libraries(so) if n.startswith(CUDA_LIBS)]
    pkg = os.path.dirname(fastprof.__file__)
    for name in os.listdir(pkg):
        src = os.path.join(pkg, name)
        if name.endswith(".py") or name in ("py.typed",):
            shutil.copy(src, lib / "fastprof" / name)
        elif os.path.isdir(src) and name != "__pycache__":
            shutil.copytree(
                src, lib / "fastprof" / name, ignore=shutil.ignore_patterns("*.so", "__pycache__")
            )
    run = subprocess.run(
        [sys.executable, "-c", CPU_ONLY_CHECK],
        cwd=str(tmp_path),
        env=dict(os.environ, PYTHONPATH=str(lib)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cpu_names = set(run.stdout.split("names", 1)[1].split())
    assert cpu_names == {n for n in dir(_fastprof) if n.startswith("_cuda_")}


# --- the device code on the host ----------------------------------------------------------------

ndimage = pytest.importorskip("scipy.ndimage")
MODES = [
    "reflect",
    "constant",
    "nearest",
    "mirror",
    "wrap",
    "grid-mirror",
    "grid-constant",
    "grid-wrap",
]


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if ref.dtype.kind in "iu":  # sums rounded differently may cross an integer
        assert np.abs(got.astype(np.float64) - ref).max(initial=0) <= 1
    else:
        # float32 sums accumulate in float32 on the device (scipy uses float64): allow for
        # cancellation relative to the largest value
        tol = 2e-5 if ref.dtype == np.float32 else 1e-11
        scale = float(np.abs(ref).max(initial=1.0))
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale)


SHAPES = [(7,), (1,), (2,), (5, 6), (3, 1, 4), (6, 5, 4), (2, 3, 2, 3)]


@cuda_build
@pytest.mark.parametrize("path", [True, "direct"], ids=["device-path", "direct"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("fn", ["correlate", "convolve"])
def test_device_code_matches_scipy(shape, fn, path) -> None:
    rng = np.random.default_rng(len(shape) * 10 + shape[0])
    for dtype in (np.float64, np.float32, np.int16):
        x = (rng.standard_normal(shape) * 20).astype(dtype)
        for wshape in (
            tuple(3 for _ in shape),
            tuple(4 for _ in shape),
            tuple(1 for _ in shape),
            tuple(min(s + 3, 6) for s in shape),
        ):
            w = rng.standard_normal(wshape)
            for mode in MODES:
                for origin in sorted({0, -(wshape[0] // 2), (wshape[0] - 1) // 2}):
                    try:
                        ref = getattr(ndimage, fn)(x, w, mode=mode, cval=1.5, origin=origin)
                    except ValueError:  # origin out of range for some axis: ours says so too
                        with pytest.raises(ValueError, match="origin"):
                            getattr(_gpu_kernels, fn)(x, w, mode=mode, origin=origin, _emulate=path)
                        continue
                    got = getattr(_gpu_kernels, fn)(
                        x, w, mode=mode, cval=1.5, origin=origin, _emulate=path
                    )
                    _close(got, ref)


@cuda_build
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_element_weights_in_the_parameters_and_above_their_limit(dtype) -> None:
    # the per-element kernel takes weights of up to FP_CU_CW_BYTES (3584: 448 float64, 896
    # float32) in its parameters and reads larger ones from global memory: both equal scipy,
    # at the limit and past it (weights no longer than their axes: scipy's float32 reflect of
    # a kernel many times longer than its axis is not a reference)
    rng = np.random.default_rng(21)
    x = rng.standard_normal((3, 2, 120, 9)).astype(dtype)
    limit = 3584 // np.dtype(dtype).itemsize
    for wshape in ((2, 2, 3, 3), (1, 1, limit // 8, 8), (1, 1, limit // 8, 8 + 1), (2, 2, 9, 8)):
        w = rng.standard_normal(wshape)
        for mode in MODES:
            got = fast_gpu.correlate(x, w, mode=mode, cval=0.5, _emulate="direct")
            _close(got, ndimage.correlate(x, w, mode=mode, cval=0.5))


@cuda_build
@pytest.mark.parametrize("mode", MODES)
def test_device_code_separable_and_box_paths(mode) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((9, 8, 7))
    w = np.multiply.outer(np.multiply.outer([1.0, 2, 3], [0.5, 1]), [1.0, 1, 1, 1])
    assert rank1_factors(w) is not None  # the GPU runs these weights as 1-D passes
    assert rank1_factors(rng.standard_normal((3, 3))) is None
    for cval in (0.0, 2.0):
        _close(
            fast_gpu.correlate(x, w, mode=mode, cval=cval, _emulate=True),
            ndimage.correlate(x, w, mode=mode, cval=cval),
        )
        _close(
            fast_gpu.convolve(x, w, mode=mode, cval=cval, origin=(0, -1, 1), _emulate=True),
            ndimage.convolve(x, w, mode=mode, cval=cval, origin=(0, -1, 1)),
        )
    for size, origin in ((3, 0), ((5, 1, 4), (1, 0, -2)), (2, -1), (1, 0)):
        _close(
            fast_gpu.uniform_filter(x, size, mode=mode, cval=1.0, origin=origin, _emulate=True),
            ndimage.uniform_filter(x, size, mode=mode, cval=1.0, origin=origin),
        )
    x32 = x.astype(np.float32)
    _close(
        fast_gpu.uniform_filter(x32, 5, mode=mode, _emulate=True),
        ndimage.uniform_filter(x32, 5, mode=mode),
    )


@cuda_build
def test_uniform_filter_modes_per_axis_and_axes() -> None:
    x = np.random.default_rng(4).standard_normal((6, 7, 5))
    _close(
        fast_gpu.uniform_filter(x, 3, mode=["wrap", "nearest", "mirror"], _emulate=True),
        ndimage.uniform_filter(x, 3, mode=["wrap", "nearest", "mirror"]),
    )
    if "axes" in ndimage.uniform_filter.__code__.co_varnames:
        _close(
            fast_gpu.uniform_filter(x, 3, axes=(0, -1), _emulate=True),
            ndimage.uniform_filter(x, 3, axes=(0, -1)),
        )


@cuda_build
def test_host_hook_rejects_buffers_it_would_overrun() -> None:
    x = np.ones(8)
    out = np.empty(8)
    with pytest.raises(ValueError):
        _fastprof._cuda_correlate_host(1, x, 0, out, None, (8,), (2,), (3,), (1,), 0, 0.0, 1.0, 0)
    with pytest.raises(ValueError):
        _fastprof._cuda_correlate_host(
            1, x, 0, np.empty(4), None, (8,), (1,), (3,), (1,), 0, 0.0, 1.0, 0
        )
    with pytest.raises(ValueError):
        _fastprof._cuda_correlate_host(
            1, x, 0, out, np.ones(2), (8,), (1,), (3,), (1,), 0, 0.0, 0.0, 0
        )


# --- evaluate: generated source and NVRTC ------------------------------------------------------

EXPRS = [
    "sin(a) + cos(b)",
    "sqrt(abs(a)) * 2 - b ** 2",
    "a ** 3 + b % 2.5",
    "where(a > b, a, -b)",
    "(a < 1) & (b >= 0) | ~(a == b)",
    "arctan2(a, b) + minimum(a, k) + maximum(b, 1e300)",
    "exp(-a * a / 2) / sqrt(2 * 3.141592653589793)",
    "log1p(abs(a)) + expm1(b) + tanh(k)",
    "-a + +b - k",
    "floor(a) + ceil(b) + fmod(a, 3)",
]


@pytest.mark.parametrize("expr", EXPRS)
def test_generated_source_names_and_kind(expr) -> None:
    f32 = np.dtype(np.float32)
    src = _gpu_kernels.generate_source(expr, {"a": f32, "b": f32, "k": 1.25})
    assert 'extern "C" __global__ void fp_eval(' in src.source
    cpu = kernels.evaluate(expr, {"a": np.ones(3, f32), "b": np.ones(3, f32), "k": 1.25})
    assert src.dtype == cpu.dtype  # one typed tree: the CPU's dtype
    assert {p.name for p in src.params} <= {"a", "b", "k"}
    for i, p in enumerate(src.params):
        assert (
            f"double s{i}" if p.name == "k" else f"const float *__restrict__ a{i}"
        ) in src.source
    src64 = _gpu_kernels.generate_source(expr, {"a": np.dtype(np.float64), "b": 2.0, "k": 1})
    assert "sinf" not in src64.source and "const float" not in src64.source


@cuda_build
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nvrtc_compiles_every_generated_kernel(dtype) -> None:
    try:
        _gpu_kernels.compile_source('extern "C" __global__ void k() {}', "sm_80")
    except cuda.CudaUnavailableError as e:
        pytest.skip(f"NVRTC not loadable here: {e}")
    for expr in EXPRS:
        src = _gpu_kernels.generate_source(
            expr, {"a": np.dtype(dtype), "b": np.dtype(dtype), "k": 1.5}
        )
        image = _gpu_kernels.compile_source(src.source, "sm_80")
        assert image[:4] == b"\x7fELF"
    with pytest.raises(RuntimeError, match="NVRTC could not compile"):
        _gpu_kernels.compile_source("this is not CUDA", "sm_80")


@cuda_build
@pytest.mark.parametrize(
    "shape, wshape",
    [
        ((19, 37, 70), (5, 5, 5)),
        ((9, 17, 33), (3, 4, 2)),
        ((70, 45), (5, 3)),
        ((3, 9, 40), (7, 1, 6)),
        ((10, 12, 40), (4, 3, 3)),
        ((17, 9, 35), (1, 5, 5)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_path_across_many_blocks(shape, wshape, dtype) -> None:
    assert _gpu_kernels._tiled_ok(np.dtype(dtype), shape, wshape)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(wshape)
    for mode in ("reflect", "constant", "wrap", "mirror", "nearest"):
        _close(
            fast_gpu.correlate(x, w, mode=mode, cval=0.25, _emulate=True),
            ndimage.correlate(x, w, mode=mode, cval=0.25),
        )
    _close(
        fast_gpu.uniform_filter(x, 3, mode="mirror", _emulate=True),
        ndimage.uniform_filter(x, 3, mode="mirror"),
    )


@cuda_build
def test_tiled_path_limits() -> None:
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert _gpu_kernels._tiled_ok(f64, (512, 512, 256), (5, 5, 5))
    assert not _gpu_kernels._tiled_ok(f64, (64, 64, 64), (9, 9, 9))  # window over 48 KiB
    assert not _gpu_kernels._tiled_ok(f32, (100,), (5,))  # 1-D: direct kernel
    assert not _gpu_kernels._tiled_ok(f32, (4, 4, 4, 4), (3, 3, 3, 3))


@cuda_build
def test_axes_and_output_dtype_as_scipy() -> None:
    x = np.random.default_rng(12).standard_normal((6, 7, 8))
    w2 = np.random.default_rng(13).standard_normal((3, 2))
    for fn in ("correlate", "convolve"):
        for axes, origin in (((0, 2), (1, 0)), ((2, 0), (0, -1)), ((-1, 1), 0)):
            if "axes" not in getattr(ndimage, fn).__code__.co_varnames:
                pytest.skip("this SciPy has no axes=")
            ref = getattr(ndimage, fn)(x, w2, mode="wrap", origin=origin, axes=axes)
            _close(
                getattr(_gpu_kernels, fn)(
                    x, w2, mode="wrap", origin=origin, axes=axes, _emulate=True
                ),
                ref,
            )
    ref = ndimage.correlate(x, np.ones((3, 3, 3)), output=np.float32)
    got = fast_gpu.correlate(x, np.ones((3, 3, 3)), output=np.float32, _emulate=True)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="axes"):
        fast_gpu.correlate(x, w2, axes=(0, 0))
    with pytest.raises(ValueError, match="filtered axis"):
        fast_gpu.correlate(x, w2, axes=(0,))
