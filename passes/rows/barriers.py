"""Where the `rows` rewrite orders a row's lanes with a barrier: after a shared-out loop
whose accesses a later access of the row may meet on another lane.

A shared-out loop gives element j of the row to lane j % G, and nothing orders one lane's
accesses against another's. An access after the loop conflicts with one of the loop's
when one of them writes and another lane may be the one that made the loop's access:

* outside every shared-out loop, on the same buffer or one that may alias it (not both
  `__restrict__`): llm.c's layer norm stores `out` in its last loop and then `mean[idx]`,
  which may alias `out`; a later read of `out[row * C]` reads lane 0's element on every
  lane; a later write may land where another lane still reads;
* in a later shared-out loop, on the same buffer, where the element goes to another lane
  (another start or step, another index, a nested loop). Different buffers of the loops
  that may overlap are the run-time check's (kxform.passes.rows.overlap), not a barrier's.

A loop that stores nothing and carries reductions (a matrix-vector product's row, a bias
gradient's column, then `y[i] = acc`) needs none: its only effect is the reductions, so
each of its loads feeds the value its lane hands to the combine after it, and no lane
passes the combine before every lane's loads have returned; what is written after it
cannot reach them.

The rewrite puts a barrier over the row's lanes right after such a loop, in its block
(`__syncwarp` with the row group's mask for G <= 32, `__syncthreads()` for G > 32, where a
block holds one row): every lane's accesses of the loop are ordered before every lane's
accesses after it. Control there is the row's: the rewrite reads `threadIdx.x` and
`blockDim.x` per row, the reductions are broadcast and no other scalar leaves a shared-out
loop (plan.py), so every condition around the loop is the same on each lane of the row,
and a lane that skips the loops at run time (`rows_share`) still reaches the barrier, which
stands outside them. One barrier serves several loops: it is left out after a loop where
the barrier after a later loop of the same block comes before every access that needed it.
Refused (`CrossLaneRead`) where the barrier's place is not structured control flow: a
loop inside a `switch`, a label or a `try`, or a kernel with `goto`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, Affine, Loop, MemoryAccess
from kxform.frontend.model import Function, SourceModel

_STRUCTURED = ("compound_statement", "if_statement", "else_clause")
"""Statements a barrier's place may lie in: each lane of the row enters them alike."""


@dataclass(frozen=True)
class Conflict:
    """The first access after `loop` that may meet one of its accesses on another lane."""

    loop: Loop
    access: MemoryAccess
    buffer: str
    """The buffer of the loop's access it may meet."""


@dataclass(frozen=True)
class Barriers:
    """The loops (ids, program order) after which the rewrite puts a barrier over the row's
    lanes, and the conflicts no barrier can be placed for."""

    after: tuple[int, ...] = ()
    unplaced: tuple[tuple[Conflict, str], ...] = ()


def barriers(model: SourceModel, kernel: Function, analysis: AccessAnalysis, top: list[Loop]) -> Barriers:
    """Where the barriers go for the shared-out loops `top` of `kernel`, and what is refused."""
    restrict = {b.name: b.restrict for b in analysis.buffers}
    by_id = {loop.id: loop for loop in top}
    accesses = sorted((a for a in analysis.accesses if a.space == "global"), key=lambda a: a.span.start)
    conflicts: list[Conflict] = []
    for loop in top:
        mine = [a for a in accesses if a.loops and a.loops[0] == loop.id]
        if any(r.loop == loop.id for r in loop.reductions) and not any(a.write for a in mine):
            continue  # its combine orders its loads (above)
        found = _first_conflict(loop, accesses, mine, by_id, restrict)
        if found is not None:
            conflicts.append(found)
    kept: list[Conflict] = []
    for c in reversed(conflicts):
        if not any(_covers(model, later.loop, c) for later in kept):
            kept.append(c)
    kept.reverse()
    gone = _goto(model, kernel)
    unplaced = tuple((c, gone or why) for c in kept for why in [_unstructured(model, kernel, c.loop)] if gone or why)
    return Barriers(tuple(c.loop.id for c in kept), unplaced)


def _first_conflict(
    loop: Loop,
    accesses: list[MemoryAccess],
    mine: list[MemoryAccess],
    by_id: Mapping[int, Loop],
    restrict: Mapping[str, bool],
) -> Conflict | None:
    """The first access after `loop` (program order) that may meet one of `mine`, the
    loop's accesses, on another lane."""
    for access in accesses:
        if access.span.start < loop.span.end:
            continue
        owner = by_id.get(access.loops[0]) if access.loops else None
        for e in mine:
            if not (e.write or access.write):
                continue
            if owner is None:
                if e.buffer == access.buffer or not (restrict.get(e.buffer) and restrict.get(access.buffer)):
                    return Conflict(loop, access, e.buffer)
            elif e.buffer == access.buffer and not _same_lane(loop, owner, access, e):
                return Conflict(loop, access, e.buffer)
    return None


def _same_lane(first: Loop, later: Loop, access: MemoryAccess, earlier: MemoryAccess) -> bool:
    """Whether the lane that makes `access` in `later` made `earlier` in `first` on the same
    element: both loops start and step alike, neither access is nested deeper, and the
    indices agree (with the loop variables matched)."""
    if (first.init, first.step) != (later.init, later.step) or len(access.loops) != 1 or len(earlier.loops) != 1:
        return False
    index = access.index
    if not isinstance(index, Affine):
        return False
    mine = index.substitute(later.var, Affine.symbol(first.var)) if later.var != first.var else index
    return earlier.index == mine


def _covers(model: SourceModel, later: Loop, c: Conflict) -> bool:
    """The barrier after `later` is reached on every path from `c.loop` to `c.access`: it
    lies between them and its block holds `c.loop` (control leaves that block only past
    `later`, or by a return that never reaches the access)."""
    if not (later.span.start >= c.loop.span.end and later.span.end <= c.access.span.start):
        return False
    block = _statement(model, later).parent
    return block is not None and block.start_byte <= c.loop.span.start


def _unstructured(model: SourceModel, kernel: Function, loop: Loop) -> str:
    """Why a barrier after `loop` might not be reached by each lane of the row alike ("" when it is)."""
    node = _statement(model, loop).parent
    while node is not None and node.start_byte > kernel.body.start:
        if node.type not in _STRUCTURED:
            return f"the loop lies in a {node.type.removesuffix('_statement').replace('_', ' ')}"
        node = node.parent
    return ""


def _goto(model: SourceModel, kernel: Function) -> str:
    node = model.tree.root_node.descendant_for_byte_range(kernel.body.start, kernel.body.end)
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "goto_statement":
            return "the kernel jumps with goto"
        stack += n.children
    return ""


def _statement(model: SourceModel, loop: Loop):  # type: ignore[no-untyped-def]
    node = model.tree.root_node.descendant_for_byte_range(loop.span.start, loop.span.end)
    while node.parent is not None and not (node.start_byte == loop.span.start and node.type.endswith("_statement")):
        node = node.parent
    return node
