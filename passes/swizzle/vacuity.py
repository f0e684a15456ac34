"""Does a remap move any block at the sizes verification runs? If not, it cannot be told
from the original there, and a "verified" rewrite proves nothing about it.

An XCD remap over 8 chiplets is the identity on every grid of at most 8 blocks; a
grouped order of 8 rows is the identity on a grid of at most 8 rows... A spec whose check
sizes are all that small verifies the original against itself. The swizzle pass asks
this of the kernel's spec after its checks and warns (a `VerifyVacuous` remark and a
`moves` check record); it does not refuse, since the remap is still proven correct.
"""

from __future__ import annotations

import re
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
    return (
        f"the remap moves no block at any check size of the spec ({shown}): verification cannot tell it from "
        "the original; add a size with more blocks"
    )


_HELPER = re.compile(
    r"/\* kxform swizzle (?P<label>[^:]+): logical block.*?\*/\s*static __device__ __forceinline__ "
    r"uint2 (?P<name>kxform_swizzle_\w+)\(",
    re.S,
)
_FORMULA = re.compile(r"from the formula\r?\n(?P<body>.*?)\r?\n\s*\(unsigned 32-bit", re.S)
_PARAM = re.compile(r"(\w+)=([^,()]+)")


def remaps_in(text: str) -> dict[str, Remap]:
    """The remaps a rewritten file's kxform helpers emit, by helper name (read back from
    each helper's comment: a library pattern's label, or a custom remap's formula)."""
    from kxform.passes.swizzle.formula import FormulaError, formula_remap
    from kxform.remap import get_pattern

    out: dict[str, Remap] = {}
    for found in _HELPER.finditer(text):
        label = found.group("label").strip()
        try:
            if label.startswith("custom("):
                body = _FORMULA.search(found.group(0))
                if body is None:
                    continue
                lines = [line.strip() for line in body.group("body").splitlines()]
                out[found.group("name")] = formula_remap("\n".join(line for line in lines if line)).apply
            else:
                name, _, inner = label.partition("(")
                params = dict(_PARAM.findall(inner.rstrip(")")))
                out[found.group("name")] = get_pattern(name).resolve(params).apply
        except (KxformError, FormulaError):
            continue  # a helper kxform did not write as it writes them: nothing to say about it
    return out


def vacuous_remaps(text: str, kernel_text: str, spec: KernelSpec) -> list[str]:
    """Warnings for the remaps `kernel_text` (the kernel's definition) calls that move no
    block at any check size of `spec`."""
    out = []
    for name, apply in remaps_in(text).items():
        if re.search(rf"\b{name}\s*\(", kernel_text):
            warning = identity_everywhere(apply, spec)
            if warning is not None:
                out.append(warning)
    return out
