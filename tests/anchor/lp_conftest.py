"""conftest for line_profiler 5.1's own test_line_profiler.py run against fastprof: its
``LineProfiler`` is fastprof's (line_profiler stays installed for everything else the file
imports), and ``ubelt.ChDir`` (the one name the file takes from ubelt) is provided when ubelt
is not installed."""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any, Iterator

import line_profiler

import fastprof

line_profiler.LineProfiler = fastprof.LineProfiler  # type: ignore[misc]

try:
    import ubelt  # noqa: F401
except ImportError:

    @contextlib.contextmanager
    def _chdir(path: Any) -> Iterator[None]:
        before = os.getcwd()
        os.chdir(path)
        try:
            yield
        finally:
            os.chdir(before)

    _ubelt = types.ModuleType("ubelt")
    _ubelt.ChDir = _chdir  # type: ignore[attr-defined]
    sys.modules["ubelt"] = _ubelt
