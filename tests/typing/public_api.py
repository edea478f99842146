"""What a user's type checker sees of the public API: .ci/lint runs ``mypy --strict`` on this
file (it is not a test module; nothing runs it).  A decorator that erased the decorated
function's type, or a runcall returning Any, fails the lint."""

from __future__ import annotations

import pathlib
from typing import assert_type

import fastprof
from fastprof.profile import ProfileSession


@fastprof.profile
def plain(x: int) -> int:
    return x


@fastprof.profile(sort_by="tottime", top_n=5)
def with_options(x: int) -> str:
    return str(x)


class Model:
    @fastprof.profile
    def step(self, batch: list[float]) -> float:
        return sum(batch)


def uses() -> None:
    assert_type(plain(1), int)
    assert_type(with_options(1), str)
    assert_type(Model().step([1.0]), float)
    prof = fastprof.Profile()
    assert_type(prof.runcall(plain, 2), int)
    assert_type(fastprof.profile(), ProfileSession)
    lines = fastprof.LineProfiler(plain)
    assert_type(lines, fastprof.LineProfiler)


lp = fastprof.LineProfiler()


@lp
def line_profiled(x: int) -> float:
    return x / 2


def uses_more() -> None:
    # a LineProfiler used as a decorator keeps the function's type
    assert_type(line_profiled(3), float)
    # the block's profiler is the session's: a call profiler, or the line profiler
    with fastprof.profile(report="never") as prof:
        pass
    assert_type(prof, "fastprof.Profile | fastprof.LineProfiler")


# the documented option forms: a legacy pstats int or a tuple of keys, a PathLike output
@fastprof.profile(sort_by=2, output=pathlib.Path("by_int.prof"), report="never")
def by_int(x: int) -> int:
    return x


@fastprof.profile(sort_by=("tottime", "calls"), output=b"by_tuple.prof", report="never")
def by_tuple(x: int) -> int:
    return x
