"""Threads already running when Profile.enable() is called (threads=True, the default).

Python 3.12 and later profile through sys.monitoring, which covers every thread.  Below 3.12
enable() sets the profile hook in every running thread that has no profile function of its
own, and threading.setprofile covers the threads started later; cProfile below 3.12 profiles
only the thread that enabled it.  docs/profiling.md says so; these tests pin it.
"""

from __future__ import annotations

import cProfile
import sys
import threading
from typing import Any, Callable, Dict, Tuple

import pytest

import fastprof

N = 25
MONITORING = sys.version_info >= (3, 12)


def tick() -> int:
    return 1


def _run_with_a_running_thread(make: Callable[[], Any]) -> Tuple[Any, Dict[str, int]]:
    """Starts a thread that loops (N calls of tick per round, waiting for its go between
    rounds), lets it do one round, then enables a profiler made by make(), lets the thread do
    a second round and the main thread N calls of its own, and disables.  Returns the
    profiler and the pstats call counts by function name."""
    go = [threading.Event(), threading.Event()]
    done = [threading.Event(), threading.Event()]

    def loop() -> None:
        for r in range(2):
            go[r].wait()
            for _ in range(N):
                tick()
            done[r].set()

    t = threading.Thread(target=loop)
    t.start()
    go[0].set()
    assert done[0].wait(60)
    prof = make()
    prof.enable()
    try:
        go[1].set()
        assert done[1].wait(60)
        for _ in range(N):
            tick()
    finally:
        prof.disable()
    t.join(60)
    prof.create_stats()
    counts: Dict[str, int] = {}
    for (_, _, name), value in prof.stats.items():
        counts[name] = counts.get(name, 0) + value[1]
    return prof, counts


@pytest.mark.parametrize("threads", [True, False])
def test_thread_running_before_enable(threads: bool) -> None:
    _, counts = _run_with_a_running_thread(lambda: fastprof.Profile(threads=threads))
    from_thread = N if threads else 0
    assert counts["tick"] == N + from_thread
    # the thread's own loop function was already running: its frame is never entered while
    # profiling, so it never shows as a call
    assert "loop" not in counts


def test_thread_running_before_enable_against_cprofile() -> None:
    _, ours = _run_with_a_running_thread(fastprof.Profile)
    _, theirs = _run_with_a_running_thread(cProfile.Profile)
    assert ours["tick"] == 2 * N
    # cProfile counts the running thread's calls from 3.12 on (sys.monitoring) only
    assert theirs["tick"] == (2 * N if MONITORING else N)


def test_running_thread_with_its_own_profile_function() -> None:
    """Below 3.12 a thread whose profile hook is taken (sys.setprofile in that thread) keeps
    it and is not profiled; sys.monitoring is separate from that hook."""
    seen: list = []
    ready, go, done = threading.Event(), threading.Event(), threading.Event()

    def own_hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is tick.__code__:
            seen.append(1)

    def loop() -> None:
        sys.setprofile(own_hook)
        ready.set()
        go.wait()
        for _ in range(N):
            tick()
        sys.setprofile(None)
        done.set()

    t = threading.Thread(target=loop)
    t.start()
    assert ready.wait(60)
    prof = fastprof.Profile()
    prof.enable()
    try:
        go.set()
        assert done.wait(60)
    finally:
        prof.disable()
    t.join(60)
    prof.create_stats()
    counted = sum(v[1] for k, v in prof.stats.items() if k[2] == "tick")
    assert counted == (N if MONITORING else 0)
    assert len(seen) == N  # the thread's own hook saw every call either way


def test_thread_started_while_enabled_is_profiled_on_every_version() -> None:
    prof = fastprof.Profile()
    prof.enable()
    try:
        t = threading.Thread(target=lambda: [tick() for _ in range(N)])
        t.start()
        t.join(60)
    finally:
        prof.disable()
    prof.create_stats()
    assert sum(v[1] for k, v in prof.stats.items() if k[2] == "tick") == N
