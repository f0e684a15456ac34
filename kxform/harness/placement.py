"""Buffers placed as a size's `layout` says: misaligned within an allocation of their own,
or overlapping another buffer (docs/harness-spec.md, *Layouts*).

A rewrite that widens accesses or reorders a thread's loads and stores is right only
for aligned, non-overlapping buffers, or where it checks them at run time. A spec's
sizes normally give every buffer an allocation of its own, so a removed check cannot
show; a size with a layout exercises it. Each buffer another is placed `within` (the
root), with the buffers placed in it, becomes one allocation (a runtime arena) covering
all of them; a buffer placed at an offset of its own allocation too. The arena holds the
members' inputs, then the root's on top (where they overlap, the root's values are what
both read); an `out` buffer's own elements hold the poison, as an `out` buffer's do.
"""

from __future__ import annotations

import numpy as np

from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import Placement
from kxform.runtime.base import BufferArg, poison_like


def place(resolved: ResolvedLaunch, args: list[BufferArg]) -> tuple[list[BufferArg], tuple[BufferArg, ...]]:
    """`args` (one allocation each) as the layout of `resolved` places them, and the arenas."""
    layout = dict(resolved.layout)
    if not layout:
        return args, ()
    by_name = {a.name: a for a in args}
    roots = {p.within or name for name, p in layout.items()}
    placed: dict[str, BufferArg] = {}
    arenas: list[BufferArg] = []
    for root in sorted(roots):
        members = [n for n, p in layout.items() if p.within == root]
        lead = layout.get(root, Placement()).offset * by_name[root].data.itemsize  # the root's own offset
        starts = {root: 0, **{n: layout[n].offset * by_name[n].data.itemsize for n in members}}  # from its pointer
        low = min([-lead, *starts.values()])
        high = max(start + by_name[n].data.nbytes for n, start in starts.items())
        arena = np.zeros(high - low, dtype=np.uint8)
        for name in [*members, root]:  # the root's values last: where they overlap, both read the root's
            arg = by_name[name]
            data = poison_like(arg.data) if arg.role == "out" else np.ascontiguousarray(arg.data)
            at = starts[name] - low
            arena[at : at + arg.data.nbytes] = data.reshape(-1).view(np.uint8)
        label = f"{root}@arena"
        arenas.append(BufferArg(label, arena, "inout"))
        for name in [root, *members]:
            arg = by_name[name]
            placed[name] = BufferArg(arg.name, arg.data, arg.role, arena=label, offset=starts[name] - low)
    return [placed.get(a.name, a) for a in args], tuple(arenas)
