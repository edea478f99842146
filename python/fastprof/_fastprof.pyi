"""Type stub of the compiled core, fastprof._fastprof: the clock, the call profiler, the line
tracer and the CPU kernels' entry points (the private _cuda_* functions are typed where
fastprof.cuda wraps them)."""

from types import CodeType, FrameType
from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, Union

_FuncRecord = Tuple[Union[CodeType, str], int, int, int, int]
"""(key, ncalls, recursive calls, cumulative ticks, own ticks); key is a code object or, for a
builtin, cProfile's label such as "<built-in method builtins.len>"."""

_EdgeRecord = Tuple[int, int, int, int, int, int]
_NodeRecord = Tuple[int, int, int, int, int, int]  # parent, func, thread, ncalls, tt, it
"""(caller index, callee index, ncalls, recursive calls, cumulative ticks, own ticks)."""
_SpanRecord = Tuple[int, int, int, int, int]
"""A timeline span: (start tick, end tick, function index, thread index, depth)."""

class Profiler:
    """The call profiler's collector; fastprof.Profile builds on it."""

    def __init__(
        self,
        timer: Optional[Callable[[], Union[int, float]]] = None,
        timeunit: float = 0.0,
        subcalls: bool = True,
        builtins: bool = True,
        *,
        clock: Literal["wall", "cpu", "process_cpu"] = "wall",
        threads: bool = True,
        strict: Optional[bool] = None,
        prune_call_sites: Optional[bool] = False,
        tree_nodes: int = 1000000,
        timeline: Optional[int] = None,
        timeline_min: Optional[float] = None,
        timeline_include: Optional[Iterable[str]] = None,
        timeline_exclude: Optional[Iterable[str]] = None,
    ) -> None: ...
    def enable(
        self, /, subcalls: Optional[bool] = None, builtins: Optional[bool] = None
    ) -> None: ...
    def disable(self, /) -> None: ...
    def clear(self, /) -> None: ...
    def _raw(self) -> Tuple[float, List[_FuncRecord], List[_EdgeRecord]]: ...
    def _raw_tree(self) -> Tuple[float, List[_NodeRecord], List[int], int]: ...
    def _tree_snapshot(self) -> Tuple[float, List[int], int, bytes]: ...
    def _tree_json(self, keys: List[int], drop: bytes) -> Tuple[List[Tuple[int, str]], int]: ...
    def _raw_timeline(
        self, *, spans: bool = True
    ) -> Optional[Tuple[float, List[_SpanRecord], List[Tuple[int, int]], Dict[str, int]]]: ...
    def _timeline_records(self, m0: int, k0: int, scale: float, /) -> Optional[bytes]: ...
    def _raw_thread_names(self) -> List[Tuple[int, int, Optional[str]]]: ...
    @property
    def tree_nodes(self) -> int: ...
    @property
    def timeline(self) -> Optional[int]: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def clock(self) -> Literal["wall", "cpu", "process_cpu", "user"]: ...
    @property
    def tool_id(self) -> Optional[int]: ...

class _Session:
    """The counted switch behind fastprof.profile (ProfileSession's base)."""

    profiler: Any
    @property
    def _active(self) -> int: ...
    def _start(self) -> None: ...
    def _stop(self) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc_info: Any) -> None: ...

class _Guarded:
    """A function decorated by fastprof.profile."""

    def __init__(
        self, session: _Session, func: Callable[..., Any], coroutine: bool = False
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    @property
    def session(self) -> Any: ...

class _GuardedCall:
    """A call of a coroutine function decorated by fastprof.profile (an awaitable)."""

    # the coroutine's own, read-only (None where what the function returned has none)
    @property
    def __name__(self) -> str: ...
    @property
    def __qualname__(self) -> str: ...
    @property
    def cr_frame(self) -> Optional[FrameType]: ...
    @property
    def cr_await(self) -> Any: ...
    @property
    def cr_code(self) -> Optional[CodeType]: ...
    @property
    def cr_origin(self) -> Optional[Tuple[Tuple[str, int, str], ...]]: ...
    @property
    def cr_running(self) -> bool: ...
    @property
    def cr_suspended(self) -> bool: ...  # 3.11+ only
    def __await__(self) -> Any: ...  # RuntimeError while another await of it is pending
    def __next__(self) -> Any: ...
    def send(self, value: Any) -> Any: ...
    def throw(self, *exc: Any) -> Any: ...
    def close(self) -> None: ...

def _monitoring_claim(name: str) -> int: ...  # 3.12+ only
def _monitoring_release(
    tool_id: int, events: int, name: str, reclaimed: bool = False
) -> None: ...  # 3.12+ only
def ticks() -> int: ...
def clock_info() -> Tuple[str, float]: ...
def _empty_profile_hook(on: bool) -> None: ...  # below 3.12 only: the benchmark floor
def _stamp_profile_hook(on: bool) -> Tuple[int, int]: ...  # below 3.12 only: the timing floor
def _exit_gate(
    stop: Optional[Callable[[], Any]],
    before: Optional[Callable[[], Any]],
    exit: Callable[..., Any],
) -> Callable[..., Any]: ...
def _stop_first(cell: List[Any], then: Callable[..., Any]) -> Callable[..., Any]: ...

class _Quiet:
    """A callable run with the thread's profiling and tracing suspended (_quiet.quiet)."""

    __wrapped__: Callable[..., Any]
    def __init__(self, func: Callable[..., Any], /) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any: ...

def _marshal_loads(
    data: bytes, /, *, allow_bytes: bool = False
) -> Any: ...  # _marshal_reader.loads

TIMELINE_RECORD_SIZE: int  # bytes of one span record (timeline._RECORD, report.chrome)

def _tree_fold(
    block: bytes,
    threads: int,
    slot: int,
    level: int,
    keys: List[Any],
    libs: bytearray,
    is_lib: Callable[[Any], bool],
    row_key: Any,
    fold_rec: bool,
    fold_lib: bool,
    spt: float,
    ncalls: int,
    tottime: float,
    levels: int,
    hidden: int,
) -> Tuple[int, float, int, int, List[int]]: ...
def _tree_columns(
    block: bytes,
    threads: int,
    slot: int,
    row: int,
    level: int,
    keys: List[Any],
    keymap: Any,  # writable int64s, one a key
    number: Callable[[Any], int],
    spt: float,
    parent: List[int],
    key: List[int],
    calls: List[int],
    own: List[float],
    total: List[float],
    levels: List[int],
    /,
) -> None: ...  # report.html._tree_threads
def _spans_of_records(
    records: bytes, keys: List[Any], span_type: Any, /
) -> List[Any]: ...  # timeline.Timeline.spans
def _chrome_x_events(
    records: bytes,
    lo: int,
    hi: int,
    names: List[bytes],
    args: List[bytes],
    tids: List[int],
    pid: int,
    origin: int = 0,
    /,
) -> bytes: ...  # report.chrome

class _EmptyCallback:  # a callback that does nothing: the benchmarks' sys.monitoring floor
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

class LineTracer:
    def __init__(self, timer: Optional[Callable[[], int]] = None) -> None: ...
    enabled: bool
    _busy: bool
    has_timer: bool
    def add_code(self, code: CodeType, first: int, last: int, start: int = 0) -> bool: ...
    def codes(self) -> List[CodeType]: ...
    def get_timings(self) -> List[Tuple[CodeType, List[Tuple[int, int, int]]]]: ...
    def reset(self) -> None: ...
    def _stop(self) -> Optional[BaseException]: ...
    @staticmethod
    def seconds_per_tick() -> float: ...
    @staticmethod
    def _unmute_thread() -> None: ...
    @staticmethod
    def _settrace_unmuting(prev: Callable[[Any], None]) -> Callable[[Any], None]: ...
    def _unregistered(self, functions: Sequence[Any]) -> List[Any]: ...
    def _set_local_events(
        self, set_local_events: Callable[[int, CodeType, int], Any], tool: int, events: int
    ) -> None: ...
    def __getattr__(self, name: str) -> Any: ...  # the private hooks and their switches

def _uniform_filter1d(
    input: Any, output: Any, size: int, axis: int, mode: int, cval: float, origin: int
) -> None: ...
def _uniform_filter_exact(
    input: Any, output: Any, sizes: Any, modes: Any, origins: Any, cval: float, order: Any
) -> None: ...
def _correlate_separable(
    input: Any, output: Any, factors: Any, modes: Any, cval: float, origins: Any
) -> None: ...
def _correlate_general(
    input: Any,
    output: Any,
    weights: Any,
    modes: Any,
    cval: float,
    origins: Any,
    exact: bool = False,
) -> None: ...
def _expr_opcodes() -> dict[str, int]: ...
def _evaluate_program(
    steps: Any, inputs: Any, consts: Any, nregs: int, result: Any, out: Any
) -> None: ...
def _set_num_threads(n: int) -> None: ...
def _get_num_threads() -> int: ...
def _usable_cores() -> int: ...
def __getattr__(name: str) -> Any: ...  # the private _cuda_* entry points
