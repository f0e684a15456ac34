"""Evaluate a custom remap formula in Python, with C's unsigned 32-bit semantics, and
refuse every grid shape on which the emitted C would wrap, divide by zero or shift out
of range.

C would silently wrap `gy - first` below zero or a product past 2^32; the formula
language treats that as an error, because a wrapped value that happens to give a
bijection on the grids checked is an accident, not a remap. The evaluation is
vectorised with NumPy over every block of a grid at once (values held in uint64,
results always below 2^32), and lazy where C is: only the chosen arm of `c ? a : b` and
the right operand of `&&`/`||` where C evaluates it can fail.

`check_arithmetic` covers every block of every grid from 1x1 to 64x64 (as the bijection
check does) and, on the bijection check's large grids and the largest grids (65535 on a
side, where wrap-around shows first), the first and last 4096 blocks, the first and last
block of every row and 20000 seeded random blocks.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from kxform.passes.swizzle.bijection import EXHAUSTIVE_SIDE, LARGE_SHAPES
from kxform.passes.swizzle.formula import Binary, Call, Formula, FormulaError, Node, Num, Unary, Var, show

LIMIT = np.uint64(2**32)
EXTREME_SHAPES: tuple[tuple[int, int], ...] = (
    (65535, 65535),
    (65535, 65534),
    (65534, 65535),
    (65535, 1024),
    (1024, 65535),
    (65535, 4096),
    (4096, 65535),
    (65535, 3),
)
EXTREME_SAMPLES = 20000


@dataclass(frozen=True)
class Lanes:
    """A batch of (bx, by, gx, gy) points, one lane per block."""

    bx: np.ndarray
    by: np.ndarray
    gx: np.ndarray
    gy: np.ndarray

    def point(self, i: int) -> str:
        return f"grid {self.gx[i]}x{self.gy[i]}, block ({self.bx[i]}, {self.by[i]})"


class _Evaluator:
    def __init__(self, lanes: Lanes) -> None:
        self.lanes = lanes
        ones = np.ones(len(lanes.bx), dtype=bool)
        self.all = ones
        self.env: dict[str, np.ndarray] = {"bx": lanes.bx, "by": lanes.by, "gx": lanes.gx, "gy": lanes.gy}
        self.env["pid"] = lanes.by * lanes.gx + lanes.bx
        self.env["total"] = lanes.gx * lanes.gy

    def fail(self, kind: str, bad: np.ndarray, node: Node, what: str) -> None:
        i = int(np.argmax(bad))
        raise FormulaError(kind, f"{what} in `{show(node)}` at {self.lanes.point(i)}")

    def eval(self, node: Node, active: np.ndarray) -> np.ndarray:
        if isinstance(node, Num):
            return np.full(len(active), node.value, dtype=np.uint64)
        if isinstance(node, Var):
            return self.env[node.name]
        if isinstance(node, Unary):
            value = self.eval(node.operand, active)
            return (~value) & (LIMIT - np.uint64(1)) if node.op == "~" else (value == 0).astype(np.uint64)
        if isinstance(node, Call):
            return self.call(node, active)
        return self.binary(node, active)

    def call(self, node: Call, active: np.ndarray) -> np.ndarray:
        if node.fn == "select":
            cond = self.eval(node.args[0], active) != 0
            yes = self.eval(node.args[1], active & cond)
            no = self.eval(node.args[2], active & ~cond)
            return np.where(cond, yes, no)
        a, b = (self.eval(arg, active) for arg in node.args)
        return np.minimum(a, b) if node.fn == "min" else np.maximum(a, b)

    def binary(self, node: Binary, active: np.ndarray) -> np.ndarray:
        op = node.op
        a = self.eval(node.left, active)
        if op in ("&&", "||"):
            left = a != 0
            b = self.eval(node.right, active & (left if op == "&&" else ~left)) != 0
            return ((left & b) if op == "&&" else (left | b)).astype(np.uint64)
        b = self.eval(node.right, active)
        if op in ("/", "%"):
            zero = active & (b == 0)
            if zero.any():
                self.fail("division-by-zero", zero, node, f"{'division' if op == '/' else 'modulo'} by zero")
            safe = np.where(b == 0, np.uint64(1), b)
            return a // safe if op == "/" else a % safe
        if op in ("<<", ">>"):
            wide = active & (b >= 32)
            if wide.any():
                self.fail("shift", wide, node, f"shift by {int(b[np.argmax(wide)])} (32 or more)")
            b = np.minimum(b, np.uint64(31))
            if op == ">>":
                return a >> b
            result = a << b
            return self.in_range(result, active, node)
        if op == "-":
            under = active & (a < b)
            if under.any():
                i = int(np.argmax(under))
                self.fail("overflow", under, node, f"subtraction below zero ({int(a[i])} - {int(b[i])})")
            return np.where(a >= b, a - b, np.uint64(0))
        if op in ("+", "*"):
            # both operands are below 2^32, so the uint64 sum or product is exact
            return self.in_range(a * b if op == "*" else a + b, active, node)
        return _BITWISE[op](a, b)

    def in_range(self, result: np.ndarray, active: np.ndarray, node: Binary) -> np.ndarray:
        over = active & (result >= LIMIT)
        if over.any():
            self.fail("overflow", over, node, f"result {int(result[np.argmax(over)])} does not fit in 32 bits")
        return result & (LIMIT - np.uint64(1))


_BITWISE = {
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<": lambda a, b: (a < b).astype(np.uint64),
    "<=": lambda a, b: (a <= b).astype(np.uint64),
    ">": lambda a, b: (a > b).astype(np.uint64),
    ">=": lambda a, b: (a >= b).astype(np.uint64),
    "==": lambda a, b: (a == b).astype(np.uint64),
    "!=": lambda a, b: (a != b).astype(np.uint64),
}


def evaluate(formula: Formula, lanes: Lanes) -> tuple[np.ndarray, np.ndarray]:
    """(lx, ly) for every lane; FormulaError at the first lane where C would misbehave."""
    ev = _Evaluator(lanes)
    for name, node in formula.statements:
        ev.env[name] = ev.eval(node, ev.all)
    return ev.env["lx"], ev.env["ly"]


def evaluate_point(formula: Formula, bx: int, by: int, gx: int, gy: int) -> tuple[int, int]:
    """The logical block of one physical block (the Python reference of the helper)."""
    one = (np.array([v], dtype=np.uint64) for v in (bx, by, gx, gy))
    lx, ly = evaluate(formula, Lanes(*one))
    return int(lx[0]), int(ly[0])


def grid_lanes(gx: int, gy: int, start: int = 0, stop: int | None = None) -> Lanes:
    """Blocks `start..stop` (row-major pid order) of a gx x gy grid."""
    pid = np.arange(start, gx * gy if stop is None else stop, dtype=np.uint64)
    return Lanes(
        pid % np.uint64(gx), pid // np.uint64(gx), np.full(len(pid), gx, np.uint64), np.full(len(pid), gy, np.uint64)
    )


def _small_grids() -> Iterator[Lanes]:
    """Every block of every grid up to 64x64, one batch per grid height."""
    for gy in range(1, EXHAUSTIVE_SIDE + 1):
        parts = [grid_lanes(gx, gy) for gx in range(1, EXHAUSTIVE_SIDE + 1)]
        yield Lanes(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("bx", "by", "gx", "gy")))


def _sampled_grids() -> Iterator[Lanes]:
    """The first and last blocks, both edge columns and seeded random blocks of the
    bijection check's large grids and of the largest grids (where wrap-around shows first)."""
    rng = np.random.default_rng(20261123)
    for gx, gy in (*LARGE_SHAPES, *EXTREME_SHAPES):
        total = gx * gy
        edges = [
            np.arange(0, min(total, 4096)),
            np.arange(max(0, total - 4096), total),
            np.arange(0, gy) * gx,
            np.arange(0, gy) * gx + (gx - 1),
            rng.integers(0, total, EXTREME_SAMPLES),
        ]
        pid = np.unique(np.concatenate(edges)).astype(np.uint64)
        yield Lanes(
            pid % np.uint64(gx),
            pid // np.uint64(gx),
            np.full(len(pid), gx, np.uint64),
            np.full(len(pid), gy, np.uint64),
        )


@dataclass(frozen=True)
class ArithmeticReport:
    blocks: int
    detail: str


@functools.lru_cache(maxsize=256)
def check_arithmetic(formula: Formula) -> ArithmeticReport:
    """Evaluate on every grid the bijection check runs and on samples of the largest grids;
    raise FormulaError (overflow, division-by-zero, shift) naming grid, block and step."""
    blocks = 0
    for batch in (*_small_grids(), *_sampled_grids()):
        lx, ly = evaluate(formula, batch)
        blocks += len(batch.bx)
        outside = (lx >= batch.gx) | (ly >= batch.gy)
        if outside.any():
            i = int(np.argmax(outside))
            raise FormulaError(
                "range", f"block maps to ({int(lx[i])}, {int(ly[i])}), outside the grid, at {batch.point(i)}"
            )
    detail = (
        f"no wrap-around, division by zero or wide shift on {blocks} blocks (every block of "
        f"1x1..{EXHAUSTIVE_SIDE}x{EXHAUSTIVE_SIDE}; edges and samples of {len(LARGE_SHAPES) + len(EXTREME_SHAPES)} "
        "grids up to 65535x65535)"
    )
    return ArithmeticReport(blocks, detail)
