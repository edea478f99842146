"""The expression language of ``fastprof.kernels.evaluate``, parsed once into a small tree.

``parse(expr)`` checks an expression string against the language and returns its tree of
:class:`Node`; the CPU evaluator and the CUDA code generator both walk that tree.

The language (NumPy semantics and broadcasting for each):

- operands: names (arrays or scalars taken from ``local_dict`` or the caller's frame),
  int / float / bool literals;
- binary operators ``+ - * / **``, comparisons ``< <= > >= == !=``, ``&  |`` (bitwise,
  logical on booleans); unary ``-``, ``+`` and ``~``;
- the functions in :data:`FUNCTIONS` (``where(c, a, b)``, ``abs``, ``sqrt``, ``exp`` ...).
"""

from __future__ import annotations

import ast
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
    "BitAnd": ("&", np.bitwise_and),
    "BitOr": ("|", np.bitwise_or),
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
    "floor": (1, np.floor),
    "ceil": (1, np.ceil),
    "minimum": (2, np.minimum),
    "maximum": (2, np.maximum),
}


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


def _bad(expr: str, what: str) -> ValueError:
    return ValueError(f"expr {expr!r}: {what}")


def _convert(node: ast.AST, expr: str) -> Node:
    """The Node for one AST node; raises ValueError for anything outside the language."""
    if isinstance(node, ast.Expression):
        return _convert(node.body, expr)
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise _bad(expr, f"{node.id!r} is a function and must be called")
        return Node("name", value=node.id)
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or isinstance(v, (int, float)):
            return Node("const", value=v)
        raise _bad(expr, f"unsupported literal {v!r} (only int, float and bool)")
    if isinstance(node, ast.BinOp):
        name = type(node.op).__name__
        if name not in BINARY_OPS:
            raise _bad(expr, f"unsupported operator {name}")
        return Node("binary", op=BINARY_OPS[name][0],
                    args=(_convert(node.left, expr), _convert(node.right, expr)))
    if isinstance(node, ast.UnaryOp):
        name = type(node.op).__name__
        if name not in UNARY_OPS:
            raise _bad(expr, "'not' is not supported; use ~")
        inner = _convert(node.operand, expr)
        if inner.kind == "const" and name == "USub" and not isinstance(inner.value, bool):
            return Node("const", value=-inner.value)  # a negative literal, as Python reads it
        return Node("unary", op=UNARY_OPS[name][0], args=(_convert(node.operand, expr),))
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1:
            raise _bad(expr, "chained comparisons are not supported; use (a < b) & (b < c)")
        name = type(node.ops[0]).__name__
        if name not in COMPARE_OPS:
            raise _bad(expr, f"unsupported comparison {name}")
        return Node("binary", op=COMPARE_OPS[name][0],
                    args=(_convert(node.left, expr), _convert(node.comparators[0], expr)))
    if isinstance(node, ast.BoolOp):
        raise _bad(expr, "'and'/'or' are not supported; use & and |")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise _bad(expr, "only plain function names can be called")
        fname = node.func.id
        if fname not in FUNCTIONS:
            raise _bad(expr, f"unknown function {fname!r}; known: {', '.join(sorted(FUNCTIONS))}")
        if node.keywords:
            raise _bad(expr, f"{fname}() takes no keyword arguments")
        nargs = FUNCTIONS[fname][0]
        if len(node.args) != nargs:
            raise _bad(expr, f"{fname}() takes {nargs} argument(s), got {len(node.args)}")
        return Node("call", op=fname, args=tuple(_convert(a, expr) for a in node.args))
    raise _bad(expr, f"unsupported syntax {type(node).__name__}")


def parse(expr: str) -> Node:
    """The tree of ``expr``; raises TypeError for a non-string and ValueError naming the problem
    for a syntax error or anything outside the language."""
    if not isinstance(expr, str):
        raise TypeError(f"expr must be a str, got {type(expr).__name__}")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise _bad(expr, f"syntax error: {exc.msg}") from None
    return _convert(tree, expr)


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
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "**": lambda a, b: a ** b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def fold_constant(op: str, args: List[Any]) -> Any:
    """An operator applied to Python literals, as Python computes it (the value NumPy then sees
    as a weakly typed scalar)."""
    if len(args) == 1:
        return {"-": lambda a: -a, "+": lambda a: +a, "~": lambda a: ~a}[op](args[0])
    return _PY_OPS[op](*args)


def evaluate_numpy(tree: Node, values: Dict[str, Any]) -> Any:
    """The tree's value computed by plain NumPy calls, one temporary per operation (the
    reference semantics: ``x ** y`` is NumPy's ``x ** y``)."""
    if tree.kind == "name":
        return values[tree.value]
    if tree.kind == "const":
        return tree.value
    args = [evaluate_numpy(a, values) for a in tree.args]
    if tree.kind != "call" and all(a.kind == "const" for a in tree.args):
        return fold_constant(tree.op, args)
    if tree.kind == "binary" and tree.op == "**":
        a = args[0]
        return (a if isinstance(a, np.ndarray) else np.asarray(a)) ** args[1]
    return numpy_function(tree)(*args)
