"""Measured neighbour sharing: sector traces of the original kernel on the CPU runtime.

Block (0,0), its x-neighbour (1,0) and its y-neighbour (0,1) are traced at the spec's
check size with the largest grid (at least 2 x 2 blocks); per buffer, the share of
(0,0)'s sectors the neighbour also reads or writes says which neighbours would find
data in L2 if they ran together. "Could not tell" is reported as such (no spec, a
1-D grid, a runtime failure), never as zero sharing.
"""

from __future__ import annotations

from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec
from kxform.propose.access import Sharing
from kxform.runtime.base import Runtime, RuntimeError_, SectorTrace

TRACED = ((0, 0, 0), (1, 0, 0), (0, 1, 0))


def measured_sharing(source: SourceText, spec: KernelSpec, runtime: Runtime) -> tuple[tuple[Sharing, ...], str]:
    """Per buffer sharing between neighbours, and a note saying where it comes from."""
    from dataclasses import replace

    from kxform.build.extract import extract_kernel
    from kxform.harness.inputs import make_inputs
    from kxform.verify.differential import launch_request

    sized = [(size, spec.launch(size)) for size in spec.check_sizes]
    usable = [(s, r) for s, r in sized if r.grid[0] >= 2 and r.grid[1] >= 2]
    if not usable:
        return (), "Sector traces: not taken (no check size of the spec has a grid of at least 2 x 2 blocks)."
    size, resolved = max(usable, key=lambda item: item[1].grid[0] * item[1].grid[1])
    try:
        request = launch_request(
            extract_kernel(source, spec.name),
            resolved,
            make_inputs(spec, resolved),
            f"{spec.name}[{size.name}] traced",
            120.0,
        )
        result = runtime.run(replace(request, trace_blocks=TRACED))
    except (RuntimeError_, OSError) as exc:
        return (), f"Sector traces: could not be taken ({str(exc)[:160]})."
    if len(result.traces) != len(TRACED):
        return (), f"Sector traces: the {runtime.name} runtime returned none (it may not support tracing)."
    origin, right, below = result.traces
    grid = "x".join(str(g) for g in resolved.grid[:2])
    return _sharing(origin, right, below), f"(traced at size '{size.name}', grid {grid})"


def _sharing(origin: SectorTrace, right: SectorTrace, below: SectorTrace) -> tuple[Sharing, ...]:
    out = []
    for buffer in sorted(set(origin.reads) | set(origin.writes)):
        mine = origin.reads.get(buffer, frozenset()) | origin.writes.get(buffer, frozenset())
        if not mine:
            continue
        shares = []
        for other in (right, below):
            theirs = other.reads.get(buffer, frozenset()) | other.writes.get(buffer, frozenset())
            shares.append(len(mine & theirs) / len(mine))
        out.append(Sharing(buffer, len(mine), shares[0], shares[1]))
    return tuple(out)
