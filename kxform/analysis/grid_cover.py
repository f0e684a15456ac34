"""Whether a rewritten launch still covers what the original launch covered, proven.

A rewrite that changes how much work a block does along a grid axis (a new block size,
rows per block, outputs per thread) must change the grid to match: a grid of
`(n + 255) >> 8` blocks covers `n` items at 256 items per block, and at 128 it leaves
half of them undone. The passes make the grid follow where they can read it; this module
checks the result for every value of the sizes, with the z3 solver.

The extent the original launch covers along an axis is read from its grid, a rounded-up
division by the items per block in one of the spellings real launches use: `ceil_div(E,
B)` (and what kxform.frontend.c_expr reads as it: `ceil((float)E / B)`, `iDivUp`),
`(E + B - 1) / B`, `(E + B - 1) >> log2(B)`, `(E - 1) / B + 1`, `E / B + 1`; a plain
division `E / B` or `E >> log2(B)` covers its quotient times `B`; a grid capped by
`min(G, C)` covers the smaller of G's extent and C blocks, and a conditional `c ? G : H`
(C's ternary, as launchers guard an empty size) covers G's extent where `c` holds and H's
where it does not (a constant branch claims nothing). The claim is then:
for all positive values of the names the grids read (below 2^31), the new grid times the
new items per block is at least that extent. A grid that does not read the items per
block at all (a fixed grid, a grid-stride loop, one block per row) makes no claim; one
that reads it in any other way cannot be followed, and neither can a claim the solver
does not decide: both are refusals, as is a counter-example, which names the sizes.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kxform.analysis.solver import context, proof_context
from kxform.frontend.c_expr import logic_text

TIMEOUT_MS = 5000
LIMIT = 2**31 - 1
"""Sizes are positive ints: the claim is over 1 <= value <= LIMIT."""

Verdict = Literal["proven", "refuted", "unknown", "independent"]


@dataclass(frozen=True)
class Cover:
    """The verdict of one axis: `detail` says why (the counter-example when refuted)."""

    verdict: Verdict
    detail: str


class _Unreadable(Exception):
    """An expression the translation does not handle (the reason is the message)."""


def prove_cover(
    old_grid: str,
    old_items: int,
    new_grid: str,
    new_items: int,
    old_env: Mapping[str, int] | None = None,
    new_env: Mapping[str, int] | None = None,
) -> Cover:
    """Whether `new_grid` blocks of `new_items` cover what `old_grid` blocks of `old_items`
    covered, for every value of the free names (`*_env` bind constants of each version).
    The proof's terms live in a z3 context of its own (kxform.analysis.solver)."""
    with proof_context():
        return _prove_cover(old_grid, old_items, new_grid, new_items, old_env, new_env)


def _prove_cover(
    old_grid: str,
    old_items: int,
    new_grid: str,
    new_items: int,
    old_env: Mapping[str, int] | None = None,
    new_env: Mapping[str, int] | None = None,
) -> Cover:
    """Whether `new_grid` blocks of `new_items` cover what `old_grid` blocks of `old_items`
    covered, for every value of the free names (`*_env` bind constants of each version)."""
    import z3

    old_env, new_env = dict(old_env or {}), dict(new_env or {})
    try:
        old_tree = _parse(old_grid)
        new_tree = _parse(new_grid)
    except _Unreadable as exc:
        return _unreadable(old_grid, old_items, old_env, str(exc))
    names: dict[str, Any] = {}
    try:
        extent = _extent(old_tree, old_items, old_env, names)
    except _Unreadable as exc:
        return Cover("unknown", f"the grid '{old_grid}' cannot be read: {exc}")
    if extent is None:
        return _unreadable(old_grid, old_items, old_env, "")
    try:
        covered = _z3(new_tree, new_env, names) * new_items
    except _Unreadable as exc:
        return Cover("unknown", f"the new grid '{new_grid}' cannot be read: {exc}")
    solver = z3.Solver(ctx=context())
    solver.set("timeout", TIMEOUT_MS)
    for var in names.values():
        solver.add(var >= 1, var <= LIMIT)
    solver.add(covered < extent)
    result = solver.check()
    if result == z3.unsat:
        return Cover("proven", f"{new_grid} blocks of {new_items} cover the extent of {old_grid} blocks of {old_items}")
    if result == z3.sat:
        model = solver.model()
        at = ", ".join(f"{n} = {model.eval(v, model_completion=True)}" for n, v in sorted(names.items()))
        need = model.eval(extent, model_completion=True)
        got = model.eval(covered, model_completion=True)
        return Cover(
            "refuted",
            f"at {at or 'any size'} the grid '{new_grid}' launches blocks of {new_items} for {got} of {need} items",
        )
    return Cover(
        "unknown", f"the solver did not decide whether '{new_grid}' covers '{old_grid}' within {TIMEOUT_MS} ms"
    )


def _unreadable(grid: str, items: int, env: Mapping[str, int], why: str) -> Cover:
    """A grid that is not a recognised rounded-up division: independent of the block when
    it names no form of the items per block, otherwise it cannot be followed."""
    if not _mentions(grid, items, env):
        return Cover("independent", f"the grid '{grid}' does not count blocks of {items}")
    reason = f" ({why})" if why else ""
    return Cover("unknown", f"the grid '{grid}' counts blocks of {items} in a way kxform cannot follow{reason}")


def _mentions(grid: str, items: int, env: Mapping[str, int]) -> bool:
    """Whether `grid` names `items`, `items - 1` or its log2 (a shift), as a literal or a bound name."""
    wanted = {items, items - 1} | ({int(math.log2(items))} if items > 1 and items & (items - 1) == 0 else set())
    try:
        tree = _parse(grid)
    except _Unreadable:
        tree = None
    nodes = list(ast.walk(tree)) if tree is not None else []
    for node in nodes:
        if isinstance(node, ast.Constant) and node.value in wanted and node.value > 1:
            return True
        if isinstance(node, ast.Name) and env.get(node.id) in wanted:
            return True
    if tree is None:
        import re

        return any(int(t) in wanted and int(t) > 1 for t in re.findall(r"\b\d+\b", grid))
    return False


def _parse(text: str) -> ast.expr:
    normal = logic_text(text)
    if normal is None:
        raise _Unreadable(f"'{text}' has a '?' without its ':'")
    try:
        tree = ast.parse(normal, mode="eval")
    except SyntaxError:
        raise _Unreadable(f"'{normal}' is not an expression kxform reads") from None
    return tree.body


def _value(node: ast.expr, env: Mapping[str, int]) -> int | None:
    """The integer value of a constant subexpression (literals and bound names)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, env), _value(node.right, env)
        if left is None or right is None:
            return None
        ops = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a // b if b else None,
            ast.FloorDiv: lambda a, b: a // b if b else None,
            ast.RShift: lambda a, b: a >> b,
            ast.LShift: lambda a, b: a << b,
        }
        op = ops.get(type(node.op))
        return op(left, right) if op is not None else None
    return None


def _extent(node: ast.expr, items: int, env: Mapping[str, int], names: dict[str, Any]) -> Any | None:
    """The extent a grid expression covers at `items` per block, as a z3 term, or None when
    it is not a rounded-up (or plain) division by `items`."""
    import z3

    shift = int(math.log2(items)) if items > 1 and items & (items - 1) == 0 else None
    if isinstance(node, ast.IfExp):
        branches = [_branch_extent(b, items, env, names) for b in (node.body, node.orelse)]
        if any(b is None for b in branches):
            return None
        return z3.If(_z3(node.test, env, names), branches[0], branches[1])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min" and node.args:
        capped = [a for a in node.args if _value(a, env) is None]
        caps = [v for a in node.args if (v := _value(a, env)) is not None]
        if len(capped) != 1:
            return None
        inner = _extent(capped[0], items, env, names)
        if inner is None:
            return None
        for cap in caps:
            inner = z3.If(inner < cap * items, inner, z3.IntVal(cap * items, context()))
        return inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ceil_div":
        if len(node.args) == 2 and _value(node.args[1], env) == items:
            return _z3(node.args[0], env, names)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.RShift)):
        divisor = _value(node.right, env)
        if isinstance(node.op, ast.RShift):
            if shift is None or divisor != shift:
                return None
        elif divisor != items:
            return None
        rounded = _rounded_numerator(node.left, items, env, names)
        if rounded is not None:
            return rounded
        return (_z3(node.left, env, names) / items) * items  # a plain division covers its quotient
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _value(node.right, env) == 1:
        inner = node.left
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Div, ast.FloorDiv, ast.RShift)):
            shifted = isinstance(inner.op, ast.RShift)
            if _value(inner.right, env) == (shift if shifted else items):
                numerator = inner.left
                if (
                    isinstance(numerator, ast.BinOp)
                    and isinstance(numerator.op, ast.Sub)
                    and _value(numerator.right, env) == 1
                ):
                    return _z3(numerator.left, env, names)  # (E - 1) / B + 1
                return _z3(numerator, env, names)  # E / B + 1 covers at least E
    return None


def _branch_extent(node: ast.expr, items: int, env: Mapping[str, int], names: dict[str, Any]) -> Any | None:
    """The extent of one branch of a conditional grid: a constant branch claims nothing."""
    import z3

    if _value(node, env) is not None:
        return z3.IntVal(0, context())
    return _extent(node, items, env, names)


def _rounded_numerator(node: ast.expr, items: int, env: Mapping[str, int], names: dict[str, Any]) -> Any | None:
    """E of `E + (B - 1)` or `E + B - 1` (either order), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        if _value(node.right, env) == items - 1:
            return _z3(node.left, env, names)
        if _value(node.left, env) == items - 1:
            return _z3(node.right, env, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _value(node.right, env) == 1:
        inner = node.left
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add):
            if _value(inner.right, env) == items:
                return _z3(inner.left, env, names)
            if _value(inner.left, env) == items:
                return _z3(inner.right, env, names)
    return None


def _z3(node: ast.expr, env: Mapping[str, int], names: dict[str, Any]) -> Any:
    """`node` as a z3 integer term over non-negative values: `/` and `>>` divide (C's
    truncation, for the non-negative operands of a launch), names bound in `env` are
    their values, others are variables shared across the claim."""
    import z3

    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return z3.IntVal(node.value, context())
    if isinstance(node, ast.Name):
        if node.id in env:
            return z3.IntVal(env[node.id], context())
        if node.id not in names:
            names[node.id] = z3.Int(node.id, context())
        return names[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _z3(node.left, env, names), _z3(node.right, env, names)
        op = type(node.op)
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op in (ast.Div, ast.FloorDiv):
            return left / right
        if op is ast.Mod:
            return left % right
        if op in (ast.RShift, ast.LShift):
            amount = _value(node.right, env)
            if amount is None or not 0 <= amount < 63:
                raise _Unreadable("a shift by an amount that is not a constant")
            return left / (2**amount) if op is ast.RShift else left * (2**amount)
        raise _Unreadable(f"the operator {type(node.op).__name__}")
    if isinstance(node, ast.IfExp):
        return z3.If(_z3(node.test, env, names), _z3(node.body, env, names), _z3(node.orelse, env, names))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _z3(node.left, env, names), _z3(node.comparators[0], env, names)
        compare = {
            ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b,
            ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b,
            ast.Eq: lambda a, b: a == b,
            ast.NotEq: lambda a, b: a != b,
        }.get(type(node.ops[0]))
        if compare is None:
            raise _Unreadable(f"the comparison {type(node.ops[0]).__name__}")
        return compare(left, right)
    if isinstance(node, ast.BoolOp):
        values = [_z3(v, env, names) for v in node.values]
        return z3.And(*values) if isinstance(node.op, ast.And) else z3.Or(*values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return z3.Not(_z3(node.operand, env, names))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_z3(a, env, names) for a in node.args]
        if node.func.id == "ceil_div" and len(args) == 2:
            return (args[0] + args[1] - 1) / args[1]
        if node.func.id in ("min", "max") and len(args) >= 2:
            out = args[0]
            for arg in args[1:]:
                out = z3.If(arg < out, arg, out) if node.func.id == "min" else z3.If(arg > out, arg, out)
            return out
        raise _Unreadable(f"a call of '{node.func.id}'")
    raise _Unreadable(f"'{ast.unparse(node)}'")
