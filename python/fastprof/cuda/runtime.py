"""The CUDA runtime side of fastprof.cuda: availability and devices, streams, timing events,
:class:`cuda_timer` and :func:`benchmark`, and :class:`DeviceArray` with its interop (CUDA
Array Interface v3, DLPack).  Imports NumPy; nothing here calls CUDA at import."""

from __future__ import annotations

import math
import operator
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import _fastprof as _C
from . import _base as _cuda_base
from ._base import CudaError, CudaUnavailableError
from .cupti import cuda_trace

__all__ = [
    "CudaError",
    "CudaUnavailableError",
    "is_available",
    "status",
    "devices",
    "DeviceInfo",
    "synchronize",
    "cuda_timer",
    "benchmark",
    "BenchmarkResult",
    "DeviceArray",
    "as_device_array",
    "is_device_array",
    "cuda_trace",
]


# CudaError, CudaUnavailableError and the availability probe live in _cuda_base, which
# fastprof.cuda.cupti shares; _probe is bound here too so that is_available, status and _require
# below read it from this module.
_probe = _cuda_base._probe


def is_available() -> bool:
    """True when this build has CUDA, a driver is loaded and at least one device is visible."""
    return _probe()[0] > 0


def status() -> str:
    """Why CUDA cannot run here, in words; or, when it can, the devices and versions."""
    count, reason = _probe()
    if count == 0:
        return reason
    driver, runtime = _C._cuda_versions()
    return (
        f"CUDA available: {count} device(s), driver CUDA {driver // 1000}.{driver % 1000 // 10}, "
        f"runtime {runtime // 1000}.{runtime % 1000 // 10}"
    )


def _require() -> None:
    """Raises CudaUnavailableError with the reason unless CUDA can run."""
    count, reason = _probe()
    if count == 0:
        raise CudaUnavailableError(reason)


@dataclass(frozen=True)
class DeviceInfo:
    """What one device is: name, compute capability, SMs, memory, L2 size and clocks."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    total_memory: int
    l2_cache_bytes: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    warp_size: int
    max_threads_per_block: int
    shared_memory_per_block: int
    pci_bus_id: int
    integrated: int

    @property
    def peak_bandwidth_gbs(self) -> float:
        """Theoretical DRAM bandwidth from the memory clock and bus width (GB/s, DDR)."""
        return 2.0 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_props_cache: dict[int, dict[str, Any]] = {}


def _props(dev: int) -> dict[str, Any]:
    """The properties of device dev (asked once: cudaGetDeviceProperties is slow)."""
    if dev not in _props_cache:
        _props_cache[dev] = _C._cuda_device_props(dev)
    return _props_cache[dev]


def devices() -> list[DeviceInfo]:
    """The visible devices. Raises CudaUnavailableError when CUDA cannot run."""
    _require()
    return [DeviceInfo(**_props(i)) for i in range(_probe()[0])]


def synchronize(device: Any = None) -> None:
    """Waits (GIL released) for all work queued on the current device, or on ``device`` (any
    form :func:`parse_device` takes). Errors of earlier asynchronous work (a failed kernel)
    surface here as CudaError."""
    index = parse_device(device)
    _require()
    with _on_device(index):
        _C._cuda_synchronize()


_DEVICE_FORMS = "'cuda', 'gpu', 'cuda:N', 'gpu:N' (any case) or an index N >= 0"


def device_spec(device: Any, allow_cpu: bool = False) -> Any:
    """The one reading of a ``device=`` argument, shared by fastprof.kernels and this module:
    "cpu" (only with allow_cpu), None for the current GPU ("cuda", "gpu", None), or a device
    index ("cuda:N", "gpu:N", N >= 0). Names are case-insensitive and stripped of spaces.
    Raises ValueError naming ``device`` for anything else; makes no CUDA call."""
    if device is None:
        return None
    if isinstance(device, str):
        name = device.strip().lower()
        if name in ("cuda", "gpu"):
            return None
        if name == "cpu" and allow_cpu:
            return "cpu"
        head, sep, tail = name.partition(":")
        if sep and head in ("cuda", "gpu") and tail.isdigit() and tail.isascii():
            return int(tail)
    elif not isinstance(device, bool) and isinstance(device, (int, np.integer)) and device >= 0:
        return int(device)
    forms = ("None, 'cpu', " if allow_cpu else "None, ") + _DEVICE_FORMS
    raise ValueError(f"device must be {forms}, got {device!r}")


def parse_device(device: Any) -> Optional[int]:
    """Device index from "cuda", "gpu", "cuda:N", "gpu:N", N or None (any case; "cuda" and
    "gpu" mean the current device: returns None). Raises ValueError for anything else
    (:func:`device_spec`); makes no CUDA call."""
    index: Optional[int] = device_spec(device)
    return index


class _on_device:
    """Context manager that makes device ``index`` current and restores the previous one."""

    __slots__ = ("index", "prev")

    def __init__(self, index: Optional[int]) -> None:
        self.index = index
        self.prev: Optional[int] = None

    def __enter__(self) -> None:
        if self.index is not None:
            if self.index >= _probe()[0]:
                raise ValueError(
                    f"device index {self.index} out of range: {_probe()[0]} device(s) visible"
                )
            self.prev = _C._cuda_get_device()
            if self.prev != self.index:
                _C._cuda_set_device(self.index)

    def __exit__(self, *exc: Any) -> None:
        if self.prev is not None and self.prev != self.index:
            _C._cuda_set_device(self.prev)


_HANDLE_END = 1 << 64  # a cudaStream_t is a pointer: 0 <= handle < 2**64


def _check_handle(value: Any, what: str) -> int:
    """value as a cudaStream_t int: an int (not a bool) in [0, 2**64); TypeError or ValueError
    naming what otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int cudaStream_t, got {type(value).__name__}")
    handle = int(value)
    if not 0 <= handle < _HANDLE_END:
        raise ValueError(f"{what} must be a cudaStream_t in [0, 2**64), got {handle}")
    return handle


def stream_handle(stream: Any) -> int:
    """The cudaStream_t of ``stream`` as an int: None is the default stream (0); an int in
    [0, 2**64) is taken as is; objects with ``.cuda_stream`` (PyTorch), ``.ptr`` (CuPy) or
    ``.handle`` (Numba; a ctypes pointer whose None is 0) give theirs, checked the same way.
    Raises TypeError or ValueError naming ``stream`` for anything else; makes no CUDA call."""
    if stream is None:
        return 0
    if isinstance(stream, (bool, int, np.integer)):
        return _check_handle(stream, "stream")
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if value is not None:
            value = getattr(value, "value", value)  # ctypes c_void_p (Numba)
            if value is None:
                return 0
            return _check_handle(value, f"stream.{attr}")
    raise TypeError(
        "stream must be None, an int cudaStream_t, or an object with .cuda_stream, "
        f".ptr or .handle (PyTorch, CuPy, Numba), got {type(stream).__name__}"
    )


# --- timers -------------------------------------------------------------------------------------


class _EventPool:
    """Reusable timing events, per device (creating one costs microseconds; an event can only
    be recorded on a stream of the device it was created on)."""

    def __init__(self) -> None:
        self.free: dict[int, list[int]] = {}
        self.owner: dict[int, int] = {}

    def get(self) -> int:
        dev = _C._cuda_get_device()
        free = self.free.get(dev)
        if free:
            return free.pop()
        ev = _C._cuda_event_create()
        self.owner[ev] = dev
        return ev

    def get_many(self, n: int, dev: Optional[int] = None) -> list[int]:
        """n events of device dev (None: the current device, asked once for all of them),
        which must be current."""
        if dev is None:
            dev = _C._cuda_get_device()
        free = self.free.setdefault(dev, [])
        out = [free.pop() for _ in range(min(n, len(free)))]
        for _ in range(n - len(out)):
            ev = _C._cuda_event_create()
            self.owner[ev] = dev
            out.append(ev)
        return out

    def put(self, ev: int) -> None:
        self.free.setdefault(self.owner.get(ev, 0), []).append(ev)

    def put_many(self, events: Sequence[int]) -> None:
        """Gives back events (all of one device, as get_many gave them)."""
        if events:
            self.free.setdefault(self.owner.get(events[0], 0), []).extend(events)


_events = _EventPool()


def _summary(values: np.ndarray) -> dict[str, float]:
    """median, IQR, min, mean, std (population) of a sample; NaN when it is empty."""
    if values.size == 0:
        nan = float("nan")
        return {"median": nan, "iqr": nan, "min": nan, "mean": nan, "std": nan}
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return {
        "median": float(med),
        "iqr": float(q3 - q1),
        "min": float(values.min()),
        "mean": float(values.mean()),
        "std": float(values.std()),
    }


_TIMER_PENDING_MAX = 64  # event pairs a timer keeps unread


class _GpuStatistics:
    """The read-only statistics of GPU times in milliseconds, from ``_stat(key)``."""

    def _stat(self, key: str) -> float:
        raise NotImplementedError

    @property
    def median(self) -> float:
        """Median GPU time (ms)."""
        return self._stat("median")

    @property
    def iqr(self) -> float:
        """Interquartile range of GPU times (ms)."""
        return self._stat("iqr")

    @property
    def min(self) -> float:
        """Fastest GPU time (ms)."""
        return self._stat("min")

    @property
    def mean(self) -> float:
        """Mean GPU time (ms)."""
        return self._stat("mean")

    @property
    def std(self) -> float:
        """Standard deviation of GPU times (ms)."""
        return self._stat("std")


class cuda_timer(_GpuStatistics):
    """Times a block on the GPU with a pair of CUDA events, and on the host.

    ``with cuda_timer(name=None, stream=None) as t: ...`` records a start event on ``stream``
    at entry and an end event at exit. ``t.elapsed_ms`` waits for the end event (GIL released)
    the first time it is read; ``t.cpu_ms`` is the host time of the block. Reusing one timer
    across iterations accumulates samples: ``t.samples_ms``, ``t.median``, ``t.iqr``, ``t.min``,
    ``t.mean``, ``t.std`` (milliseconds). ``stream`` is None (default stream), an int
    cudaStream_t, or a stream object (``.cuda_stream``, ``.ptr``, ``.handle``). One timer
    belongs to one thread; give each thread its own.
    """

    __slots__ = ("name", "stream", "_pending", "_gpu", "_cpu", "_t0", "_ev0")

    def __init__(self, name: Optional[str] = None, stream: Any = None) -> None:
        self.name = name
        self.stream = stream_handle(stream)
        self._pending: list[tuple[int, int]] = []
        self._gpu: list[float] = []
        self._cpu: list[float] = []
        self._t0 = 0
        self._ev0 = 0

    def __enter__(self) -> "cuda_timer":
        _require()
        if self._ev0:
            raise RuntimeError("cuda_timer is already running (nested use of one timer)")
        ev = _events.get()
        try:
            _C._cuda_event_record(ev, self.stream)
        except BaseException:
            _events.put(ev)  # the pooled event goes back whatever failed
            raise
        self._ev0 = ev
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        t1 = time.perf_counter_ns()
        ev0, self._ev0 = self._ev0, 0
        ev1 = _events.get()
        try:
            _C._cuda_event_record(ev1, self.stream)
        except BaseException:
            _events.put(ev0)  # no sample: both events go back, the timer can run again
            _events.put(ev1)
            raise
        self._pending.append((ev0, ev1))
        self._cpu.append((t1 - self._t0) / 1e6)
        if len(self._pending) > _TIMER_PENDING_MAX:
            # a timer never read keeps a bounded number of events: the oldest pairs (long
            # finished, as a rule) are read into the samples
            self._resolve(len(self._pending) - _TIMER_PENDING_MAX // 2)

    def _resolve(self, count: Optional[int] = None) -> None:
        """Reads the oldest count pending event pairs (every one by default; waiting for the
        last one read) into the samples."""
        left = len(self._pending) if count is None else count
        while self._pending and left > 0:
            left -= 1
            e0, e1 = self._pending[0]
            ms = _C._cuda_event_elapsed(e0, e1)
            self._pending.pop(0)
            self._gpu.append(ms)
            _events.put(e0)
            _events.put(e1)

    @property
    def elapsed_ms(self) -> float:
        """GPU time of the last timed block in ms (waits for it, GIL released)."""
        self._resolve()
        if not self._gpu:
            raise RuntimeError("cuda_timer has no finished sample yet")
        return self._gpu[-1]

    @property
    def cpu_ms(self) -> float:
        """Host time of the last timed block in ms."""
        if not self._cpu:
            raise RuntimeError("cuda_timer has no finished sample yet")
        return self._cpu[-1]

    @property
    def samples_ms(self) -> np.ndarray:
        """GPU times of every timed block so far (ms)."""
        self._resolve()
        return np.array(self._gpu, dtype=np.float64)

    @property
    def cpu_samples_ms(self) -> np.ndarray:
        """Host times of every timed block so far (ms)."""
        return np.array(self._cpu, dtype=np.float64)

    def stats(self) -> dict[str, float]:
        """median, iqr, min, mean, std of the GPU samples (ms)."""
        return _summary(self.samples_ms)

    def _stat(self, key: str) -> float:
        return self.stats()[key]

    def __len__(self) -> int:
        return len(self._gpu) + len(self._pending)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<cuda_timer{label}: {len(self)} sample(s)>"

    def __del__(self) -> None:
        try:
            for e0, e1 in self._pending:
                _C._cuda_event_destroy(e0)
                _C._cuda_event_destroy(e1)
        except Exception:
            pass


# --- benchmark ----------------------------------------------------------------------------------


@dataclass
class BenchmarkResult(_GpuStatistics):
    """Times of :func:`benchmark` in milliseconds: ``gpu_times`` (events around each call) and
    ``cpu_times`` (host time of each call, launch included, wait excluded)."""

    name: str
    gpu_times: np.ndarray
    cpu_times: np.ndarray
    n_warmup: int
    flush_l2: bool

    @property
    def n_repeat(self) -> int:
        return int(self.gpu_times.size)

    def _stat(self, key: str) -> float:
        return _summary(self.gpu_times)[key]

    def to_dict(self) -> dict[str, Any]:
        """Plain data: name, settings, GPU and CPU summaries, and the raw times (lists)."""
        return {
            "name": self.name,
            "n_warmup": self.n_warmup,
            "n_repeat": self.n_repeat,
            "flush_l2": self.flush_l2,
            "gpu_ms": _summary(self.gpu_times),
            "cpu_ms": _summary(self.cpu_times),
            "gpu_times": self.gpu_times.tolist(),
            "cpu_times": self.cpu_times.tolist(),
        }

    def __str__(self) -> str:
        g, c = _summary(self.gpu_times), _summary(self.cpu_times)
        return (
            f"{self.name}: GPU {_fmt_ms(g['median'])} median (IQR {_fmt_ms(g['iqr'])}, "
            f"min {_fmt_ms(g['min'])}), CPU {_fmt_ms(c['median'])} median, "
            f"{self.n_repeat} repeats, {self.n_warmup} warm-up, "
            f"L2 {'flushed' if self.flush_l2 else 'warm'}"
        )


def _fmt_ms(ms: float) -> str:
    if not math.isfinite(ms):
        return "n/a"
    if ms < 1e-3:
        return f"{ms * 1e6:.0f} ns"
    if ms < 1:
        return f"{ms * 1e3:.2f} us"
    if ms < 1000:
        return f"{ms:.3f} ms"
    return f"{ms / 1000:.3f} s"


class _BenchStart(threading.local):
    """Per thread: ``pending``, the start event of a running benchmark repeat and its stream
    (None outside one: a plain attribute read, which the kernels test before calling
    :func:`_kernel_start`)."""

    pending: Optional[tuple[int, int]] = None


_bench_start = _BenchStart()


def _kernel_start() -> None:
    """Called by fastprof's kernels once their arguments are prepared, right before their
    first device work (where ``_bench_start.pending`` is set): the start event of a running
    :func:`benchmark` repeat is recorded again here, so the host work before the launch is not
    counted as GPU time (an event recorded twice keeps the later time).  Nothing outside a
    benchmark."""
    pending = _bench_start.pending
    if pending is not None:
        _bench_start.pending = None
        _C._cuda_event_record(pending[0], pending[1])


_flush_buffers: dict[int, tuple[_Allocation, int]] = {}


def _flush_buffer() -> tuple[int, int]:
    """(pointer, nbytes) of a scratch buffer twice the current device's L2, kept for reuse."""
    dev = _C._cuda_get_device()
    if dev not in _flush_buffers:
        l2 = int(_props(dev)["l2_cache_bytes"]) or (8 << 20)
        nbytes = 2 * l2
        _flush_buffers[dev] = (_Allocation(nbytes, dev), nbytes)
    alloc, nbytes = _flush_buffers[dev]
    return alloc.ptr, nbytes


def _check_count(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{what} must be an int >= {minimum}, got {value!r}")
    return int(value)


def benchmark(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Optional[dict] = None,
    n_warmup: int = 10,
    n_repeat: int = 100,
    max_duration: Optional[float] = None,
    flush_l2: bool = True,
    stream: Any = None,
    name: Optional[str] = None,
) -> BenchmarkResult:
    """Times ``fn(*args, **kwargs)`` on the GPU.

    ``n_warmup`` untimed calls, then up to ``n_repeat`` timed ones (fewer when ``max_duration``
    seconds of wall time have passed, at least one). Before each timed call, when ``flush_l2``,
    a kernel overwrites a buffer twice the L2 size, outside the timed window; then a start
    event, the call, an end event, and one wait for the end event. Events go on ``stream``.
    When the call runs fastprof's own kernels, the start event is recorded again once they
    have prepared their arguments (checks, plans), right before their first device work, so
    that host work is not counted as GPU time.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if kwargs is None:
        kwargs = {}
    elif not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict or None, got {type(kwargs).__name__}")
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise TypeError(f"args must be a sequence of arguments, got {type(args).__name__}")
    args = tuple(args)
    n_warmup = _check_count(n_warmup, "n_warmup", 0)
    n_repeat = _check_count(n_repeat, "n_repeat", 1)
    if max_duration is not None and not (
        not isinstance(max_duration, bool)
        and isinstance(max_duration, (int, float, np.integer, np.floating))
        and max_duration > 0
    ):
        raise ValueError(
            f"max_duration must be a number of seconds > 0 or None, got {max_duration!r}"
        )
    handle = stream_handle(stream)
    _require()
    for _ in range(n_warmup):
        fn(*args, **kwargs)
    flush = _flush_buffer() if flush_l2 else None
    e0, e1 = _events.get(), _events.get()
    gpu: list[float] = []
    cpu: list[float] = []
    deadline = None if max_duration is None else time.perf_counter() + max_duration
    try:
        for _ in range(n_repeat):
            if flush is not None:
                _C._cuda_scrub(flush[0], flush[1], handle)
            _C._cuda_event_record(e0, handle)
            _bench_start.pending = (e0, handle)  # fastprof's kernels record it again later
            t0 = time.perf_counter_ns()
            try:
                fn(*args, **kwargs)
            finally:
                _bench_start.pending = None
            t1 = time.perf_counter_ns()
            _C._cuda_event_record(e1, handle)
            gpu.append(_C._cuda_event_elapsed(e0, e1))
            cpu.append((t1 - t0) / 1e6)
            if deadline is not None and time.perf_counter() > deadline:
                break
    finally:
        _events.put(e0)
        _events.put(e1)
    return BenchmarkResult(
        name or str(getattr(fn, "__name__", "fn")),
        np.array(gpu),
        np.array(cpu),
        n_warmup,
        bool(flush_l2),
    )


# --- device arrays ------------------------------------------------------------------------------

_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # DLPack type codes
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_KDL_CUDA = 2
_KDL_CUDA_MANAGED = 13


class _Fence:
    """One event recorded after fastprof's last work on some blocks; back to the pool when
    the last block holding it goes."""

    __slots__ = ("event", "__weakref__")

    def __init__(self, stream: int) -> None:
        self.event = _events.get()
        _C._cuda_event_record(self.event, stream)

    def __del__(self) -> None:
        try:
            _events.put(self.event)
        except Exception:
            pass


class _Allocation:
    """Owns one device block; gives it back when the last array using it goes. Blocks are
    stream-ordered (cudaMallocFromPoolAsync on the allocating stream, from fastprof's own pool)
    where the device supports memory pools: no device-wide sync on free.  A block is freed on
    the null stream, which always exists (the stream it was allocated on may have been
    destroyed by then): after the fence of fastprof's last work on it, when that work ran on
    another stream.  Other work on another stream must be synchronized by the user before the
    array is dropped, as with CuPy and PyTorch."""

    __slots__ = ("ptr", "nbytes", "device", "stream", "ordered", "fence", "__weakref__")

    def __init__(self, nbytes: int, device: int, stream: int = 0) -> None:
        self.ptr = 0
        self.nbytes = nbytes
        self.device = device
        self.stream = stream
        self.fence: Optional[_Fence] = None
        self.ptr, self.ordered = _C._cuda_malloc(nbytes, stream)

    def __del__(self) -> None:
        if self.ptr:
            try:  # on the null stream of the block's own device, after the fence if any
                fence = self.fence
                _C._cuda_release(self.ptr, self.device, fence.event if fence else 0, self.ordered)
            except Exception:
                pass
            self.ptr = 0
            self.fence = None


# --- staging buffers of NumPy operands --------------------------------------------------------

_STAGING_MAX_BYTES = 64 << 20  # per device, what the free list below keeps at most


# one call's staging set: device pointers, their allocations, four timing events
_Staged = tuple[tuple[int, ...], tuple[_Allocation, ...], tuple[int, ...]]


class _StagingPool:
    """What a kernel call on NumPy operands runs with: one device buffer per size it needs (the
    uploaded operands, temporaries, the result) and four timing events, kept for the next call
    that needs the same sizes, so that a repeat call allocates and frees nothing.  The sets are
    kept in a free list keyed by device and the tuple of sizes.  A call takes a set with
    :meth:`begin` and waits for its last work with :meth:`end`, which keeps the set: no work
    queued before then uses it any more, so none will when it is handed out again.  A call
    that fails on the way gives its set up with :meth:`abandon` (its blocks are freed after a
    fence).  At most ``_STAGING_MAX_BYTES`` per device are kept; what does not fit is freed."""

    __slots__ = ("free", "held")

    def __init__(self) -> None:
        self.free: dict[tuple[int, tuple[int, ...]], list[_Staged]] = {}
        self.held: dict[int, int] = {}

    def begin(self, dev: int, sizes: tuple[int, ...], total: int, stream: int) -> _Staged:
        """A set of one buffer per size on device dev (current; total: sum(sizes)), kept or
        made (ordered on stream), with its first event recorded on stream, after the start
        event of a running :func:`benchmark` repeat (the call's host work is done)."""
        got = None
        sets = self.free.get((dev, sizes))
        if sets:
            try:
                got = sets.pop()
            except IndexError:  # another thread took the last one
                pass
            else:
                self.held[dev] -= total
        if got is None:
            got = self._fresh(dev, sizes, stream)
        if _bench_start.pending is not None:
            _kernel_start()
        _C._cuda_event_record(got[2][0], stream)
        return got

    def _fresh(self, dev: int, sizes: tuple[int, ...], stream: int) -> _Staged:
        """A new set: blocks of sizes on device dev ordered on stream, four events."""
        try:
            allocs = tuple(_Allocation(n, dev, stream) for n in sizes)
        except CudaError:
            if not self.free:
                raise
            self.clear()  # the kept sets may be what fills the device: once more without them
            allocs = tuple(_Allocation(n, dev, stream) for n in sizes)
        return tuple(a.ptr for a in allocs), allocs, tuple(_events.get_many(4, dev))

    def end(
        self, got: _Staged, dev: int, sizes: tuple[int, ...], total: int, stream: int
    ) -> tuple[float, float, float]:
        """The ms between the four events of got (all recorded on stream), waiting for them;
        then keeps got for the next call of the same sizes unless the device's share is full."""
        try:
            times = _C._cuda_event_times(got[2])
        except BaseException:
            self.abandon(got, stream)
            raise
        held = self.held.get(dev, 0)
        if held + total <= _STAGING_MAX_BYTES:
            self.held[dev] = held + total
            self.free.setdefault((dev, sizes), []).append(got)
        else:
            _events.put_many(got[2])
        return times

    def abandon(self, got: _Staged, stream: int) -> None:
        """Gives up got after a failure: its blocks are freed once the work queued on stream
        so far is done, its events go back to their pool."""
        _fence_blocks(got[1], stream)
        _events.put_many(got[2])

    def clear(self) -> None:
        """Frees every kept set (its events back to their pool)."""
        for sets in self.free.values():
            for got in sets:
                _events.put_many(got[2])
        self.free.clear()
        self.held.clear()


_staging = _StagingPool()


def _fence_after(arrays: Sequence[Any], stream: int) -> None:
    """Records that fastprof's work on the blocks of arrays (DeviceArrays it made; others are
    skipped) was queued on stream: their frees on the null stream wait for it.  Nothing for
    the null stream itself."""
    if not stream:
        return
    fence = None
    for a in arrays:
        alloc = getattr(a, "_owner", None)
        if type(alloc) is _Allocation:
            if fence is None:
                fence = _Fence(stream)
            alloc.fence = fence


def _fence_blocks(allocs: Sequence[_Allocation], stream: int) -> None:
    """Makes the frees of allocs wait for the work queued on stream so far (nothing for the
    null stream, where they go)."""
    if stream and allocs:
        fence = _Fence(stream)
        for a in allocs:
            a.fence = fence


def _wait_for_operands(arrays: Sequence[Any], stream: int) -> None:
    """Makes stream wait for the work queued on each array's stream (its CUDA Array
    Interface v3 ``stream``) when that is another stream: an event recorded there, waited on
    here."""
    for a in arrays:
        if a.stream != stream:
            ev = _events.get()
            try:
                _C._cuda_event_record(ev, a.stream)
                _C._cuda_stream_wait_event(stream, ev)
            finally:
                _events.put(ev)


_c_strides_seen: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The C-order byte strides of shape, as NumPy gives them (remembered per shape)."""
    key = (shape, itemsize)
    hit = _c_strides_seen.get(key)
    if hit is not None:
        return hit
    if 0 in shape:  # NumPy's strides of an empty array (all 0 in NumPy 2)
        out = tuple(np.empty(shape, dtype=f"V{itemsize}").strides)
    else:
        strides = []
        acc = itemsize
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        out = tuple(reversed(strides))
    if len(_c_strides_seen) < 1024 and type(shape) is tuple:
        _c_strides_seen[key] = out
    return out


def _shape_size(n: Any, shape: Any) -> int:
    """n as one size of shape, as NumPy takes it (operator.index: no str, float or bool);
    TypeError naming ``shape`` otherwise."""
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"shape must hold ints, got a bool in {shape!r}")
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None


def _check_shape(shape: Any) -> tuple[int, ...]:
    """shape as a tuple of non-negative ints (one int or a sequence of them); TypeError or
    ValueError naming ``shape`` otherwise."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        out: tuple[int, ...] = (_shape_size(shape, shape),)
    else:
        out = tuple(_shape_size(n, shape) for n in shape)
    if any(n < 0 for n in out):
        raise ValueError(f"shape must be non-negative, got {out}")
    return out


def _check_nbytes(shape: tuple[int, ...], dtype: np.dtype) -> None:
    """ValueError ("array is too big", as NumPy's) when the bytes of shape in dtype exceed what
    an allocation can take (sys.maxsize, NumPy's limit too)."""
    if math.prod(shape) * dtype.itemsize > sys.maxsize:
        raise ValueError(
            f"array is too big: shape {shape} of {dtype} is more than {sys.maxsize} bytes"
        )


class DeviceArray:
    """An n-d array in device memory, or a zero-copy view of another library's device array.

    Create with :meth:`empty`, :meth:`zeros` or :meth:`from_numpy`; bring back with
    :meth:`to_numpy`. Exposes ``__cuda_array_interface__`` (v3) and DLPack
    (``__dlpack__`` / ``__dlpack_device__``), so CuPy, PyTorch and Numba take it without a copy.
    ``strides`` are in bytes, as in NumPy.
    """

    __slots__ = ("ptr", "shape", "dtype", "strides", "device", "stream", "_owner")

    def __init__(
        self,
        ptr: int,
        shape: tuple[int, ...],
        dtype: Any,
        strides: Optional[tuple[int, ...]],
        device: int,
        owner: Any,
        stream: int = 0,
    ) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(n) for n in shape)
        self.strides = (
            tuple(strides) if strides is not None else _c_strides(self.shape, self.dtype.itemsize)
        )
        self.ptr = int(ptr)
        self.device = int(device)
        self.stream = int(stream)
        self._owner = owner

    # construction
    @classmethod
    def empty(
        cls, shape: Any, dtype: Any = np.float64, device: Any = None, stream: Any = None
    ) -> "DeviceArray":
        """Uninitialized C-contiguous array on ``device`` (None: the current device), ordered
        on ``stream`` (None: the default stream)."""
        shape = _check_shape(shape)
        dtype = _check_dtype(dtype)
        _check_nbytes(shape, dtype)
        index = parse_device(device)
        handle = stream_handle(stream)
        _require()
        with _on_device(index):
            dev = _C._cuda_get_device()
            return _empty_here(shape, dtype, dev, handle)

    @classmethod
    def zeros(cls, shape: Any, dtype: Any = np.float64, device: Any = None) -> "DeviceArray":
        """Zero-filled C-contiguous array (copied from a host zero buffer)."""
        shape, dtype = _check_shape(shape), _check_dtype(dtype)
        _check_nbytes(shape, dtype)
        parse_device(device)
        return cls.from_numpy(np.zeros(shape, dtype=dtype), device=device)

    @classmethod
    def from_numpy(cls, array: Any, device: Any = None, stream: Any = None) -> "DeviceArray":
        """A C-contiguous device copy of ``array`` (anything np.asarray takes)."""
        host = np.ascontiguousarray(array)
        _check_dtype(host.dtype)
        handle = stream_handle(stream)
        if device is None:  # the current device: no device switch
            _require()
            out = _empty_here(host.shape, host.dtype, _C._cuda_get_device(), handle)
            if host.nbytes:
                _C._cuda_memcpy_htod(out.ptr, host.data.cast("B"), handle)
            return out
        out = cls.empty(host.shape, host.dtype, device, handle)
        if host.nbytes:
            with _on_device(out.device):
                _C._cuda_memcpy_htod(out.ptr, host.data.cast("B"), handle)
        return out

    # properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def is_c_contiguous(self) -> bool:
        if self.strides == _c_strides(self.shape, self.itemsize):
            return True
        return self.size <= 1 or all(
            n == 1 or s == c
            for n, s, c in zip(self.shape, self.strides, _c_strides(self.shape, self.itemsize))
        )

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    # copies
    def to_numpy(self, stream: Any = None) -> np.ndarray:
        """A host copy (NumPy array of the same shape, dtype and layout order C)."""
        handle = stream_handle(stream) if stream is not None else self.stream
        _require()
        out = np.empty(self.shape, dtype=self.dtype)
        if out.nbytes == 0:
            return out
        with _on_device(self.device):
            if self.is_c_contiguous:
                _C._cuda_memcpy_dtoh(out.data.cast("B"), self.ptr, handle)
                return out
            # a strided view: bring back its whole extent, then view it on the host
            lo = sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0)
            hi = sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0) + self.itemsize
            raw = np.empty(hi - lo, dtype=np.uint8)
            _C._cuda_memcpy_dtoh(raw.data, self.ptr + lo, handle)
        base = np.ndarray(
            self.shape, dtype=self.dtype, buffer=raw, offset=-lo, strides=self.strides
        )
        out[...] = base
        return out

    copy_to_host = to_numpy
    get = to_numpy

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Refused, as CuPy refuses it: a device-to-host copy is never implicit."""
        raise TypeError(
            "a DeviceArray is not converted to a NumPy array implicitly (np.asarray, "
            "np.array, NumPy functions): call .to_numpy() (or .get()) for a host copy"
        )

    def copy(self) -> "DeviceArray":
        """A C-contiguous device copy, queued on this array's stream, which the copy records as
        its own (``.stream`` and its ``__cuda_array_interface__``)."""
        if not self.is_c_contiguous:
            return DeviceArray.from_numpy(self.to_numpy(), device=self.device, stream=self.stream)
        out = DeviceArray.empty(self.shape, self.dtype, self.device, stream=self.stream)
        if self.nbytes:
            with _on_device(self.device):
                _C._cuda_memcpy_dtod(out.ptr, self.ptr, self.nbytes, self.stream)
        return out

    # interop
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None if self.is_c_contiguous else self.strides,
            # our work goes on the legacy default stream unless a stream was given
            "stream": self.stream if self.stream else 1,
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDL_CUDA, self.device)

    def __dlpack__(
        self, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> Any:
        """A "dltensor" capsule (DLPack 0.x ABI) viewing this memory; keeps it alive."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy (copy=True asked)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on {self.__dlpack_device__()}, not {dl_device}")
        # the consumer will use `stream` (None or 1: the legacy default stream; -1: it will
        # synchronize itself): make that stream wait for the work queued on ours
        target = 0 if stream in (None, 1) else int(stream)
        if stream != -1 and target != self.stream:
            _require()
            with _on_device(self.device):
                ev = _events.get()
                try:
                    _C._cuda_event_record(ev, self.stream)
                    _C._cuda_stream_wait_event(target, ev)
                finally:
                    _events.put(ev)
        if any(s % self.itemsize for s in self.strides):
            raise BufferError("strides are not a multiple of the item size")
        strides = tuple(s // self.itemsize for s in self.strides)
        kind = self.dtype.kind
        if kind not in _DL_CODES:
            raise BufferError(f"dtype {self.dtype} has no DLPack code")
        return _C._cuda_dlpack_export(
            self.ptr,
            self.shape,
            strides,
            _DL_CODES[kind],
            self.dtype.itemsize * 8,
            _KDL_CUDA,
            self.device,
            self,
        )


def _empty_here(shape: tuple[int, ...], dtype: np.dtype, dev: int, stream: int) -> DeviceArray:
    """An uninitialized C-contiguous array on device dev, which must be current (shape and dtype
    already checked: the kernels' fast path)."""
    item = dtype.itemsize
    alloc = _Allocation(math.prod(shape) * item, dev, stream)
    out = object.__new__(DeviceArray)
    out.ptr, out.shape, out.dtype, out.strides = alloc.ptr, shape, dtype, _c_strides(shape, item)
    out.device, out.stream, out._owner = dev, stream, alloc
    return out


def _empty_laid_out(
    shape: tuple[int, ...],
    dtype: np.dtype,
    strides: tuple[int, ...],
    nbytes: int,
    dev: int,
    stream: int,
) -> DeviceArray:
    """_empty_here for a shape whose C-contiguous strides and byte size a plan already holds."""
    alloc = _Allocation(nbytes, dev, stream)
    out = object.__new__(DeviceArray)
    out.ptr, out.shape, out.dtype, out.strides = alloc.ptr, shape, dtype, strides
    out.device, out.stream, out._owner = dev, stream, alloc
    return out


def _check_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in "biufc" or dt.hasobject:
        raise TypeError(f"dtype must be a numeric or bool dtype, got {dt}")
    return dt


def is_device_array(obj: Any) -> bool:
    """True for a DeviceArray, an object with ``__cuda_array_interface__``, or one whose
    ``__dlpack_device__()`` is a CUDA device. Makes no CUDA call."""
    if isinstance(obj, DeviceArray):
        return True
    if isinstance(obj, np.ndarray):
        return False
    if hasattr(type(obj), "__cuda_array_interface__") or hasattr(obj, "__cuda_array_interface__"):
        return True
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None and hasattr(obj, "__dlpack__"):
        try:
            return int(dev()[0]) in (_KDL_CUDA, _KDL_CUDA_MANAGED)
        except Exception:
            return False
    return False


def _cai_stream(stream: Any) -> int:
    """The cudaStream_t of a CUDA Array Interface v3 ``stream`` entry: None (no
    synchronization asked) and 1 (the legacy default stream) are 0, 2 is the per-thread
    default stream, another int in [0, 2**64) a stream handle; TypeError or ValueError
    otherwise."""
    if stream is None:
        return 0
    handle = _check_handle(stream, "__cuda_array_interface__['stream']")
    return 0 if handle == 1 else handle


def _on_stream(arr: DeviceArray, handle: int) -> DeviceArray:
    """arr, or when its stream is not handle, a view of it that records handle, with handle
    made to wait for the work queued on arr's stream so far (the consumer's side of CUDA Array
    Interface v3 and DLPack)."""
    if arr.stream == handle:
        return arr
    with _on_device(arr.device):
        _wait_for_operands((arr,), handle)
    return DeviceArray(
        arr.ptr, arr.shape, arr.dtype, arr.strides, arr.device, arr._owner, stream=handle
    )


def _from_cai(obj: Any, cai: dict[str, Any]) -> DeviceArray:
    """A zero-copy DeviceArray view from a __cuda_array_interface__ dict."""
    if not isinstance(cai, dict) or "data" not in cai or "shape" not in cai or "typestr" not in cai:
        raise TypeError("__cuda_array_interface__ must be a dict with data, shape and typestr")
    if cai.get("mask") is not None:
        raise ValueError("masked __cuda_array_interface__ arrays are not supported")
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    ptr = int(cai["data"][0] or 0)
    strides = cai.get("strides")
    handle = _cai_stream(cai.get("stream"))
    dev = _C._cuda_pointer_device(ptr) if ptr else _C._cuda_get_device()
    return DeviceArray(
        ptr, shape, dtype, tuple(strides) if strides is not None else None, dev, obj, stream=handle
    )


def as_device_array(obj: Any, stream: Any = None) -> DeviceArray:
    """A zero-copy DeviceArray view of a device array from any library (DeviceArray,
    ``__cuda_array_interface__``, or ``__dlpack__`` on a CUDA device). The view keeps the
    producer alive and records the stream its work goes on: with ``stream`` None, the
    producer's (a DeviceArray's own, the CAI ``stream``; for DLPack the default stream,
    which is passed to the producer); with ``stream`` given (checked as
    :func:`stream_handle` does), that one, made to wait for the producer's work first (for
    DLPack the producer is passed it). Raises TypeError for other objects."""
    handle = stream_handle(stream)
    if isinstance(obj, DeviceArray):
        return obj if stream is None else _on_stream(obj, handle)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        _require()
        view = _from_cai(obj, cai)
        return view if stream is None else _on_stream(view, handle)
    if is_device_array(obj):
        _require()
        try:
            cap = obj.__dlpack__(stream=handle if handle else 1)
        except TypeError:
            cap = obj.__dlpack__()
        ptr, shape, strides, (code, bits, _lanes), dev_type, dev_id, keeper = (
            _C._cuda_dlpack_import(cap)
        )
        if code not in _DL_KINDS or bits % 8:
            raise TypeError(f"unsupported DLPack dtype (code {code}, {bits} bits)")
        kind = _DL_KINDS[code]
        dtype = np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{bits // 8}")
        byte_strides = None if strides is None else tuple(s * dtype.itemsize for s in strides)
        return DeviceArray(ptr, shape, dtype, byte_strides, dev_id, (obj, keeper), stream=handle)
    raise TypeError(
        f"expected a device array (DeviceArray, __cuda_array_interface__ or CUDA "
        f"__dlpack__), got {type(obj).__name__}"
    )
