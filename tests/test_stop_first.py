"""The core's _stop_first: the builtin a job's child uses as its atexit callback and SIGTERM
handler, which stops the child's profile from C before fastprof's own Python code runs."""

from __future__ import annotations

from typing import Any, List

import pytest

from fastprof import Profile, _fastprof


def test_calls_the_cells_stop_then_the_callable_with_its_arguments() -> None:
    seen: List[Any] = []
    cell: List[Any] = [lambda: seen.append("stop")]
    gate = _fastprof._stop_first(cell, lambda *a, **k: seen.append(("then", a, k)) or 7)
    assert gate(1, 2, x=3) == 7
    assert seen == ["stop", ("then", (1, 2), {"x": 3})]
    cell[0] = None  # read at each call: the session of a fork child replaces it
    seen.clear()
    assert gate() == 7 and seen == [("then", (), {})]


def test_a_failing_stop_does_not_keep_the_write_from_running() -> None:
    def stop() -> None:
        raise RuntimeError("cannot disable the profiler from inside its own timer")

    ran: List[int] = []
    gate = _fastprof._stop_first([stop], lambda: ran.append(1))
    gate()
    assert ran == [1]
    with pytest.raises(ZeroDivisionError):  # the callable's own error is the caller's
        _fastprof._stop_first([None], lambda: 1 / 0)()


@pytest.mark.parametrize(
    "cell, then, word",
    [((None,), print, "list"), ([None], 3, "then must be callable"), ("x", print, "list")],
)
def test_bad_arguments(cell: Any, then: Any, word: str) -> None:
    with pytest.raises(TypeError, match=word):
        _fastprof._stop_first(cell, then)


def written() -> int:
    return sum(range(10))


def test_called_from_c_the_profile_holds_neither_it_nor_what_it_runs() -> None:
    prof = Profile()
    gate = _fastprof._stop_first([prof.disable], lambda _: written())
    prof.enable()
    sorted([0], key=gate)  # called from C, as atexit and the signal machinery call it
    assert not prof.enabled
    prof.create_stats()
    names = {k[2] for k in prof.stats}
    assert "written" not in names and "<lambda>" not in names, names
    assert not any("disable" in n for n in names), names
    assert any("sorted" in n for n in names), names  # the call it stopped inside
