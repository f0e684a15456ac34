"""Safe arithmetic expressions over size variables (`ceil_div(N, 16)`, `M*K`).

Specs are data, not code: an expression is parsed with `ast` and only a whitelist of
node types is evaluated, so a spec can never run arbitrary Python. Integer `/` is
floor division because launch dimensions and element counts must stay integers.
Every failure raises `SpecError` quoting the expression; callers add the field name
and the file location.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kxform.errors import SpecError

Number = int | float

MAX_TEXT = 500
"""Longest expression accepted; longer text is almost certainly a mistake."""

MAX_NODES = 200
"""Bound on syntax-tree size so evaluation cost stays trivial."""

MAX_INT = 2**80
"""Bound on integer intermediates: far beyond any real size, small enough to stay fast."""

MAX_EXPONENT = 64


def _ceil_div(a: Number, b: Number) -> Number:
    _need_ints("ceil_div", a, b)
    if b == 0:
        raise ZeroDivisionError
    return -(-int(a) // int(b))


def _round_up(a: Number, b: Number) -> Number:
    return _ceil_div(a, b) * int(b)


def _need_ints(name: str, *values: Number) -> None:
    if not all(isinstance(v, int) for v in values):
        raise _EvalError(f"{name}() takes integer arguments")


FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name: (implementation, min args, max args)
    "ceil_div": (_ceil_div, 2, 2),
    "round_up": (_round_up, 2, 2),
    "min": (min, 2, 16),
    "max": (max, 2, 16),
}


class _EvalError(Exception):
    """Internal: a reason, wrapped into a SpecError naming the expression by the caller."""


def _div(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return a / b


def _pow(a: Number, b: Number) -> Number:
    if isinstance(b, int) and not 0 <= b <= MAX_EXPONENT:
        raise _EvalError(f"exponent {b} out of range 0..{MAX_EXPONENT}")
    base: Number = float(a) if isinstance(a, int) and not isinstance(b, int) else a
    result: object = base**b
    if not isinstance(result, (int, float)):
        raise _EvalError("result is not a real number")
    return result


BINARY_OPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _div,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}

UNARY_OPS: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


@dataclass(frozen=True)
class Expr:
    """A parsed, validated expression; cheap to evaluate many times (once per size)."""

    text: str
    variables: frozenset[str]
    tree: ast.Expression = field(compare=False, repr=False)

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        """Value of the expression with `env` binding the size variables."""
        try:
            return _check_range(_eval_node(self.tree.body, env))
        except ZeroDivisionError:
            raise SpecError(f"expression '{self.text}': division by zero") from None
        except OverflowError:
            raise SpecError(f"expression '{self.text}': overflow") from None
        except _EvalError as err:
            raise SpecError(f"expression '{self.text}': {err}") from None

    def evaluate_int(self, env: Mapping[str, Number]) -> int:
        """Value that must be an integer (counts, dimensions): floats are refused."""
        value = self.evaluate(env)
        if not isinstance(value, int):
            raise SpecError(f"expression '{self.text}' gives {value!r}, expected an integer")
        return value

    def __str__(self) -> str:
        return self.text


def parse_expr(source: str | int | float) -> Expr:
    """Parse and validate `source`; a TOML number is accepted as a constant expression."""
    if isinstance(source, bool) or not isinstance(source, (str, int, float)):
        raise SpecError(f"expression {source!r}: expected a string or a number")
    text = source.strip() if isinstance(source, str) else repr(source)
    if not text:
        raise SpecError("expression '': empty")
    if len(text) > MAX_TEXT:
        raise SpecError(f"expression '{text[:40]}...': longer than {MAX_TEXT} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise SpecError(f"expression '{text}': syntax error ({err.msg})") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise SpecError(f"expression '{text}': more than {MAX_NODES} syntax nodes")
    for node in nodes:
        reason = _disallowed(node)
        if reason:
            raise SpecError(f"expression '{text}': {reason}")
    names = frozenset(
        n.id for n in nodes if isinstance(n, ast.Name) and not _is_function_name(n, nodes)
    )
    return Expr(text=text, variables=names, tree=tree)


def evaluate(source: str | int | float, env: Mapping[str, Number]) -> Number:
    """Parse and evaluate in one step (for one-off use; prefer `parse_expr` once)."""
    return parse_expr(source).evaluate(env)


def _is_function_name(name: ast.Name, nodes: list[ast.AST]) -> bool:
    return any(isinstance(n, ast.Call) and n.func is name for n in nodes)


_ALLOWED_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Call,
    ast.Name,
    ast.Constant,
    ast.Load,
    *BINARY_OPS,
    *UNARY_OPS,
)


def _disallowed(node: ast.AST) -> str | None:
    """Why `node` may not appear in an expression, or None when it may."""
    if not isinstance(node, _ALLOWED_NODES):
        allowed = f"+ - * / // % **, numbers, names and {', '.join(FUNCTIONS)}"
        return f"'{type(node).__name__}' is not allowed (only {allowed})"
    if isinstance(node, ast.Constant) and (
        isinstance(node.value, bool) or not isinstance(node.value, (int, float))
    ):
        return f"literal {node.value!r} is not a number"
    if isinstance(node, ast.Call):
        return _bad_call(node)
    return None


def _bad_call(node: ast.Call) -> str | None:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        shown = ast.unparse(node.func)
        return f"unknown function '{shown}' (expected one of {', '.join(FUNCTIONS)})"
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return f"{node.func.id}() takes positional arguments only"
    _, low, high = FUNCTIONS[node.func.id]
    if not low <= len(node.args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        return f"{node.func.id}() takes {want} arguments, got {len(node.args)}"
    return None


def _eval_node(node: ast.AST, env: Mapping[str, Number]) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value  # parse_expr admitted only number literals
    if isinstance(node, ast.Name):
        if node.id not in env:
            known = ", ".join(sorted(env)) or "none"
            raise _EvalError(f"unknown variable '{node.id}' (defined: {known})")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left = _check_range(_eval_node(node.left, env))
        right = _check_range(_eval_node(node.right, env))
        return BINARY_OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return UNARY_OPS[type(node.op)](_eval_node(node.operand, env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        impl = FUNCTIONS[node.func.id][0]
        return impl(*(_check_range(_eval_node(a, env)) for a in node.args))
    raise _EvalError(f"cannot evaluate '{type(node).__name__}'")  # unreachable after parse


def _check_range(value: Number) -> Number:
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise _EvalError("integer value too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise _EvalError("result is not finite")
    return value
