"""The run-time overlap check of the `rows` pass: a row shared over G lanes reorders the
row's accesses, which is right only when no buffer the row's loops write overlaps another
buffer they touch. Where the launch's arguments are not known to be distinct allocations
and the parameters are not both `__restrict__`, each thread computes, at entry, the byte
range of each such buffer its row's loops touch (every affine index at the ends of its
loops' ranges) and tests the written ones against the others. When two overlap, the row
is not shared: lane 0 runs every loop alone, in the original order, and the other lanes
skip the loops (their reductions start at the identity), so the result is the original's.

    bool rows_alias = false;
    { long long rows_out_lo = ..., rows_out_hi = ...; ... rows_alias = ...; }
    const int rows_share = rows_alias ? 1 : K_LANES;
    for (int i = 0 + rows_lane; rows_lane < rows_share && i < C; i += rows_share)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, Affine, Loop
from kxform.analysis.affine import c_text

SHARE = "rows_share"
"""The local holding the lanes that share the row (1 where buffers overlap)."""
MAX_DEPTH = 3
"""Loops an access may be nested in (ranges are read at 2^depth corners)."""


@dataclass(frozen=True)
class Overlap:
    """The buffer pairs a run-time check must cover, its statements, or why it cannot be written."""

    pairs: tuple[tuple[str, str], ...]
    """(written, other) pointer parameters of the row's loops, not both `__restrict__`."""
    lines: tuple[str, ...] = ()
    unchecked: str = ""
    """Why no check could be written (an index that is not affine, a loop range kxform cannot read)."""

    @property
    def checked(self) -> bool:
        return bool(self.pairs) and not self.unchecked


def overlap(analysis: AccessAnalysis, loops: tuple[Loop, ...], params: set[str], lanes_name: str) -> Overlap:
    """The check for the row's `loops` (the shared-out top loops) of a kernel whose pointer
    parameters are `params`."""
    top = {loop.id for loop in loops}
    restrict = {b.name: b.restrict for b in analysis.buffers}
    touched = [a for a in analysis.accesses if a.space == "global" and a.loops and a.loops[0] in top]
    touched = [a for a in touched if a.buffer in params]
    written = sorted({a.buffer for a in touched if a.write})
    pairs: list[tuple[str, str]] = []
    for w in written:
        for b in sorted({a.buffer for a in touched}):
            if b != w and not (restrict.get(w) and restrict.get(b)) and (b, w) not in pairs:
                pairs.append((w, b))
    if not pairs:
        return Overlap(())
    rename = {"threadIdx.x": f"(threadIdx.x / {lanes_name})", "blockDim.x": f"(blockDim.x / {lanes_name})"}
    by_id = {loop.id: loop for loop in analysis.loops}
    ends: dict[str, list[str]] = {}
    needed = {b for pair in pairs for b in pair}
    for access in touched:
        if access.buffer not in needed:
            continue
        if not isinstance(access.index, Affine):
            return Overlap(tuple(pairs), unchecked=f"the index of '{access.text}' (line {access.line}) is not affine")
        corners = _corners(access.index, [by_id[i] for i in access.loops])
        if isinstance(corners, str):
            return Overlap(tuple(pairs), unchecked=corners)
        texts = ends.setdefault(access.buffer, [])
        texts += [t for t in (c_text(c, rename) for c in corners) if t not in texts]
    return Overlap(tuple(pairs), _statements(ends, pairs, lanes_name))


def _corners(index: Affine, loops: list[Loop]) -> list[Affine] | str:
    """`index` at the first and last value of each enclosing loop (innermost first, so an
    inner range that reads an outer variable is taken at the outer ends too)."""
    if len(loops) > MAX_DEPTH:
        return f"an access nested {len(loops)} loops deep"
    forms = [index]
    for loop in reversed(loops):
        if not (isinstance(loop.init, Affine) and isinstance(loop.bound, Affine) and loop.var):
            return f"the range of the loop over '{loop.var or loop.kind}' is not affine"
        step = loop.step.value if isinstance(loop.step, Affine) else None
        if loop.op not in ("<", "<=") or not step or step <= 0:
            return f"the loop over '{loop.var}' does not count up under < or <="
        last = loop.bound - Affine.const(1) if loop.op == "<" else loop.bound
        forms = [f.substitute(loop.var, end) for f in forms for end in (loop.init, last)]
    return list(dict.fromkeys(forms))


def _statements(ends: Mapping[str, list[str]], pairs: list[tuple[str, str]], lanes_name: str) -> tuple[str, ...]:
    lines = ["bool rows_alias = false;", "{"]
    for buffer, texts in ends.items():
        var = f"rows_{buffer}"
        lines.append(f"    long long {var}_lo = {texts[0]}, {var}_hi = {var}_lo;")
        for text in texts[1:]:
            lines += [
                f"    {{ const long long rows_e = {text};",
                f"      {var}_lo = rows_e < {var}_lo ? rows_e : {var}_lo; {var}_hi = rows_e > {var}_hi ? rows_e : {var}_hi; }}",
            ]
    for first, second in pairs:
        a, b = f"rows_{first}", f"rows_{second}"
        lines.append(
            f"    rows_alias = rows_alias || ({_byte(first, a + '_lo')} < {_byte(second, b + '_hi + 1')} && "
            f"{_byte(second, b + '_lo')} < {_byte(first, a + '_hi + 1')});"
        )
    lines += ["}", f"const int {SHARE} = rows_alias ? 1 : {lanes_name};"]
    return tuple(lines)


def _byte(buffer: str, element: str) -> str:
    """The byte address of element `element` of `buffer`, as an integer (no pointer is formed
    outside the allocation)."""
    return f"((long long)({buffer}) + ({element}) * (long long)sizeof({buffer}[0]))"
