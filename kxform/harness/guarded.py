"""A launch for a kernel its file never launches, read from the kernel's own guards.

Library files and test fixtures define kernels that other files launch. Such a kernel
still says which threads do work: `int i = blockIdx.x * blockDim.x + threadIdx.x; if (i <
n)` covers `n` elements along x, one per thread, and `blockIdx.y * 16 + threadIdx.y < n`
covers `n` along y in blocks of 16. Where every block axis the kernel reads has such a
bound, the same on every access, the grid is `ceil_div(bound, block)` along it (the bound
itself where a block handles one index: `row = blockIdx.x; if (row >= rows) return;`).
The block is the constant the index is written with, else a default the kernel accepts
because it reads `blockDim` (256 threads along x, 16 x 16 for two axes; no more than
its `__launch_bounds__` allows). Anything less
certain is refused with the reason: a block axis with no bound, bounds that disagree, a
thread index with neither a constant nor `blockDim`, shared arrays sized for a block the
file does not show, dynamic shared memory. The draft marks the result for review.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kxform.analysis.access import analyse_function, closure_functions
from kxform.analysis.affine import Affine
from kxform.analysis.records import Comparison
from kxform.frontend.model import Function, SourceModel

AXES = ("x", "y", "z")
DEFAULT_BLOCKS = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}
"""Block shapes for a kernel that takes its block size from `blockDim`, by thread axes used."""


@dataclass(frozen=True)
class AxisBound:
    """What one guard says about one grid axis: `extent` indices are covered, `per_block`
    at a time (None: one index per block, `blockIdx` alone; 0: `blockDim`, any block)."""

    extent: str
    per_block: int | None
    guard: str


@dataclass(frozen=True)
class GuardedLaunch:
    grid: tuple[str, ...]
    block: tuple[str, ...]
    note: str


def launch_from_guards(model: SourceModel, kernel: Function, size_vars: list[str]) -> GuardedLaunch | str:
    """The launch the kernel's guards imply, or why there is none (a sentence)."""
    functions = closure_functions(model, kernel)
    broken = next(
        (i for f in functions for i in model.syntax_issues if f.span.start <= i.span.start < f.span.end), None
    )
    if broken is not None:
        return f"the kernel does not parse (line {model.source.line_col(broken.span.start)[0]})"
    text = "\n".join(model.source.data[f.span.start : f.span.end].decode("utf-8", "replace") for f in functions)
    block_axes = [a for a in AXES if re.search(rf"\bblockIdx\s*\.\s*{a}\b", text)]
    thread_axes = [a for a in AXES if re.search(rf"\b(?:threadIdx|blockDim)\s*\.\s*{a}\b", text)]
    if not block_axes:
        return "the kernel reads no block index, so its guards say nothing about the grid"
    if re.search(r"\bextern\s+__shared__", text):
        return "the kernel uses dynamic shared memory, whose size only a launch says"
    bounds: dict[str, list[AxisBound]] = {a: [] for a in AXES}
    for function in functions:
        analysis = analyse_function(model, function)
        hidden = next((a for a in analysis.accesses if a.space == "global" and a.write and not a.affine), None)
        if hidden is not None:
            return f"the write {hidden.text} (line {hidden.line}) has an index kxform cannot read ({hidden.index})"
        comparisons = [
            c
            for access in analysis.accesses
            if access.space == "global"
            for guard in access.guards
            for c in guard.bounds
        ]
        comparisons += [Comparison(loop.init, loop.op, loop.bound) for loop in analysis.loops if loop.kind == "for"]
        for comparison in comparisons:
            found = _axis_bound(comparison, set(size_vars))
            if found is not None:
                bounds[found[0]].append(found[1])
    grid, block, guards = [], [], []
    for axis in block_axes:
        axis_bounds = bounds[axis]
        extents = {b.extent for b in axis_bounds}
        if not axis_bounds:
            return f"no guard bounds blockIdx.{axis} by the size variables ({', '.join(size_vars) or 'none'})"
        if len(extents) > 1:
            return f"the guards bound blockIdx.{axis} differently ({', '.join(sorted(extents))})"
        steps = {b.per_block for b in axis_bounds}
        if len(steps - {0}) > 1:
            return f"the guards step blockIdx.{axis} by different block sizes ({', '.join(map(str, steps))})"
        guards.append(axis_bounds[0].guard)
    defaults = DEFAULT_BLOCKS[max(1, len(thread_axes))]
    most = _max_threads(kernel)
    if most is not None and len(thread_axes) <= 1:
        defaults = (min(defaults[0], most),)  # `__launch_bounds__(128)`: at most 128 threads
    used_default = False
    last = AXES.index(max(block_axes + thread_axes, key=AXES.index))
    for axis in AXES[: last + 1]:
        steps = {b.per_block for b in bounds[axis]} if axis in block_axes else set()
        constant = next((s for s in steps if s), None)
        if constant is not None:
            size = constant
        elif axis in thread_axes:
            if not re.search(rf"\bblockDim\s*\.\s*{axis}\b", text):
                return f"threadIdx.{axis} is read with neither blockDim.{axis} nor a constant block size"
            size, used_default = defaults[min(thread_axes.index(axis), len(defaults) - 1)], True
        else:
            size = 1
        block.append(str(size))
        if axis not in block_axes:
            grid.append("1")
        else:
            extent = bounds[axis][0].extent
            grid.append(extent if steps == {None} else f"ceil_div({extent}, {size})")
    if most is not None and math.prod(int(b) for b in block) > most:
        return f"the block the guards imply ({'x'.join(block)}) exceeds {kernel.launch_bounds}"
    if used_default and re.search(r"\b__shared__\b", text):
        return "the kernel has shared arrays sized for a block size the file does not show"
    note = (
        f"review: no launch in the file; from the kernel's guards ({'; '.join(dict.fromkeys(guards))}), "
        f"block {'x'.join(block)}{' (any: the kernel reads blockDim)' if used_default else ''}"
    )
    return GuardedLaunch(tuple(grid), tuple(block), note)


def _max_threads(kernel: Function) -> int | None:
    """The first argument of the kernel's `__launch_bounds__`, when it is a literal."""
    found = re.match(r"__launch_bounds__\s*\(\s*(\d+)", kernel.launch_bounds or "")
    return int(found.group(1)) if found else None


def _axis_bound(comparison: Comparison, size_vars: set[str]) -> tuple[str, AxisBound] | None:
    """`c * blockIdx.a + threadIdx.a < S` (c a constant or blockDim.a) or `blockIdx.a < S`,
    with S over the size variables: the axis and what it says."""
    left, op, right = comparison.left, comparison.op, comparison.right
    if op in (">", ">="):
        left, right, op = right, left, "<" if op == ">" else "<="
    if op not in ("<", "<=") or not isinstance(left, Affine) or not isinstance(right, Affine):
        return None
    if not right.symbols or not right.symbols <= size_vars:
        return None
    for axis in AXES:
        block, thread, dim = f"blockIdx.{axis}", f"threadIdx.{axis}", f"blockDim.{axis}"
        if block not in left.symbols or not left.symbols <= {block, thread, dim}:
            continue
        step, rest = left.coefficient(block), left.without([block])
        if rest == Affine() and step == Affine.const(1):
            per_block: int | None = None
        elif rest == Affine.symbol(thread) and step == Affine.symbol(dim):
            per_block = 0
        elif rest == Affine.symbol(thread) and step.value is not None and step.value > 0:
            per_block = step.value
        else:
            return None
        extent = right if op == "<" else right + Affine.const(1)
        return axis, AxisBound(str(extent).replace("*", " * "), per_block, str(comparison))
    return None
