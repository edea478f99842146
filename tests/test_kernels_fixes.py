"""Regression tests of the kernels' fixes: the private C entry points survive arguments whose
conversion runs Python code (A1-A3); fastprof.kernels against NumPy/scipy: the parse cache
under threads (B1), Python-scalar subexpressions stay weak (B2), uniform_filter with no axis
to filter (B3) and scipy's sizes (B5), where() with a Python int at every size (B4), and
floating-point errors reported once at the caller's line (B6)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Any, List

import numpy as np
import pytest

from fastprof import kernels
from fastprof.kernels import cpu as _cpu

LARGE = 1 << 17  # above cpu._SMALL: the blocked path (and the compiled program)


def _run(code: str) -> subprocess.CompletedProcess:
    """code run by a fresh interpreter with this one's import path (a crash is a return
    code, not the end of the test run)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# --- A1-A3: the C entry points ---------------------------------------------------------------

_LIST_MUTATION = """
import numpy as np, fastprof.kernels, fastprof._fastprof as m
a = np.arange(20.).reshape(4, 5); o = np.empty_like(a)
lst = []
class E:
    def __index__(self):
        lst.clear(); return 0
class S:
    def __index__(self):
        lst.clear(); return 3
case = {case!r}
if case == "modes":
    lst.extend([E(), 0])
    m._correlate_separable(a, o, [np.ones(3), np.ones(3)], lst, 0.0, [0, 0])
    ref = np.empty_like(a)
    m._correlate_separable(a, ref, [np.ones(3), np.ones(3)], [0, 0], 0.0, [0, 0])
elif case == "origins":
    lst.extend([E(), 0])
    m._correlate_general(a, o, np.ones((3, 3)), [0, 0], 0.0, lst)
    ref = np.empty_like(a)
    m._correlate_general(a, ref, np.ones((3, 3)), [0, 0], 0.0, [0, 0])
elif case == "sizes":
    lst.extend([S(), 3])
    m._uniform_filter_exact(a, o, lst, [0, 0], [0, 0], 0.0, [0, 1])
    ref = np.empty_like(a)
    m._uniform_filter_exact(a, ref, [3, 3], [0, 0], [0, 0], 0.0, [0, 1])
else:
    ops = m._expr_opcodes(); x = np.arange(5.); o = np.empty(5)
    class T:
        def __index__(self):
            lst.clear(); return ops['add']
    lst.extend([(T(), 1, 0, 0, 0, 0), (ops['add'], 1, 0, 0, 0, 0)])
    m._evaluate_program(lst, [x], [], 2, 1, o)
    ref = x + x
assert lst == [], lst
print("same", np.array_equal(o, ref))
"""


@pytest.mark.parametrize("case", ["modes", "origins", "sizes", "steps"])
def test_int_sequence_emptied_by_its_items_index(case: str) -> None:
    # A1: the items are read from a tuple copy: the list an __index__ clears is not read again
    r = _run(_LIST_MUTATION.format(case=case))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "same True"


def test_evaluate_program_const_frees_the_inputs() -> None:
    # A2: a const's __float__ empties the inputs list after the VM took the data pointer
    r = _run(
        """
        import numpy as np, fastprof.kernels, fastprof._fastprof as m
        ops = m._expr_opcodes(); o = np.empty(1 << 20)
        inputs = [np.arange(float(1 << 20))]
        class E:
            def __float__(self):
                inputs.clear(); return 1.0
        m._evaluate_program([(ops['add'], 2, 0, 1, 0, 0)], inputs, [E()], 3, 2, o)
        print(o[:4].tolist(), bool((o == np.arange(float(1 << 20)) + 1.0).all()))
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[1.0, 2.0, 3.0, 4.0] True"


def test_separable_factors_freed_by_modes_index() -> None:
    # A2: modes' __index__ frees the factor arrays after their pointers were read
    r = _run(
        """
        import numpy as np, fastprof.kernels, fastprof._fastprof as m
        a = np.arange(2000.).reshape(40, 50); o = np.empty_like(a)
        fac = [np.ones(3), np.ones(5) * 2.0]
        junk = []
        class E:
            def __index__(self):
                fac.clear(); junk.extend(np.full(5, 7e300) for _ in range(100)); return 0
        m._correlate_separable(a, o, fac, [E(), 0], 0.0, [0, 0])
        ref = np.empty_like(a)
        m._correlate_separable(a, ref, [np.ones(3), np.ones(5) * 2.0], [0, 0], 0.0, [0, 0])
        print(np.array_equal(o, ref))
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "True"


def test_index_that_reshapes_the_input_is_seen() -> None:
    # the ints are read before the arrays: a shape changed by __index__ is the one checked
    # (the shapes were compared first, then the kernel ran over a (5, 4) input into (4, 5))
    r = _run(
        """
        import numpy as np, fastprof.kernels, fastprof._fastprof as m
        a = np.arange(20.0).reshape(4, 5); o = np.empty((4, 5))
        class Reshape:
            def __index__(self):
                a.shape = (5, 4); return 0
        for call in (
            lambda: m._correlate_separable(a, o, [np.ones(3)] * 2, [Reshape(), 0], 0.0, [0, 0]),
            lambda: m._correlate_general(a, o, np.ones((3, 3)), [0, 0], 0.0, [Reshape(), 0]),
            lambda: m._uniform_filter_exact(a, o, [3, Reshape()], [0, 0], [0, 0], 0.0, [0, 1]),
        ):
            a.shape = (4, 5)
            try:
                call()
                print("ran")
            except ValueError as exc:
                print("ValueError", "shape" in str(exc))
        """
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:3] == ["ValueError True"] * 3


def test_evaluate_program_step_as_list_is_a_type_error() -> None:
    # A3: a step that is a list, not a tuple: TypeError naming the step (was SystemError)
    from fastprof import _fastprof as m

    ops = m._expr_opcodes()
    x = np.arange(5.0)
    o = np.empty(5)
    with pytest.raises(TypeError, match="step 0 must be a tuple of 6 ints"):
        m._evaluate_program([[ops["add"], 1, 0, 0, 0, 0]], [x], [], 2, 1, o)
    with pytest.raises(TypeError, match="step 1"):
        m._evaluate_program([(ops["add"], 1, 0, 0, 0, 0), (1, 2)], [x], [], 2, 1, o)
    m._evaluate_program([(ops["add"], 1, 0, 0, 0, 0)], [x], [], 2, 1, o)
    np.testing.assert_array_equal(o, x + x)


# --- B1: the parse cache under threads -------------------------------------------------------


def test_parse_cache_eviction_under_threads() -> None:
    # two threads evicting the full cache's oldest key at once raised KeyError
    x = np.arange(4.0)
    errors: List[str] = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:

        def work(tid: int) -> None:
            try:
                for i in range(1500):
                    kernels.evaluate(f"x * {tid} + {i} - 0", {"x": x})
            except Exception as exc:  # noqa: BLE001 - the test reports any
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []


# --- B2: subexpressions of Python scalars stay weak ------------------------------------------


@pytest.mark.parametrize("n", [8, LARGE])
def test_python_scalar_subexpressions_are_weak(n: int) -> None:
    x = np.linspace(0, 1, n, dtype=np.float32)
    a = 0.25
    got = kernels.evaluate("x * (1 - a)", {"x": x, "a": a})
    want = x * (1 - a)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    # as the literal form gives
    assert kernels.evaluate("x * (1 - 0.25)", {"x": x}).dtype == np.float32

    i = (np.arange(n) % 100).astype(np.int8)
    got = kernels.evaluate("i + (-k)", {"i": i, "k": 3})
    want = i + (-3)
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)

    u = np.arange(n, dtype=np.uint64)
    got = kernels.evaluate("u + big * 1", {"u": u, "big": 2**63})
    want = u + 2**63 * 1
    assert got.dtype == want.dtype == np.uint64
    np.testing.assert_array_equal(got, want)

    # Python's semantics for the scalar part: True + True is 2, 7 // 2 is 3, 2 ** -1 is 0.5
    got = kernels.evaluate("x * (t + t) + (p // q) + q ** -1", {"x": x, "t": True, "p": 7, "q": 2})
    want = x * (True + True) + (7 // 2) + 2**-1
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_python_scalar_division_by_zero_is_pythons() -> None:
    x = np.ones(8)
    with pytest.raises(ZeroDivisionError, match=r"\(1 // z\)"):
        kernels.evaluate("x * (1 // z)", {"x": x, "z": 0})
    with pytest.raises(OverflowError, match="overflows"):
        kernels.evaluate("x * (a ** 400)", {"x": x, "a": 10.0})
    with pytest.raises(TypeError, match="complex"):
        kernels.evaluate("x * (a ** 0.5)", {"x": x, "a": -1.0})
    with pytest.raises(ValueError, match="bits"):
        kernels.evaluate("x + a ** 2000", {"x": x, "a": 3})


def test_functions_and_numpy_scalars_stay_strong() -> None:
    x = np.ones(8, np.float32)
    # a function of scalars is NumPy's strongly typed scalar (the docs' sqrt(2))
    assert kernels.evaluate("x * sqrt(a)", {"x": x, "a": 2.0}).dtype == np.float64
    # a NumPy scalar is strong: NumPy computes 1 - np.float64(a) as a float64 scalar
    assert kernels.evaluate("x * (1 - a)", {"x": x, "a": np.float64(0.25)}).dtype == np.float64
    # the plan is typed per call: another value of the same Python type gives its own value
    for a in (0.25, 0.5, 2.0):
        np.testing.assert_array_equal(
            kernels.evaluate("x * (1 - a)", {"x": x, "a": a}), x * (1 - a)
        )


# --- B3, B5: uniform_filter ------------------------------------------------------------------


def test_uniform_filter_no_axis_assigns_into_c_order() -> None:
    # scipy assigns output[...] = input into a fresh C-order array: that cast, that layout
    x = np.array([[1.0, -np.inf], [2.0, 3.0]])[::-1, ::-1]
    want = np.empty(x.shape, np.uint32)
    with np.errstate(invalid="ignore"):
        want[...] = x
        got = kernels.uniform_filter(x, 1, output=np.uint32)
    np.testing.assert_array_equal(got, want)
    xf = np.asfortranarray(np.array([[1.0, -np.inf], [2.0, 3.0]]))
    got = kernels.uniform_filter(xf, 1)
    assert got.flags.c_contiguous and not np.shares_memory(got, xf)
    np.testing.assert_array_equal(got, xf)


@pytest.mark.parametrize(
    "size, want_sizes",
    [
        (0, (1, 1)),
        (-1, (1, 1)),
        ([0, 3], (1, 3)),
        ([3, 0], (3, 1)),
        (2.5, (2, 2)),
        (True, (1, 1)),
        (np.float64(3.0), (3, 3)),
        (np.array([3, 0]), (3, 1)),
        (float("nan"), (1, 1)),
    ],
)
def test_uniform_filter_sizes_as_scipy_reads_them(size: Any, want_sizes: Any) -> None:
    # scipy filters the axes whose size is > 1, with int(size) taps
    x = np.arange(12.0).reshape(3, 4)
    want = kernels.uniform_filter(x, list(want_sizes))
    np.testing.assert_array_equal(kernels.uniform_filter(x, size), want)
    if want_sizes == (1, 1):
        np.testing.assert_array_equal(want, x)


def test_uniform_filter_size_and_origin_errors() -> None:
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(TypeError, match="size"):
        kernels.uniform_filter(x, "3")
    with pytest.raises(ValueError, match="size must be finite"):
        kernels.uniform_filter(x, float("inf"))
    with pytest.raises(ValueError, match="size"):
        kernels.uniform_filter(x, (3, 3, 3))
    with pytest.raises(TypeError, match="origin"):
        kernels.uniform_filter(x, 3, origin=1.0)
    # origin=True is 1, as scipy reads it
    np.testing.assert_array_equal(
        kernels.uniform_filter(x, 3, origin=True), kernels.uniform_filter(x, 3, origin=1)
    )
    np.testing.assert_array_equal(
        kernels.uniform_filter(x, 3, origin=[True, 0]),
        kernels.uniform_filter(x, 3, origin=[1, 0]),
    )


# --- B4: where with a Python int --------------------------------------------------------------


def _outcome(f: Any) -> Any:
    try:
        r = f()
    except Exception as exc:  # noqa: BLE001 - compared with NumPy's
        return type(exc)
    return (r.dtype, r.tolist())


@pytest.mark.parametrize("s", [300, -3, 2**63])
def test_where_python_int_gives_numpys_result_at_every_size(s: int) -> None:
    for n in (4, LARGE):
        x = np.array([-1, 2, -3, 4] * (n // 4), dtype=np.int8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _outcome(lambda x=x: np.where(x > 0, s, x))
            got = _outcome(lambda x=x: kernels.evaluate("where(x > 0, s, x)", {"x": x, "s": s}))
        assert got == want, n


# --- B6: floating-point errors reported once, at the caller's line --------------------------


def test_integer_division_by_zero_warns_once_at_the_callers_line() -> None:
    old = _cpu.get_num_threads()
    _cpu.set_num_threads(2)  # blocks on two threads
    try:
        x = np.arange(LARGE)
        z = np.zeros(LARGE, dtype=np.int64)
        for expr, name in [("x // z", "floor_divide"), ("x % z", "remainder")]:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                kernels.evaluate(expr, {"x": x, "z": z})
            assert [str(m.message) for m in w] == [f"divide by zero encountered in {name}"]
            assert w[0].category is RuntimeWarning
            assert w[0].filename == __file__
        # small arrays (plain NumPy calls) too
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            kernels.evaluate("x // z", {"x": x[:8], "z": z[:8]})
        assert len(w) == 1 and w[0].filename == __file__
    finally:
        _cpu.set_num_threads(old)


def test_floating_point_errors_follow_errstate() -> None:
    x = np.arange(LARGE)
    z = np.zeros(LARGE, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="ignore"):
            kernels.evaluate("x // z", {"x": x, "z": z})  # nothing: ignored
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            kernels.evaluate("x // z", {"x": x, "z": z})  # a warnings filter applies
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError, match="divide by zero encountered in floor_divide"):
            kernels.evaluate("x // z", {"x": x, "z": z})
    calls: List[Any] = []
    with np.errstate(divide="call", call=lambda err, flag: calls.append((err, flag))):
        kernels.evaluate("x // z + x % z", {"x": x, "z": z})
    assert calls == [("divide by zero", 1), ("divide by zero", 1)]  # one per ufunc, as NumPy


@pytest.mark.parametrize("n", [8, LARGE])
def test_python_float_cast_overflow_warns_once_as_numpy(n: int) -> None:
    # NumPy names the overflow of 1e300 converted to a float32 loop a cast, once per call
    b = np.ones(n, np.float32)
    for expr in ("b * 1e300", "maximum(b, 1e300) + b"):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            kernels.evaluate(expr, {"b": b})
        assert [str(m.message) for m in w] == ["overflow encountered in cast"], expr
        assert w[0].filename == __file__
