"""The CUDA side of the timeline without a GPU: a stand-in libcupti (tests/stubs/cupti_stub.c,
compiled here with the system C compiler) is found by fastprof's own library search through
CUDA_HOME, and feeds the C record path synthetic API callbacks and activity records. What
runs for real is everything from CUPTI's entry points up: the C callbacks and record
buffers, the Python stacks taken at each launch, the clock mapping, the release of CUPTI at
stop, the correlation join, nsys's summary tables and the per-line GPU attribution.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import shutil
import statistics
import subprocess
import threading
from pathlib import Path

import pytest

from fastprof import _fastprof
from fastprof.cuda import _base as _cuda_base
from fastprof.cuda import timeline as cuda_timeline
from fastprof.cuda.attribution import UNKNOWN
from fastprof.cuda.demangle import demangle
from fastprof.cuda.timeline import CudaRecorder, map_clock
from fastprof.report.cuda_chrome import API_TID, GPU_TID, NVTX_TID

pytestmark = pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")

STUB = Path(__file__).resolve().parent / "stubs" / "cupti_stub.c"
CC = shutil.which("cc") or shutil.which("gcc")

RUNTIME, DRIVER = 2, 1  # CUPTI's callback domains
KIND_RUNTIME, KIND_DRIVER, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 5, 4, 10, 1, 2
KIND_SYNC, KIND_MARKER = 38, 12
C0 = 10**15  # the stub's frozen CUPTI clock in the exact tests
U64, U32, I32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int


def _signatures(lib: ctypes.CDLL) -> ctypes.CDLL:
    sig = {
        "stub_api": (None, [I32, U32, ctypes.c_char_p, U32, U64, U64, I32, ctypes.c_char_p]),
        "stub_kernel": (None, [ctypes.c_char_p, U32, U32, U32, U32, U64, U64]),
        "stub_copy": (None, [I32, U64, U32, U32, U32, U32, U64, U64]),
        "stub_sync": (None, [U32, U32, U32, U32, U64, U64]),
        "stub_marker": (None, [U32, U32, U32, ctypes.c_char_p, U64]),
        "stub_set_clock_fixed": (None, [U64]),
        "stub_set_clock_offset": (None, [ctypes.c_int64]),
        "stub_set_subscribe_result": (None, [I32]),
        "stub_fail_enable": (None, [I32]),
        "stub_now": (U64, []),
        "stub_gettid": (U32, []),
        "stub_launch_on_new_thread": (U32, [U32, U64, U64]),
        "stub_domains": (ctypes.c_uint, []),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    return lib


@pytest.fixture(scope="module")
def stub_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CC is None:
        pytest.skip("no C compiler for the stand-in libcupti")
    home = tmp_path_factory.mktemp("cuda_home")
    (home / "lib64").mkdir()
    so = home / "lib64" / "libcupti.so"
    subprocess.run(
        [CC, "-shared", "-fPIC", "-O1", "-o", str(so), str(STUB), "-lpthread"], check=True
    )
    return home


class Stub:
    """The stand-in's controls: ``py`` keeps the GIL during a call (ctypes.PyDLL), ``nogil``
    releases it (ctypes.CDLL), as a C library called from Python would."""

    def __init__(self, so: Path) -> None:
        self.path = str(so)
        self.py = _signatures(ctypes.PyDLL(self.path))
        self.nogil = _signatures(ctypes.CDLL(self.path))


@pytest.fixture
def stub(stub_home: Path, monkeypatch: pytest.MonkeyPatch) -> Stub:
    monkeypatch.setenv("CUDA_HOME", str(stub_home))
    monkeypatch.setattr(_cuda_base, "_probe", lambda: (1, ""))
    monkeypatch.setattr(cuda_timeline, "_synchronize", lambda: None)
    s = Stub(stub_home / "lib64" / "libcupti.so")
    s.py.stub_reset()
    return s


def _start(stub: Stub) -> CudaRecorder:
    rec = CudaRecorder().start()
    if os.path.realpath(rec.library) != os.path.realpath(stub.path):  # another libcupti first
        rec.stop()
        pytest.skip(f"this process loaded {rec.library} before the stand-in")
    return rec


def _line(marker: str) -> int:
    """The line of this file holding ``# <marker>``."""
    for n, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return n
    raise AssertionError(marker)


SAXPY = b"_Z5saxpyifPKfPf"
KBOOL = b"_Z6kernelILb1EEvPKfPfi"
TMPL = b"_Z22fp_cu_correlate_kernelIfLi2EEvPKT_PS0_PKS0_10fp_cu_geom"


def _workload(lib: ctypes.CDLL) -> None:
    """Known launches from known lines (times on the stub's CUPTI axis, offsets from C0)."""
    api, rt = lib.stub_api, RUNTIME
    launch, cu_launch = b"cudaLaunchKernel", b"cuLaunchKernel"
    copy, cu_copy = b"cudaMemcpyAsync", b"cuMemcpyHtoDAsync_v2"
    # cudaLaunchKernel of KBOOL (corr 1), with its nested cuLaunchKernel (corr 1000001)
    api(rt, 0, launch, 1, C0 + 100, C0 + 600, 0, cu_launch)  # L_BOOL
    for i in range(3):
        s = C0 + 1000 + 1000 * i
        api(rt, 0, launch, 10 + i, s, s + 400, 0, cu_launch)  # L_LOOP
    api(rt, 0, launch, 13, C0 + 4000, C0 + 4300, 0, cu_launch)  # L_TMPL
    api(rt, 1, copy, 20, C0 + 5000, C0 + 5200, 1, cu_copy)  # L_H2D
    api(rt, 1, copy, 21, C0 + 5300, C0 + 5400, 1, cu_copy)  # L_D2H
    api(rt, 2, b"cudaMemsetAsync", 22, C0 + 5500, C0 + 5550, 2, b"cuMemsetD8Async")  # L_SET
    api(rt, 4, b"cudaStreamSynchronize", 23, C0 + 6000, C0 + 16000, 4, b"cuStreamSynchronize")
    api(DRIVER, 5, b"cuMemAlloc_v2", 24, C0 + 17000, C0 + 17100, -1, None)
    # the GPU side: kernels, copies, a memset, the synchronisation, an NVTX range
    lib.stub_kernel(KBOOL, 0, 1, 7, 1, C0 + 700, C0 + 2700)
    for i, d in enumerate((1000, 3000, 2000)):
        s = C0 + 3000 + 4000 * i
        lib.stub_kernel(SAXPY, 0, 1, 7, 10 + i, s, s + d)
    lib.stub_kernel(TMPL, 0, 1, 9, 1000013, C0 + 4500, C0 + 5000)  # names the nested driver call
    lib.stub_copy(1, 4_000_000, 0, 1, 7, 20, C0 + 20000, C0 + 24000)
    lib.stub_copy(2, 1_000_000, 0, 1, 7, 21, C0 + 24000, C0 + 25000)
    lib.stub_copy(-1, 1_000, 0, 1, 9, 22, C0 + 25500, C0 + 25600)
    lib.stub_sync(3, 1, 7, 23, C0 + 6100, C0 + 15900)
    tid = lib.stub_gettid()
    lib.stub_marker(2, 5, tid, b"forward", C0 + 50)
    lib.stub_marker(4, 5, tid, None, C0 + 5600)


def _traced(stub: Stub) -> CudaRecorder:
    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    _workload(stub.py)
    rec.stop()
    return rec


def test_records_are_read_exactly_and_mapped_onto_the_monotonic_axis(stub: Stub) -> None:
    rec = _traced(stub)
    m0 = rec.clock_start[1]
    assert rec.clock_start[0] == rec.clock_stop[0] == C0  # frozen CUPTI clock: an offset map

    def t(x: int) -> int:
        return m0 + x

    assert [(k.name, k.start_ns, k.end_ns, k.stream, k.correlation_id) for k in rec.kernels] == [
        (KBOOL.decode(), t(700), t(2700), 7, 1),
        (SAXPY.decode(), t(3000), t(4000), 7, 10),
        (TMPL.decode(), t(4500), t(5000), 9, 1000013),
        (SAXPY.decode(), t(7000), t(10000), 7, 11),
        (SAXPY.decode(), t(11000), t(13000), 7, 12),
    ]
    assert [(c.copy_kind, c.bytes, c.duration_ns) for c in rec.memcpys] == [
        ("Host-to-Device", 4_000_000, 4000),
        ("Device-to-Host", 1_000_000, 1000),
    ]
    assert [(s.bytes, s.stream, s.duration_ns) for s in rec.memsets] == [(1000, 9, 100)]
    assert [(s.type, s.duration_ns, s.correlation_id) for s in rec.syncs] == [
        ("stream synchronize", 9800, 23)
    ]
    tid = threading.get_native_id()
    assert [(n.name, n.start_ns, n.end_ns, n.tid) for n in rec.nvtx_ranges] == [
        ("forward", t(50), t(5600), tid)
    ]
    runtime = [a for a in rec.api_calls if a.domain == "runtime"]
    assert [a.correlation_id for a in runtime] == [1, 10, 11, 12, 13, 20, 21, 22, 23]
    assert all(a.tid == tid for a in rec.api_calls)  # CUPTI's thread ids are the native ids
    assert runtime[0].name == "cudaLaunchKernel" and runtime[0].duration_ns == 500
    assert len([a for a in rec.api_calls if a.domain == "driver"]) == 10  # 9 nested, 1 alone
    assert rec.dropped == 0
    assert rec.records == sorted(rec.records, key=lambda r: (r.start_ns, r.end_ns))
    assert len(rec.records) == len(rec.api_calls) + 5 + 2 + 1 + 1 + 1


def _row(table, name):
    return next(r for r in table.rows if r[-1] == name)


def test_summary_tables_are_nsys_stats_exactly(stub: Stub) -> None:
    rec = _traced(stub)
    s = rec.summary()
    kern = s.tables["cuda_gpu_kern_sum"]
    assert kern.columns == (
        "Time (%)",
        "Total Time (ns)",
        "Instances",
        "Avg (ns)",
        "Med (ns)",
        "Min (ns)",
        "Max (ns)",
        "StdDev (ns)",
        "Name",
    )
    total = 2000 + 6000 + 500
    assert kern.rows == [
        (
            100 * 6000 / total,
            6000,
            3,
            2000.0,
            2000.0,
            1000,
            3000,
            1000.0,
            "saxpy(int, float, float const*, float*)",
        ),
        (
            100 * 2000 / total,
            2000,
            1,
            2000.0,
            2000.0,
            2000,
            2000,
            0.0,
            "void kernel<true>(float const*, float*, int)",
        ),
        (
            100 * 500 / total,
            500,
            1,
            500.0,
            500.0,
            500,
            500,
            0.0,
            "void fp_cu_correlate_kernel<float, 2>(float const*, float*, float const*, fp_cu_geom)",
        ),
    ]
    api = s.tables["cuda_api_sum"]
    assert api.columns[2] == "Num Calls" and api.columns[-1] == "Name"
    launches = [500, 400, 400, 400, 300]
    assert _row(api, "cudaLaunchKernel")[1:8] == (
        2000,
        5,
        400.0,
        400.0,
        300,
        500,
        statistics.stdev(launches),
    )
    assert _row(api, "cudaStreamSynchronize")[1:3] == (10000, 1)
    assert _row(api, "cuMemAlloc_v2")[1:3] == (100, 1)  # a driver call outside the runtime
    names = [r[-1] for r in api.rows]
    assert "cuLaunchKernel" not in names  # the driver calls inside runtime calls are not
    assert names[0] == "cudaStreamSynchronize"  # most time first
    api_total = 2000 + 200 + 100 + 50 + 10000 + 100
    assert _row(api, "cudaMemcpyAsync")[:3] == (100 * 300 / api_total, 300, 2)
    assert sum(r[0] for r in api.rows) == pytest.approx(100.0)
    mem_t = s.tables["cuda_gpu_mem_time_sum"]
    assert mem_t.columns[2] == "Count" and mem_t.columns[-1] == "Operation"
    assert mem_t.rows == [
        (
            100 * 4000 / 5100,
            4000,
            1,
            4000.0,
            4000.0,
            4000,
            4000,
            0.0,
            "[CUDA memcpy Host-to-Device]",
        ),
        (
            100 * 1000 / 5100,
            1000,
            1,
            1000.0,
            1000.0,
            1000,
            1000,
            0.0,
            "[CUDA memcpy Device-to-Host]",
        ),
        (100 * 100 / 5100, 100, 1, 100.0, 100.0, 100, 100, 0.0, "[CUDA memset]"),
    ]
    mem_s = s.tables["cuda_gpu_mem_size_sum"]
    assert mem_s.columns == (
        "Total (MB)",
        "Count",
        "Avg (MB)",
        "Med (MB)",
        "Min (MB)",
        "Max (MB)",
        "StdDev (MB)",
        "Operation",
    )
    assert mem_s.rows == [
        (4.0, 1, 4.0, 4.0, 4.0, 4.0, 0.0, "[CUDA memcpy Host-to-Device]"),
        (1.0, 1, 1.0, 1.0, 1.0, 1.0, 0.0, "[CUDA memcpy Device-to-Host]"),
        (0.001, 1, 0.001, 0.001, 0.001, 0.001, 0.0, "[CUDA memset]"),
    ]
    # GPU busy: the union of [700,2700] [3000,4000] [4500,5000] [7000,10000] [11000,13000]
    # [20000,24000] [24000,25000] [25500,25600]
    assert s.gpu_busy_ns == 2000 + 1000 + 500 + 3000 + 2000 + 5000 + 100
    assert s.wall_ns == max(rec.stop_ns, rec.memsets[0].end_ns) - rec.start_ns > 0
    assert s.gpu_busy_share == s.gpu_busy_ns / s.wall_ns
    assert s.sync_blocked_ns == 9800 and s.sync_by_type == {"stream synchronize": (1, 9800)}
    assert kern.as_dicts()[0]["Instances"] == 3
    text = str(s)
    assert "CUDA GPU Kernel Summary (cuda_gpu_kern_sum)" in text
    assert "saxpy(int, float, float const*, float*)" in text and "6,000" in text
    assert "Host blocked in synchronising calls: 9,800 ns" in text


def test_an_empty_trace_says_no_data_for_each_table(stub: Stub) -> None:
    rec = _start(stub)
    rec.stop()
    s = rec.summary()
    assert all(not t.rows for t in s.tables.values())
    assert str(s).count("(no data") == 4 and "synchronising calls: no data" in str(s)
    assert s.gpu_busy_ns == 0 and s.gpu_busy_share == 0.0
    assert "no data" in str(rec.gpu_by_python())


def test_gpu_time_is_charged_to_the_python_lines_that_launched_it(stub: Stub) -> None:
    rec = _traced(stub)
    g = rec.gpu_by_python()
    here = __file__

    def line(marker: str):
        row = g.line(here, _line(marker))
        assert row is not None, marker
        assert row.function == "_workload"
        return (
            row.self_launches,
            row.self_gpu_ns,
            row.launches,
            row.gpu_ns,
            row.api_calls,
            row.api_ns,
        )

    assert line("L_BOOL") == (1, 2000, 1, 2000, 1, 500)
    assert line("L_LOOP") == (3, 6000, 3, 6000, 3, 1200)
    # the kernel names the driver call nested in cudaLaunchKernel: charged through it
    assert line("L_TMPL") == (1, 500, 1, 500, 1, 300)
    assert line("L_H2D") == (1, 4000, 1, 4000, 1, 200)
    assert line("L_D2H") == (1, 1000, 1, 1000, 1, 100)
    assert line("L_SET") == (1, 100, 1, 100, 1, 50)
    assert g.total_launches == 8 and g.total_gpu_ns == 2000 + 6000 + 500 + 5100
    work = g.function("_workload")
    assert work is not None and work.firstlineno == inspect.getsourcelines(_workload)[1]
    assert (work.self_launches, work.self_gpu_ns, work.launches) == (8, g.total_gpu_ns, 8)
    assert work.api_calls == 8 and work.api_ns == 500 + 1200 + 300 + 200 + 100 + 50
    assert work.host_ns is None  # no timeline given
    # the callers up the stack see every launch once (inclusive), none as their own
    caller = g.function("_traced")
    assert caller is not None and (caller.launches, caller.gpu_ns, caller.self_launches) == (
        8,
        g.total_gpu_ns,
        0,
    )
    test_row = g.function("test_gpu_time_is_charged_to_the_python_lines_that_launched_it")
    assert test_row is not None and test_row.gpu_ns == g.total_gpu_ns
    assert g.lines[0].gpu_ns == g.total_gpu_ns  # callers' lines first: most GPU time
    assert "GPU time by Python line" in str(g) and "_workload" in str(g)


def test_fastprofs_own_frames_are_skipped_when_charging_lines(stub: Stub) -> None:
    rec = _traced(stub)
    own = os.path.dirname(cuda_timeline.__file__)
    g = cuda_timeline.CudaRecorder.gpu_by_python(rec)
    assert all(not r.filename.startswith(own + os.sep) for r in g.lines)
    from fastprof.cuda.attribution import attribute

    g2 = attribute(rec, None, skip_dirs=(os.path.dirname(__file__),))  # every frame is "own"
    assert g2.total_launches == 8 and g2.lines  # then the whole stack is kept


def test_a_launch_without_the_gil_has_no_stack_and_is_charged_to_the_timeline(stub: Stub) -> None:
    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    box: dict[str, int] = {}

    def worker() -> None:
        box["tid"] = threading.get_native_id()
        # ctypes.CDLL releases the GIL around the call: the callback sees no Python thread
        stub.nogil.stub_api(RUNTIME, 0, b"cudaLaunchKernel", 40, C0 + 100, C0 + 200, -1, None)

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    raw_tid = stub.py.stub_launch_on_new_thread(41, C0 + 300, C0 + 400)  # a thread with no Python
    stub.py.stub_kernel(SAXPY, 0, 1, 7, 40, C0 + 1000, C0 + 1500)
    stub.py.stub_kernel(SAXPY, 0, 1, 7, 41, C0 + 2000, C0 + 2700)
    rec.stop()
    assert rec.launches[40].stack == () and rec.launches[40].tid == box["tid"]
    assert rec.launches[41].stack == () and rec.launches[41].tid == raw_tid != box["tid"]
    g = rec.gpu_by_python()
    unknown = g.function(UNKNOWN)
    assert unknown is not None and (unknown.launches, unknown.gpu_ns) == (2, 500 + 700)
    m0 = rec.clock_start[1]
    spans = [
        {
            "tid": box["tid"],
            "start_ns": m0,
            "end_ns": m0 + 1000,
            "filename": "w.py",
            "function": "worker",
            "firstlineno": 3,
        },
        {
            "tid": box["tid"],
            "start_ns": m0 + 50,
            "end_ns": m0 + 250,
            "filename": "w.py",
            "function": "inner",
            "firstlineno": 9,
        },
        {
            "tid": box["tid"],
            "start_ns": m0 + 600,
            "end_ns": m0 + 700,
            "filename": "w.py",
            "function": "inner",
            "firstlineno": 9,
        },
    ]
    g = rec.gpu_by_python(spans)
    inner = g.function("inner")
    assert inner is not None and (inner.launches, inner.gpu_ns) == (1, 500)
    assert inner.host_ns == 200 + 100
    worker_row = g.function("worker")
    assert worker_row is not None and worker_row.host_ns == 1000
    assert (worker_row.launches, worker_row.self_launches) == (1, 0)  # inner's caller
    unknown = g.function(UNKNOWN)
    assert unknown is not None and (unknown.launches, unknown.gpu_ns) == (1, 700)


def test_more_records_and_launches_than_the_first_allocation_all_come_back(stub: Stub) -> None:
    # The C lists start with room for 1024 records and 256 launches and grow as CUPTI's
    # threads append; what grew is taken whole at the stop, nothing lost or repeated.
    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    n, nk = 300, 1100
    api, launch, cu_launch = stub.py.stub_api, b"cudaLaunchKernel", b"cuLaunchKernel"
    for i in range(n):
        s = C0 + 10 * i
        api(RUNTIME, 0, launch, 100 + i, s, s + 5, 0, cu_launch)  # L_MANY
    for i in range(nk):
        s = C0 + 10_000 + 10 * i
        stub.py.stub_kernel(SAXPY, 0, 1, 7, 100 + i % n, s, s + 3 + i % 5)
    rec.stop()
    m0 = rec.clock_start[1]
    assert rec.dropped == 0
    assert [(k.correlation_id, k.start_ns, k.end_ns) for k in rec.kernels] == [
        (100 + i % n, m0 + 10_000 + 10 * i, m0 + 10_000 + 10 * i + 3 + i % 5) for i in range(nk)
    ]
    runtime = [a for a in rec.api_calls if a.domain == "runtime"]
    assert [(a.correlation_id, a.start_ns) for a in runtime] == [
        (100 + i, m0 + 10 * i) for i in range(n)
    ]
    driver = sorted(a.correlation_id for a in rec.api_calls if a.domain == "driver")
    assert driver == [1_000_100 + i for i in range(n)]
    # every launch noted, the nested driver call sharing its runtime call's stack
    assert sorted(rec.launches) == list(range(100, 100 + n)) + driver
    here = os.path.realpath(__file__)
    for i in range(n):
        outer, inner = rec.launches[100 + i], rec.launches[1_000_100 + i]
        top = outer.stack[0]
        assert (os.path.realpath(top.filename), top.lineno) == (here, _line("L_MANY"))
        assert inner.stack == outer.stack and inner.outer_correlation_id == 100 + i
    g = rec.gpu_by_python()
    row = g.line(__file__, _line("L_MANY"))
    assert row is not None and row.gpu_ns == sum(3 + i % 5 for i in range(nk))


def test_cupti_is_released_at_stop(stub: Stub) -> None:
    rec = _start(stub)
    lib = stub.py
    assert lib.stub_subscribed() == 1 and lib.stub_domains() == (1 << RUNTIME) | (1 << DRIVER)
    kinds = (
        KIND_RUNTIME,
        KIND_DRIVER,
        KIND_KERNEL,
        KIND_MEMCPY,
        KIND_MEMSET,
        KIND_SYNC,
        KIND_MARKER,
    )
    assert all(lib.stub_enabled(k) for k in kinds) and lib.stub_enabled_count() == len(kinds)
    assert sorted(rec.enabled_kinds) == sorted(kinds)
    assert lib.stub_thread_id_type() == 1  # CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM
    assert lib.stub_finalized() == 0
    rec.stop()
    assert lib.stub_enabled_count() == 0
    assert lib.stub_subscribed() == 0 and lib.stub_domains() == 0
    assert lib.stub_finalized() == 1
    with pytest.raises(RuntimeError, match="without a start"):
        rec.stop()
    # a later trace registers again and works
    rec2 = _start(stub)
    lib.stub_kernel(SAXPY, 0, 1, 7, 99, C0, C0 + 10)
    rec2.stop()
    assert len(rec2.kernels) == 1 and lib.stub_finalized() == 2


def test_another_cupti_holder_gives_a_clear_error_and_nothing_stays_enabled(stub: Stub) -> None:
    lib = stub.py
    lib.stub_set_subscribe_result(39)  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
    with pytest.raises(RuntimeError, match=r"Nsight Systems.*torch\.profiler") as info:
        CudaRecorder().start()
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)" in str(info.value)
    # the other holder's CUPTI is left alone: nothing enabled, nothing detached
    assert lib.stub_enable_calls() == 0 and lib.stub_finalized() == 0
    lib.stub_set_subscribe_result(0)
    _start(stub).stop()  # the next trace starts


def test_a_failing_start_undoes_what_it_did(stub: Stub) -> None:
    lib = stub.py
    lib.stub_fail_enable(KIND_MEMCPY)
    with pytest.raises(RuntimeError, match=r"cuptiActivityEnable\(1\) failed"):
        CudaRecorder().start()
    assert lib.stub_enabled_count() == 0 and lib.stub_subscribed() == 0 and lib.stub_domains() == 0
    assert lib.stub_finalized() == 1  # it had subscribed: CUPTI is detached again
    lib.stub_fail_enable(-1)
    _start(stub).stop()


def test_one_trace_at_a_time(stub: Stub) -> None:
    rec = _start(stub)
    try:
        with pytest.raises(RuntimeError, match="already running"):
            CudaRecorder().start()
    finally:
        rec.stop()


def test_the_clock_is_aligned_with_time_monotonic_ns(stub: Stub) -> None:
    lib = stub.py
    offset = 123_456_789_012
    lib.stub_set_clock_offset(offset)  # CUPTI's clock = CLOCK_MONOTONIC + offset
    rec = _start(stub)
    t1 = lib.stub_now()
    lib.stub_kernel(SAXPY, 0, 1, 7, 1, t1, t1 + 5)
    t2 = lib.stub_now()
    lib.stub_kernel(SAXPY, 0, 1, 7, 2, t2, t2 + 5)
    rec.stop()
    bound = max(rec.clock_start[2], rec.clock_stop[2]) // 2 + 2  # half the sampling window
    for k, t in zip(rec.kernels, (t1, t2)):
        assert abs(k.start_ns - (t - offset)) <= bound
    assert rec.start_ns <= rec.kernels[0].start_ns + bound
    assert rec.kernels[1].start_ns <= rec.stop_ns + bound


def test_map_clock_is_a_line_through_the_two_samples() -> None:
    start, stop = (1000, 50, 3), (3000, 1050, 3)  # CUPTI's clock runs twice as fast
    assert map_clock(1000, start, stop) == 50
    assert map_clock(3000, start, stop) == 1050
    assert map_clock(2001, start, stop) == 551  # 550.5 rounds half up
    assert map_clock(500, start, stop) == -200
    assert map_clock(7, (5, 100, 0), (5, 900, 0)) == 102  # no move: an offset


def test_chrome_events_have_tracks_and_flows(stub: Stub) -> None:
    rec = _traced(stub)
    ev = rec.chrome_events(pid=4242)
    assert all(e["pid"] == 4242 for e in ev)
    tid = threading.get_native_id()
    names = {
        (e["tid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert (API_TID + tid, f"CUDA API (thread {tid})") in names
    assert (NVTX_TID + tid, f"NVTX (thread {tid})") in names
    assert (GPU_TID + 0, "GPU 0 stream 7") in names and (GPU_TID + 1, "GPU 0 stream 9") in names
    m0 = rec.clock_start[1]
    kern = [e for e in ev if e.get("cat") == "cuda_kernel"]
    assert len(kern) == 5
    first = min(kern, key=lambda e: e["ts"])
    assert first["name"] == "void kernel<true>(float const*, float*, int)"
    assert first["ts"] == (m0 + 700) / 1000 and first["dur"] == 2.0 and first["tid"] == GPU_TID
    assert isinstance(first["ts"], float)
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert set(starts) == set(ends) and len(starts) == 8  # one flow id per launch -> work
    work = [e for e in ev if e.get("cat") in ("cuda_kernel", "cuda_memcpy", "cuda_memset")]
    by_corr = {}
    for flow_id, end in ends.items():  # each arrow ends where its work starts, on its lane
        (w,) = [e for e in work if e["ts"] == end["ts"] and e["tid"] == end["tid"]]
        by_corr[w["args"]["correlation"]] = (starts[flow_id], end)
    assert set(by_corr) == {1, 10, 11, 12, 1000013, 20, 21, 22}
    assert by_corr[1000013][0]["ts"] == (m0 + 4000) / 1000  # from the outer cudaLaunchKernel
    start, end = by_corr[1]
    assert start["tid"] == API_TID + tid and end["tid"] == GPU_TID and end["bp"] == "e"
    nvtx = [e for e in ev if e.get("cat") == "nvtx"]
    assert [(e["name"], e["ts"], e["dur"]) for e in nvtx] == [("forward", (m0 + 50) / 1000, 5.55)]
    assert any(e.get("cat") == "cuda_sync" and e["dur"] == 9.8 for e in ev)
    with pytest.raises(TypeError, match="pid"):
        rec.chrome_events(pid="1")  # type: ignore[arg-type]


def test_cuda_trace_gives_the_new_records_too(stub: Stub) -> None:
    from fastprof import cuda_trace

    stub.py.stub_set_clock_fixed(C0)
    with cuda_trace() as tr:
        if os.path.realpath(tr.recorder.library) != os.path.realpath(stub.path):
            pytest.skip("another libcupti was loaded first")
        _workload(stub.py)
    assert [r.kind for r in tr.records].count("kernel") == 5
    assert [r.name for r in tr.copies()] == ["memcpy HtoD", "memcpy DtoH"]
    assert tr.records[0].start_ns == tr.recorder.clock_start[1] + 700
    assert tr.recorder.summary().tables["cuda_gpu_kern_sum"].rows[0][2] == 3
    assert tr.recorder.gpu_by_python().total_launches == 8


CXXFILT = shutil.which("c++filt")

MANGLED = [
    "_Z14fp_spin_kernelx",
    "_Z22fp_cu_correlate_kernelIfLi2EEvPKT_PS0_PKS0_10fp_cu_geom",
    "_ZN2ns6detail7reduce1IdLj256EEEvPKT_PS2_m",
    "_ZN12_GLOBAL__N_16kernelEPfi",
    "_Z3addIfEvT_S0_",
    "_Z6kernelILb1EEvPKfPfi",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE",
    "_Z5saxpyifPKfPf",
    "_Z9vectorAddPKfS0_Pfi",
    "_ZN3foo3barERKNS_3BazE",
    "_Z4copyILin3ELm8EEvPcRKS0_",
    "_Z1fv",
]


@pytest.mark.skipif(CXXFILT is None, reason="no c++filt to compare with")
def test_demangle_matches_cxxfilt() -> None:
    out = subprocess.run([CXXFILT], input="\n".join(MANGLED), capture_output=True, text=True)
    for name, want in zip(MANGLED, out.stdout.splitlines()):
        assert demangle(name) == want, name


def test_demangle_leaves_other_names_alone() -> None:
    assert demangle("my_kernel") == "my_kernel"
    assert demangle("_Z1fIiLi3EEvRAT0__T_") == "_Z1fIiLi3EEvRAT0__T_"  # arrays: outside the subset
    assert demangle("_Zgarbage") == "_Zgarbage"
    assert (
        demangle("_Z5saxpyifPKfPf.constprop.0")
        == "saxpy(int, float, float const*, float*) [clone .constprop.0]"
    )


def test_nvtx_injection_points_at_cupti_during_the_trace_only(
    stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    libc.getenv.argtypes = [ctypes.c_char_p]
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    rec = _start(stub)
    assert libc.getenv(b"NVTX_INJECTION64_PATH") == stub.path.encode()
    rec.stop()
    assert libc.getenv(b"NVTX_INJECTION64_PATH") is None  # children after the trace: no CUPTI
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/tool/libinject.so")  # the user's choice
    rec = _start(stub)
    assert libc.getenv(b"NVTX_INJECTION64_PATH") == b"/opt/tool/libinject.so"
    rec.stop()
    assert libc.getenv(b"NVTX_INJECTION64_PATH") == b"/opt/tool/libinject.so"


NVTX_CHILD = """
import json, threading
from fastprof.cuda import _base as _cuda_base
from fastprof.cuda import timeline as cuda_timeline
from fastprof.cuda import nvtx
_cuda_base._probe = lambda: (1, "")
cuda_timeline._synchronize = lambda: None
rec = cuda_timeline.CudaRecorder().start()
with nvtx.range("outer"):
    with nvtx.range("inner"):
        pass
rec.stop()
rows = [(r.name, r.tid, rec.start_ns <= r.start_ns <= r.end_ns <= rec.stop_ns)
        for r in rec.nvtx_ranges]
print(json.dumps({"ranges": rows, "tid": threading.get_native_id(), "lib": rec.library}))
"""


def test_fastprof_nvtx_ranges_reach_the_trace_through_nvtx_injection(stub_home: Path) -> None:
    # a fresh process: NVTX reads NVTX_INJECTION64_PATH once, at its first call
    import json
    import sys

    env = dict(os.environ, CUDA_HOME=str(stub_home))
    env.pop("NVTX_INJECTION64_PATH", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, "-c", NVTX_CHILD], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    if os.path.realpath(got["lib"]) != os.path.realpath(stub_home / "lib64" / "libcupti.so"):
        pytest.skip(f"the child loaded {got['lib']}")
    tid = got["tid"]
    assert got["ranges"] == [["outer", tid, True], ["inner", tid, True]]


# -- the timeline and the CUDA side together: fastprof.trace(cuda=True) --------------------


def _launch_from_python(lib: ctypes.CDLL) -> None:
    launch, cu_launch = b"cudaLaunchKernel", b"cuLaunchKernel"
    lib.stub_api(RUNTIME, 0, launch, 50, C0 + 100, C0 + 200, 0, cu_launch)  # L_TRACE


@pytest.mark.parametrize("long_up", [False, True])
def test_trace_with_cuda_charges_the_launching_line_and_writes_one_file(
    stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long_up: bool
) -> None:
    import json

    if long_up:  # as on a machine up for weeks: the file's times are less an origin
        from fastprof.report import chrome

        monkeypatch.setattr(chrome, "_EXACT_NS", 0)

    import fastprof
    from timeline_helpers import chrome_trace_problems

    stub.py.stub_set_clock_fixed(C0)
    with fastprof.trace(cuda=True) as tr:
        _launch_from_python(stub.py)
        stub.py.stub_kernel(SAXPY, 0, 1, 7, 50, C0 + 1000, C0 + 3000)
    if os.path.realpath(tr._cuda.library) != os.path.realpath(stub.path):
        pytest.skip(f"this process loaded {tr._cuda.library} before the stand-in")
    # the kernel's GPU time is charged to the line that launched it, with the host time of
    # the launching function from the timeline's spans
    g = tr.gpu_by_python()
    row = g.line(__file__, _line("L_TRACE"))
    assert row is not None and row.function == "_launch_from_python"
    assert (row.launches, row.gpu_ns) == (1, 2000)
    fn = g.function("_launch_from_python")
    assert fn is not None and fn.host_ns is not None and fn.host_ns > 0
    assert (
        tr.call_counts()[
            (__file__, _launch_from_python.__code__.co_firstlineno, "_launch_from_python")
        ]
        == 1
    )
    assert "saxpy" in str(tr.summary())
    # one file: the Python span and the kernel on one axis, a flow from the launch to it
    data = json.loads(Path(tr.export_chrome_trace(tmp_path / "t.json")).read_text())
    assert chrome_trace_problems(data) == []
    events = data["traceEvents"]
    span = next(e for e in events if e.get("ph") == "X" and "_launch_from_python" in e["name"])
    kernel = next(e for e in events if e.get("ph") == "X" and "saxpy" in e["name"])
    # the stand-in's clock is frozen at C0, so the kernel sits at the recorder's start + 1 us;
    # the Python span lies between the recorder's start and stop, on the same monotonic axis
    origin = data["otherData"].get("ts_origin_ns", 0)
    assert (origin > 0) == long_up and origin % 10**9 == 0
    m0, m1 = tr._cuda.clock_start[1] - origin, tr._cuda.clock_stop[1] - origin
    assert kernel["ts"] == pytest.approx((m0 + 1000) / 1000, abs=1e-3)
    assert m0 / 1000 <= span["ts"] <= span["ts"] + span["dur"] <= m1 / 1000
    assert any(e.get("ph") == "s" for e in events) and any(e.get("ph") == "f" for e in events)


def test_a_failing_wait_at_stop_keeps_the_records(
    stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel's fault surfaces at the stop's synchronize: the error is raised after the
    records are read, so the trace of the faulting run is there to look at."""
    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    _workload(stub.py)

    def fault() -> None:
        raise RuntimeError("cudaErrorIllegalAddress")

    monkeypatch.setattr(cuda_timeline, "_synchronize", fault)
    with pytest.raises(RuntimeError, match="IllegalAddress"):
        rec.stop()
    assert len(rec.kernels) == 5 and len(rec.api_calls) > 0 and rec.stop_ns > 0
    with pytest.raises(RuntimeError, match="without a start"):
        rec.stop()


def test_a_launch_inside_fastprof_kernels_is_charged_to_the_users_line(stub: Stub) -> None:
    import fastprof.kernels as kernels_pkg

    inner_src = "def inner_launch(api):\n    api(2, 0, b'cudaLaunchKernel', 5, 0, 10, 0, None)\n"
    ns: dict = {}
    exec(
        compile(inner_src, os.path.join(os.path.dirname(kernels_pkg.__file__), "gpu.py"), "exec"),
        ns,
    )
    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    ns["inner_launch"](stub.py.stub_api)  # L_KERNELS
    stub.py.stub_kernel(SAXPY, 0, 1, 7, 5, C0 + 100, C0 + 600)
    rec.stop()
    g = rec.gpu_by_python()
    top = max(g.lines, key=lambda r: r.self_gpu_ns)
    assert (top.filename, top.lineno, top.self_gpu_ns) == (__file__, _line("L_KERNELS"), 500)


def test_every_flow_is_its_own_and_every_track_is_named(stub: Stub) -> None:
    """Two kernels of one launch (a CUDA graph's) get an arrow each, with ids of their own;
    a synchronisation whose API call was not recorded sits on a named track."""
    from timeline_helpers import chrome_trace_problems

    stub.py.stub_set_clock_fixed(C0)
    rec = _start(stub)
    stub.py.stub_api(RUNTIME, 0, b"cudaGraphLaunch", 300, C0 + 10, C0 + 20, 0, None)
    stub.py.stub_kernel(SAXPY, 0, 1, 7, 300, C0 + 100, C0 + 200)
    stub.py.stub_kernel(SAXPY, 0, 1, 7, 300, C0 + 300, C0 + 400)
    stub.py.stub_sync(3, 1, 7, 777, C0 + 500, C0 + 600)
    rec.stop()
    events = rec.chrome_events(1)
    doc = {"traceEvents": events, "displayTimeUnit": "ns"}
    assert chrome_trace_problems(doc) == []
    ids = [e["id"] for e in events if e["ph"] == "s"]
    assert len(ids) == 2 and len(set(ids)) == 2
