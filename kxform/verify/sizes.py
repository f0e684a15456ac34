"""Sizes derived from the rewrite itself, verified beside the spec's.

A spec's check sizes are chosen for the original kernel; a rewrite brings limits of its
own (rows per block, lanes per row, a block-level reduction over warps, a template's
`if (blockIdx.x >= 64) return;` or loop bound `i < 8192`) that those sizes may never
reach: at N = 283 every block count and row length stays below them, and a rewrite that
is wrong past them verifies. So a structural rewrite is also verified at sizes derived
from it:

* the constants it names (every integer literal of the rewritten kernel's unit, its
  parameters' values, its block's dimensions, the warp) are suspect bounds: for each size
  variable, one past the smallest and one past the largest suspect above the spec's value
  (`C = 257` past 256 lanes, `N = 8193` past a loop bound of 8192);
* more blocks than any suspect in every grid dimension the sizes set, at the rewritten
  launch (all variables grown together), so a block-count limit is exceeded;
* the spec's bench sizes.

Each within a budget (`Budget`: bytes of buffers, threads launched, the product of the
size variables) so that a derived size stays runnable on the CPU runtime; a size that
does not fit is left out, and one where the original itself fails or cannot be compared
says nothing against the rewrite: it is noted, never a refusal. Variables a block
dimension or the shared memory reads are never grown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kxform.errors import SpecError
from kxform.frontend.lexical import blank_comments_and_strings
from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import KernelSpec, SizeSpec

WARP = 32
MAX_CONSTANT = 1 << 20
"""Literals above this (masks, magic numbers) are not sizes."""
MAX_GRID_YZ = 65535
_LITERAL_RE = re.compile(r"(?<![\w.])(0[xX][0-9a-fA-F]+|\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU]?)(?![\w.])")


@dataclass(frozen=True)
class Budget:
    """The most a derived size may take."""

    bytes: int = 64 << 20
    threads: int = 1 << 24
    work: int = 1 << 28
    """The product of the size variables (a loop nest's trip count grows with it)."""


DEFAULT_BUDGET = Budget()


@dataclass(frozen=True)
class Derived:
    """A derived size and why it is checked."""

    size: SizeSpec
    why: str


def suspects(unit: str, values: Iterable[int] = ()) -> tuple[int, ...]:
    """The constants a rewrite names: integer literals of its unit's code (comments and
    strings left out), `values` (its parameters, its block), and the warp."""
    text = blank_comments_and_strings(unit)
    found = {int(m.group(1), 0) for m in _LITERAL_RE.finditer(text)}
    return tuple(sorted(c for c in found | set(values) | {WARP} if 2 <= c <= MAX_CONSTANT))


def derived_sizes(
    spec: KernelSpec,
    constants: Iterable[int],
    grid_of: Callable[[ResolvedLaunch], tuple[int, int, int] | None],
    budget: Budget = DEFAULT_BUDGET,
) -> tuple[Derived, ...]:
    """The sizes to verify besides the spec's (see the module docstring). `grid_of` gives
    the rewritten version's grid at a size (None where it cannot be derived)."""
    checks = spec.check_sizes
    if not checks:
        return ()
    base = max(checks, key=lambda s: _bytes(spec, s) or 0)
    growable = _growable(spec, base)
    known = sorted(set(constants))
    out: list[Derived] = []
    seen = {tuple(sorted(s.values.items())) for s in spec.sizes}

    def add(values: dict[str, int], name: str, why: str) -> None:
        key = tuple(sorted(values.items()))
        if key not in seen:
            seen.add(key)
            out.append(Derived(SizeSpec(name, False, values), why))

    for var in growable:
        above = [c + 1 for c in known if c + 1 > base.values[var]]
        fitting = [t for t in above if _fits(spec, {**base.values, var: t}, budget)]
        for target in dict.fromkeys(fitting[:1] + fitting[-1:]):
            add({**base.values, var: target}, f"past-{var}-{target - 1}", f"{var} = {target}, one past {target - 1}")
    blocks = _many_blocks(spec, base, growable, known, grid_of, budget)
    if blocks is not None:
        add(blocks, "blocks", f"more blocks than {_grid_target(known)} in every grid dimension the sizes set")
    for bench in spec.bench_sizes:
        if _fits(spec, bench.values, budget):
            add(dict(bench.values), f"bench-{bench.name}", f"the spec's bench size '{bench.name}'")
    return tuple(out)


def _growable(spec: KernelSpec, base: SizeSpec) -> list[str]:
    """The size variables no block dimension or shared-memory size reads."""
    fixed: set[str] = set()
    for expr in (*spec.block, spec.shared_bytes):
        fixed |= set(expr.variables)
    return [v for v in base.values if v not in fixed]


def _grid_target(constants: list[int]) -> int:
    fitting = [c for c in constants if c <= MAX_GRID_YZ]
    return max(fitting, default=1)


def _many_blocks(
    spec: KernelSpec,
    base: SizeSpec,
    growable: list[str],
    constants: list[int],
    grid_of: Callable[[ResolvedLaunch], tuple[int, int, int] | None],
    budget: Budget,
) -> dict[str, int] | None:
    """The base size grown (every growable variable doubled, kept odd) until each grid
    dimension the variables set holds more blocks than the largest suspect, or the last
    size within the budget; None when growing changes no grid dimension."""
    if not growable:
        return None
    target = _grid_target(constants)
    first = _resolved(spec, base.values)
    start = grid_of(first) if first is not None else None
    if start is None:
        return None
    values, best = dict(base.values), None
    for _ in range(32):
        values = {k: (v * 2 + 1 if k in growable else v) for k, v in values.items()}
        if not _fits(spec, values, budget):
            break
        resolved = _resolved(spec, values)
        grid = grid_of(resolved) if resolved is not None else None
        if grid is None:
            break
        moving = [i for i in range(3) if grid[i] != start[i]]
        if not moving:
            continue
        best = dict(values)
        if all(grid[i] > target for i in moving):
            break
    return best


def _resolved(spec: KernelSpec, values: dict[str, int]) -> ResolvedLaunch | None:
    try:
        return spec.launch(SizeSpec("derived", False, values))
    except (SpecError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _bytes(spec: KernelSpec, size: SizeSpec) -> int | None:
    resolved = _resolved(spec, size.values)
    return None if resolved is None else resolved.total_bytes


def _fits(spec: KernelSpec, values: dict[str, int], budget: Budget) -> bool:
    resolved = _resolved(spec, values)
    if resolved is None or resolved.total_bytes > budget.bytes:
        return False
    grid, block = resolved.grid, resolved.block
    if min(grid) < 1 or grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ or grid[0] >= 2**31:
        return False
    if math.prod(grid) * math.prod(block) > budget.threads:
        return False
    return math.prod(max(1, v) for v in values.values()) <= budget.work
