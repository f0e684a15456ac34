"""Block-stride and grid-stride loops: the second shape `vectorize` widens.

    for (int i = threadIdx.x; i < D; i += blockDim.x) { ... }                          // block-stride
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)  // grid-stride

(`Loop.stride_loop` of the shared access analysis: the start and step may be spelled
through locals, `int stride = gridDim.x * blockDim.x;`). The threads of the block (the grid) share out the
elements 0 .. D-1, one each per turn. With width W they share out vectors instead: the
loop starts at `start * W` and steps by `step * W`, so a thread's turn covers elements
i .. i+W-1, and the union over the threads is the same set of elements. Neither the
launch nor the grid changes.

Each turn takes a vector path when its W elements are all below the bound, every
widened access's vector is aligned (checked at run time on its address: a row that starts
at `t * D` is aligned for some D and not others) and no written vector overlaps another
widened one (unless both buffers are `__restrict__`): one vector load per widened read,
the body once per element in order on registers, one vector store per widened write. A
scalar path runs the body as written for each element below the bound otherwise (the
tail, a misaligned row). No arithmetic is reordered: bit-exact.

An access is widened when its index is `base + i` with `base` fixed for the thread's
turn (it may depend on the block: a row `t * 2 * D`); a read whose index does not depend
on `i` is kept as written (of a buffer the kernel never writes, and `__restrict__` when
anything is written, since the widened stores move after it). Refused, with the line:
any other access in the loop, an access under a condition inside the loop, a loop with a
reduction, a carried dependence, a barrier, an exit or `continue`, a bound other than
`i < BOUND`, a pointer used other than by the subscripts the analysis follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis import AccessAnalysis, Affine, Loop, MemoryAccess
from kxform.engine.edits import Edit
from kxform.engine.pass_api import Blocker, PassContext
from kxform.engine.rewrite import loop_header, scale_loop
from kxform.frontend.model import Function, SourceModel
from kxform.passes.vectorize.facts import SIZES, VECTOR_TYPES, WIDTHS, element_of

PREFIX = "kx_e"


@dataclass(frozen=True)
class Widened:
    """The accesses of one element per turn (`buf[base + i]`, read, written or both): one
    vector, one register per lane."""

    accesses: tuple[MemoryAccess, ...]
    element: str
    restrict: bool

    @property
    def text(self) -> str:
        """The subscript as written (at the turn's first element, its vector's address)."""
        return self.accesses[0].text

    @property
    def read(self) -> bool:
        return any(a.read for a in self.accesses)

    @property
    def write(self) -> bool:
        return any(a.write for a in self.accesses)

    @property
    def size(self) -> int:
        return SIZES[self.element]


@dataclass(frozen=True)
class StrideLoop:
    """A block- or grid-stride loop the pass widens, with what it needs to rewrite it."""

    loop: Loop
    kind: str  # "block" | "grid"
    ctype: str
    """The loop variable's type as declared (`int`, `int64_t`)."""
    bound: str
    """The right side of `i < BOUND`, as written."""
    widened: tuple[Widened, ...]


@dataclass(frozen=True)
class StrideFacts:
    loops: tuple[StrideLoop, ...]
    blockers: tuple[Blocker, ...]

    def widths(self) -> tuple[int, ...]:
        """Widths at which every widened access moves 4, 8 or 16 bytes per turn."""
        found = [w for lp in self.loops for w in lp.widened]
        if not found:
            return ()
        return tuple(w for w in WIDTHS if all(w * x.size in VECTOR_TYPES for x in found))


def stride_facts(ctx: PassContext, kernel: Function) -> StrideFacts:
    """The kernel's stride loops and what they widen, or why not (each reason with its line)."""
    model = ctx.model
    analysis = ctx.analysis(AccessAnalysis, kernel)
    loops = [lp for lp in analysis.loops if lp.stride_loop]
    line = model.source.line_col
    if not loops:
        return StrideFacts((), (Blocker("NotElementwise", "no block- or grid-stride loop", kernel.span.start),))
    found: list[StrideLoop] = []
    for loop in loops:
        why = _refusal(model, analysis, loop)
        if why is not None:
            key, message, offset = why
            return StrideFacts((), (Blocker(key, f"{message} (line {line(offset)[0]})", offset),))
        found.append(_stride_loop(model, analysis, loop))
    return StrideFacts(tuple(found), ())


def _refusal(model: SourceModel, analysis: AccessAnalysis, loop: Loop) -> tuple[str, str, int] | None:
    data = model.source.data
    header = loop_header(model, loop)
    body = data[loop.body.start : loop.body.end].decode("utf-8", "replace")
    what = f"the stride loop over '{loop.var}'"
    if loop.reductions or loop.carried:
        why = loop.carried[0] if loop.carried else f"it accumulates '{loop.reductions[0].var}'"
        return "Dependence", f"{what} carries a value from one turn to the next: {why}", loop.span.start
    if loop.barrier or loop.exits or re.search(r"\bcontinue\b", body):
        return "LoopShape", f"{what} holds a barrier, a warp operation or an exit", loop.span.start
    if header is None:
        return "LoopShape", f"{what} does not declare '{loop.var}' in its header", loop.span.start
    if not header.bound or header.step is None:
        return "LoopShape", f"{what} does not run while `{loop.var} < BOUND` by `{loop.var} += STRIDE`", loop.span.start
    mine = [a for a in analysis.accesses if loop.id in a.loops]
    written = {a.buffer for a in analysis.accesses if a.write}
    for access in mine:
        inner = [g for g in access.guards if loop.body.contains(g.span)]
        if access.loops != (loop.id,) or inner:
            return "NotContiguous", f"`{access.text}` is under a condition or a loop inside {what}", access.span.start
        if access.space not in ("global", "shared") or access.atomic or not isinstance(access.index, Affine):
            return "NotContiguous", f"`{access.text}` is not a subscript the analysis follows", access.span.start
        if _widened(access, loop.var) is None:
            if loop.var in access.index.symbols or access.write or access.buffer in written:
                return (
                    "NotContiguous",
                    f"`{access.text}` is neither `base + {loop.var}` nor fixed over the loop",
                    access.span.start,
                )
            if written & {a.buffer for a in mine} and not _restrict(analysis, access.buffer):
                return (
                    "MayAlias",
                    f"`{access.text}` is read as written and may overlap a buffer the loop writes (no __restrict__)",
                    access.span.start,
                )
        elif access.space != "global" or element_of(access) not in SIZES:
            return "ElementType", f"`{access.text}` is not a global buffer of a known element type", access.span.start
    for access in mine:
        local = next((n for n in _names(access.text) if _declared_in(body, n)), None)
        if local is not None and _widened(access, loop.var) is not None:
            return (
                "LoopShape",
                f"`{access.text}` reads '{local}', declared inside {what}: its address is not known before the turn",
                access.span.start,
            )
    escaped = _escaped(body, mine)
    if escaped is not None:
        return (
            "Escapes",
            f"`{escaped}` is used in {what} other than by a subscript the analysis follows",
            loop.span.start,
        )
    if not any(_widened(a, loop.var) for a in mine):
        return "NotContiguous", f"no access in {what} is `base + {loop.var}`", loop.span.start
    return None


def _widened(access: MemoryAccess, var: str) -> Affine | None:
    """The base of `base + var` (fixed for the thread's turn), or None."""
    index = access.index
    if not isinstance(index, Affine) or index.coefficient(var) != Affine.const(1):
        return None
    base = index - Affine.symbol(var)
    if base.symbols & {"threadIdx.x", "threadIdx.y", "threadIdx.z"} or var in base.symbols:
        return None
    return base


def _names(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", text))


def _declared_in(text: str, name: str) -> bool:
    """`name` is declared in `text` (a declaration starts a statement or a `for` header)."""
    return (
        re.search(
            r"(?:^|[;{}(])\s*(?:(?:const|volatile|static|unsigned|signed|long|short)\s+)*[A-Za-z_][\w:<>]*"
            rf"(?:\s*[*&]+\s*|\s+){re.escape(name)}\s*(?:=|;|\[|,)",
            text,
        )
        is not None
    )


def _restrict(analysis: AccessAnalysis, buffer: str) -> bool:
    return any(b.name == buffer and b.restrict for b in analysis.buffers)


def _escaped(body: str, accesses: list[MemoryAccess]) -> str | None:
    """A pointer the loop names more often than its recorded subscripts do (passed on, or
    moved): what it reaches is not known."""
    roots = {re.match(r"\s*([A-Za-z_]\w*)", a.text).group(1) for a in accesses if re.match(r"\s*[A-Za-z_]", a.text)}  # type: ignore[union-attr]
    for root in sorted(roots):
        word = re.compile(rf"(?<![\w.]){re.escape(root)}(?!\w)")
        if len(word.findall(body)) > sum(len(word.findall(a.text)) for a in accesses):
            return root
    return None


def _stride_loop(model: SourceModel, analysis: AccessAnalysis, loop: Loop) -> StrideLoop:
    header = loop_header(model, loop)
    assert header is not None
    ctype, bound = header.ctype, header.bound
    slots: dict[tuple[str, str], list[MemoryAccess]] = {}
    for a in analysis.accesses:
        if loop.id in a.loops and _widened(a, loop.var) is not None:
            slots.setdefault((a.buffer, str(a.index)), []).append(a)
    widened = tuple(
        Widened(tuple(found), element_of(found[0]), _restrict(analysis, found[0].buffer)) for found in slots.values()
    )
    return StrideLoop(loop, loop.stride_loop or "", ctype, bound, widened)


def stride_edits(model: SourceModel, loops: tuple[StrideLoop, ...], width: int, name: str, origin: str) -> list[Edit]:
    """Each loop's start and step scaled by the width, and its body as a vector path and a
    scalar path."""
    out: list[Edit] = []
    data = model.source.data
    for sl in loops:
        out += scale_loop(model, sl.loop, name, True, origin)
        braced = data[sl.loop.body.start : sl.loop.body.end].strip().startswith(b"{")
        header = loop_header(model, sl.loop)
        assert header is not None
        start = sl.loop.body.start if braced else header.end
        out.append(Edit(start, sl.loop.body.end, ("" if braced else " ") + _body(model, sl, width, name), origin))
    return out


def _body(model: SourceModel, sl: StrideLoop, width: int, name: str) -> str:
    nl = model.source.newline
    ind = model.source.indent_at(sl.loop.span.start)
    step = "    "
    inner, lanes = _inside(model, sl)
    var, ctype = sl.loop.var, sl.ctype
    checks = [f"kx_first + {name} <= ({sl.bound})"]
    for w in sl.widened:
        checks.append(f"(unsigned long long)(&{w.text}) % {width * w.size} == 0")
    for n, w in enumerate(sl.widened):
        if not w.write:
            continue
        for m, other in enumerate(sl.widened):
            if m == n or (m < n and other.write) or (w.restrict and other.restrict):
                continue
            a, b = f"(unsigned long long)(&{w.text})", f"(unsigned long long)(&{other.text})"
            checks.append(f"({a} + {width * w.size} <= {b} || {b} + {width * other.size} <= {a})")
    s2 = step * 2
    lines = [
        "{",
        f"{step}const {ctype} kx_first = {var};",
        f"{step}if ({f' &&{nl}{ind}{s2}'.join(checks)}) {{",
    ]
    for n, w in enumerate(sl.widened):
        vt = VECTOR_TYPES[width * w.size]
        lines.append(f"{s2}{w.element} {PREFIX}{n}[{name}];")
        if w.read:
            lines.append(
                f"{s2}{{ const {vt} kx_t = *reinterpret_cast<const {vt}*>(&{w.text}); "
                f"memcpy({PREFIX}{n}, &kx_t, sizeof(kx_t)); }}"
            )
    lines += [
        f"{s2}#pragma unroll",
        f"{s2}for (int kx_j = 0; kx_j < {name}; ++kx_j) {{",
        *([f"{s2}{step}const {ctype} {var} = kx_first + kx_j;"] if re.search(rf"(?<![\w.]){var}(?!\w)", lanes) else []),
        *_indented(lanes, s2 + step),
        f"{s2}}}",
    ]
    for n, w in enumerate(sl.widened):
        if w.write:
            vt = VECTOR_TYPES[width * w.size]
            lines.append(
                f"{s2}{{ {vt} kx_t; memcpy(&kx_t, {PREFIX}{n}, sizeof(kx_t)); "
                f"*reinterpret_cast<{vt}*>(&{w.text}) = kx_t; }}"
            )
    lines += [
        f"{step}}} else {{",
        f"{s2}for (int kx_j = 0; kx_j < {name} && kx_first + kx_j < ({sl.bound}); ++kx_j) {{",
        f"{s2}{step}const {ctype} {var} = kx_first + kx_j;",
        *_indented(inner, s2 + step),
        f"{s2}}}",
        f"{step}}}",
        "}",
    ]
    return lines[0] + "".join(f"{nl}{ind}{line}" for line in lines[1:])


def _inside(model: SourceModel, sl: StrideLoop) -> tuple[str, str]:
    """The body's statements as written, and with each widened access replaced by its
    register lane (`kx_e0[kx_j]`)."""
    data = model.source.data
    start, end = sl.loop.body.start, sl.loop.body.end
    while data[start : start + 1].isspace():
        start += 1
    while data[end - 1 : end].isspace():
        end -= 1
    if data[start : start + 1] == b"{" and data[end - 1 : end] == b"}":
        start, end = start + 1, end - 1
    parts, at = [], start
    spans = sorted((a.span.start, a.span.end, n) for n, w in enumerate(sl.widened) for a in w.accesses)
    for first, last, n in spans:
        parts.append(data[at:first])
        parts.append(f"{PREFIX}{n}[kx_j]".encode())
        at = last
    parts.append(data[at:end])
    return data[start:end].decode("utf-8"), b"".join(parts).decode("utf-8")


def _indented(text: str, indent: str) -> list[str]:
    rows = [r.rstrip() for r in text.strip("\n").split("\n")]
    rows = [r for r in rows if r.strip()] or [""]
    common = min(len(r) - len(r.lstrip()) for r in rows)
    return [indent + r[common:] for r in rows]
