"""Does a remap move any block at the sizes verification runs? If not, it cannot be told
from the original there, and a "verified" rewrite proves nothing about it.

An XCD remap over 8 chiplets is the identity on every grid of at most 8 blocks; a
grouped order of 8 rows is the identity on a grid of at most 8 rows... A spec whose check
sizes are all that small verifies the original against itself. The swizzle pass asks
this of the kernel's spec after its checks and warns (a `VerifyVacuous` remark and a
`moves` check record); it does not refuse, since the remap is still proven correct.
"""

from __future__ import annotations

from collections.abc import Callable

from kxform.errors import KxformError
from kxform.harness.model import KernelSpec

MAX_BLOCKS = 1 << 16
"""Grids larger than this are taken to move a block (enumerating them costs more than it tells)."""

Remap = Callable[[int, int, int, int], tuple[int, int]]


def moved_at(apply: Remap, grid: tuple[int, int]) -> bool:
    """Whether `apply` sends some block of the gx x gy grid to another tile."""
    gx, gy = grid
    if gx * gy > MAX_BLOCKS:
        return True
    return any(apply(bx, by, gx, gy) != (bx, by) for by in range(gy) for bx in range(gx))


def check_grids(spec: KernelSpec) -> list[tuple[str, tuple[int, int]]]:
    """(size name, (gx, gy)) of every check size whose launch resolves."""
    out = []
    for size in spec.check_sizes:
        try:
            grid = spec.launch(size).grid
        except KxformError:
            continue
        out.append((size.name, (grid[0], grid[1])))
    return out


def identity_everywhere(apply: Remap, spec: KernelSpec) -> str | None:
    """The warning when `apply` moves no block at any check size of `spec` (None when it
    moves one, or when no check size resolves)."""
    grids = check_grids(spec)
    if not grids or any(moved_at(apply, grid) for _, grid in grids):
        return None
    shown = ", ".join(f"{name} {gx}x{gy}" for name, (gx, gy) in grids)
    return (f"the remap moves no block at any check size of the spec ({shown}): verification cannot tell it from "
            "the original; add a size with more blocks")
