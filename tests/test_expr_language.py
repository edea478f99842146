"""The expression language of evaluate on both devices: one typed tree, one opcode table,
every operator and function against NumPy over every dtype (bit-exact where NumPy's result
is correctly rounded, within the documented ulps for transcendental functions), reductions,
integer semantics and errors; the CUDA source of every case compiles with NVRTC and runs on
the fake device (tests/test_cuda_fake_device.py) with the CPU's results."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fastprof import _fastprof, kernels
from fastprof.kernels import expr as _expr

LARGE = 70_001  # through the blocked / compiled paths
SMALL = 101  # plain NumPy calls
DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]
EXACT_BINARY = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^"]
EXACT_BINARY += ["<", "<=", ">", ">=", "==", "!="]
EXACT_FUNCS2 = ["fmod", "minimum", "maximum", "min", "max", "power"]
EXACT_FUNCS1 = ["abs", "floor", "ceil", "sqrt"]
# transcendental functions: the most ulps from NumPy measured here (docs/kernels.md)
ULPS = {
    "exp": 4,
    "log": 4,
    "log10": 4,
    "log2": 4,
    "log1p": 4,
    "expm1": 4,
    "sin": 4,
    "cos": 4,
    "tan": 4,
    "arcsin": 4,
    "arccos": 4,
    "arctan": 4,
    "sinh": 4,
    "cosh": 4,
    "tanh": 4,
    "arcsinh": 4,
    "arccosh": 4,
    "arctanh": 4,
    "arctan2": 4,
    "hypot": 4,
    "power": 4,  # a float ** is a transcendental function (x ** 2 is a square: exact)
}
NUMPY = {
    "abs": np.absolute,
    "min": np.minimum,
    "max": np.maximum,
    "where": np.where,
    **{n: getattr(np, n) for n in list(ULPS) + ["floor", "ceil", "sqrt", "fmod", "power"]},
    "minimum": np.minimum,
    "maximum": np.maximum,
}


def _array(dt: str, n: int, seed: int, lo: float = -9, hi: float = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    if d.kind == "b":
        return rng.random(n) < 0.5
    if d.kind in "iu":
        lo_i = 0 if d.kind == "u" else int(lo)
        a = rng.integers(lo_i, int(hi) + 1, n).astype(d)
        a[::7] = 0  # zero divisors
        return a
    a = (rng.random(n) * (hi - lo) + lo).astype(d)
    a[::11] = 0
    a[5::97] = np.nan
    return a


def _outcome(fn):
    """(result, None) or (None, exception type), warnings silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn()), None
        except (TypeError, ValueError, OverflowError) as exc:
            return None, type(exc)


def _ulps(got: np.ndarray, want: np.ndarray) -> float:
    """The most units in the last place between two float arrays (NaN where both are)."""
    got = got.astype(want.dtype)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    if same.all():
        return 0.0
    bad = ~same
    if np.isnan(got[bad]).any() or np.isnan(want[bad]).any():
        return float("inf")
    spacing = np.spacing(np.abs(want[bad]).astype(want.dtype))
    return float(np.max(np.abs(got[bad].astype(np.float64) - want[bad]) / spacing))


def _check(expr: str, names: dict, ulps: float = 0.0, device=None):
    """kernels.evaluate against NumPy's eval of expr: same exception, dtype, shape, and
    values (bit-exact, or within ulps)."""
    want, want_exc = _outcome(lambda: eval(expr, {**NUMPY}, dict(names)))  # noqa: S307
    got, got_exc = _outcome(lambda: kernels.evaluate(expr, dict(names), device=device))
    assert got_exc == want_exc, expr
    if want_exc is not None:
        return want, got
    assert got.dtype == want.dtype, expr
    assert got.shape == want.shape, expr
    if want.dtype.kind == "f" and ulps:
        assert _ulps(got, want) <= ulps, expr
    else:
        np.testing.assert_array_equal(got, want, err_msg=expr)
    return want, got


def test_opcode_table_is_one_table():
    table = _fastprof._expr_opcodes()
    assert _expr.opcodes() == table
    assert sorted(table.values()) == list(range(len(table)))
    ufuncs = [f for _, f in _expr.BINARY_OPS.values()] + [f for _, f in _expr.COMPARE_OPS.values()]
    ufuncs += [f for _, f in _expr.UNARY_OPS.values()] + [f for _, f in _expr.FUNCTIONS.values()]
    for f in ufuncs:  # every operation of the language has an opcode, by NumPy's name
        assert (f.__name__ if f is not np.where else "where") in table, f
    assert "square" in table


@pytest.mark.parametrize("n", [SMALL, LARGE])
@pytest.mark.parametrize("dt", DTYPES)
def test_exact_operators_and_functions_every_dtype(dt, n):
    x, y = _array(dt, n, 1), _array(dt, n, 2)
    for op in EXACT_BINARY:
        ulps = ULPS["power"] if op == "**" else 0
        _check(f"x {op} y", {"x": x, "y": y}, ulps)
        _check(f"x {op} 3", {"x": x}, ulps)
        _check(f"2.5 {op} x", {"x": x}, ulps)
    for fn in EXACT_FUNCS2:
        _check(f"{fn}(x, y)", {"x": x, "y": y}, ULPS["power"] if fn == "power" else 0)
    for fn in EXACT_FUNCS1:
        _check(f"{fn}(x) + 1", {"x": x})
    for expr in ("-x", "~x", "where(x, y, 2)", "where(x > y, x, y)", "x ** 2"):
        _check(expr, {"x": x, "y": y})


@pytest.mark.parametrize("a", ["?", "i1", "u2", "i4", "u8", "i8", "f4", "f8"])
@pytest.mark.parametrize("b", ["?", "u1", "i2", "u4", "i8", "f4", "f8"])
def test_mixed_dtypes_follow_numpys_promotion(a, b):
    x, y = _array(a, LARGE, 3), _array(b, LARGE, 4)
    for expr in ("x + y", "x * y - 1", "x < y", "where(x > 2, x, y)", "x % (y + 1)", "x / y"):
        _check(expr, {"x": x, "y": y})


@pytest.mark.parametrize("dt", ["f4", "f8"])
@pytest.mark.parametrize("fn", sorted(ULPS))
def test_transcendental_functions_within_documented_ulps(dt, fn):
    lo, hi = {"arccosh": (1, 20), "arcsin": (-1, 1), "arccos": (-1, 1)}.get(fn, (-0.99, 20))
    if fn in ("log", "log10", "log2", "log1p"):
        lo = 0.0
    x, y = _array(dt, LARGE, 5, lo, hi), _array(dt, LARGE, 6, lo, hi)
    if fn == "arctanh":
        x, y = x / np.asarray(21, x.dtype), y
    args = "x, y" if fn in ("arctan2", "hypot", "power") else "x"
    _check(f"{fn}({args})", {"x": x, "y": y}, ulps=ULPS[fn])


def test_broadcasting_strides_and_out():
    rng = np.random.default_rng(7)
    m = rng.integers(-50, 50, (300, 250)).astype(np.int32)
    row = rng.random(250).astype(np.float32)
    col = rng.integers(1, 9, (300, 1)).astype(np.uint8)
    names = {"m": m[:, ::-1], "row": row, "col": col, "f": np.asfortranarray(m)}
    for expr in ("m % col + row", "f // col - m", "where(m > 0, m ** 2, col)", "hypot(m, row)"):
        _check(expr, names)
    out = np.empty((300, 250), np.float64)
    res = kernels.evaluate("m * row + col", names, out=out)
    assert res is out
    np.testing.assert_array_equal(out, m[:, ::-1] * row + col)


@pytest.mark.parametrize("n", [SMALL, LARGE])
def test_reductions_equal_numpys(n):
    rng = np.random.default_rng(8)
    x = rng.random((n // 10, 10)).astype(np.float32)
    i = rng.integers(-3, 4, (n // 10, 10)).astype(np.int8)
    b = rng.random((n // 10, 10)) < 0.5
    names = {"x": x, "i": i, "b": b}
    cases = {
        "sum(x * 2 + 1)": np.sum(x * 2 + 1),
        "sum(x, axis=0)": np.sum(x, axis=0),
        "sum(x * x, axis=-1)": np.sum(x * x, axis=-1),
        "prod(x + 1, 1)": np.prod(x + 1, axis=1),
        "sum(i * i)": np.sum(i * i),  # int8 sums are int64
        "prod(i % 3 + 1, axis=1)": np.prod(i % 3 + 1, axis=1),
        "sum(b)": np.sum(b),
        "sum(b & (i > 0), axis=0)": np.sum(b & (i > 0), axis=0),
    }
    for expr, want in cases.items():
        got = np.asarray(kernels.evaluate(expr, names))
        want = np.asarray(want)
        assert got.dtype == want.dtype, expr
        np.testing.assert_array_equal(got, want, err_msg=expr)
    out = np.empty(10)
    assert kernels.evaluate("sum(x - 1, axis=0)", names, out=out) is out
    np.testing.assert_array_equal(out, np.sum(x - 1, axis=0))


@pytest.mark.parametrize(
    "expr,match",
    [
        ("x + sum(x)", "sum\\(\\) at column 5 must be the outermost"),
        ("sum(x, axis=y)", "axis of sum\\(\\) at column 1 must be an integer literal"),
        ("sum(x, keepdims=1)", "only the keyword axis"),
        ("sum(x, 0, 1)", "at most one axis"),
        ("sum(x, axis=2)", "axis 2 is out of range"),
        ("x @ y", "unsupported operator MatMult at column 1"),
        ("x + foo(y)", "unknown function 'foo' at column 5"),
        ("min(x)", "min\\(\\) at column 1 takes 2 argument"),
        ("x < y < 2", "chained comparisons at column 1"),
    ],
)
def test_errors_name_the_token_and_column(expr, match):
    with pytest.raises(ValueError, match=match):
        kernels.evaluate(expr, {"x": np.ones((2, 3)), "y": np.ones((2, 3))})


def test_complex_operands_are_a_clear_type_error():
    with pytest.raises(TypeError, match="complex128; expected bool, integer or float"):
        kernels.evaluate("x + 1", {"x": np.ones(3, complex)})


@pytest.mark.parametrize("n", [SMALL, LARGE])
def test_integer_division_by_zero_warns_as_numpy(n):
    i = np.arange(n, dtype=np.int32) - 5
    j = np.zeros(n, dtype=np.int32)
    for expr, fn in (("i // j", np.floor_divide), ("i % j", np.remainder)):
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            got = kernels.evaluate(expr, {"i": i, "j": j})
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(got, fn(i, j))
    with pytest.raises(ValueError, match="negative integer powers"):
        kernels.evaluate("i ** j", {"i": i, "j": j - 1})


# --- the GPU side: NVRTC and the fake device ---------------------------------------------

GPU_CASES = [
    (["i1", "i1"], ["x + y", "x * y - 3", "x // y", "x % y", "fmod(x, y)", "x ** 2", "~x"]),
    (["u2", "i4"], ["x + y", "x // y", "x % y", "x < y", "abs(y) + x", "x ^ y", "min(x, y)"]),
    (["i8", "u8"], ["x < y", "x == y", "x >= y", "maximum(x, 3)", "x < 2**63", "y > -5"]),
    (["i1", "u1"], ["x < 1000", "y == -1", "(x > -200) & (y <= 300)"]),
    (["?", "?"], ["x & y", "x | ~y", "x ^ y", "x + y", "x * y", "where(x, 1, 2) + y"]),
    (["f4", "f4"], ["x % y", "x // y", "fmod(x, y)", "floor(x) * ceil(y)", "sqrt(abs(x)) - y"]),
    (["f4", "i2"], ["x / y", "x ** 2 + y", "minimum(x, y)", "where(x > y, x, -y)"]),
    (["f8", "f8"], ["x % -0.75", "x // 2.5", "maximum(x, y)", "x / y", "hypot(x, y)"]),
    (["f8", "u4"], ["log10(abs(x) + 1) + log2(y + 1)", "arcsinh(x) + arctan2(x, y)"]),
    (["f4", "f8"], ["sum(x * y)", "sum(x, axis=0)", "prod(x / 8 + 1, axis=1)"]),
    (["i1", "u1"], ["sum(x * y)", "sum(x + y, axis=1)", "prod(x % 3 + 1, axis=0)"]),
]


def _gpu_names(dts, n=(40, 25)):
    return {
        "x": _array(dts[0], n[0] * n[1], 11).reshape(n),
        "y": _array(dts[1], n[0] * n[1], 12).reshape(n),
    }


@pytest.mark.skipif(not _fastprof._cuda_built(), reason="fastprof built without CUDA")
@pytest.mark.parametrize("dts,exprs", GPU_CASES)
def test_every_gpu_case_compiles_with_nvrtc(dts, exprs):
    from fastprof.cuda import runtime as cuda
    from fastprof.kernels import gpu as _gpu_kernels

    try:
        _gpu_kernels.compile_source('extern "C" __global__ void k() {}', "sm_80")
    except cuda.CudaUnavailableError as e:
        pytest.skip(f"NVRTC not loadable here: {e}")
    for expr in exprs:
        src = _gpu_kernels.generate_source(
            expr, {"x": np.dtype(dts[0]), "y": np.dtype(dts[1]), "k": 2.5}
        )
        assert _gpu_kernels.compile_source(src.source, "sm_80")[:4] == b"\x7fELF", expr


def test_gpu_refuses_float16_results_clearly():
    _gpu_kernels = pytest.importorskip("fastprof.kernels.gpu")
    with pytest.raises(TypeError, match="float16; evaluate on the GPU computes in"):
        _gpu_kernels.generate_source("sqrt(x)", {"x": np.dtype(np.int8)})


def test_bool_arithmetic_feeding_floats_is_numpys():
    # NumPy's bool + bool is a logical or (True), so (b + c) * 1.5 is at most 1.5; the compiled
    # program once held the sum as 2.0 and gave 3.0
    b = np.arange(LARGE) % 3 == 0
    c = np.arange(LARGE) % 2 == 0
    for expr in ("(b + c) * 1.5", "(b * c) + 0.5", "abs(b) * 2.5", "maximum(b, c) - 0.25"):
        _check(expr, {"b": b, "c": c})


def test_the_parse_cache_is_shared_by_both_devices():
    expr = "x * 3 + 17.25 - x"
    tree = kernels.args._tree_of(expr)
    assert _expr.parse_cached(expr) is tree
    gk = pytest.importorskip("fastprof.kernels.gpu")
    assert gk.generate_source(expr, {"x": np.dtype(np.float32)}).dtype == np.float32
    assert _expr.parse_cached(expr) is tree
