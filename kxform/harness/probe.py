"""Measuring a drafted spec on the CPU runtime: the extent each buffer really spans, and
the `out` buffers the kernel reads before writing.

`harness infer` cannot read element counts off most kernels (they live in index
expressions and guards), but it can run the kernel. The probe launches the original
kernel at the draft's sizes with every buffer over-allocated (the product of all size
variables), watched: the runtime reports one past the highest byte each buffer was
touched at, and any read of a poisoned `out` element before a write. A count is then
the simplest expression over the size variables (a product of up to three of them,
possibly plus one or times a small factor such as the 2 of a row holding a gate and an
up half, or a constant) that equals the measured element extent at every
probed size: an expression that agrees at two unrelated sizes is the kernel's own.
"""

from __future__ import annotations

import itertools
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kxform.errors import KxformError
from kxform.expr import Expr
from kxform.harness.dtypes import FLOAT_DTYPES, numpy_dtype, to_float64
from kxform.harness.request import UnitFlags
from kxform.runtime.base import Runtime, RuntimeError_, UnwrittenRead, poison_mask

MAX_DEGREE = 3
FACTORS = (2, 3, 4)
"""Whole multiples of a product tried after the product itself (gate|up, q|k|v, x|y|z|w rows)."""
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ProbeResult:
    """What the probe measured; `error` says why it could not (then nothing else is set)."""

    counts: dict[str, str] = field(default_factory=dict)
    """Buffer -> count expression that matched the extent at every probed size."""
    extents: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Buffer -> elements touched at each probed size (0: untouched)."""
    unwritten_reads: dict[str, UnwrittenRead] = field(default_factory=dict)
    """`out` buffers read before written, with the first such read."""
    non_finite: dict[str, int] = field(default_factory=dict)
    """Float outputs with NaN or Inf elements the kernel wrote (inputs are finite), and how
    many, at the sizes probed: the fills are outside the kernel's domain (a log or a square
    root of an input drawn from [-1, 1])."""
    partial: frozenset[str] = frozenset()
    """Inputs whose count covers what was read, the last row read in part (covering_expression)."""
    error: str | None = None


def count_expression(
    extents: Sequence[int],
    sizes: Sequence[Mapping[str, int]],
    variables: Sequence[str],
    factors: Sequence[int] = FACTORS,
) -> str | None:
    """The simplest expression over `variables` equal to `extents[i]` at `sizes[i]` for all i
    (a product of up to MAX_DEGREE of them, possibly plus one or times one of `factors`)."""
    if not extents or any(e <= 0 for e in extents):
        return None
    combos = [
        combo
        for degree in range(1, MAX_DEGREE + 1 if variables else 1)
        for combo in itertools.combinations_with_replacement(variables, degree)
    ]
    for factor in (1, *factors):
        for combo in combos:
            values = [factor * math.prod(size[v] for v in combo) for size in sizes]
            text = " * ".join(combo if factor == 1 else (str(factor), *combo))
            if values == list(extents):
                return text
            if factor == 1 and [v + 1 for v in values] == list(extents):
                return f"{text} + 1"
    for combo in _padded_combos(variables):
        if [_product(combo, size) for size in sizes] == list(extents):
            return " * ".join(combo)
    return str(extents[0]) if len(set(extents)) == 1 else None


def _padded_combos(variables: Sequence[str]) -> list[tuple[str, ...]]:
    """Products with at least one `(v + 1)` factor (`nx * (ny + 1)`: a grid with a halo
    column), after every plain product."""
    terms = [*variables, *(f"({v} + 1)" for v in variables)]
    return [
        combo
        for degree in range(1, MAX_DEGREE + 1)
        for combo in itertools.combinations_with_replacement(terms, degree)
        if any(t.startswith("(") for t in combo)
    ]


def _product(combo: Sequence[str], size: Mapping[str, int]) -> int:
    return math.prod(size[t[1:-5]] + 1 if t.startswith("(") else size[t] for t in combo)


def probe(
    source_path: str,
    spec_text: str,
    spelling: str,
    runtime: Runtime,
    variables: Sequence[str],
    flags: UnitFlags | None = None,
    factors: Sequence[int] = FACTORS,
) -> ProbeResult:
    """Run the draft in `spec_text` (buffers over-allocated) at each of its sizes, watched.
    `flags`: the unit's include directories and defines (the project's build flags).
    `factors`: the whole multiples of a product a count may be (count_expression)."""
    from kxform.build.extract import extract_kernel
    from kxform.frontend.source import read_source
    from kxform.harness.inputs import make_inputs
    from kxform.harness.spec import load_spec
    from kxform.harness.request import NO_FLAGS, launch_request

    if not runtime.watches_reads:
        return ProbeResult(error=f"the {runtime.name} runtime cannot watch a launch")
    try:
        with tempfile.TemporaryDirectory(prefix="kxform-probe-") as tmp:
            path = Path(tmp) / "probe.kxspec.toml"
            path.write_text(spec_text.replace('file = "', f'file = "{Path(source_path).parent.resolve()}/', 1))
            kernel = load_spec(path).kernel(spelling)
        extracted = extract_kernel(read_source(source_path), spelling)
        extents: dict[str, list[int]] = {}
        reads: dict[str, UnwrittenRead] = {}
        non_finite: dict[str, int] = {}
        grids: list[tuple[int, int, int]] = []
        sizes = [s for s in kernel.sizes if not s.bench]
        for size in sizes:
            resolved = kernel.launch(size)
            grids.append(resolved.grid)
            inputs = make_inputs(kernel, resolved)
            request = launch_request(
                extracted, resolved, inputs, f"{spelling}[{size.name}] probe", PROBE_TIMEOUT_S, flags=flags or NO_FLAGS
            )
            result = runtime.run(replace(request, watch=True))
            for arg in resolved.args:
                if arg.kind != "buffer":
                    continue
                item = numpy_dtype(arg.dtype).itemsize
                extents.setdefault(arg.name, []).append(-(-result.extents.get(arg.name, 0) // item))
            for read in result.unwritten_reads:
                reads.setdefault(read.buffer, read)
            for arg in resolved.args:
                if (
                    arg.kind == "buffer"
                    and arg.name in result.outputs
                    and (bad := _non_finite(result.outputs[arg.name], arg.dtype))
                ):
                    non_finite[arg.name] = non_finite.get(arg.name, 0) + bad
    except (KxformError, RuntimeError_) as exc:
        return ProbeResult(error=str(exc))
    values = [dict(s.values) for s in sizes]
    counts = {
        name: expr
        for name, found in extents.items()
        if (expr := count_expression(found, values, variables, factors)) is not None
    }
    per_block = _per_block_counts(kernel.grid, grids)
    counts.update(
        {
            name: per_block[tuple(found)]
            for name, found in extents.items()
            if name not in counts and tuple(found) in per_block
        }
    )
    read_only = {a.name for a in kernel.args if a.kind == "buffer" and a.role != "out"}
    partial = {
        name: expr
        for name, found in extents.items()
        if name not in counts
        and name in read_only
        and (expr := covering_expression(found, values, variables)) is not None
    }
    return ProbeResult(
        {**counts, **partial}, {k: tuple(v) for k, v in extents.items()}, reads, non_finite, frozenset(partial)
    )


def _per_block_counts(grid: Sequence[Expr], launched: Sequence[tuple[int, int, int]]) -> dict[tuple[int, ...], str]:
    """Extents a buffer of one element per block has (`partial[blockIdx.x]`, a scan's
    flags): each grid dimension, and the whole grid, at every probed size, by expression."""
    out: dict[tuple[int, ...], str] = {}
    texts = [f"({e.text})" if any(op in e.text for op in "+-") else e.text for e in grid]
    if len(grid) > 1:
        out[tuple(math.prod(g[: len(grid)]) for g in launched)] = " * ".join(texts)
    for axis in reversed(range(len(grid))):
        out[tuple(g[axis] for g in launched)] = grid[axis].text
    return {k: v for k, v in out.items() if any(n > 1 for n in k)}


def covering_expression(
    extents: Sequence[int], sizes: Sequence[Mapping[str, int]], variables: Sequence[str]
) -> str | None:
    """The smallest product of up to MAX_DEGREE `variables` that covers `extents[i]` at
    `sizes[i]` by less than the largest variable's value (one row) at every size: an input
    whose last row is read in part (`logits[b * V + target]`, a stencil's shifted read
    stopping short of the end). Only for buffers the kernel does not write: the elements
    past the extent hold their fill."""
    if not extents or any(e <= 0 for e in extents) or not variables:
        return None
    best: tuple[int, str] | None = None
    plain = [
        combo
        for degree in range(1, MAX_DEGREE + 1)
        for combo in itertools.combinations_with_replacement(variables, degree)
    ]
    for combo in [*plain, *_padded_combos(variables)]:
        products = [_product(combo, size) for size in sizes]
        if all(0 <= p - e < max(size[v] for v in variables) for p, e, size in zip(products, extents, sizes)):
            if best is None or products[0] < best[0]:
                best = (products[0], " * ".join(combo))
    return best[1] if best else None


def _non_finite(array: np.ndarray, dtype: str) -> int:
    """NaN or Inf elements of a float output, the poison of elements never written aside."""
    if dtype not in FLOAT_DTYPES:
        return 0
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(to_float64(array.reshape(-1), dtype)) & ~poison_mask(array)
    return int(bad.sum())
