"""Edges of the GPU front end: integer matmul, DeviceArray shapes and implicit conversion,
stream values, TimedArray reductions, device names, mixed matmul operands, NVTX range names
and typing, and benchmark's argument checks.

The checks run before any CUDA call, so most tests need no device; those that run device
work use the fake device of tests/fake_device.py (CUDA builds only, as
tests/test_cuda_fake_device.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fake_device
from fastprof import _fastprof, kernels
from fastprof.cuda import nvtx
from fastprof.cuda import runtime as cuda
from fastprof.kernels import args as _kernel_args
from fastprof.kernels import gpu as _gpu_kernels

needs_cuda_build = pytest.mark.skipif(
    not _fastprof._cuda_built(), reason="fastprof built without CUDA (the fake device needs it)"
)
dev = fake_device.dev  # the fixture: a FakeDevice installed for one test


# --- 1. integer matmul is refused on the GPU ---------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])  # bool: refused on both
def test_matmul_refuses_an_integer_product_on_the_gpu(dtype: Any) -> None:
    a = np.array([[2**53 + 1, 3]]).astype(dtype)
    b = np.array([[1], [0]]).astype(dtype)
    assert kernels.matmul(a, b).dtype == (a @ b).dtype  # NumPy's on the CPU, exact
    for call in (
        lambda: kernels.matmul(a, b, device="cuda"),
        lambda: _gpu_kernels.matmul(a, b),
    ):
        with pytest.raises(TypeError) as info:
            call()
        text = str(info.value)
        assert f"a: {np.dtype(dtype)}, b: {np.dtype(dtype)}" in text
        assert "float32/float64" in text and "device='cpu'" in text
    assert _gpu_kernels._plans == {} or all(
        k[2].kind == "f" or k[5].kind == "f" for k in _gpu_kernels._plans if k[0] == "matmul"
    )


@needs_cuda_build
def test_matmul_of_integers_and_floats_still_runs_as_numpy_promotes(dev) -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.ones((3, 2))
    got = _gpu_kernels.matmul(a, b)
    assert got.dtype == np.float64 and got.tolist() == (a @ b).tolist()


# --- 2. DeviceArray sizes are taken as NumPy takes them ----------------------------------------


@pytest.mark.parametrize(
    "shape, error",
    [
        ("12", TypeError),
        ((2.5,), TypeError),
        (2.5, TypeError),
        ((True, 3), TypeError),
        (True, TypeError),
        ((np.bool_(True),), TypeError),
        ((None,), TypeError),
        ((-1, 2), ValueError),
        (-3, ValueError),
    ],
)
def test_device_array_shapes_are_refused_as_numpy_refuses_them(shape: Any, error: type) -> None:
    with pytest.raises((TypeError, ValueError)):
        np.empty(shape)  # NumPy refuses it too
    for make in (cuda.DeviceArray.empty, cuda.DeviceArray.zeros):
        with pytest.raises(error, match="shape"):
            make(shape)


@pytest.mark.parametrize("shape", [(2**62, 4), 2**63 - 1, (2**40, 2**40)])
def test_a_device_array_too_big_for_an_allocation_is_a_valueerror(shape: Any) -> None:
    for make in (cuda.DeviceArray.empty, cuda.DeviceArray.zeros):
        with pytest.raises(ValueError, match="array is too big"):
            make(shape, np.float64)


@needs_cuda_build
def test_device_array_sizes_take_index_types(dev) -> None:
    assert cuda.DeviceArray.empty(np.int64(3)).shape == (3,)
    assert cuda.DeviceArray.zeros([np.uint8(2), 3]).shape == (2, 3)
    assert cuda.DeviceArray.empty(np.array([4, 1])).shape == (4, 1)
    assert cuda.DeviceArray.empty(()).shape == ()


# --- 3. no implicit conversion to NumPy ----------------------------------------------------------


def test_numpy_conversion_of_a_device_array_is_refused() -> None:
    d = cuda.DeviceArray(0, (2, 3), np.float64, None, 0, None)  # makes no CUDA call
    for convert in (np.asarray, np.array, np.sum, lambda x: np.add(x, 1)):
        with pytest.raises(TypeError, match=r"\.to_numpy\(\)"):
            convert(d)


@needs_cuda_build
def test_to_numpy_still_copies_and_the_kernels_still_take_device_arrays(dev) -> None:
    host = np.arange(6.0).reshape(2, 3)
    d = cuda.DeviceArray.from_numpy(host)
    assert d.to_numpy().tolist() == d.get().tolist() == host.tolist()
    got = kernels.evaluate("x * 2", {"x": d})
    assert got.to_numpy().tolist() == (host * 2).tolist()


# --- 4. stream values ---------------------------------------------------------------------------


class _Attr:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


@pytest.mark.parametrize(
    "stream, error",
    [
        (2**70, ValueError),
        (2**64, ValueError),
        (-1, ValueError),
        (np.int64(-5), ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("7", TypeError),
        (_Attr(ptr=-1), ValueError),
        (_Attr(ptr=2**64), ValueError),
        (_Attr(cuda_stream=-3), ValueError),
        (_Attr(handle=2**70), ValueError),
        (_Attr(ptr=1.5), TypeError),
        (_Attr(cuda_stream=True), TypeError),
    ],
)
def test_stream_values_outside_a_cudastream_t_are_refused(stream: Any, error: type) -> None:
    with pytest.raises(error, match="stream"):
        cuda.stream_handle(stream)
    with pytest.raises(error, match="stream"):
        cuda.cuda_timer(stream=stream)
    with pytest.raises(error, match="stream"):
        cuda.DeviceArray.empty(3, stream=stream)


def test_stream_values_inside_are_taken() -> None:
    assert cuda.stream_handle(2**64 - 1) == 2**64 - 1
    assert cuda.stream_handle(np.uint64(2**64 - 1)) == 2**64 - 1
    assert cuda.stream_handle(_Attr(ptr=0)) == 0 and cuda.stream_handle(_Attr(handle=5)) == 5

    class VoidP:  # a ctypes c_void_p whose value is None: the null stream
        value = None

    assert cuda.stream_handle(_Attr(handle=VoidP())) == 0


@needs_cuda_build
def test_cuda_timer_gives_its_events_back_when_recording_fails(dev, monkeypatch) -> None:
    t = cuda.cuda_timer(stream=7)
    real = dev._cuda_event_record

    def record(ev: int, stream: int) -> None:
        raise cuda.CudaError(400, "cudaErrorInvalidResourceHandle", "invalid resource handle")

    monkeypatch.setattr(dev, "_cuda_event_record", record, raising=False)
    with pytest.raises(cuda.CudaError):
        with t:
            pass
    assert sum(len(v) for v in cuda._events.free.values()) == len(cuda._events.owner) == 1
    monkeypatch.setattr(dev, "_cuda_event_record", real, raising=False)
    with t:  # the start event went back: the same one is taken again, and one more
        pass
    assert len(t) == 1 and len(cuda._events.owner) == 2


@needs_cuda_build
def test_cuda_timer_exit_failure_gives_both_events_back_and_can_run_again(dev, monkeypatch) -> None:
    t = cuda.cuda_timer(stream=7)
    real = dev._cuda_event_record

    def record(ev: int, stream: int) -> None:
        raise cuda.CudaError(400, "cudaErrorInvalidResourceHandle", "invalid resource handle")

    with pytest.raises(cuda.CudaError):
        with t:
            monkeypatch.setattr(dev, "_cuda_event_record", record, raising=False)
    monkeypatch.setattr(dev, "_cuda_event_record", real, raising=False)
    assert len(t) == 0
    assert sum(len(v) for v in cuda._events.free.values()) == len(cuda._events.owner) == 2
    with t:  # not "already running"
        pass
    assert len(t) == 1 and t.elapsed_ms == 1.0
    assert len(cuda._events.owner) == 2  # the two pooled events, reused


@needs_cuda_build
def test_as_device_array_honours_and_checks_its_stream(dev) -> None:
    d = cuda.DeviceArray.from_numpy(np.arange(4.0), stream=5)
    assert cuda.as_device_array(d) is d and cuda.as_device_array(d, 5) is d
    dev.log.clear()
    v = cuda.as_device_array(d, stream=9)
    assert (v.ptr, v.shape, v.stream) == (d.ptr, d.shape, 9) and v._owner is d._owner
    assert _waited(dev.log, 5, 9)  # stream 9 waits for the work queued on d's stream
    for bad, error in (("bad", TypeError), (-1, ValueError), (2**64, ValueError)):
        with pytest.raises(error, match="stream"):
            cuda.as_device_array(d, stream=bad)

    class Cai:
        def __init__(self, stream: Any) -> None:
            self.__cuda_array_interface__ = {**d.__cuda_array_interface__, "stream": stream}

    assert cuda.as_device_array(Cai(6)).stream == 6
    assert cuda.as_device_array(Cai(1)).stream == 0 and cuda.as_device_array(Cai(None)).stream == 0
    dev.log.clear()
    w = cuda.as_device_array(Cai(6), stream=9)
    assert w.stream == 9 and _waited(dev.log, 6, 9)
    for bad, error in ((-3, ValueError), (2**64, ValueError), (True, TypeError), ("1", TypeError)):
        with pytest.raises(error, match=r"__cuda_array_interface__\['stream'\]"):
            cuda.as_device_array(Cai(bad))
        with pytest.raises(error, match="stream"):
            kernels.evaluate("x + 1", {"x": Cai(bad)})


def _waited(log: list, producer: int, consumer: int) -> bool:
    """Whether an event recorded on producer was then waited on by consumer."""
    recorded = {ev for what, st, *rest in log if what == "record" and st == producer for ev in rest}
    return any(what == "wait" and st == consumer and rest[0] in recorded for what, st, *rest in log)


# --- 5. TimedArray reductions -------------------------------------------------------------------


def _timed(values: Any) -> _gpu_kernels.TimedArray:
    out = np.asarray(values, dtype=np.float64).view(_gpu_kernels.TimedArray)
    out.timings = {"h2d_ms": 1.0, "kernel_ms": 1.0, "d2h_ms": 1.0, "total_ms": 3.0}
    return out


def test_timed_array_reductions_are_numpy_scalars() -> None:
    r = _timed(np.ones((3, 4)))
    for got, want in (
        (r.sum(), 12.0),
        (r.max(), 1.0),
        (np.mean(r), 1.0),
        (r[0, 0] * 2, 2.0),
        (np.sqrt(r[1, 1]), 1.0),
    ):
        assert type(got) is np.float64 and got == want
        assert isinstance(got, float) and json.dumps({"v": got}) == f'{{"v": {want}}}'
    zero_d = np.add(r.sum(), 0, out=np.empty(()))  # NumPy keeps out= a 0-d array
    assert type(zero_d) is np.ndarray and zero_d.shape == ()
    rows = r.sum(axis=1)  # a reduction to an array: as before, a TimedArray without timings
    assert type(rows) is _gpu_kernels.TimedArray and rows.timings is None
    assert rows.tolist() == [4.0, 4.0, 4.0]
    assert r.timings["total_ms"] == 3.0 and r[1:].timings is None


@needs_cuda_build
def test_gpu_results_reduce_like_cpu_results(dev) -> None:
    a, w = np.ones((8, 8)), np.ones((3, 3))
    for device in ("cpu", "cuda"):
        r = kernels.correlate(a, w, device=device)
        s = r.sum()
        assert type(s) is np.float64 and s == 576.0, device
        assert json.dumps({"total": s}) == '{"total": 576.0}'
    assert kernels.correlate(a, w, device="cuda").timings["total_ms"] == 3.0


@needs_cuda_build
@pytest.mark.skipif(fake_device.CXX is None, reason="no C++ compiler for the generated kernels")
def test_a_whole_array_reduction_of_evaluate_is_a_scalar_on_both_devices(dev) -> None:
    x = np.arange(5.0)
    for expr in ("sum(x)", "sum(x * 2, axis=0)", "prod(x + 1)"):
        cpu = kernels.evaluate(expr, {"x": x}, device="cpu")
        gpu = kernels.evaluate(expr, {"x": x}, device="cuda")
        assert type(gpu) is type(cpu) is np.float64 and gpu == cpu, expr
        assert _gpu_kernels.last_timings()["total_ms"] == 3.0  # the timings stay readable
    out = np.empty(())
    assert kernels.evaluate("sum(x)", {"x": x}, out=out, device="cuda") is out and out == 10.0


# --- 6. device names: one reading in both layers ------------------------------------------------


GPU_NAMES = [
    ("cuda", None),
    ("gpu", None),
    ("CUDA", None),
    ("GPU", None),
    (" cuda", None),
    ("Cuda:0", 0),
    ("cuda:1", 1),
    ("GPU:2", 2),
    (" gpu:3 ", 3),
    (0, 0),
    (np.int64(1), 1),
]
BAD_NAMES = ["cuda:", "cuda:-1", "cuda:x", "tpu", "", -1, True, 1.0, "cuda 0"]


@pytest.mark.parametrize("name, index", GPU_NAMES)
def test_both_layers_read_a_gpu_name_alike(name: Any, index: Any) -> None:
    assert cuda.parse_device(name) == index
    assert cuda.device_spec(name, allow_cpu=True) == index
    assert _kernel_args.wants_gpu(name, np.ones(3)) is True


@pytest.mark.parametrize("name", ["cpu", "CPU", " Cpu "])
def test_cpu_names_are_the_cpu_and_no_device(name: str) -> None:
    assert _kernel_args.wants_gpu(name, np.ones(3)) is False
    with pytest.raises(ValueError, match="device must be"):
        cuda.parse_device(name)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_both_layers_refuse_a_bad_name_with_one_message(name: Any) -> None:
    with pytest.raises(ValueError) as front:
        _kernel_args.wants_gpu(name, np.ones(3))
    with pytest.raises(ValueError) as back:
        cuda.parse_device(name)
    forms = "'cuda', 'gpu', 'cuda:N', 'gpu:N' (any case) or an index N >= 0"
    assert str(front.value) == f"device must be None, 'cpu', {forms}, got {name!r}"
    assert str(back.value) == f"device must be None, {forms}, got {name!r}"
    with pytest.raises(ValueError, match="device must be"):
        kernels.matmul(np.ones((2, 2)), np.ones((2, 2)), device=name)


@needs_cuda_build
@pytest.mark.parametrize("name", ["CUDA", "Cuda:0", " cuda", "GPU", 0])
def test_kernels_and_runtime_take_every_gpu_name(dev, name: Any) -> None:
    a = np.ones((4, 4))
    assert kernels.matmul(a, a, device=name).tolist() == (a @ a).tolist()
    assert kernels.correlate(a, np.ones((3, 3)), device=name).shape == (4, 4)
    assert cuda.DeviceArray.empty(3, device=name).device == 0
    cuda.synchronize(name)
    cuda.synchronize("cuda:0")
    assert kernels.matmul(a, a, device="CPU").tolist() == (a @ a).tolist()


# --- 7. matmul of a device array and a NumPy array -------------------------------------------


@needs_cuda_build
def test_matmul_uploads_a_numpy_operand_beside_a_device_array(dev) -> None:
    a = np.arange(12.0).reshape(3, 4)
    b = np.arange(8.0).reshape(4, 2)
    d_a, d_b = cuda.DeviceArray.from_numpy(a), cuda.DeviceArray.from_numpy(b)
    for x, y in ((d_a, b), (a, d_b)):
        for call in (kernels.matmul, _gpu_kernels.matmul):
            got = call(x, y)
            assert isinstance(got, cuda.DeviceArray)
            assert got.to_numpy().tolist() == (a @ b).tolist()
    with pytest.raises(TypeError, match="a: float64, b: float32"):
        kernels.matmul(d_a, b.astype(np.float32))
    with pytest.raises(TypeError, match="a: int64, b: int64"):
        kernels.matmul(cuda.DeviceArray.from_numpy(a.astype(np.int64)), b.astype(np.int64))


@needs_cuda_build
def test_matmul_uploads_on_the_device_operands_stream(dev) -> None:
    a = np.ones((2, 2))
    d = cuda.DeviceArray.from_numpy(a, stream=5)
    dev.log.clear()
    got = _gpu_kernels.matmul(d, a)
    assert got.stream == 5 and all(e[1] == 5 for e in dev.log if e[0] == "kernel")


# --- 8 and 9. NVTX ranges: names and typing ------------------------------------------------------


def test_nvtx_ranges_are_named_after_the_function_without_a_name(monkeypatch) -> None:
    pushed: list[str] = []

    class Rec:
        def _cuda_nvtx_push(self, name: str) -> int:
            pushed.append(name)
            return 0

        def _cuda_nvtx_pop(self) -> int:
            return 0

    monkeypatch.setattr(nvtx, "_C", Rec())
    monkeypatch.setattr(nvtx, "_BUILT", True)

    @nvtx.range
    def bare() -> int:
        return 1

    @nvtx.range()
    def empty_parens() -> int:
        return 2

    @nvtx.range("given")
    def named() -> int:
        return 3

    class Model:
        @nvtx.range()
        def step(self) -> int:
            return 4

    assert bare() + empty_parens() + named() + Model().step() == 10
    with nvtx.range("block") as r:
        assert r.name == "block"
    with nvtx.range():
        pass
    prefix = "test_nvtx_ranges_are_named_after_the_function_without_a_name.<locals>."
    assert pushed == [
        prefix + "bare",
        prefix + "empty_parens",
        "given",
        prefix + "Model.step",
        "block",
        "range",
    ]
    assert empty_parens.__name__ == "empty_parens" and repr(nvtx.range("x")) == "nvtx.range('x')"
    with pytest.raises(TypeError, match="name must be a str"):
        nvtx.range(3)  # type: ignore[call-overload]


MYPY_SCRIPT = """
from typing import Optional

from fastprof import nvtx


@nvtx.range
def bare(x: int) -> int:
    return x


@nvtx.range()
def empty(x: int) -> int:
    return x


@nvtx.range("given")
def named(x: int) -> int:
    return x


with nvtx.range("block") as r:
    label: Optional[str] = r.name
n: int = bare(1) + empty(2) + named(3)
"""


def test_every_documented_nvtx_form_type_checks(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    script = tmp_path / "user_nvtx.py"
    script.write_text(textwrap.dedent(MYPY_SCRIPT))
    package = Path(nvtx.__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(script),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(package)},
        cwd=str(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- cosmetic: benchmark's and synchronize's arguments -------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"args": 5}, TypeError, "args"),
        ({"args": "ab"}, TypeError, "args"),
        ({"max_duration": True}, ValueError, "max_duration"),
        ({"max_duration": float("nan")}, ValueError, "max_duration"),
        ({"max_duration": "1"}, ValueError, "max_duration"),
    ],
)
def test_benchmark_names_a_bad_argument(kwargs: dict, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        cuda.benchmark(lambda *a: None, **kwargs)


def test_synchronize_checks_its_device_as_the_other_entry_points() -> None:
    for bad in ("tpu", -1, True):
        with pytest.raises(ValueError, match="device must be"):
            cuda.synchronize(bad)
