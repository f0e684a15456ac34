"""kxform's own expression language: safe arithmetic and logic over named values.

Two grammars share one evaluator. Size expressions (`ceil_div(N, 16)`, `M*K`: harness
specs) are arithmetic only. Logic expressions (`parse_logic`: the constraints of a
pass's parameter space and of recorded tuning spaces, e.g.
`block_x * block_y <= hw.max_threads_per_block`, `32 <= bx * by <= 1024 and TILE % 4 == 0`)
add comparisons (chained too), `and`/`or`/`not`, conditional expressions and dotted
names (`hw.l2_bytes`, bound in the environment under the dotted name).

Specs and proposals are data, not code: an expression is parsed with `ast` and only a
whitelist of node types is admitted, then compiled to a tree of closures (never `eval`),
so evaluating it many times (once per size, once per candidate configuration) is cheap
and can never run arbitrary Python. Integer `/` is floor division because launch
dimensions and element counts must stay integers. Every failure raises `SpecError`
quoting the expression; callers add the field name and the file location.
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


Value = int | float | bool | str
Compiled = Callable[[Mapping[str, Value]], Value]

COMPARE_OPS: dict[type[ast.cmpop], Callable[[Value, Value], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _is_pow2(a: Number) -> Number:
    _need_ints("is_pow2", a)
    return int(a > 0 and (int(a) & (int(a) - 1)) == 0)


LOGIC_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    **FUNCTIONS,
    "is_pow2": (_is_pow2, 1, 1),
}


@dataclass(frozen=True)
class Expr:
    """A parsed, validated expression, compiled once; cheap to evaluate many times."""

    text: str
    variables: frozenset[str]
    """Every name it reads; dotted names (`hw.l2_bytes`) appear whole."""
    tree: ast.Expression = field(compare=False, repr=False)
    logic: bool = False
    """Parsed with the logic grammar (comparisons, and/or/not, dotted names)."""
    compiled: Compiled | None = field(default=None, compare=False, repr=False)

    def evaluate(self, env: Mapping[str, Value]) -> Value:
        """Value of the expression with `env` binding its variables."""
        fn = self.compiled or _compile(self.tree.body, self.logic)
        try:
            return _check_range(fn(env))
        except ZeroDivisionError:
            raise SpecError(f"expression '{self.text}': division by zero") from None
        except OverflowError:
            raise SpecError(f"expression '{self.text}': overflow") from None
        except _EvalError as err:
            raise SpecError(f"expression '{self.text}': {err}") from None
        except TypeError:  # a name in arithmetic (`layout + 1`, layout an enum): no meaning
            raise SpecError(
                f"expression '{self.text}': a name (an enum's value) in arithmetic or an ordering"
            ) from None

    def evaluate_int(self, env: Mapping[str, Value]) -> int:
        """Value that must be an integer (counts, dimensions): floats are refused."""
        value = self.evaluate(env)
        if not isinstance(value, int) or isinstance(value, bool):
            raise SpecError(f"expression '{self.text}' gives {value!r}, expected an integer")
        return value

    def holds(self, env: Mapping[str, Value]) -> bool:
        """Truth of a logic expression (a constraint) under `env`."""
        return bool(self.evaluate(env))

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[Callable[..., Expr], tuple[str, bool]]:
        """Pickled as its text (the compiled closure cannot be): another process, a
        tuning worker, parses it again, to the same expression."""
        return _parse, (self.text, self.logic)


def parse_expr(source: str | int | float) -> Expr:
    """Parse and validate an arithmetic expression; a TOML number is a constant expression."""
    return _parse(source, logic=False)


def parse_logic(source: str | int | float | bool) -> Expr:
    """Parse and validate a logic expression (a constraint): arithmetic plus comparisons,
    `and`/`or`/`not`, `True`/`False`, `is_pow2()`, dotted names such as `hw.l2_bytes`, and
    quoted names compared with `==`/`!=` (an enum parameter's value: `layout == "contiguous"`)."""
    return _parse(source, logic=True)


def _parse(source: str | int | float | bool, logic: bool) -> Expr:
    if isinstance(source, bool) and logic:
        source = repr(source)
    if isinstance(source, bool) or not isinstance(source, (str, int, float)):
        raise SpecError(f"expression {source!r}: expected a string or a number")
    text = source.strip() if isinstance(source, str) else repr(source)
    if not text:
        raise SpecError("expression '': empty")
    if len(text) > MAX_TEXT:
        raise SpecError(f"expression '{text[:40]}...': longer than {MAX_TEXT} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as err:
        raise SpecError(f"expression '{text}': syntax error ({getattr(err, 'msg', err)})") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise SpecError(f"expression '{text}': more than {MAX_NODES} syntax nodes")
    for node in nodes:
        reason = _disallowed(node, logic)
        if reason:
            raise SpecError(f"expression '{text}': {reason}")
    if logic:
        _check_names_compared(nodes, text)
    functions = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    names = frozenset(n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in functions and id(n) not in inner)
    names |= frozenset(_dotted(n) for n in nodes if isinstance(n, ast.Attribute) and id(n) not in inner)
    return Expr(text=text, variables=names, tree=tree, logic=logic, compiled=_compile(tree.body, logic))


def _check_names_compared(nodes: list[ast.AST], text: str) -> None:
    """A quoted name (an enum parameter's value: `layout == "contiguous"`) may only be an
    operand of `==` or `!=`: arithmetic or ordering on it has no meaning."""
    compared: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            compared.update(id(operand) for operand in (node.left, *node.comparators))
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in compared:
            raise SpecError(f"expression '{text}': the name {node.value!r} may only be compared with == or !=")


def evaluate(source: str | int | float, env: Mapping[str, Number]) -> Number:
    """Parse and evaluate in one step (for one-off use; prefer `parse_expr` once)."""
    value = parse_expr(source).evaluate(env)
    assert not isinstance(value, bool)
    return value


_ARITH_NODES = (
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
_LOGIC_NODES = (
    *_ARITH_NODES,
    ast.Compare,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.Not,
    ast.Attribute,
    ast.IfExp,
    *COMPARE_OPS,
)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise _EvalError("only names may be dotted")


def _disallowed(node: ast.AST, logic: bool) -> str | None:
    """Why `node` may not appear in an expression, or None when it may."""
    allowed_nodes = _LOGIC_NODES if logic else _ARITH_NODES
    functions = LOGIC_FUNCTIONS if logic else FUNCTIONS
    if not isinstance(node, allowed_nodes):
        allowed = f"+ - * / // % **, numbers, names and {', '.join(functions)}"
        if logic:
            allowed += ", comparisons, and/or/not, conditional expressions (a if c else b), dotted names"
        return f"'{type(node).__name__}' is not allowed (only {allowed})"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return None if logic else f"literal {node.value!r} is not a number"
        if isinstance(node.value, str) and logic:
            return None  # a name of an enum's domain; _parse admits it only beside == or !=
        if not isinstance(node.value, (int, float)):
            return f"literal {node.value!r} is not a number"
    if isinstance(node, ast.Attribute) and (
        not isinstance(node.value, (ast.Name, ast.Attribute)) or node.attr.startswith("_")
    ):
        return "only names may be dotted, with public field names (hw.l2_bytes)"
    if isinstance(node, ast.Call):
        return _bad_call(node, functions)
    return None


def _bad_call(node: ast.Call, functions: Mapping[str, tuple[Callable[..., Number], int, int]]) -> str | None:
    if not isinstance(node.func, ast.Name) or node.func.id not in functions:
        shown = ast.unparse(node.func)
        return f"unknown function '{shown}' (expected one of {', '.join(functions)})"
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return f"{node.func.id}() takes positional arguments only"
    _, low, high = functions[node.func.id]
    if not low <= len(node.args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        return f"{node.func.id}() takes {want} arguments, got {len(node.args)}"
    return None


def _lookup(name: str) -> Compiled:
    def get(env: Mapping[str, Value]) -> Value:
        try:
            return env[name]
        except KeyError:
            known = ", ".join(sorted(k for k in env if "." not in k)) or "none"
            raise _EvalError(f"unknown variable '{name}' (defined: {known})") from None

    return get


def _compile(node: ast.AST, logic: bool) -> Compiled:
    """A closure computing `node` (validated by `_parse`) from an environment."""
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda env: value
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _lookup(_dotted(node))
    if isinstance(node, ast.BinOp):
        left, right, op = _compile(node.left, logic), _compile(node.right, logic), BINARY_OPS[type(node.op)]
        return lambda env: op(_check_range(left(env)), _check_range(right(env)))
    if isinstance(node, ast.UnaryOp):
        operand = _compile(node.operand, logic)
        if isinstance(node.op, ast.Not):
            return lambda env: not operand(env)
        unary = UNARY_OPS[type(node.op)]
        return lambda env: unary(operand(env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        impl = (LOGIC_FUNCTIONS if logic else FUNCTIONS)[node.func.id][0]
        args = [_compile(a, logic) for a in node.args]
        return lambda env: impl(*(_check_range(a(env)) for a in args))
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, logic) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda env: all(p(env) for p in parts)
        return lambda env: any(p(env) for p in parts)
    if isinstance(node, ast.Compare):
        return _compile_compare(node, logic)
    if isinstance(node, ast.IfExp):
        test, body, orelse = (_compile(n, logic) for n in (node.test, node.body, node.orelse))
        return lambda env: body(env) if test(env) else orelse(env)
    raise _EvalError(f"cannot evaluate '{type(node).__name__}'")  # unreachable after parse


def _compile_compare(node: ast.Compare, logic: bool) -> Compiled:
    first = _compile(node.left, logic)
    rest = [(COMPARE_OPS[type(op)], _compile(c, logic)) for op, c in zip(node.ops, node.comparators)]

    def compare(env: Mapping[str, Value]) -> bool:
        left = first(env)
        for op, get in rest:
            right = get(env)
            if not op(left, right):
                return False
            left = right
        return True

    return compare


def _check_range(value: Value) -> Value:
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise _EvalError("integer value too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise _EvalError("result is not finite")
    return value
