"""Type stub of the compiled core, fastprof._fastprof (the call profiler part)."""

from types import CodeType
from typing import Callable, List, Literal, Optional, Tuple, Union

_FuncRecord = Tuple[Union[CodeType, str], int, int, int, int]
"""(key, ncalls, recursive calls, cumulative ticks, own ticks); key is a code object or, for a
builtin, cProfile's label such as "<built-in method builtins.len>"."""

_EdgeRecord = Tuple[int, int, int, int, int, int]
"""(caller index, callee index, ncalls, recursive calls, cumulative ticks, own ticks)."""

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
    ) -> None: ...
    def enable(self, subcalls: Optional[bool] = None, builtins: Optional[bool] = None) -> None: ...
    def disable(self) -> None: ...
    def clear(self) -> None: ...
    def _raw(self) -> Tuple[float, List[_FuncRecord], List[_EdgeRecord]]: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def clock(self) -> Literal["wall", "cpu", "process_cpu", "user"]: ...
    @property
    def tool_id(self) -> Optional[int]: ...
