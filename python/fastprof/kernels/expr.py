"""The expression language of ``fastprof.kernels.evaluate``, parsed once into a small tree
and typed once into the tree both devices compile.

``parse(expr)`` checks an expression string against the language and returns its tree of
:class:`Node` (``parse_cached`` keeps the trees of recent strings); ``typed(tree, probe)``
gives each operation NumPy's result dtype and the input dtypes of NumPy's loop for it
(:class:`Typed`).  The CPU compiler (fastprof.kernels) and the CUDA generator
(fastprof.kernels.expr_cuda) both walk that typed tree; the opcode numbers of the compiled CPU
program come from the extension's one table (:func:`opcodes`).

The language (NumPy semantics and broadcasting for each):

- operands: names (arrays or scalars taken from ``local_dict`` or the caller's frame),
  int / float / bool literals;
- binary operators ``+ - * / // % **``, comparisons ``< <= > >= == !=``, ``& | ^``
  (bitwise, logical on booleans); unary ``-``, ``+`` and ``~``;
- the functions in :data:`FUNCTIONS` (``where(c, a, b)``, ``abs``, ``sqrt``, ``exp`` ...);
- ``sum(e)`` / ``prod(e)``, optionally with ``axis=k``, as the outermost operation only
  (:data:`REDUCTIONS`).

Operators and functions are NumPy's ufuncs, with NumPy's promotion (NEP 50: Python scalars are
weak). A subexpression made only of literals is folded once at parse time as Python computes
it (``x + 2 ** 3`` reads ``x + 8``, as Python's own evaluation would), within bounds: an
integer constant must fit in :data:`MAX_INT_BITS` bits. Expressions are bounded too
(:data:`MAX_LENGTH` characters, :data:`MAX_DEPTH` levels of nesting); whatever breaks a bound
or the language raises ValueError naming the expression (and the token's column).
"""

from __future__ import annotations

import ast
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

#: Binary operators: the AST class name -> (symbol, NumPy function).
BINARY_OPS: Dict[str, Tuple[str, Callable[..., Any]]] = {
    "Add": ("+", np.add),
    "Sub": ("-", np.subtract),
    "Mult": ("*", np.multiply),
    "Div": ("/", np.true_divide),
    "Pow": ("**", np.power),
    "FloorDiv": ("//", np.floor_divide),
    "Mod": ("%", np.remainder),
    "BitAnd": ("&", np.bitwise_and),
    "BitOr": ("|", np.bitwise_or),
    "BitXor": ("^", np.bitwise_xor),
}

#: Comparison operators: AST class name -> (symbol, NumPy function).
COMPARE_OPS: Dict[str, Tuple[str, Callable[..., Any]]] = {
    "Lt": ("<", np.less),
    "LtE": ("<=", np.less_equal),
    "Gt": (">", np.greater),
    "GtE": (">=", np.greater_equal),
    "Eq": ("==", np.equal),
    "NotEq": ("!=", np.not_equal),
}

#: Unary operators: AST class name -> (symbol, NumPy function).
UNARY_OPS: Dict[str, Tuple[str, Callable[..., Any]]] = {
    "USub": ("-", np.negative),
    "UAdd": ("+", np.positive),
    "Invert": ("~", np.invert),
}

#: Functions: name -> (number of arguments, NumPy function).
FUNCTIONS: Dict[str, Tuple[int, Callable[..., Any]]] = {
    "where": (3, np.where),
    "abs": (1, np.absolute),
    "absolute": (1, np.absolute),
    "sqrt": (1, np.sqrt),
    "exp": (1, np.exp),
    "log": (1, np.log),
    "log10": (1, np.log10),
    "log2": (1, np.log2),
    "log1p": (1, np.log1p),
    "expm1": (1, np.expm1),
    "sin": (1, np.sin),
    "cos": (1, np.cos),
    "tan": (1, np.tan),
    "arcsin": (1, np.arcsin),
    "arccos": (1, np.arccos),
    "arctan": (1, np.arctan),
    "arctan2": (2, np.arctan2),
    "sinh": (1, np.sinh),
    "cosh": (1, np.cosh),
    "tanh": (1, np.tanh),
    "arcsinh": (1, np.arcsinh),
    "arccosh": (1, np.arccosh),
    "arctanh": (1, np.arctanh),
    "floor": (1, np.floor),
    "ceil": (1, np.ceil),
    "power": (2, np.power),
    "fmod": (2, np.fmod),
    "hypot": (2, np.hypot),
    "minimum": (2, np.minimum),
    "maximum": (2, np.maximum),
    "min": (2, np.minimum),
    "max": (2, np.maximum),
}

#: Reductions, allowed only as the outermost call: name -> the ufunc whose ``reduce`` it is.
#: ``sum(e)`` / ``prod(e)`` reduce the whole array, ``sum(e, axis=k)`` (or ``sum(e, k)``) one
#: axis, with NumPy's result dtype (e.g. an int8 sum is int64).
REDUCTIONS: Dict[str, Any] = {"sum": np.add, "prod": np.multiply}


#: The longest expression accepted, in characters.
MAX_LENGTH = 20_000
#: The deepest nesting accepted (operators, calls and parentheses, counted from the top).
MAX_DEPTH = 200
#: The widest integer constant, literal or folded: wider ones cannot meet an array (int64,
#: uint64 and float64 all hold less), and computing them costs without bound.
MAX_INT_BITS = 1024


@dataclass(frozen=True)
class Node:
    """One node of an expression tree.

    kind is "name" (value: the name), "const" (value: a Python int/float/bool), "unary"
    (op: "-", "+" or "~"), "binary" (op: an operator symbol, comparisons included) or
    "call" (op: a name in FUNCTIONS); args holds the operands in order.
    """

    kind: str
    op: str = ""
    value: Any = None
    args: Tuple["Node", ...] = field(default_factory=tuple)


def _shown(expr: str) -> str:
    """expr as error messages quote it: cut to its first 60 characters when longer."""
    return repr(expr) if len(expr) <= 80 else repr(expr[:60]) + f"... ({len(expr)} characters)"


def _bad(expr: str, what: str) -> ValueError:
    return ValueError(f"expr {_shown(expr)}: {what}")


def _at(node: ast.AST) -> str:
    """Where node starts in the expression, for error messages ("" when unknown)."""
    col = getattr(node, "col_offset", None)
    return "" if col is None else f" at column {col + 1}"


def _convert(node: ast.AST, expr: str, top: bool = False) -> Node:
    """The Node for one AST node; raises ValueError naming the token and its column for
    anything outside the language.  top: whether node is the whole expression (the only
    place a reduction may stand)."""
    if isinstance(node, ast.Expression):
        return _convert(node.body, expr, top)
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS or node.id in REDUCTIONS:
            raise _bad(expr, f"{node.id!r}{_at(node)} is a function and must be called")
        return Node("name", value=node.id)
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or isinstance(v, (int, float)):
            return Node("const", value=_checked_constant(v, expr))
        raise _bad(expr, f"unsupported literal {v!r}{_at(node)} (only int, float and bool)")
    if isinstance(node, ast.BinOp):
        name = type(node.op).__name__
        if name not in BINARY_OPS:
            raise _bad(expr, f"unsupported operator {name}{_at(node)}")
        return _operation(
            BINARY_OPS[name][0], _convert(node.left, expr), _convert(node.right, expr), expr=expr
        )
    if isinstance(node, ast.UnaryOp):
        name = type(node.op).__name__
        if name not in UNARY_OPS:
            raise _bad(expr, f"'not'{_at(node)} is not supported; use ~")
        return _operation(UNARY_OPS[name][0], _convert(node.operand, expr), expr=expr)
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1:
            raise _bad(
                expr, f"chained comparisons{_at(node)} are not supported; use (a < b) & (b < c)"
            )
        name = type(node.ops[0]).__name__
        if name not in COMPARE_OPS:
            raise _bad(expr, f"unsupported comparison {name}{_at(node)}")
        return _operation(
            COMPARE_OPS[name][0],
            _convert(node.left, expr),
            _convert(node.comparators[0], expr),
            expr=expr,
        )
    if isinstance(node, ast.BoolOp):
        raise _bad(expr, f"'and'/'or'{_at(node)} are not supported; use & and |")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise _bad(expr, f"only plain function names can be called{_at(node)}")
        fname = node.func.id
        if fname in REDUCTIONS:
            return _reduction(node, expr, top)
        if fname not in FUNCTIONS:
            raise _bad(
                expr,
                f"unknown function {fname!r}{_at(node)}; known:"
                f" {', '.join(sorted(FUNCTIONS) + sorted(REDUCTIONS))}",
            )
        if node.keywords:
            raise _bad(expr, f"{fname}(){_at(node)} takes no keyword arguments")
        nargs = FUNCTIONS[fname][0]
        if len(node.args) != nargs:
            raise _bad(
                expr, f"{fname}(){_at(node)} takes {nargs} argument(s), got {len(node.args)}"
            )
        return Node("call", op=fname, args=tuple(_convert(a, expr) for a in node.args))
    raise _bad(expr, f"unsupported syntax {type(node).__name__}{_at(node)}")


def _reduction(node: ast.Call, expr: str, top: bool) -> Node:
    """The reduce Node of sum(e) / sum(e, axis=k) / sum(e, k) (prod alike); ValueError naming
    the call for one that is not the whole expression or has other arguments."""
    fname = node.func.id  # type: ignore[attr-defined]
    if not top:
        raise _bad(
            expr,
            f"{fname}(){_at(node)} must be the outermost operation (a reduction cannot be an"
            " operand)",
        )
    axis_nodes = list(node.args[1:])
    for kw in node.keywords:
        if kw.arg != "axis":
            raise _bad(expr, f"{fname}(){_at(node)} takes only the keyword axis, got {kw.arg!r}")
        axis_nodes.append(kw.value)
    if len(node.args) < 1 or len(axis_nodes) > 1:
        raise _bad(expr, f"{fname}(){_at(node)} takes an expression and at most one axis")
    axis = None
    if axis_nodes:
        a = axis_nodes[0]
        if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub):
            a, sign = a.operand, -1
        else:
            sign = 1
        if (
            not isinstance(a, ast.Constant)
            or isinstance(a.value, bool)
            or not isinstance(a.value, int)
        ):
            raise _bad(expr, f"the axis of {fname}(){_at(node)} must be an integer literal")
        axis = sign * a.value
    inner = _convert(node.args[0], expr)
    return Node("reduce", op=fname, value=axis, args=(inner,))


def _depth(tree: ast.AST, limit: int) -> int:
    """The nesting depth of an AST (a leaf is 1), measured without recursion and no further
    than limit + 1."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            break
        stack.extend(
            (child, d + 1)
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.expr_context)
        )
    return deepest


def _paren_depth(expr: str) -> int:
    """The deepest nesting of brackets in the text."""
    deepest = level = 0
    for ch in expr:
        if ch in "([{":
            level += 1
            deepest = max(deepest, level)
        elif ch in ")]}":
            level -= 1
    return deepest


def parse_ast(expr: str) -> ast.Expression:
    """The Python AST of ``expr`` within the bounds (MAX_LENGTH characters, MAX_DEPTH levels),
    checked before and after CPython's parser so that neither it nor a walk of the tree can
    overflow a stack; raises TypeError for a non-string, ValueError naming the problem
    otherwise (syntax errors, parser-stack overflow, RecursionError and integer-string limits
    included)."""
    if not isinstance(expr, str):
        raise TypeError(f"expr must be a str, got {type(expr).__name__}")
    if len(expr) > MAX_LENGTH:
        raise _bad(expr, f"too long ({len(expr)} characters; at most {MAX_LENGTH})")
    if _paren_depth(expr) > MAX_DEPTH:
        raise _bad(expr, f"nested too deeply (more than {MAX_DEPTH} levels of brackets)")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:  # integer literals over sys.get_int_max_str_digits() too
        raise _bad(expr, f"syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):
        # CPython's parser stack or AST construction gave up: nesting far beyond MAX_DEPTH
        raise _bad(expr, f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # e.g. a null byte
        raise _bad(expr, str(exc)) from None
    if _depth(tree.body, MAX_DEPTH) > MAX_DEPTH:
        raise _bad(expr, f"nested too deeply (more than {MAX_DEPTH} levels of operators)")
    return tree


def parse(expr: str) -> Node:
    """The tree of ``expr``, literal-only subexpressions folded; raises TypeError for a
    non-string and ValueError naming the problem for a syntax error, anything outside the
    language, an expression beyond MAX_LENGTH or MAX_DEPTH, or a constant out of bounds."""
    tree = parse_ast(expr)
    try:
        return _convert(tree, expr, top=True)
    except RecursionError:  # the caller was already deep in recursion
        raise _bad(expr, "nested too deeply for the remaining recursion depth") from None


_TREES: "OrderedDict[str, Node]" = OrderedDict()
_TREES_MAX = 512
_TREES_LOCK = threading.Lock()


def parse_cached(expr: str) -> Node:
    """parse(expr), computed once per string (an LRU cache of _TREES_MAX expressions) for both
    devices; raises as parse does."""
    if not isinstance(expr, str):
        raise TypeError(f"expr must be a str, got {type(expr).__name__}")
    with _TREES_LOCK:
        tree = _TREES.get(expr)
        if tree is not None:
            _TREES.move_to_end(expr)
            return tree
    tree = parse(expr)
    with _TREES_LOCK:
        _TREES[expr] = tree
        if len(_TREES) > _TREES_MAX:
            _TREES.popitem(last=False)
    return tree


def names(tree: Node) -> List[str]:
    """The distinct names the tree reads, in order of first appearance."""
    seen: List[str] = []

    def walk(n: Node) -> None:
        if n.kind == "name":
            if n.value not in seen:
                seen.append(n.value)
        for a in n.args:
            walk(a)

    walk(tree)
    return seen


_BY_SYMBOL: Dict[str, Callable[..., Any]] = {s: f for s, f in BINARY_OPS.values()}
_BY_SYMBOL.update({s: f for s, f in COMPARE_OPS.values()})
_UNARY_BY_SYMBOL: Dict[str, Callable[..., Any]] = {s: f for s, f in UNARY_OPS.values()}


def numpy_function(node: Node) -> Callable[..., Any]:
    """The NumPy function that computes an operator or call node."""
    if node.kind == "binary":
        return _BY_SYMBOL[node.op]
    if node.kind == "unary":
        return _UNARY_BY_SYMBOL[node.op]
    if node.kind == "call":
        return FUNCTIONS[node.op][1]
    raise ValueError(f"node of kind {node.kind!r} is not an operation")


_PY_OPS: Dict[str, Callable[..., Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_PY_UNARY: Dict[str, Callable[..., Any]] = {
    "-": operator.neg,
    "+": operator.pos,
    "~": operator.invert,
}


def _checked_constant(v: Any, expr: str, where: str = "") -> Any:
    """v when it is a bool, an int of at most MAX_INT_BITS bits or a float; ValueError
    naming expr otherwise.  where: "" for literals, else what computed v from Python
    scalars (a complex value of those is a TypeError, as a complex operand is)."""
    if isinstance(v, bool) or isinstance(v, float):
        return v
    what = f"an integer value of {where}" if where else "an integer constant"
    if isinstance(v, int):
        if v.bit_length() > MAX_INT_BITS:
            raise _bad(
                expr, f"{what} has {v.bit_length()} bits; at most {MAX_INT_BITS} are allowed"
            )
        return v
    if isinstance(v, complex) and where:
        raise TypeError(f"expr {_shown(expr)}: {where} has a complex value")
    raise _bad(expr, f"{where or 'a constant subexpression'} has a {type(v).__name__} value")


def _fold(op: str, args: List[Any], expr: str, where: str) -> Any:
    """op of Python scalars args, by Python's operator, checked by _checked_constant (where:
    "" for literals, else what computes it, for messages); a power
    wider than MAX_INT_BITS is refused (ValueError) before it is computed.  Python's
    ZeroDivisionError and OverflowError pass through."""
    try:
        if len(args) == 1:
            return _checked_constant(_PY_UNARY[op](args[0]), expr, where)
        a, b = args
        if (
            op == "**"
            and isinstance(a, int)
            and isinstance(b, int)
            and b > 0
            and abs(a) > 1
            and (abs(a).bit_length() - 1) * b > MAX_INT_BITS
        ):
            raise _bad(
                expr,
                f"a power in {where} is larger than {MAX_INT_BITS} bits"
                if where
                else f"a constant power is larger than {MAX_INT_BITS} bits",
            )
        return _checked_constant(_PY_OPS[op](a, b), expr, where)
    except TypeError as exc:
        if str(exc).startswith("expr "):
            raise
        raise TypeError(f"expr {_shown(expr)}: {exc}") from None


def fold_constant(op: str, args: List[Any], expr: str = "") -> Any:
    """An operator applied to Python literals, as Python computes it (the value NumPy then sees
    as a weakly typed scalar).  Integer powers whose result would exceed MAX_INT_BITS are
    refused before they are computed.  Raises ValueError naming expr for a result out of
    bounds, a division by zero or an overflow, TypeError for an operator the operands lack."""
    try:
        return _fold(op, args, expr, "")
    except ZeroDivisionError:
        raise _bad(expr, "division by zero in a constant subexpression") from None
    except OverflowError:
        raise _bad(expr, "a constant subexpression overflows") from None


def _operation(op: str, *args: Node, expr: str) -> Node:
    """The node applying an operator to args: a folded constant when every arg is one."""
    if all(a.kind == "const" for a in args):
        return Node("const", value=fold_constant(op, [a.value for a in args], expr))
    return Node("unary" if len(args) == 1 else "binary", op=op, args=tuple(args))


# --- subexpressions of Python scalars: computed in Python, as NumPy's caller would --------


def is_python_scalar(v: Any) -> bool:
    """Whether v is a Python bool, int or float (not a NumPy scalar: np.float64 subclasses
    float but is strongly typed)."""
    return isinstance(v, (bool, int, float)) and not isinstance(v, np.generic)


def show(n: Node) -> str:
    """The source text of an operator tree of names and literals (binary operations in
    parentheses): the name under which a Python-scalar subexpression is bound."""
    if n.kind == "name":
        return str(n.value)
    if n.kind == "const":
        return repr(n.value)
    if n.kind == "unary":
        return f"{n.op}{show(n.args[0])}"
    if n.kind == "binary":
        return f"({show(n.args[0])} {n.op} {show(n.args[1])})"
    return f"{n.op}({', '.join(show(a) for a in n.args)})"


def scalar_parts(tree: Node, scalars: Any) -> Tuple[Node, Tuple[Tuple[str, Node], ...]]:
    """(tree', parts): tree with each largest operator subtree whose operands are all literals
    or names in the set scalars (names bound to Python scalars) replaced by a name node, and
    the (name, subtree) of each.  The caller binds each name to the subtree's value computed
    by :func:`scalar_value`, so NumPy meets that Python scalar weakly typed, as in the
    equivalent Python code (``x * (1 - a)`` with ``a`` a Python float evaluates ``1 - a`` in
    Python first).  Functions are NumPy's even of scalars (``sqrt(a)`` stays strongly typed)."""
    parts: Dict[str, Node] = {}

    def pure(n: Node) -> bool:
        if n.kind == "const":
            return True
        if n.kind == "name":
            return n.value in scalars
        return n.kind in ("unary", "binary") and all(pure(a) for a in n.args)

    def visit(n: Node) -> Node:
        if n.kind in ("unary", "binary") and pure(n):
            name = show(n)
            parts[name] = n
            return Node("name", value=name)
        if not n.args:
            return n
        args = tuple(visit(a) for a in n.args)
        if all(a is b for a, b in zip(args, n.args)):
            return n
        return Node(n.kind, op=n.op, value=n.value, args=args)

    out = visit(tree)
    return out, tuple(parts.items())


def scalar_value(n: Node, values: Dict[str, Any], expr: str = "") -> Any:
    """The value of an operator tree of literals and Python-scalar names, computed by Python's
    operators (as Python code computes it before NumPy sees it).  Raises ZeroDivisionError or
    OverflowError naming expr where Python raises them, ValueError for an integer wider than
    MAX_INT_BITS (or a power that would be), TypeError for a complex value or an operator the
    operands lack."""
    if n.kind == "const":
        return n.value
    if n.kind == "name":
        return values[n.value]
    args = [scalar_value(a, values, expr) for a in n.args]
    where = f"{show(n)}, a subexpression of Python scalars computed by Python's operators"
    try:
        return _fold(n.op, args, expr, where)
    except ZeroDivisionError:
        raise ZeroDivisionError(
            f"expr {_shown(expr)}: division by zero in {where} (as NumPy's equivalent Python"
            " code raises)"
        ) from None
    except OverflowError:
        raise OverflowError(f"expr {_shown(expr)}: {where} overflows") from None


def evaluate_numpy(tree: Node, values: Dict[str, Any], log: Any = None) -> Any:
    """The tree's value computed by plain NumPy calls, one temporary per operation: every
    operator and function is its NumPy ufunc, ``**`` NumPy's operator (the reference
    semantics).  log: None, or an object whose ``step(name, operands)`` is called before each
    operation runs (fastprof.kernels.fperr.ErrorLog: which ufunc an error came from)."""
    if tree.kind == "name":
        return values[tree.value]
    if tree.kind == "const":
        return tree.value
    if tree.kind == "reduce":
        operand = evaluate_numpy(tree.args[0], values, log)
        if log is not None:
            log.step("reduce")
        return REDUCTIONS[tree.op].reduce(operand, axis=tree.value)
    args = [evaluate_numpy(a, values, log) for a in tree.args]
    func = numpy_function(tree)
    if log is not None:
        log.step(func.__name__, args)
    if tree.kind == "binary" and tree.op == "**":
        return power(*args)
    return func(*args)


def power(a: Any, b: Any) -> Any:
    """NumPy's ``a ** b``: the ndarray operator for an array base (with its fast paths, e.g.
    ``bool_array ** 2`` is ``np.square``, int8), ``np.power`` otherwise (a Python scalar base
    stays weak)."""
    return a**b if isinstance(a, np.ndarray) else np.power(a, b)


# --- the typed tree: what both code generators walk ----------------------------------------


@dataclass(frozen=True)
class Typed:
    """One node of a typed expression tree, NumPy's promotion applied once.

    kind is "name", "const", "op" (op: the NumPy ufunc's name, e.g. "add", "square"),
    "where" or "reduce" (op: "sum" or "prod", value: the axis or None).  dtype is the node's
    result dtype, None for a weak leaf (a Python int/float literal or scalar, NEP 50) whose
    consumer casts it; in_dtypes are the dtypes the operation reads its operands as (NumPy's
    loop for it: where reads its condition as bool, a reduction its operand in the result's
    dtype).  value: the name, the constant, or the reduction's axis.
    """

    kind: str
    op: str = ""
    value: Any = None
    args: Tuple["Typed", ...] = ()
    dtype: Optional[np.dtype] = None
    in_dtypes: Tuple[np.dtype, ...] = ()


def _weak(v: Any) -> bool:
    """Whether NumPy treats v as a weakly typed Python scalar (NEP 50): a Python int or float,
    not a NumPy scalar (np.float64 subclasses float but keeps its dtype)."""
    return isinstance(v, (int, float)) and not isinstance(v, (bool, np.generic))


def _loop_dtypes(ufunc: Any, samples: List[Any], out: np.dtype) -> Tuple[np.dtype, ...]:
    """The input dtypes of the loop NumPy runs for ufunc on samples (out: its result dtype)."""
    spec = (
        tuple(type(v) if _weak(v) else np.asarray(v).dtype for v in samples) + (None,) * ufunc.nout
    )
    try:
        return tuple(np.dtype(d) for d in ufunc.resolve_dtypes(spec)[: ufunc.nin])
    except (TypeError, ValueError, AttributeError):
        # NumPy before 1.24 has no resolve_dtypes: the operands' common dtype (a comparison's
        # loop compares its operands' common type, never its bool result's)
        common = np.result_type(*samples)
        return (out if out != np.dtype(bool) else common,) * len(samples)


def typed(tree: Node, probe: Dict[str, Any]) -> Typed:
    """The typed tree of tree for operands like probe's (zero-size arrays of the operands'
    dtypes and ndim, scalars as they are): each dtype is the one NumPy gives when it runs the
    expression.  Raises what NumPy raises for an operation it has no loop for (TypeError) or
    a Python scalar out of an array's range (OverflowError)."""

    def visit(n: Node) -> Tuple[Typed, Any]:
        if n.kind == "name":
            v = probe[n.value]
            dt = None if _weak(v) else np.asarray(v).dtype
            return Typed("name", value=n.value, dtype=dt), v
        if n.kind == "const":
            v = n.value
            return Typed("const", value=v, dtype=None if _weak(v) else np.asarray(v).dtype), v
        kids, samples = zip(*[visit(a) for a in n.args])
        if n.kind == "reduce":
            ufunc = REDUCTIONS[n.op]
            # the dtype does not depend on the axis, which the caller checks against the shape
            sample = ufunc.reduce(np.asarray(samples[0]).reshape(-1))
            dt = np.asarray(sample).dtype
            return Typed("reduce", n.op, n.value, kids, dt, (dt,)), sample
        if n.kind == "call" and n.op == "where":
            sample = np.where(*samples)
            dt = np.asarray(sample).dtype
            return Typed("where", "where", None, kids, dt, (np.dtype(bool), dt, dt)), sample
        ufunc = numpy_function(n)
        if n.kind == "binary" and n.op == "**":
            sample = power(*samples)  # a Python scalar base stays weak (NEP 50)
            dt = np.asarray(sample).dtype
            base = samples[0]
            if kids[1].kind == "const" and isinstance(base, np.ndarray):
                # the ndarray operator's fast paths: x ** 2 is np.square (bool ** 2 is int8)
                if kids[1].value == 2 and np.square(base).dtype == dt:
                    ufunc, kids, samples = np.square, kids[:1], samples[:1]
                elif kids[1].value == 0.5 and base.dtype.kind == "f" and dt == base.dtype:
                    ufunc, kids, samples = np.sqrt, kids[:1], samples[:1]
        else:
            sample = ufunc(*samples)
            dt = np.asarray(sample).dtype
        loop = _loop_dtypes(ufunc, list(samples), dt)
        return Typed("op", ufunc.__name__, None, tuple(kids), dt, loop), sample

    return visit(tree)[0]


def typed_names(tree: Typed) -> List[str]:
    """The distinct names a typed tree reads, in order of first appearance."""
    seen: List[str] = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if n.kind == "name" and n.value not in seen:
            seen.append(n.value)
        stack.extend(reversed(n.args))
    return seen


_OPCODES: Optional[Dict[str, int]] = None


def opcodes() -> Dict[str, int]:
    """The compiled evaluator's opcode numbers by operation name ({"add": 2, ...}), read once
    from the extension's table (src/kernels/expr_ops.h, the one place they are written)."""
    global _OPCODES
    if _OPCODES is None:
        from .. import _fastprof

        _OPCODES = dict(_fastprof._expr_opcodes())
    return _OPCODES
