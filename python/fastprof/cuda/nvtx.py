"""fastprof.nvtx: NVTX ranges that name regions in Nsight Systems timelines.

``fastprof.nvtx.range(name)`` works as a context manager and as a decorator. NVTX3 is
header-only: with no tool attached each push/pop is a check of a null function pointer, so
ranges can stay in production code. In a build without CUDA they do nothing.

    >>> from fastprof import nvtx
    >>> with nvtx.range("forward"):
    ...     model(x)
    >>> @nvtx.range("step")
    ... def step(): ...
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar, cast, overload

from .. import _fastprof as _C

__all__ = ["range", "Range", "push", "pop", "enabled"]

F = TypeVar("F", bound=Callable[..., Any])

_BUILT = bool(_C._cuda_built())


def enabled() -> bool:
    """True when this build carries NVTX (a CUDA build); ranges are no-ops otherwise."""
    return _BUILT


def push(name: str) -> int:
    """Opens a range; returns its depth (negative when no tool is attached, or not built)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    return _C._cuda_nvtx_push(name) if _BUILT else -1


def pop() -> int:
    """Closes the innermost range; returns the depth left (negative without a tool)."""
    return _C._cuda_nvtx_pop() if _BUILT else -1


class Range:
    """An NVTX range, as :func:`range` makes it: a context manager (``with``), and a decorator
    whose calls each run inside the range (named after the function when the range has no
    name)."""

    __slots__ = ("name",)

    def __init__(self, name: Optional[str] = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name

    def __enter__(self) -> "Range":
        if _BUILT:
            _C._cuda_nvtx_push(self.name if self.name is not None else "range")
        return self

    def __exit__(self, *exc: Any) -> None:
        if _BUILT:
            _C._cuda_nvtx_pop()

    def __call__(self, fn: F) -> F:
        if not callable(fn):
            raise TypeError(f"range(...) decorates a callable, got {type(fn).__name__}")
        name = self.name if self.name is not None else _name_of(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _BUILT:
                _C._cuda_nvtx_push(name)
            try:
                return fn(*args, **kwargs)
            finally:
                if _BUILT:
                    _C._cuda_nvtx_pop()

        return cast(F, wrapper)  # functools.wraps keeps fn's signature

    def __repr__(self) -> str:
        return f"nvtx.range({self.name!r})"


def _name_of(fn: Callable[..., Any]) -> str:
    """The label of a range decorating fn: its __qualname__ (else __name__, else its repr)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


@overload
def range(name: F, /) -> F: ...


@overload
def range(name: Optional[str] = None) -> Range: ...


def range(name: Any = None) -> Any:  # noqa: A001  (mirrors nvtx.annotate / torch's range)
    """An NVTX range: ``with range("name"):``, ``@range("name")``, or ``@range()`` and bare
    ``@range``, named after the decorated function (its __qualname__).  A range with no name
    in a ``with`` statement is labelled "range".  TypeError for a name that is no str."""
    if callable(name) and not isinstance(name, str):
        return Range()(name)  # bare decorator: @range
    return Range(name)
