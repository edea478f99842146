"""CUDA source for ``fastprof.kernels.evaluate``: the typed tree of fastprof.kernels.expr, as one
kernel ``fp_eval`` that NVRTC compiles.

The generator walks the same typed tree as the CPU compiler (``_expr.typed``: NumPy's loop
dtypes applied once), so both devices accept one language and give one result dtype.  Each
operation becomes one local of its NumPy dtype's C type, computed in its loop's input dtypes
with NumPy's semantics: integer arithmetic wraps, integer ``//`` and ``%`` by zero give 0,
float ``%`` and ``//`` follow NumPy's divmod, ``minimum``/``maximum`` propagate NaN, mixed
int64/uint64 comparisons compare the values.  Differences from the CPU: no floating-point
warnings, and an integer raised to a negative integer power gives 0 (NumPy raises).

A reduction (sum/prod at the top) sums per output element along its axis: the kernel reads
the operand as [outer, nred, inner] and writes one partial per output; the whole-array form
writes one partial per chunk, which the host then adds.  Floats accumulate in double.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from . import expr as _expr

#: C type of each dtype the generator handles.
C_TYPES: Dict[str, str] = {
    "b1": "bool",
    "i1": "signed char",
    "u1": "unsigned char",
    "i2": "short",
    "u2": "unsigned short",
    "i4": "int",
    "u4": "unsigned int",
    "i8": "long long",
    "u8": "unsigned long long",
    "f4": "float",
    "f8": "double",
}

# float functions: NumPy ufunc name -> CUDA (double) name; float32 appends "f"
_MATH = {
    "sqrt": "sqrt",
    "exp": "exp",
    "log": "log",
    "log10": "log10",
    "log2": "log2",
    "log1p": "log1p",
    "expm1": "expm1",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "floor": "floor",
    "ceil": "ceil",
    "absolute": "fabs",
    "arctan2": "atan2",
    "hypot": "hypot",
    "fmod": "fmod",
    "power": "pow",
}
_CMP = {
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
    "equal": "==",
    "not_equal": "!=",
}

PRELUDE = r"""
template <class T> struct fp_wide { typedef unsigned int t; };
template <> struct fp_wide<long long> { typedef unsigned long long t; };
template <> struct fp_wide<unsigned long long> { typedef unsigned long long t; };
template <class T> __device__ __forceinline__ T fp_add(T a, T b)
{ return (T)((typename fp_wide<T>::t)a + (typename fp_wide<T>::t)b); }
template <class T> __device__ __forceinline__ T fp_sub(T a, T b)
{ return (T)((typename fp_wide<T>::t)a - (typename fp_wide<T>::t)b); }
template <class T> __device__ __forceinline__ T fp_mul(T a, T b)
{ return (T)((typename fp_wide<T>::t)a * (typename fp_wide<T>::t)b); }
template <class T> __device__ __forceinline__ T fp_neg(T a)
{ return (T)(0 - (typename fp_wide<T>::t)a); }
template <class T> __device__ __forceinline__ T fp_abs(T a) { return a < 0 ? fp_neg(a) : a; }
template <class T> __device__ __forceinline__ T fp_min(T a, T b) { return a <= b ? a : b; }
template <class T> __device__ __forceinline__ T fp_max(T a, T b) { return a >= b ? a : b; }
template <class T> __device__ __forceinline__ T fp_fmin(T a, T b)
{ return (a != a || b != b) ? a + b : (a < b ? a : b); }
template <class T> __device__ __forceinline__ T fp_fmax(T a, T b)
{ return (a != a || b != b) ? a + b : (a > b ? a : b); }
/* signed integers: NumPy gives 0 for a zero divisor, MIN // -1 wraps to MIN */
template <class T> __device__ __forceinline__ T fp_sfloordiv(T a, T b)
{
    if (b == 0) return 0;
    if (b == -1) return fp_neg(a);
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q = q - 1;
    return q;
}
template <class T> __device__ __forceinline__ T fp_srem(T a, T b)
{
    if (b == 0 || b == -1) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r = r + b;
    return r;
}
template <class T> __device__ __forceinline__ T fp_sfmod(T a, T b)
{ return (b == 0 || b == -1) ? (T)0 : (T)(a % b); }
template <class T> __device__ __forceinline__ T fp_ufloordiv(T a, T b)
{ return b == 0 ? (T)0 : (T)(a / b); }
template <class T> __device__ __forceinline__ T fp_urem(T a, T b)
{ return b == 0 ? (T)0 : (T)(a % b); }
template <class T> __device__ __forceinline__ T fp_ipow(T a, T b)
{
    if (b < 0) return 0;
    T r = 1;
    while (b != 0) {
        if (b & 1) r = fp_mul(r, a);
        a = fp_mul(a, a);
        b = (T)(b >> 1);
    }
    return r;
}
__device__ __forceinline__ int fp_cmp_su(long long a, unsigned long long b)
{ return a < 0 ? -1 : ((unsigned long long)a < b ? -1 : ((unsigned long long)a > b ? 1 : 0)); }
__device__ __forceinline__ float fp_fmodt(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double fp_fmodt(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float fp_floort(float a) { return floorf(a); }
__device__ __forceinline__ double fp_floort(double a) { return floor(a); }
__device__ __forceinline__ float fp_copysignt(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double fp_copysignt(double a, double b) { return copysign(a, b); }
/* NumPy's float divmod: the floor quotient, the remainder with b's sign in *mod */
template <class T> __device__ __forceinline__ T fp_divmod(T a, T b, T *mod)
{
    T m = fp_fmodt(a, b), div, fl;
    if (b == 0) { *mod = m; return a / b; }
    div = (a - m) / b;
    if (m != 0) {
        if ((b < 0) != (m < 0)) { m += b; div -= 1; }
    } else {
        m = fp_copysignt((T)0, b);
    }
    if (div != 0) {
        fl = fp_floort(div);
        if (div - fl > (T)0.5) fl += 1;
    } else {
        fl = fp_copysignt((T)0, a / b);
    }
    *mod = m;
    return fl;
}
template <class T> __device__ __forceinline__ T fp_frem(T a, T b)
{ T m; if (b == 0) return fp_fmodt(a, b); fp_divmod(a, b, &m); return m; }
template <class T> __device__ __forceinline__ T fp_ffloordiv(T a, T b)
{ T m; if (b == 0) return a / b; return fp_divmod(a, b, &m); }
"""


class Param(NamedTuple):
    """One kernel argument: the expression name it carries, its launch format ("p" pointer,
    "q" long long, "d" double) and, for an array, its dtype."""

    name: str
    fmt: str
    dtype: Optional[np.dtype]


class Source(NamedTuple):
    """A generated kernel: its CUDA source, the arguments for the names in order (the launch
    appends out and the counts), the result dtype, the dtype the kernel writes (a
    reduction's partials: double for a float result), the reduction (None, "sum" or
    "prod") and its axis (None: the whole array)."""

    source: str
    params: Tuple[Param, ...]
    dtype: np.dtype
    out_dtype: np.dtype
    reduce: Optional[str]
    axis: Optional[int] = None


def c_type(dt: np.dtype, what: str = "a value") -> str:
    """The C type of dt; TypeError naming what for a dtype the GPU cannot compute in."""
    dt = np.dtype(dt)
    key = "b1" if dt.kind == "b" else f"{dt.kind}{dt.itemsize}"
    if key not in C_TYPES:
        raise TypeError(
            f"{what} has dtype {dt}; evaluate on the GPU computes in bool, integer, float32"
            " and float64 only"
        )
    return C_TYPES[key]


def literal(value: Any, dt: np.dtype) -> str:
    """value converted to dt as NumPy converts a scalar, as an exact C expression."""
    dt = np.dtype(dt)
    v = dt.type(value)
    ct = c_type(dt)
    if dt.kind == "b":
        return "true" if v else "false"
    if dt.kind in "iu":
        iv = int(v)
        if dt.kind == "u":
            return f"(({ct}){iv}ULL)"
        if iv == -(2**63):
            return f"(({ct})(-9223372036854775807LL - 1))"
        return f"(({ct}){iv}LL)"
    f = float(v)
    if f != f:
        return (
            "__int_as_float(0x7fc00000)"
            if dt.itemsize == 4
            else "__longlong_as_double(0x7ff8000000000000LL)"
        )
    if f in (float("inf"), float("-inf")):
        sign = "-" if f < 0 else ""
        inf = (
            "__int_as_float(0x7f800000)"
            if dt.itemsize == 4
            else "__longlong_as_double(0x7ff0000000000000LL)"
        )
        return f"({sign}{inf})"
    return f"(({ct}){f.hex()})"


class _Gen:
    """Statements computing a typed tree, one local per operation."""

    def __init__(self, scalars: Dict[str, str], arrays: Dict[str, str]) -> None:
        self.scalars = scalars
        self.arrays = arrays
        self.lines: List[str] = []
        self.count = 0

    def cast(self, n: _expr.Typed, code: str, to: np.dtype) -> str:
        """The value code of node n read as dtype to."""
        if n.kind == "const":
            return literal(n.value, to)
        ct = c_type(to)
        if n.kind == "name" and n.value in self.scalars:  # a double or long long argument
            if to.kind == "b":
                return f"(({code}) != 0)"
            if to.kind == "u":
                return f"(({ct})(unsigned long long)({code}))"
            return f"(({ct})({code}))"
        if n.dtype is not None and np.dtype(n.dtype) == to:
            return code
        if to.kind == "b":
            return f"(({code}) != 0)"
        return f"(({ct})({code}))"

    def visit(self, n: _expr.Typed) -> str:
        """The C expression (a local or a leaf) holding n's value in n.dtype."""
        if n.kind == "const":
            return ""  # read through cast(), at its consumer's dtype
        if n.kind == "name":
            if n.value in self.scalars:
                return self.scalars[n.value]
            return self.arrays[n.value]
        assert n.dtype is not None
        dtype = n.dtype
        codes = [self.visit(a) for a in n.args]
        ins = _compare_dtypes(n) if n.op in _CMP else n.in_dtypes
        if ins != n.in_dtypes:
            n = _expr.Typed(n.kind, n.op, n.value, n.args, n.dtype, ins)
        args = [self.cast(a, c, d) for a, c, d in zip(n.args, codes, ins)]
        expr = self.operation(n, args)
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"        const {c_type(dtype)} {name} = {expr};")
        return name

    def operation(self, n: _expr.Typed, a: List[str]) -> str:
        op = n.op
        ins = n.in_dtypes
        kind = ins[0].kind if ins else "f"
        out_ct = c_type(np.dtype(n.dtype))
        if n.kind == "where":
            return f"({a[0]} ? {a[1]} : {a[2]})"
        if op in _CMP:
            k0, k1 = ins[0].kind, ins[1].kind
            if {k0, k1} == {"i", "u"} and ins[0] != ins[1]:
                cmp = (
                    f"fp_cmp_su((long long){a[0]}, (unsigned long long){a[1]})"
                    if k0 == "i"
                    else f"(-fp_cmp_su((long long){a[1]}, (unsigned long long){a[0]}))"
                )
                return f"({cmp} {_CMP[op]} 0)"
            return f"({a[0]} {_CMP[op]} {a[1]})"
        if kind == "b":
            table = {
                "add": "({0} || {1})",
                "multiply": "({0} && {1})",
                "bitwise_or": "({0} || {1})",
                "bitwise_and": "({0} && {1})",
                "bitwise_xor": "({0} != {1})",
                "logical_not": "(!{0})",
                "invert": "(!{0})",
                "positive": "{0}",
                "absolute": "{0}",
                "minimum": "({0} && {1})",
                "maximum": "({0} || {1})",
            }
            if op in table:
                return table[op].format(*a)
        elif kind in "iu":
            signed = kind == "i"
            table = {
                "add": "fp_add({0}, {1})",
                "subtract": "fp_sub({0}, {1})",
                "multiply": "fp_mul({0}, {1})",
                "square": "fp_mul({0}, {0})",
                "negative": "fp_neg({0})",
                "positive": "{0}",
                "absolute": "fp_abs({0})" if signed else "{0}",
                "floor_divide": "fp_sfloordiv({0}, {1})" if signed else "fp_ufloordiv({0}, {1})",
                "remainder": "fp_srem({0}, {1})" if signed else "fp_urem({0}, {1})",
                "fmod": "fp_sfmod({0}, {1})" if signed else "fp_urem({0}, {1})",
                "power": "fp_ipow({0}, {1})",
                "bitwise_and": f"(({out_ct})({{0}} & {{1}}))",
                "bitwise_or": f"(({out_ct})({{0}} | {{1}}))",
                "bitwise_xor": f"(({out_ct})({{0}} ^ {{1}}))",
                "invert": f"(({out_ct})~{{0}})",
                "minimum": "fp_min({0}, {1})",
                "maximum": "fp_max({0}, {1})",
            }
            if op in table:
                return table[op].format(*a)
        elif kind == "f":
            sfx = "f" if ins[0].itemsize == 4 else ""
            table = {
                "add": "({0} + {1})",
                "subtract": "({0} - {1})",
                "multiply": "({0} * {1})",
                "divide": "({0} / {1})",
                "square": "({0} * {0})",
                "negative": "(-{0})",
                "positive": "{0}",
                "floor_divide": "fp_ffloordiv({0}, {1})",
                "remainder": "fp_frem({0}, {1})",
                "minimum": "fp_fmin({0}, {1})",
                "maximum": "fp_fmax({0}, {1})",
            }
            if op in table:
                return table[op].format(*a)
            if op in _MATH:
                return f"{_MATH[op]}{sfx}({', '.join(a)})"
        raise TypeError(f"{op} on {', '.join(str(d) for d in ins)} has no GPU code")


def _compare_dtypes(n: _expr.Typed) -> Tuple[np.dtype, ...]:
    """The dtypes a comparison reads its operands as: NumPy's loop, except that an integer
    literal outside the other side's integer dtype (int8 < 1000, uint8 == -1) is compared by
    value, as NumPy 2 does: both sides as 64-bit integers."""
    ins = n.in_dtypes
    for k, arg in enumerate(n.args):
        d = ins[k]
        if arg.kind != "const" or arg.dtype is not None or d.kind not in "iu":
            continue
        if not isinstance(arg.value, int) or isinstance(arg.value, bool):
            continue
        info = np.iinfo(d)
        if info.min <= arg.value <= info.max:
            continue
        other = ins[1 - k]
        lit = np.dtype(np.int64) if arg.value < 2**63 else np.dtype(np.uint64)
        wide = np.dtype(np.int64) if other.kind == "i" else np.dtype(np.uint64)
        return (lit, wide) if k == 0 else (wide, lit)
    return ins


def generate(tree: _expr.Typed, operands: Dict[str, Any]) -> Source:
    """The kernel for typed tree, given each name's operand: an array dtype (np.dtype), or a
    scalar (Python int/float/bool, NumPy scalar).  Raises TypeError for a dtype or operation
    the GPU cannot compute."""
    reduce_op = None
    body = tree
    if tree.kind == "reduce":
        reduce_op = tree.op
        body = tree.args[0]
    scalars: Dict[str, str] = {}  # name -> its C name
    arrays: Dict[str, str] = {}
    params: List[Param] = []
    decls: List[str] = []
    loads: List[str] = []
    for i, name in enumerate(_expr.typed_names(tree)):
        v = operands[name]
        if isinstance(v, np.dtype):
            ct = c_type(v, f"variable {name!r}")
            p = Param(name, "p", v)
            arrays[name] = f"v{i}"
            decls.append(f"const {ct} *__restrict__ a{i}")
            loads.append(f"        const {ct} v{i} = a{i}[i];")
        else:
            is_float = isinstance(v, (float, np.floating))
            p = Param(name, "d" if is_float else "q", None)
            scalars[name] = f"s{i}"
            decls.append(f"{'double' if is_float else 'long long'} s{i}")
        params.append(p)
    gen = _Gen(scalars, arrays)
    top = gen.visit(body)
    res_dt = np.dtype(tree.dtype if tree.dtype is not None else np.float64)
    val = gen.cast(body, top, res_dt)  # the value (a reduction's operand) in res_dt
    if reduce_op is None:
        out_dt = res_dt
        out_ct = c_type(out_dt)
        sig = ", ".join(decls + [f"{out_ct} *__restrict__ out", "long long n"])
        loop = [
            "    const long long step = (long long)gridDim.x * blockDim.x;",
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
            " i += step) {",
            *loads,
            *gen.lines,
            f"        out[i] = {val};",
            "    }",
        ]
    else:
        out_dt = np.dtype(np.float64) if res_dt.kind == "f" else res_dt
        acc_ct = c_type(out_dt)
        if out_dt.kind == "f":
            val = f"(double){val}"
            combine = "acc + x" if reduce_op == "sum" else "acc * x"
        elif out_dt.kind == "b":
            combine = "acc || x" if reduce_op == "sum" else "acc && x"
        else:
            combine = "fp_add(acc, x)" if reduce_op == "sum" else "fp_mul(acc, x)"
        identity = literal(0 if reduce_op == "sum" else 1, out_dt)
        sig = ", ".join(
            decls
            + [
                f"{acc_ct} *__restrict__ out",
                "long long nout",
                "long long nred",
                "long long inner",
                "long long ntot",
            ]
        )
        loop = [
            "    const long long step = (long long)gridDim.x * blockDim.x;",
            "    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < nout;"
            " o += step) {",
            f"      {acc_ct} acc = {identity};",
            "      const long long base = (o / inner) * nred * inner + o % inner;",
            "      for (long long r = 0; r < nred; r++) {",
            "        const long long i = base + r * inner;",
            "        if (i >= ntot) break;",
            *loads,
            *gen.lines,
            f"        const {acc_ct} x = {val};",
            f"        acc = {combine};",
            "      }",
            "      out[o] = acc;",
            "    }",
        ]
    src = "\n".join([PRELUDE, f'extern "C" __global__ void fp_eval({sig})', "{", *loop, "}", ""])
    return Source(src, tuple(params), res_dt, out_dt, reduce_op, tree.value if reduce_op else None)
