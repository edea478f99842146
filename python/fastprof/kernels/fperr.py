"""NumPy's floating-point error reports for a kernel that runs NumPy calls in pieces (blocks,
threads): the errors are collected while it runs and reported once each when it is done, as
one NumPy call would report them, at the caller's line and under the caller's settings
(``np.errstate``: ignore, warn, raise, call, print, log; warnings filters for warn).

``log = ErrorLog(np.geterr())``; ``with log.trap(): ...`` in each thread that computes (call
``log.step(name, operands)`` before each NumPy call); then ``log.report()`` in the caller's
thread."""

from __future__ import annotations

import os
import sys
import threading
import warnings
from contextlib import contextmanager
from types import FrameType
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np

# NumPy's error names (what an errcall receives) -> (errstate category, errcall flag)
_CATEGORY: Dict[str, Tuple[str, int]] = {
    "divide by zero": ("divide", 1),
    "overflow": ("over", 2),
    "underflow": ("under", 4),
    "invalid value": ("invalid", 8),
}

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class ErrorLog:
    """The floating-point errors of one kernel call, in order of first occurrence, each once
    per (error, ufunc name); settings: the caller's np.geterr()."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = dict(settings)
        self.seen: Dict[Tuple[str, str], None] = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The name of the operation running in this thread (as NumPy's messages name it)."""
        return getattr(self._local, "name", "")

    @name.setter
    def name(self, value: str) -> None:
        self.step(value)

    def step(self, name: str, operands: Sequence[Any] = ()) -> None:
        """Names the NumPy call about to run in this thread (an error it reports is "in" that
        name, as NumPy's message says; "cast" for the overflow of a Python float operand
        converted to a float32/float16 loop, which NumPy reports as a cast)."""
        self._local.name = name
        self._local.cast = _float_cast_overflows(operands)

    def _record(self, err: str, flag: int) -> None:
        """NumPy's errcall: notes the error for the operation running in this thread."""
        name = self.name
        if err == "overflow" and getattr(self._local, "cast", False):
            name = "cast"
        with self._lock:
            self.seen.setdefault((err, name), None)

    @contextmanager
    def trap(self) -> Iterator[None]:
        """Within it (in the current thread), NumPy's errors that the caller does not ignore
        are noted here instead of reported."""
        modes: Dict[str, Any] = {
            k: ("ignore" if v == "ignore" else "call") for k, v in self.settings.items()
        }
        with np.errstate(call=self._record, **modes):
            yield

    def report(self) -> None:
        """Reports each noted error once, as NumPy would have under the caller's settings:
        a RuntimeWarning at the first frame outside fastprof.kernels, FloatingPointError,
        the errcall, or a line on stdout / to the errcall's write."""
        seen, self.seen = list(self.seen), {}
        for err, name in seen:
            category, flag = _CATEGORY.get(err, ("invalid", 8))
            mode = self.settings.get(category, "warn")
            msg = f"{err} encountered in {name}"
            if mode == "warn":
                warnings.warn(msg, RuntimeWarning, stacklevel=_caller_level())
            elif mode == "raise":
                raise FloatingPointError(msg)
            elif mode == "call":
                _call(np.geterrcall(), err, flag)
            elif mode == "print":
                sys.stdout.write(f"Warning: {msg}\n")
            elif mode == "log":
                handler: Any = np.geterrcall()
                handler.write(f"Warning: {msg}\n")


def _float_cast_overflows(operands: Sequence[Any]) -> bool:
    """Whether a ufunc of operands converts a Python float beyond its loop's float16/float32
    range (NumPy warns "overflow encountered in cast" for it)."""
    big = [
        v
        for v in operands
        if type(v) is float and v == v and abs(v) != float("inf") and abs(v) > 65504.0
    ]
    if not big:
        return False
    try:
        dt = np.result_type(*operands)
    except (TypeError, ValueError):
        return False
    return dt.kind == "f" and dt.itemsize < 8 and any(abs(v) > float(np.finfo(dt).max) for v in big)


def _call(handler: Any, err: str, flag: int) -> None:
    """Calls the caller's errcall as NumPy does."""
    if handler is not None:
        handler(err, flag)


def _inside(filename: str) -> bool:
    """Whether filename is a file of the fastprof.kernels package."""
    d = os.path.dirname(os.path.abspath(filename))
    return d == _PACKAGE_DIR or d.startswith(_PACKAGE_DIR + os.sep)


def _caller_level() -> int:
    """The stacklevel of warnings.warn, called from report, that names the first frame outside
    the fastprof.kernels package (the user's line, as NumPy's warning names it)."""
    level = 1
    frame: Optional[FrameType] = sys._getframe(1)  # report's frame: warn's stacklevel 1
    try:
        while frame is not None and _inside(frame.f_code.co_filename):
            frame = frame.f_back
            level += 1
    finally:
        del frame
    return level
