"""The CPU side of the kernels: the compiled convolution and box passes on the NumPy C API,
the blocked, threaded evaluation of expressions, and the thread count.  Each entry point takes
the normalised arguments of :mod:`fastprof.kernels.args`."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .. import _fastprof
from . import expr as _expr
from . import ndimage_exact as _ndimage_exact
from .args import FLOAT_TYPES, ConvArgs, EvalArgs, UniformArgs, rank1_factors
from .fperr import ErrorLog


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (>= 1) in the kernels; the default is the usable cores."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if not 1 <= int(n) <= 256:
        raise ValueError(f"n must be between 1 and 256, got {n}")
    _fastprof._set_num_threads(int(n))


def get_num_threads() -> int:
    """The number of threads the kernels use."""
    return int(_fastprof._get_num_threads())


def _run_correlate(
    x: np.ndarray,
    target: np.ndarray,
    factors: Optional[List[np.ndarray]],
    w: Optional[np.ndarray],
    modes: Tuple[int, ...],
    cval: float,
    origins: Tuple[int, ...],
) -> None:
    """Runs the compiled kernel from float x into float target (same shape, no overlap)."""
    if factors is not None:
        _fastprof._correlate_separable(x, target, factors, modes, cval, origins)
    else:
        _fastprof._correlate_general(x, target, w, modes, cval, origins)


def _native_float(a: np.ndarray) -> bool:
    """True for an aligned, native-byte-order float32/float64 array (what the C code reads)."""
    return a.dtype.type in FLOAT_TYPES and a.dtype.isnative and a.flags.aligned


def _float_input(x: np.ndarray) -> np.ndarray:
    if _native_float(x):
        return x
    return x.astype(x.dtype.newbyteorder("=") if x.dtype.type in FLOAT_TYPES else np.float64)


@_ndimage_exact.c_arithmetic
def _finish(target: np.ndarray, output: Optional[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """Casts the float result into output (or a new array of out_dtype) as scipy's C cast does
    (silently); returns output or the new array."""
    return _store(target, output, out_dtype)


def _store(target: np.ndarray, output: Optional[np.ndarray], out_dtype: np.dtype) -> np.ndarray:
    """target stored into output (or a new array of out_dtype) with NumPy's cast, under the
    caller's error settings; returns output, target (already out_dtype) or the new array."""
    if output is None:
        return target if target.dtype == out_dtype else target.astype(out_dtype)
    if target is not output:
        np.copyto(output, target, casting="unsafe")
    return output


def correlate(a: ConvArgs, exact: bool = False) -> np.ndarray:
    """The correlation of the checked arguments ``a`` (convolve's come with flipped weights);
    with exact, float outputs are scipy's bit for bit too."""
    x = a.input
    output = a.output
    if x.ndim == 0:  # 0-d input, 0-d weights (ascontiguousarray made them (1,)): 0-d output
        w = float(a.weights.reshape(()))
        # a dropped weight (zeroed by the checker) is no tap: the sum of none is 0.0, NaN or not
        with np.errstate(over="ignore", invalid="ignore"):  # a product in C: no warning
            res = (
                np.asarray(_ndimage_exact.bool_bytes(x), np.float64) * w
                if w != 0.0
                else np.zeros((), np.float64)
            )
        res = np.asarray(res, dtype=np.float64)
        if a.out_dtype.kind in "biu":  # scipy's store, as the n-d paths' (-0.5 -> False)
            res = _ndimage_exact.c_cast(res, a.out_dtype, True)
        return _finish(res, output, a.out_dtype)
    if output is not None and np.may_share_memory(x, output):
        x = x.copy()
    if a.out_dtype.kind in "biu" and x.size:
        # a truncated result depends on every rounding step: scipy's own order and cast
        res = _ndimage_exact.correlate(x, a.weights, a.modes[0], a.cval, a.origins, a.out_dtype)
        return _finish(res, output, a.out_dtype)
    x = _float_input(_ndimage_exact.bool_bytes(x))  # scipy reads a bool's byte, 2 as 2.0
    if output is not None and _native_float(output):
        target = output
    else:
        target = np.empty(
            x.shape,
            dtype=a.out_dtype.newbyteorder("=") if a.out_dtype.type in FLOAT_TYPES else np.float64,
        )
    if x.size and (
        exact or _cval_changes_class(a.cval, a.modes, (x.dtype, target.dtype), _reach(a.weights))
    ):
        _correlate_exact(x, target, a)
    elif x.size:
        factors = rank1_factors(a.weights)
        _run_correlate(x, target, factors, a.weights, a.modes, a.cval, a.origins)
    return _finish(target, output, a.out_dtype)


def _correlate_exact(x: np.ndarray, target: np.ndarray, a: ConvArgs) -> None:
    """scipy's correlation of float x into float target, bit for bit: every tap of the whole
    kernel (never its factors) summed from 0.0 in C order of the taps, a product then a sum
    each (no FMA).  The general kernel keeps that order when the input's axes are in C order,
    so x is read C-contiguous; a 1-D line is cut into rows (see _correlate_line_exact)."""
    if x.ndim == 1:
        _correlate_line_exact(x, target, a)
        return
    _fastprof._correlate_general(
        np.ascontiguousarray(x), target, a.weights, a.modes, a.cval, a.origins, True
    )


_LINE_ROW = 4096  # outputs per row of a long 1-D line cut into rows


@_ndimage_exact.c_arithmetic
def _correlate_line_exact(x: np.ndarray, target: np.ndarray, a: ConvArgs) -> None:
    """scipy's correlation of the float line x into the line target, bit for bit, on all the
    workers: the line extended by scipy's mode, then read as overlapping rows of _LINE_ROW + k - 1
    elements, each row's interior outputs those of its share of the line (every output sums
    the same taps in the same order whichever row holds it); silently, as scipy's C."""
    n, k = x.shape[0], a.weights.shape[0]
    before = k // 2 + a.origins[0]
    rows = -(-n // _LINE_ROW)
    # scipy's line buffer holds doubles: a cval a float32 line cannot hold needs a double one
    wide = a.modes[0] == 1 and float(x.dtype.type(a.cval)) != a.cval
    ext = np.empty(rows * _LINE_ROW + k - 1, dtype=np.float64 if wide else x.dtype)
    ext[before : before + n] = x
    for lo, j in ((0, np.arange(-before, 0)), (before + n, np.arange(n, n + k - 1 - before))):
        idx = _ndimage_exact.index_map(j, n, a.modes[0])
        part = ext[lo : lo + j.size]
        part[...] = x[np.maximum(idx, 0)]
        part[idx < 0] = a.cval  # as a double where ext holds doubles
    ext[n + k - 1 :] = 0.0  # the last row's tail: outputs beyond the line, never kept
    nonzero = np.flatnonzero(a.weights)
    # rows cost (row + k - 1) * k products each, in C; a pass per tap n, in NumPy, plus its
    # call: a kernel far longer than the line (k >> n) takes the passes
    if rows * (_LINE_ROW + k - 1) * k * 0.06 > nonzero.size * (1500.0 + n):
        acc = np.zeros(n, dtype=np.float64)
        for tap in nonzero.tolist():  # scipy's order: every nonzero tap, a product then a sum
            acc += a.weights[tap] * ext[tap : tap + n].astype(np.float64)
        target[...] = acc
        return
    step = ext.strides[0]
    grid = np.lib.stride_tricks.as_strided(
        ext, shape=(rows, _LINE_ROW + k - 1), strides=(_LINE_ROW * step, step), writeable=False
    )
    res = np.empty(grid.shape, dtype=target.dtype)
    # weights (1, k) centred on each row: output column k // 2 + i reads grid[r, i .. i + k - 1]
    _fastprof._correlate_general(grid, res, a.weights.reshape(1, k), (1, 1), 0.0, (0, 0), True)
    target[...] = res[:, k // 2 : k // 2 + _LINE_ROW].reshape(-1)[:n]


def uniform_filter(a: UniformArgs, exact: bool = False) -> np.ndarray:
    """The box mean of the checked arguments ``a`` (see :func:`fastprof.kernels.uniform_filter`);
    with exact, float outputs are scipy's bit for bit too."""
    x = a.input
    output = a.output
    if x.ndim == 0 or x.size == 0 or all(s == 1 for s in a.sizes):
        # no axis to filter: scipy assigns output[...] = input into a new C-order array (or
        # output), NumPy's cast and its warnings, element by element from the input itself
        if output is None:
            output = np.empty(x.shape, dtype=a.out_dtype)
        np.copyto(output, x, casting="unsafe")
        return output
    if output is not None and np.may_share_memory(x, output):
        x = x.copy()
    boxes = [_long_box(x.shape[d], s, a.origins[d], a.modes[d]) for d, s in enumerate(a.sizes)]
    exact_float = a.out_dtype.type in FLOAT_TYPES and (
        exact or _cval_changes_class(a.cval, a.modes, (x.dtype, a.out_dtype), float(max(a.sizes)))
    )
    if exact_float and all(b is None for b in boxes):
        return _uniform_exact(x, a, output)
    if a.out_dtype.kind in "biu" or exact_float:
        # an integer result truncates a double: scipy's own running sums, never a folded box
        # (its mean is only equal to rounding, and 6.999... truncates to 6 where scipy has 7)
        cur = x
        for d in a.axes:  # scipy's uniform_filter1d chain, in the order of axes
            if a.sizes[d] > 1:
                cur = _ndimage_exact.uniform_filter1d(
                    cur, a.sizes[d], d, a.origins[d], a.modes[d], a.cval, a.out_dtype
                )
        return _finish(cur, output, a.out_dtype)
    if a.out_dtype.type in FLOAT_TYPES and all(b is None for b in boxes):
        x = _float_input(x)
        if output is not None and _native_float(output):
            target = output
        else:
            target = np.empty(x.shape, dtype=a.out_dtype.newbyteorder("="))
        factors = [np.full(s, 1.0 / s) for s in a.sizes]
        _fastprof._correlate_separable(x, target, factors, a.modes, a.cval, a.origins)
        return _finish(target, output, a.out_dtype)
    # float outputs, exact=False, a box longer than its axis: one axis at a time, such a box
    # folded to the axis' length (equal to scipy's mean to rounding)
    cur = x
    with np.errstate(over="ignore", invalid="ignore"):  # sums as a kernel's: silent in C
        for d in a.axes:
            s = a.sizes[d]
            if s == 1:
                continue
            cur = _box_along(_float_input(cur), d, s, a.origins[d], a.modes, a.cval, boxes[d])
    return _finish(np.asarray(cur), output, a.out_dtype)


def _reach(weights: np.ndarray) -> float:
    """The sum of |weights|: the most cvals one output of a correlation sums (inf when a weight
    is)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sum(np.abs(weights)))


def _cval_changes_class(
    cval: float, modes: Tuple[int, ...], dtypes: Tuple[np.dtype, ...], reach: float
) -> bool:
    """True where the fast paths' handling of a constant mode's cval can change what class of
    value (finite, inf, NaN) scipy's result holds, so the exact path must run: a cval of inf
    or NaN (scipy's running sums and tap sums carry it as inf - inf = NaN where the fast
    paths' do not), a cval beyond float32's range when the fast float32 path may round it to
    float32 (inf where scipy's double is finite), or |cval| times reach (the most cvals an
    output sums in scipy's order, which overflows to inf where the fast paths' scaled sums do
    not) beyond float64's range.  False for any other mode."""
    if 1 not in modes:
        return False
    if not np.isfinite(cval):
        return True
    big = np.finfo(np.float64).max
    if abs(cval) * reach > big:  # a Python float: inf past the range, no warning
        return True
    return any(d == np.float32 for d in dtypes) and abs(cval) > float(np.finfo(np.float32).max)


class _LongBox(NamedTuple):
    """A box of size ``size`` on an axis of length n, folded: its mean is
    ``(short * mean of the box of size short, origin origin) + extra) / size``, where extra is
    ``periods`` times one period of the extended axis (reflect, mirror, wrap), or
    ``left`` copies of the value beyond the start and ``right`` beyond the end (constant:
    cval; nearest: the first and last element)."""

    size: int
    short: int
    origin: int
    periods: int
    left: int
    right: int


def _long_box(n: int, size: int, origin: int, mode: int) -> Optional[_LongBox]:
    """The folded form of a box far longer than its axis (cost then bounded by the axis, not the
    box), or None when the box is short enough to run as it is."""
    if size <= 1 or n == 0:
        return None
    center = (
        size // 2 + origin
    )  # output i reads extended indices i - center ... i - center + size - 1
    if mode in (1, 2):  # constant, nearest: beyond one axis length out, every value is the same
        left, right = min(center, n), min(size - 1 - center, n)
        if left == center and right == size - 1 - center:
            return None
        short = left + right + 1
        return _LongBox(size, short, left - short // 2, 0, center - left, size - 1 - center - right)
    period = n if mode == 4 else 2 * n if mode == 0 else max(1, 2 * n - 2)  # wrap/reflect/mirror
    if size < 2 * period:
        return None
    short = period + size % period  # a window of this size shifted by whole periods
    c = center % period
    return _LongBox(size, short, c - short // 2, (size - short) // period, 0, 0)


def _uniform_exact(x: np.ndarray, a: UniformArgs, output: Optional[np.ndarray]) -> np.ndarray:
    """scipy's uniform_filter of x into a float output, bit for bit, by the fused streaming
    kernel (kernels/box_fused.c): scipy's per-axis running sums in double, each axis' result
    rounded to the output dtype before the next reads it."""
    xin = _float_input(_ndimage_exact.bool_bytes(x))
    if output is not None and _native_float(output):
        target = output
    else:
        target = np.empty(x.shape, dtype=a.out_dtype.newbyteorder("="))
    order = [d for d in a.axes if a.sizes[d] > 1]
    _fastprof._uniform_filter_exact(xin, target, a.sizes, a.modes, a.origins, a.cval, order)
    return _finish(target, output, a.out_dtype)


def _box_along(
    x: np.ndarray,
    axis: int,
    size: int,
    origin: int,
    modes: Tuple[int, ...],
    cval: float,
    box: Optional[_LongBox],
) -> np.ndarray:
    """The float64 mean over a box of size along one axis of the float array x."""
    factors = [np.ones(1) for _ in range(x.ndim)]
    origins = [0] * x.ndim
    factors[axis] = np.full(
        size if box is None else box.short, 1.0 / (size if box is None else box.short)
    )
    origins[axis] = origin if box is None else box.origin
    out = np.empty(x.shape)
    _fastprof._correlate_separable(x, out, factors, modes, cval, tuple(origins))
    if box is None:
        return out
    out *= box.short / box.size
    mode = modes[axis]
    n = x.shape[axis]
    if box.periods:
        total = np.sum(x, axis=axis, keepdims=True, dtype=np.float64)
        if mode == 0 or (mode == 3 and n > 1):  # reflect: each element twice per period
            total = 2.0 * total
        if mode == 3 and n > 1:  # mirror: the two ends once per period
            total -= np.take(x, [0], axis=axis) + np.take(x, [n - 1], axis=axis)
        out += total * (box.periods / box.size)
    elif mode == 1:
        out += cval * ((box.left + box.right) / box.size)
    else:
        if box.left:
            out += np.take(x, [0], axis=axis).astype(np.float64) * (box.left / box.size)
        if box.right:
            out += np.take(x, [n - 1], axis=axis).astype(np.float64) * (box.right / box.size)
    return out


# --- fused elementwise expressions -----------------------------------------------------------


_BLOCK = 16384  # elements per block: a few registers of it stay in L2
_SMALL = 1 << 16  # below this many elements a plain NumPy evaluation is as fast
_TREES_MAX = 512
_PLANS: "OrderedDict[tuple, Tuple[List[_Step], Tuple[str, Any]]]" = OrderedDict()
_pool_lock = threading.Lock()
_pool: Optional[ThreadPoolExecutor] = None
_pool_size = 0


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size != n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="fastprof-kernels")
            _pool_size = n
        return _pool


class _Step(NamedTuple):
    kind: str  # "ufunc" or "where"
    func: Any
    args: Tuple[Tuple[str, Any], ...]  # ("v", name) | ("c", value) | ("r", step)
    dtype: np.dtype
    in_dtypes: Tuple[np.dtype, ...]  # the dtypes the step reads its operands as


def _plan(tree: _expr.Node, probe: Dict[str, Any]) -> Tuple[List[_Step], Tuple[str, Any]]:
    """The steps computing tree in post-order and the reference of the result, from its typed
    tree (fastprof.kernels.expr.typed: NumPy's dtypes, applied once)."""
    steps: List[_Step] = []

    def visit(n: _expr.Typed) -> Tuple[str, Any]:
        if n.kind == "name":
            return ("v", n.value)
        if n.kind == "const":
            return ("c", n.value)
        refs = tuple(visit(a) for a in n.args)
        assert n.dtype is not None  # an operation's result is typed
        if n.kind == "where":
            steps.append(_Step("where", None, refs, n.dtype, n.in_dtypes))
        else:
            steps.append(_Step("ufunc", getattr(np, n.op), refs, n.dtype, n.in_dtypes))
        return ("r", len(steps) - 1)

    ref = visit(_expr.typed(tree, probe))
    return steps, ref


def _run_blocks(
    steps: List[_Step],
    views: Dict[str, Any],
    dest: np.ndarray,
    lo: int,
    hi: int,
    block: int,
    flat: bool,
    log: ErrorLog,
) -> None:
    """Computes rows/elements [lo, hi) of the result into dest, block by block, with private
    registers (in a worker thread), noting floating-point errors in log."""
    with log.trap():
        _run_blocks_inner(steps, views, dest, lo, hi, block, flat, log)


def _run_blocks_inner(
    steps: List[_Step],
    views: Dict[str, Any],
    dest: np.ndarray,
    lo: int,
    hi: int,
    block: int,
    flat: bool,
    log: ErrorLog,
) -> None:
    """_run_blocks in a thread where log traps errors: rows/elements [lo, hi) into dest (each
    step's name set in log before it runs, as NumPy's error messages name the ufunc)."""
    # a register for each step but the last, which writes into dest; a last step of another
    # dtype than dest's gets one too: NumPy computes the result's dtype, then casts into out
    # (int64 -> float64 -> float32 rounds twice, int64 -> float32 once)
    last = len(steps) - 1 if steps[-1].dtype == dest.dtype else len(steps)
    regs = [
        np.empty(
            block * (1 if flat else int(np.prod(dest.shape[1:], dtype=np.int64))), dtype=st.dtype
        )
        for st in steps[:last]
    ]
    # where's Python-scalar branches, converted once as np.where itself converts them
    wheres = {
        i: {
            j: _where_scalar(views[val] if kind == "v" else val, st.dtype)
            for j, (kind, val) in enumerate(st.args)
            if j > 0 and kind != "r" and _expr.is_python_scalar(views[val] if kind == "v" else val)
        }
        for i, st in enumerate(steps)
        if st.kind == "where"
    }
    start = lo
    while start < hi:
        stop = min(hi, start + block)
        shape = (stop - start,) + tuple(dest.shape[1:])
        size = int(np.prod(shape, dtype=np.int64))
        cur: List[Any] = [None] * len(steps)
        for i, st in enumerate(steps):
            args = []
            for kind, val in st.args:
                if kind == "v":
                    v = views[val]
                    args.append(v[start:stop] if isinstance(v, np.ndarray) and v.ndim else v)
                elif kind == "c":
                    args.append(val)
                else:
                    args.append(cur[val])
            target = dest[start:stop] if i == last else regs[i][:size].reshape(shape)
            if st.kind == "where":
                log.step("cast")
                for j, v in wheres[i].items():
                    args[j] = v
                np.copyto(target, args[2], casting="unsafe")
                cond = args[0]
                if np.asarray(cond).dtype != np.bool_:  # np.where reads any condition's truth
                    cond = np.not_equal(cond, 0)
                np.copyto(target, args[1], casting="unsafe", where=cond)
            else:
                log.step(st.func.__name__, args)
                st.func(*args, out=target, casting="unsafe")
            cur[i] = target
        if last == len(steps):  # the result's dtype differs from dest's: cast it in
            log.step("cast")
            np.copyto(dest[start:stop], cur[-1], casting="unsafe")
        start = stop


def _where_scalar(v: Any, dtype: np.dtype) -> np.ndarray:
    """The Python scalar v as np.where reads it into a result of dtype: converted by np.where
    itself (NumPy 2.4 wraps an out-of-range Python int into an int8 result, later NumPy
    raises OverflowError), so the blocked path gives NumPy's result at every size."""
    return np.where(np.ones(1, np.bool_), v, np.zeros(1, dtype))


_VM_TYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.bool_))


# operations whose bool result the VM's 0.0/1.0 registers hold as NumPy does (bool + bool is
# NumPy's logical or, which a register holding 2.0 would not be)
_VM_BOOL_OPS = frozenset(
    "less less_equal greater greater_equal equal not_equal bitwise_and bitwise_or bitwise_xor"
    " invert where positive absolute minimum maximum".split()
)


def _vm_program(
    steps: List[_Step], views: Dict[str, Any], probe: Dict[str, Any]
) -> Optional[Tuple[list, list, list, int, int]]:
    """(steps, inputs, consts, nregs, result register) for the compiled evaluator, or None
    when some operand or step is outside what it handles (integers, other dtypes)."""
    opcodes = _expr.opcodes()
    inputs: List[np.ndarray] = []
    reg_of_name: Dict[str, int] = {}
    for name, v in views.items():
        if isinstance(v, np.ndarray):
            if v.dtype not in _VM_TYPES or not v.dtype.isnative or not v.flags.aligned:
                return None
            reg_of_name[name] = len(inputs)
            inputs.append(v.reshape(-1) if v.ndim else v.reshape(1))
        elif not isinstance(v, (bool, int, float)):
            return None

    program = []
    consts: List[float] = []
    for st in steps:
        name = "where" if st.kind == "where" else st.func.__name__
        op = opcodes.get(name)
        if (
            op is None
            or st.dtype not in _VM_TYPES
            or any(d not in _VM_TYPES for d in st.in_dtypes)
            or (st.dtype == np.bool_ and name not in _VM_BOOL_OPS)
            # the float32 floor quotient rounds differently through a double
            or (name == "floor_divide" and st.dtype == np.float32)
        ):
            return None
        refs = []
        for (kind, val), in_dt in zip(st.args, st.in_dtypes):
            if kind == "r":
                refs.append(("t", val))
            elif kind == "v" and val in reg_of_name:
                refs.append(("i", reg_of_name[val]))
            else:
                scalar = views[val] if kind == "v" else val
                try:  # the scalar as the step reads it (a Python float rounded to float32)
                    consts.append(float(in_dt.type(scalar)))
                except (OverflowError, ValueError, TypeError):
                    return None
                refs.append(("k", len(consts) - 1))
        program.append((op, refs, st.dtype == np.float32))
    nin, nk = len(inputs), len(consts)
    nregs = nin + nk + len(steps)

    def reg(ref: Tuple[str, int]) -> int:
        kind, i = ref
        return i if kind == "i" else nin + i if kind == "k" else nin + nk + i

    out_steps = []
    for i, (op, refs, r32) in enumerate(program):
        regs = [reg(r) for r in refs] + [0] * (3 - len(refs))
        out_steps.append((op, nin + nk + i, regs[0], regs[1], regs[2], int(r32)))
    if nregs > 512:
        return None
    return out_steps, inputs, consts, nregs, nin + nk + len(steps) - 1


def _reduce_cpu(a: EvalArgs, log: ErrorLog) -> Any:
    """sum/prod of an expression: its elementwise value, then NumPy's reduction of it (so the
    result is np.sum's / np.prod's of that array, bit for bit)."""
    tree = a.tree
    inner = _evaluate(EvalArgs(a.expr, tree.args[0], a.values, None), log)
    inner = np.asarray(inner)
    axis = tree.value
    if axis is not None and not -inner.ndim <= axis < max(inner.ndim, 1):
        raise ValueError(
            f"expr {_expr._shown(a.expr)}: axis {axis} is out of range for the"
            f" {inner.ndim}-d value of {tree.op}()'s operand"
        )
    if axis is not None and inner.ndim == 0:
        raise ValueError(
            f"expr {_expr._shown(a.expr)}: {tree.op}() of a scalar takes no axis, got {axis}"
        )
    log.step("reduce")
    res = _expr.REDUCTIONS[tree.op].reduce(inner, axis=axis)
    out = a.out
    if out is None:
        return res
    res = np.asarray(res)
    if tuple(out.shape) != res.shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {res.shape}")
    if not np.can_cast(res.dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"out has dtype {out.dtype}; the result's dtype {res.dtype} cannot be cast to it"
        )
    log.step("cast")
    np.copyto(out, res, casting="same_kind")
    return out


def _broadcast_shape(shapes: List[Tuple[int, ...]]) -> Tuple[int, ...]:
    """The shape the given shapes broadcast to, by NumPy's rules, for any number of dimensions
    (np.broadcast_shapes stops at 32); ValueError with NumPy's text for shapes that do not
    broadcast (the first axis, left to right, that mismatches; the argument that set it)."""
    nd = max((len(s) for s in shapes), default=0)
    out: List[int] = []
    for i in range(nd):
        dim, src = 1, 0
        for j, s in enumerate(shapes):
            k = i + len(s) - nd  # shapes are aligned at their last axis
            if k < 0 or s[k] == 1:
                continue
            if dim == 1:
                dim, src = s[k], j
            elif dim != s[k]:
                raise ValueError(
                    "shape mismatch: objects cannot be broadcast to a single shape.  Mismatch"
                    f" is between arg {src} with shape {tuple(shapes[src])} and arg {j} with"
                    f" shape {tuple(s)}."
                )
        out.append(dim)
    return tuple(out)


def evaluate(a: EvalArgs) -> Any:
    """The value of the checked expression arguments a on the CPU.  NumPy's floating-point
    errors of its pieces (blocks, threads, steps) are reported once each, at the caller's
    line, under the caller's np.errstate, as one NumPy expression would report them."""
    log = ErrorLog(np.geterr())
    with log.trap():
        res = _evaluate(a, log)
    log.report()
    return res


def _evaluate(a: EvalArgs, log: ErrorLog) -> Any:
    """evaluate within log's trap (its errors noted in log)."""
    if a.tree.kind == "reduce":
        return _reduce_cpu(a, log)
    values = a.values
    out = a.out
    arrays = [v for v in values.values() if isinstance(v, np.ndarray)]
    shape = _broadcast_shape([v.shape for v in arrays])
    if out is not None and tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    probe = {
        k: (np.empty((0,) * v.ndim, v.dtype) if isinstance(v, np.ndarray) and v.ndim else v)
        for k, v in values.items()
    }
    signature = (a.expr,) + tuple(
        (k, v.dtype.str, v.ndim == 0) if isinstance(v, np.ndarray) else (k, type(v))
        for k, v in values.items()
    )
    planned = _PLANS.get(signature)
    if planned is None:
        try:
            with np.errstate(all="ignore"):  # typing on probes: the run itself reports
                planned = _plan(a.tree, probe)
        except TypeError as exc:  # e.g. ~ on floats, & on floats: NumPy has no such loop
            raise TypeError(f"expr {_expr._shown(a.expr)}: {exc}") from None
        _PLANS[signature] = planned
        if len(_PLANS) > _TREES_MAX:
            _PLANS.popitem(last=False)
    steps, ref = planned
    size = int(np.prod(shape, dtype=np.int64))
    with np.errstate(all="ignore"):  # a probe, as typing: the run itself reports
        res_dtype = (
            steps[-1].dtype
            if ref[0] == "r"
            else np.asarray(_expr.evaluate_numpy(a.tree, probe)).dtype
        )
    if out is not None and not np.can_cast(res_dtype, out.dtype, "same_kind"):
        raise TypeError(
            f"out has dtype {out.dtype}; the result's dtype {res_dtype} cannot be cast to it"
        )
    nthreads = get_num_threads()
    if ref[0] != "r" or size < _SMALL or len(shape) == 0:
        res = _expr.evaluate_numpy(a.tree, values, log)
        log.step("cast")
        if out is None:
            # a bare name is the caller's own array: a new one, as numexpr returns
            return res.copy() if any(res is v for v in arrays) else res
        np.copyto(out, res, casting="same_kind")
        return out
    if out is not None and any(np.may_share_memory(out, v) for v in arrays):
        # reading and writing one buffer block by block is only safe elementwise-aligned
        if not all(
            v.shape == out.shape
            and v.strides == out.strides
            and v.__array_interface__["data"][0] == out.__array_interface__["data"][0]
            for v in arrays
            if np.may_share_memory(out, v)
        ):
            res = _evaluate(EvalArgs(a.expr, a.tree, values, None), log)
            log.step("cast")
            np.copyto(out, res, casting="same_kind")
            return out
    flat = all((v.shape == shape and v.flags.c_contiguous) or v.size == 1 for v in arrays) and (
        out is None or out.flags.c_contiguous
    )
    if flat:
        views = {
            k: (v.reshape(-1) if v.shape == shape else v.reshape(()))
            if isinstance(v, np.ndarray)
            else v
            for k, v in values.items()
        }
        dest = np.empty(size, dtype=res_dtype) if out is None else out.reshape(-1)
        block = _BLOCK
        n = size
    else:
        views = {
            k: np.broadcast_to(v, shape) if isinstance(v, np.ndarray) else v
            for k, v in values.items()
        }
        dest = np.empty(shape, dtype=res_dtype) if out is None else out
        rowsize = max(1, size // shape[0])
        block = max(1, _BLOCK // rowsize)
        n = shape[0]
    if flat:
        log.step("cast")  # the program's constants, converted to their steps' dtypes
        prog = _vm_program(steps, views, probe)
        if prog is not None:
            vm_steps, inputs, consts, nregs, result = prog
            direct = (
                out is not None
                and out.dtype == res_dtype
                and out.dtype.isnative
                and out.flags.aligned
            )
            target = dest if (out is None or direct) else np.empty(size, dtype=res_dtype)
            _fastprof._evaluate_program(vm_steps, inputs, consts, nregs, result, target)
            if out is not None:
                if not direct:
                    np.copyto(out, target.reshape(shape), casting="same_kind")
                return out
            return target.reshape(shape)
    nblocks = -(-n // block)
    ntasks = min(nthreads, nblocks)
    if ntasks <= 1:
        _run_blocks_inner(steps, views, dest, 0, n, block, flat, log)
    else:
        per = -(-nblocks // ntasks)
        futures = []
        pool = _executor(nthreads)
        for t in range(ntasks):
            lo, hi = t * per * block, min(n, (t + 1) * per * block)
            if lo < hi:
                futures.append(
                    pool.submit(_run_blocks, steps, views, dest, lo, hi, block, flat, log)
                )
        for f in futures:
            f.result()
    if out is not None:
        return out
    return dest.reshape(shape)
