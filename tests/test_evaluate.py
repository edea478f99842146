"""fastprof.kernels.evaluate against NumPy over every operator and function, dtypes,
broadcasting, layouts and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from fastprof import _reference as ref
from fastprof import kernels
from fastprof.kernels import expr as _expr

N = 200_003  # above the blocking threshold, not a multiple of the block


def _data(dtype, n=N, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.random(n) * 1.8 - 0.9).astype(dtype)  # inside arcsin/arccos's domain
    y = (rng.random(n) * 2.0 + 0.1).astype(dtype)  # positive
    return x, y


UNARY = [
    "abs",
    "sqrt",
    "exp",
    "log",
    "log1p",
    "expm1",
    "sin",
    "cos",
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "floor",
    "ceil",
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", UNARY)
def test_unary_functions(dtype, fn):
    x, y = _data(dtype)
    arg = "y" if fn in ("sqrt", "log") else "x"
    got = kernels.evaluate(f"{fn}({arg}) * 2 + 1", {"x": x, "y": y})
    want = getattr(np, "absolute" if fn == "abs" else fn)(x if arg == "x" else y) * 2 + 1
    assert got.dtype == want.dtype == dtype
    np.testing.assert_allclose(got, want, **_tol(dtype))


def _tol(dtype) -> dict:
    # float32 functions may differ from NumPy's by an ulp of an intermediate of size ~1
    return dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "expr",
    [
        "x + y",
        "x - y",
        "x * y",
        "x / y",
        "y ** x",
        "x ** 2",
        "y ** 0.5",
        "-x",
        "+x",
        "arctan2(x, y)",
        "minimum(x, y)",
        "maximum(x, 0.5)",
        "where(x > 0, x, y)",
        "where((x < 0) | (y > 1), 1.0, x)",
        "where(~(x >= 0) & (y <= 1.5), x, -y)",
        "(x == y) | (x != 0.25)",
        "2 * x + 1",
        "sin(x) + cos(x) + sqrt(abs(x))",
        "x * 2.5 - 3",
        "1 / (1 + exp(-x))",
    ],
)
def test_expressions_match_numpy(dtype, expr):
    x, y = _data(dtype, seed=1)
    got = kernels.evaluate(expr, {"x": x, "y": y})
    want = ref.evaluate(expr, {"x": x, "y": y})
    want = np.asarray(want)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, **_tol(dtype))
    else:
        np.testing.assert_array_equal(got, want)


def test_names_from_the_callers_frame():
    a = np.linspace(0, 1, N)
    b = 3.0
    np.testing.assert_allclose(kernels.evaluate("a * b + 1"), a * b + 1)


def test_broadcasting_and_layouts():
    rng = np.random.default_rng(2)
    m = rng.standard_normal((300, 400))
    row = rng.standard_normal(400)
    col = rng.standard_normal((300, 1))
    names = {
        "m": m.T.copy().T,
        "row": row,
        "col": col,
        "f": np.asfortranarray(m),
        "s": m[::-1, ::2].repeat(2, axis=1),
    }
    for expr in ("m * row + col", "sin(f) - m", "s + col * 2", "where(m > row, col, row)"):
        got = kernels.evaluate(expr, names)
        np.testing.assert_allclose(got, ref.evaluate(expr, names), rtol=1e-14, err_msg=expr)


def test_out_argument():
    x, y = _data(np.float64)
    out = np.empty_like(x)
    res = kernels.evaluate("x * y - 1", {"x": x, "y": y}, out=out)
    assert res is out
    np.testing.assert_allclose(out, x * y - 1, rtol=1e-15)
    # out aliasing an input, elementwise: as NumPy's in-place ufuncs
    z = x.copy()
    kernels.evaluate("z * 2 + y", {"z": z, "y": y}, out=z)
    np.testing.assert_allclose(z, x * 2 + y, rtol=1e-15)
    # out aliasing an input with a shift: as if the result were computed first
    w = x.copy()
    kernels.evaluate("a + 1", {"a": w[1:]}, out=w[:-1])
    np.testing.assert_allclose(w[:-1], x[1:] + 1, rtol=1e-15)
    with pytest.raises(ValueError, match="out has shape"):
        kernels.evaluate("x + 1", {"x": x}, out=np.empty(3))
    with pytest.raises(TypeError, match="out has dtype"):
        kernels.evaluate("x + 1", {"x": x}, out=np.empty(N, dtype=np.int32))


def test_small_and_scalar_cases():
    assert kernels.evaluate("2 * 3 + a", {"a": 1.5}) == 7.5
    small = np.arange(10.0)
    np.testing.assert_allclose(kernels.evaluate("small ** 2", {"small": small}), small**2)
    x32 = np.ones(N, dtype=np.float32)
    assert kernels.evaluate("x * -2.5 + 1", {"x": x32}).dtype == np.float32  # weak scalars
    e = np.empty((0, 3))
    assert kernels.evaluate("e + 1", {"e": e}).shape == (0, 3)


def test_nan_and_inf_propagate():
    x = np.linspace(-2, 2, N)
    x[::1000] = np.nan
    x[5::1000] = np.inf
    with np.errstate(all="ignore"):
        got = kernels.evaluate("log(x) + sqrt(x) * 2", {"x": x})
        want = np.log(x) + np.sqrt(x) * 2
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-14, atol=1e-14)


def test_compiled_and_python_paths_agree_on_float32_comparisons():
    # a float32 array against a Python float compares in float32, as NumPy does
    x = np.full(N, np.float32(0.1))
    x[::3] = np.float32(0.2)
    for expr in ("x > 0.1", "where(x >= 0.1, 1.0, 0.0)", "(x == 0.1) | (x < 0.15)"):
        got = kernels.evaluate(expr, {"x": x})
        np.testing.assert_array_equal(got, ref.evaluate(expr, {"x": x}), err_msg=expr)


def test_integer_operands_fall_back_to_numpy_semantics():
    i = np.arange(N, dtype=np.int64)
    got = kernels.evaluate("i * 3 + 1", {"i": i})
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, i * 3 + 1)
    b = i % 2 == 0
    np.testing.assert_array_equal(kernels.evaluate("b & (i > 5)", {"b": b, "i": i}), b & (i > 5))


def test_threads_give_the_same_result():
    x, y = _data(np.float64, seed=4)
    n = kernels.get_num_threads()
    try:
        kernels.set_num_threads(1)
        one = kernels.evaluate("exp(x) * y - tanh(y)", {"x": x, "y": y})
        kernels.set_num_threads(3)
        three = kernels.evaluate("exp(x) * y - tanh(y)", {"x": x, "y": y})
    finally:
        kernels.set_num_threads(n)
    np.testing.assert_array_equal(one, three)


@pytest.mark.parametrize(
    "expr,exc,match",
    [
        ("x +", ValueError, "syntax error"),
        ("foo(x)", ValueError, "unknown function 'foo'"),
        ("x + q", ValueError, "unknown name 'q'"),
        ("x.real", ValueError, "unsupported syntax"),
        ("x and y", ValueError, "use & and |"),
        ("not x", ValueError, "use ~"),
        ("0 < x < 1", ValueError, "chained"),
        ("sin(x, y)", ValueError, "takes 1 argument"),
        ("x + 1j", ValueError, "unsupported literal"),
        ("sin", ValueError, "must be called"),
        ("x[0]", ValueError, "unsupported syntax"),
    ],
)
def test_bad_expressions(expr, exc, match):
    with pytest.raises(exc, match=match):
        kernels.evaluate(expr, {"x": np.ones(3), "y": np.ones(3)})


def test_operator_without_a_numpy_loop_names_the_expression():
    with pytest.raises(TypeError, match="expr '~x'"):
        kernels.evaluate("~x", {"x": np.ones(N)})


def test_one_expression_with_different_operand_types():
    for v in (
        np.arange(N, dtype=np.float32),
        np.arange(N, dtype=np.float64),
        np.arange(N, dtype=np.int32),
        np.arange(N) % 3 == 0,
        2.5,
        7,
    ):
        got = kernels.evaluate("v * 2 + 1", {"v": v})
        want = np.asarray(v) * 2 + 1 if isinstance(v, np.ndarray) else v * 2 + 1
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)


def test_bad_values():
    with pytest.raises(TypeError, match="dtype complex128"):
        kernels.evaluate("x + 1", {"x": np.ones(3, dtype=complex)})
    with pytest.raises(TypeError, match="dtype object"):
        kernels.evaluate("x + 1", {"x": np.array([None, 1])})
    with pytest.raises(TypeError, match="expr must be a str"):
        kernels.evaluate(3, {})
    with pytest.raises(TypeError, match="local_dict"):
        kernels.evaluate("x", [1])


def test_parse_tree_and_names():
    tree = _expr.parse("where(a > 1, sin(b) ** 2, -3)")
    assert tree.kind == "call" and tree.op == "where"
    assert _expr.names(tree) == ["a", "b"]
    assert tree.args[2] == _expr.Node("const", value=-3)
    assert set(_expr.FUNCTIONS) >= {"where", "abs", "sqrt", "arctan2", "minimum", "maximum"}


# --- one promotion rule on every path (NumPy's, NEP 50 for Python scalars) -------------------

SMALL, LARGE = 1_000, 70_001  # either side of the size where the compiled path takes over


def test_python_scalar_base_of_a_power_stays_weak():
    for n in (SMALL, LARGE):
        a = np.full(n, 0.5, dtype=np.float32)
        got = kernels.evaluate("1e-300 ** a", {"a": a})
        want = 1e-300**a  # NumPy: the Python float is weak, so the power is float32: 0.0
        assert got.dtype == want.dtype == np.float32, n
        np.testing.assert_array_equal(got, want)


_NAMES = {"x": np.float32, "y": np.float64, "i": np.int32, "j": np.int64, "b": np.bool_}
_LITERALS = ["2", "3", "0.5", "1e-300", "1e300", "-1.5", "True", "7", "2 ** 40"]
_BINARY = ["+", "-", "*", "/", "&", "|", "<", "<=", ">", ">=", "==", "!="]
_NUMPY_NAMES = {
    "where": np.where,
    "abs": np.absolute,
    "sqrt": np.sqrt,
    "floor": np.floor,
    "minimum": np.minimum,
    "maximum": np.maximum,
}


def _random_expr(rng, depth: int) -> str:
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.8:
            return str(rng.choice(list(_NAMES)))
        return str(rng.choice(_LITERALS))
    kind = rng.integers(0, 6)

    def sub() -> str:
        return _random_expr(rng, depth - 1)

    if kind <= 1:
        return f"({sub()} {rng.choice(_BINARY)} {sub()})"
    if kind == 2:
        return f"({sub()} ** {rng.choice(['2', '3', '0.5', '2.0'])})"
    if kind == 3:
        return f"{rng.choice(['-', '~'])}{sub()}"
    if kind == 4:
        fn = str(rng.choice(["abs", "sqrt", "floor", "minimum", "maximum"]))
        return f"{fn}({sub()})" if fn in ("abs", "sqrt", "floor") else f"{fn}({sub()}, {sub()})"
    return f"where({sub()}, {sub()}, {sub()})"


def _values(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for name, dt in _NAMES.items():
        if dt is np.bool_:
            out[name] = rng.random(n) < 0.5
        elif np.dtype(dt).kind == "i":
            out[name] = rng.integers(-5, 6, n).astype(dt)
        else:
            out[name] = (rng.random(n) * 6 - 3).astype(dt)
    return out


def _outcome(fn):
    """(result, None) or (None, exception type) of fn(), floating-point warnings silenced."""
    import warnings

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn()), None
        except (TypeError, ValueError, OverflowError) as exc:
            return None, type(exc)


def test_small_and_large_arrays_agree_with_numpy_on_random_expressions():
    rng = np.random.default_rng(2024)
    checked = 0
    for case in range(300):
        expr = _random_expr(rng, 4)
        try:
            tree = _expr.parse(expr)
        except (ValueError, TypeError) as exc:  # literals out of bounds (1e300 ** 2), ~1.5
            with pytest.raises(type(exc), match="constant|operand type"):
                kernels.evaluate(expr, _values(SMALL, case))
            continue
        if not _expr.names(tree):
            continue
        for n in (SMALL, LARGE):
            names = _values(n, case)
            want, want_exc = _outcome(lambda e=expr, v=names: eval(e, {**_NUMPY_NAMES, **v}))
            got, got_exc = _outcome(lambda e=expr, v=names: kernels.evaluate(e, v))
            where = f"{expr} with {n} elements"
            assert got_exc == want_exc, where
            if want_exc is not None:
                continue
            assert got.dtype == want.dtype, where
            assert got.shape == want.shape, where
            if want.dtype.kind == "f":
                rtol = 1e-5 if want.dtype.itemsize <= 4 else 1e-12
                np.testing.assert_allclose(
                    got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=where
                )
            else:
                np.testing.assert_array_equal(got, want, err_msg=where)
            checked += 1
    assert checked > 300  # most cases are valid expressions, each checked at both sizes


# --- bounded constants and expressions: ValueError, never a hang, RecursionError or crash ----


@pytest.mark.parametrize(
    "expr,match",
    [
        ("x + 10 ** 10 ** 10", "constant power is larger than 1024 bits"),
        ("x * 7 ** 100000", "constant power is larger than 1024 bits"),
        ("x + 2 ** 1024", "integer constant has 1025 bits"),
        ("x + 0x" + "f" * 300, "integer constant has 1200 bits"),
        ("x + 1 / 0", "division by zero"),
        ("x + 0 ** -1", "division by zero"),
        ("x + 1e300 ** 2", "overflows"),
        ("x + (-8) ** 0.5", "complex"),
    ],
)
def test_constant_folding_is_bounded(expr, match):
    with pytest.raises(ValueError, match=match):
        kernels.evaluate(expr, {"x": np.ones(3)})


def test_folded_constants_within_bounds_are_pythons():
    x = np.arange(N, dtype=np.float32)
    got = kernels.evaluate("x + 2 ** 10 - 3 * 2 ** 1000 / 2 ** 999", {"x": x})
    want = x + (2**10 - 3 * 2**1000 / 2**999)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert _expr.parse("x + 2 ** 3").args[1] == _expr.Node("const", value=8)


@pytest.mark.parametrize(
    "expr,match",
    [
        ("x+" * 100_000 + "x", "too long"),  # 100k terms
        ("(" * 10_000 + "x" + ")" * 10_000, "too long"),  # 10k nested parentheses
        ("(" * 5_000 + "x" + ")" * 5_000, "nested too deeply"),  # within the length bound
        ("x+" * 3_000 + "x", "nested too deeply"),  # deep through operators
        ("-" * 10_000 + "x", "nested too deeply"),  # CPython's parser stack
        ("sin(" * 300 + "x" + ")" * 300, "nested too deeply"),
        ("x + " + "1" * 5_000, "integer string conversion"),  # CPython's int-digit limit
    ],
)
def test_long_and_deep_expressions_raise_valueerror(expr, match):
    with pytest.raises(ValueError, match=match) as info:
        kernels.evaluate(expr, {"x": np.ones(3)})
    assert len(str(info.value)) < 400  # the message quotes the start of the expression only


def test_depth_limit_holds_deep_in_the_callers_recursion():
    import sys

    expr = "+".join(["x"] * 150)  # within the bounds
    x = np.ones(3)

    def nested(k):
        return nested(k - 1) if k else kernels.evaluate(expr + " + 0.5", {"x": x})

    def nested2(k):
        return nested2(k - 1) if k else kernels.evaluate(expr + " * 2", {"x": x})

    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(400)
        with pytest.raises(ValueError, match="nested too deeply"):
            nested(300)
        kernels.args._tree_of(expr + " * 2")  # parsed and cached: planning is what recurses then
        with pytest.raises(ValueError, match="nested too deeply"):
            nested2(300)
    finally:
        sys.setrecursionlimit(limit)
    np.testing.assert_array_equal(kernels.evaluate(expr, {"x": x}), x * 150)


def test_gpu_code_generator_shares_the_bounds():
    _gpu_kernels = pytest.importorskip("fastprof.kernels.gpu")
    f8 = {"x": np.dtype(np.float64)}
    for expr in ("x+" * 100_000 + "x", "(" * 5_000 + "x" + ")" * 5_000, "x+" * 3_000 + "x"):
        with pytest.raises(ValueError, match="too long|nested too deeply"):
            _gpu_kernels.generate_source(expr, f8)
    with pytest.raises(ValueError, match="integer constant has 1101 bits"):
        _gpu_kernels.generate_source("x + " + str(2**1100), f8)


def test_gpu_dtypes_are_the_cpus():
    # one typed tree: the generated kernel's result dtype is NumPy's (NEP 50), as on the CPU
    gk = pytest.importorskip("fastprof.kernels.gpu")
    f32 = np.dtype(np.float32)
    cases = [
        ({"a": f32, "s": 2.5}, "a * s"),  # a Python float is weak
        ({"a": f32, "b": np.dtype(bool)}, "a + b"),
        ({"a": f32, "b": np.dtype(np.int8)}, "a + b"),
        ({"a": f32, "b": np.dtype(np.int32)}, "a + b"),
        ({"a": f32, "s": np.float64(0.5)}, "a * s"),  # a NumPy float64 scalar is strong
        ({"a": np.dtype(np.int8), "b": np.dtype(np.uint8)}, "a * b"),
        ({"a": np.dtype(np.int16), "s": 7}, "a // s"),
    ]
    for kinds, expr in cases:
        probe = {k: np.zeros(3, v) if isinstance(v, np.dtype) else v for k, v in kinds.items()}
        want = np.asarray(kernels.evaluate(expr, probe)).dtype
        assert gk.generate_source(expr, kinds).dtype == want, (kinds, expr)


def test_depth_bound_is_exact():
    # brackets make no level of their own; each unary minus does, the name is the last
    ok = "(" * 50 + "-" * (_expr.MAX_DEPTH - 1) + "x" + ")" * 50
    deep = "(" * 50 + "-" * _expr.MAX_DEPTH + "x" + ")" * 50
    assert _expr.names(_expr.parse(ok)) == ["x"]
    with pytest.raises(ValueError, match="more than 200 levels of operators"):
        _expr.parse_ast(deep)
    chain = "x+" * 3_000 + "x"  # CPython 3.9 and 3.13 parse it: the walk of the tree refuses
    with pytest.raises(ValueError, match="nested too deeply"):
        _expr.parse_ast(chain)


def test_where_with_a_non_bool_condition_on_every_path():
    for n in (SMALL, LARGE):
        v = _values(n, 3)
        for expr in ("where(y * j, y, i)", "where(x, 1.5, x)", "where(i, j, 2)"):
            got = kernels.evaluate(expr, v)
            want = eval(expr, {"where": np.where, **v})  # noqa: S307
            assert got.dtype == want.dtype, (expr, n)
            np.testing.assert_array_equal(got, want, err_msg=f"{expr} with {n} elements")


def test_scalar_names_follow_the_ufunc_rule_on_every_path():
    # a * 2 of Python scalars is Python's float, weak, as in the same NumPy code `x + a * 2`
    # (float32 stays float32), on every path
    for n in (SMALL, LARGE):
        x = np.linspace(0, 1, n, dtype=np.float32)
        got = kernels.evaluate("x + a * 2", {"x": x, "a": 1.5})
        a = 1.5
        want = x + a * 2
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
        got = kernels.evaluate("x + a", {"x": x, "a": 1.5})
        assert got.dtype == np.float32  # alone, a Python float is weak


@pytest.mark.parametrize("n", [101, N])
def test_numpy_scalars_keep_their_dtype(n):
    # np.float64 subclasses float but is no weak Python scalar: x > np.mean(x) compares as
    # NumPy does (it compared bools once, every element False)
    x = np.linspace(0.0, 1.0, n)
    x32 = x.astype(np.float32)
    names = dict(
        x=x,
        x32=x32,
        thr=np.mean(x),
        t32=np.float32(0.25),
        big=np.float64(0.1),
        k=np.int64(3),
        where=np.where,
    )
    for e in (
        "x > thr",
        "x < thr",
        "x >= thr",
        "x != thr",
        "where(x > thr, 1.0, -1.0)",
        "x32 > big",
        "x32 + big",
        "x32 * t32",
        "x32 + k",
        "x * k > thr",
    ):
        want = eval(e, {}, names)
        got = kernels.evaluate(e, names)
        assert got.dtype == want.dtype, e
        np.testing.assert_array_equal(got, want, err_msg=e)


def test_a_bare_name_is_a_new_array():
    for n in (5, N):
        a = np.arange(float(n))
        got = kernels.evaluate("a", {"a": a})
        assert not np.shares_memory(got, a)
        got += 1.0
        assert a[1] == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", ["minimum", "maximum"])
def test_minimum_and_maximum_pick_numpys_signed_zero(dtype, fn):
    for n in (7, N):
        pos, neg = np.zeros(n, dtype), np.full(n, -0.0, dtype)
        for a, b in ((pos, neg), (neg, pos)):
            got = kernels.evaluate(f"{fn}(a, b)", {"a": a, "b": b})
            want = getattr(np, fn)(a, b)
            assert np.array_equal(np.signbit(got), np.signbit(want)), (fn, n, a[0], b[0])


G_ONLY = np.arange(3.0)


def test_names_local_dict_lacks_come_from_the_globals_as_numexpr():
    L = np.ones(3)
    np.testing.assert_array_equal(kernels.evaluate("L + G_ONLY", {"L": L}), L + G_ONLY)
    got = kernels.evaluate("L + G_ONLY", {"L": L}, global_dict={"G_ONLY": np.full(3, 5.0)})
    np.testing.assert_array_equal(got, L + 5.0)
    with pytest.raises(ValueError, match="unknown name 'G_ONLY'"):
        kernels.evaluate("L + G_ONLY", {"L": L}, global_dict={})
    with pytest.raises(TypeError, match="global_dict must be a dict"):
        kernels.evaluate("L", {"L": L}, global_dict=[1])


needs_64_dims = pytest.mark.skipif(
    np.lib.NumpyVersion(np.__version__) < "2.0.0", reason="this NumPy has at most 32 dimensions"
)


@needs_64_dims
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((1,) * 33, (1,) * 33),  # one element: NumPy's path
        ((2,) * 17 + (1,) * 16, (1,) * 33),  # 131072 elements, one block layout: the VM
        ((2,) * 17 + (1,) * 16, (1,) * 16 + (2,) + (1,) * 16),  # broadcast: blocks of rows
        ((2,) * 17 + (1,) * 47, (2,) * 17 + (1,) * 47),  # 64 dimensions, NumPy's most
    ],
)
def test_more_than_32_dimensions_as_numpy(a_shape, b_shape):
    # np.broadcast_shapes stops at 32 dimensions; NumPy's arithmetic and numexpr do not
    a = np.arange(np.prod(a_shape), dtype=np.float64).reshape(a_shape)
    b = np.arange(np.prod(b_shape), dtype=np.float64).reshape(b_shape) + 1.0
    got = kernels.evaluate("a * 2 + b", {"a": a, "b": b})
    assert got.shape == (a * 2 + b).shape
    assert np.array_equal(got, a * 2 + b)
    out = np.empty(got.shape, np.float32)
    assert kernels.evaluate("a * 2 + b", {"a": a, "b": b}, out=out) is out
    assert np.array_equal(out, (a * 2 + b).astype(np.float32))


@pytest.mark.parametrize(
    "shapes", [((2,), (3,)), ((2, 3), (4, 1), (3,)), ((5, 1), (1, 4), (5, 3)), ((3, 1, 2), (4, 3))]
)
def test_shapes_that_do_not_broadcast_raise_numpys_error(shapes):
    values = {f"v{i}": np.ones(s) for i, s in enumerate(shapes)}
    with pytest.raises(ValueError) as want:
        np.broadcast_shapes(*shapes)
    with pytest.raises(ValueError) as got:
        kernels.evaluate(" + ".join(values), local_dict=values)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("n", [10, N])
@pytest.mark.parametrize("expr", ["where(c, ia, fb)", "where(c, fb, ia)", "ia + fb", "ia * 3"])
def test_out_of_another_dtype_gets_numpys_value_at_every_size(expr, n):
    # NumPy computes the result's dtype (float64 for int64 with float64) and then casts into
    # out: int64 -> float64 -> float32 rounds twice where a direct int64 -> float32 rounds once
    c = np.arange(n) % 3 != 0
    ia = np.full(n, 2**60 + 2**36 + 1, np.int64)
    fb = np.full(n, 2.0**40 + 0.5)
    v = {"c": c, "ia": ia, "fb": fb}
    want = eval(expr, {"where": np.where, **v})  # noqa: S307
    for dtype in (np.float32,):
        out = np.empty(n, dtype)
        assert kernels.evaluate(expr, v, out=out) is out
        assert np.array_equal(out, want.astype(dtype)), (expr, n, dtype)
        strided = np.empty(2 * n, dtype)[::2]  # the blocked path's other layout
        kernels.evaluate(expr, v, out=strided)
        assert np.array_equal(strided, want.astype(dtype))
