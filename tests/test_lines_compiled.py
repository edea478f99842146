"""What the line profiler says of callables it cannot time line by line: a compiled wrapper
(jax.jit's, numba's dispatcher: a C call that names the Python function it was made from) is
registered by that function, with a warning that its lines run only as Python; a callable
object implemented in C registers nothing, with a warning, never silently."""

from __future__ import annotations

import operator
import warnings
from typing import Any, List

import pytest

from fastprof import LineProfiler


def plus_one(x: int) -> int:
    return x + 1


class Compiled:
    """The shape of jax.jit's and numba's objects: a call implemented in C, __wrapped__ (the
    class is said to be numba's, as a jit compiler's objects are known by their package)."""

    __call__ = staticmethod(len)
    __module__ = "numba.core.registry"

    def __init__(self, fn: Any) -> None:
        self.__wrapped__ = fn


def _messages(w: List[Any]) -> List[str]:
    return [str(x.message) for x in w]


@pytest.mark.parametrize("how", ["decorator", "add_callable", "add_function"])
def test_a_compiled_wrapper_registers_its_python_function_and_says_so(how: str) -> None:
    lp = LineProfiler()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        if how == "decorator":
            lp(Compiled(plus_one))
        else:
            getattr(lp, how)(Compiled(plus_one))
    assert lp.functions == [plus_one]
    (msg,) = _messages(w)
    assert "runs compiled code" in msg and "timed only when that function runs as Python" in msg
    assert w[0].filename == __file__  # the warning points at the caller's line


@pytest.mark.parametrize("how", ["decorator", "add_callable"])
def test_a_c_callable_object_registers_nothing_with_a_warning(how: str) -> None:
    lp = LineProfiler()
    obj = operator.itemgetter(1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        result = lp(obj) if how == "decorator" else lp.add_callable(obj)
    assert lp.functions == []
    assert result is obj if how == "decorator" else result == 0
    (msg,) = _messages(w)
    assert "has no Python code to time" in msg and w[0].filename == __file__


def test_plain_functions_own_wrappers_and_caches_warn_nothing() -> None:
    import functools

    lp = LineProfiler()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        wrapped = lp(plus_one)
        lp(wrapped)
        lp(functools.partial(wrapped, 1))  # its function is this profiler's wrapper
        assert lp.add_callable(plus_one) == 1
        cached = functools.lru_cache(plus_one)  # a C call that runs the function as Python
        assert lp.add_callable(cached) == 1
        lp(classmethod(plus_one))
    assert _messages(w) == []
