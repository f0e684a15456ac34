"""The corpus specs can tell a remap apart from the identity.

Verification proves a block-index remap only at grids where the remap moves some
block: at a size whose grid is smaller than a pattern's period (an XCD remap over 8
XCDs on a grid of 7 blocks, a Morton order on 2x2 tiles) the rewritten kernel runs the
very same blocks in the very same places, and a planted error in the remap goes
unnoticed (tools/mutants.py found such survivors). Every swizzlable corpus kernel
therefore has, for every pattern that applies to it, a check size where it moves a block.
"""

from __future__ import annotations

import sys

import pytest

from conftest import CORPORA
from kxform.harness.spec import load_spec
from kxform.passes.swizzle.patterns import PATTERNS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENTRIES = [
    e
    for e in tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]
    if e.get("spec") and e["swizzle"] == "applies"
]


def _moves_a_block(config, grid: tuple[int, int, int]) -> bool:  # type: ignore[no-untyped-def]
    gx, gy, _ = grid
    return any(config.apply(bx, by, gx, gy) != (bx, by) for by in range(gy) for bx in range(gx))


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_every_pattern_moves_a_block_at_some_check_size(entry: dict) -> None:
    kernel = load_spec(CORPORA / entry["spec"]).kernels[entry["kernel"]]
    grids = [kernel.launch(size).grid for size in kernel.check_sizes]
    dims = 1 if entry["grid_dims"] == 1 else 2
    idle = []
    for pattern in PATTERNS.values():
        if pattern.name == "row" or dims not in pattern.dims:
            continue
        config = pattern.resolve({"xcds": 8} if "xcds" in {p.name for p in pattern.params} else {})
        if not any(_moves_a_block(config, grid) for grid in grids):
            idle.append(pattern.name)
    assert not idle, f"{entry['name']}: {idle} map every block to itself at every check size {grids}"


def test_the_check_catches_an_idle_spec() -> None:
    config = PATTERNS["xcd"].resolve({"xcds": 8})
    assert not _moves_a_block(config, (7, 1, 1)) and _moves_a_block(config, (20, 1, 1))
