"""The benchmarks' sys.monitoring floor (benchmarks/floors.py): it takes a tool id of its own
for the call profiler's events and gives everything back, and its callback does nothing."""

from __future__ import annotations

import os
import sys

import pytest

from fastprof import _fastprof

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

needs_monitoring = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")


def test_empty_callback_returns_none_for_any_arguments() -> None:
    cb = _fastprof._EmptyCallback()
    assert cb() is None and cb(1, "x", key=2) is None
    with pytest.raises(TypeError, match="takes no arguments"):
        _fastprof._EmptyCallback(1)


@needs_monitoring
def test_floor_holds_its_own_id_for_the_exact_events_and_gives_it_back() -> None:
    import floors

    mon = sys.monitoring
    before = [mon.get_tool(i) for i in range(6)]
    with floors.monitoring_floor(exact=True):
        held = [i for i in range(6) if mon.get_tool(i) == "fastprof-floor"]
        assert len(held) == 1
        events = mon.get_events(held[0])
        assert events & mon.events.CALL and events & mon.events.PY_START
    assert [mon.get_tool(i) for i in range(6)] == before
    with floors.monitoring_floor(exact=False):
        (tid,) = [i for i in range(6) if mon.get_tool(i) == "fastprof-floor"]
        assert not mon.get_events(tid) & mon.events.CALL  # Python events only
    assert [mon.get_tool(i) for i in range(6)] == before
