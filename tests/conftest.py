"""Shared fixtures: ``fake_lines`` stands in for the line profiler; ``kernel_threads`` runs a
kernel test with 1, 2 and 3 kernel threads."""

from __future__ import annotations

from typing import Any, Iterator

import pytest


class FakeLineProfiler:
    """Stands in for fastprof.lines.LineProfiler to test how the call-profiler side wires it
    (the line profiler's own tests live with it)."""

    def __init__(self, *funcs: Any) -> None:
        self.funcs = list(funcs)
        self.events: list = []

    def add_function(self, func: Any) -> None:
        self.funcs.append(func)

    def enable(self) -> None:
        self.events.append("enable")

    def disable(self) -> None:
        self.events.append("disable")

    def print_stats(self) -> None:
        print("LINE STATS " + ",".join(f.__name__ for f in self.funcs))

    def dump_stats(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(",".join(fn.__name__ for fn in self.funcs))


@pytest.fixture
def fake_lines(monkeypatch: Any) -> list:
    """Replaces fastprof.lines' entry points with fakes; returns the profilers made."""
    import importlib

    from fastprof import lines

    made: list = []

    def make(*funcs: Any) -> FakeLineProfiler:
        lp = FakeLineProfiler(*funcs)
        made.append(lp)
        return lp

    def kernprof_builtin(lp: Any) -> Any:
        def profile(func: Any) -> Any:
            lp.add_function(func)
            return func

        return profile

    def resolve_function(spec: str) -> Any:
        mod, _, qual = spec.partition(":")
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj

    monkeypatch.setattr(lines, "LineProfiler", make, raising=False)
    monkeypatch.setattr(lines, "kernprof_builtin", kernprof_builtin, raising=False)
    monkeypatch.setattr(lines, "resolve_function", resolve_function, raising=False)
    return made


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"threads{n}")
def kernel_threads(request: Any) -> Iterator[int]:
    """Runs the test with the kernels set to 1, 2 and 3 threads; restores the count after."""
    from fastprof import kernels

    before = kernels.get_num_threads()
    kernels.set_num_threads(request.param)
    yield request.param
    kernels.set_num_threads(before)
