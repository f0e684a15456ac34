"""The records of the access analysis: buffers, loops, memory accesses, guards and
reductions of one function, with byte spans the edit engine can use.

Frozen and picklable; every fact a pass needs to decide is a field or a property, so
passes, the locality model, the proposers and the prompt read the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.analysis.affine import THREAD_AXES, Affine, Index, NotAffine
from kxform.frontend.model import Span

REDUCTION_OPS = ("+", "*", "max", "min")
_STRIDE_SHAPES = {
    ("threadIdx.x", "blockDim.x"): "block",
    ("blockDim.x*blockIdx.x + threadIdx.x", "blockDim.x*gridDim.x"): "grid",
}


@dataclass(frozen=True)
class Buffer:
    """Memory a function subscripts: a pointer parameter (global), a `__shared__` array, or
    an array local to a thread (registers or local memory)."""

    name: str
    space: str  # "global" | "shared" | "local"
    element: str
    """The element type as written, qualifiers removed (`float`, `__half`, `T`)."""
    restrict: bool = False
    const: bool = False
    extents: tuple[Affine | None, ...] = ()
    """Shared arrays: the extent of each dimension, an affine form of constants and template
    parameters (`TILE + 1`), None where not one."""


@dataclass(frozen=True)
class Comparison:
    """`left op right` with both sides evaluated (a bound a guard establishes)."""

    left: Index
    op: str  # "<", "<=", ">", ">=", "==", "!="
    right: Index

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class Guard:
    """A condition an access runs under: `holds` True inside `if (condition)`, False in its
    `else` and after `if (condition) return;` (an early exit)."""

    condition: str
    holds: bool
    span: Span
    kind: str  # "if" | "else" | "exit"
    bounds: tuple[Comparison, ...] = ()
    """What holds where the guarded code runs, as comparisons, when the condition is a
    conjunction of them (`i < n && j < m`; a negated disjunction `!(x >= nx || y >= ny)`
    gives `x < nx`, `y < ny`); empty otherwise."""

    def __str__(self) -> str:
        return self.condition if self.holds else f"!({self.condition})"


@dataclass(frozen=True)
class Reduction:
    """An accumulation `acc OP= e` (or `acc = max(acc, e)`, ...) into a scalar declared
    outside the loops that carry it, read nowhere else in them."""

    var: str
    op: str  # one of REDUCTION_OPS
    ctype: str
    init: str
    """The initial value as written (`0.0f`), "" when declared without one."""
    updates: tuple[Span, ...]
    """The statements that accumulate."""
    loop: int
    """The outermost loop that carries it (the innermost loop enclosing its declaration is outside)."""
    read_after: tuple[Span, ...] = ()
    """Where the result is read after that loop (a parallel version must give it to every
    thread that reads it there)."""

    @property
    def identity(self) -> str:
        """The operator's identity in C, for the element type."""
        floating = any(t in self.ctype for t in ("float", "double", "half", "bfloat"))
        if self.op == "+":
            return "0.0f" if "float" in self.ctype else "0.0" if floating else "0"
        if self.op == "*":
            return "1.0f" if "float" in self.ctype else "1.0" if floating else "1"
        if floating:
            return "-INFINITY" if self.op == "max" else "INFINITY"
        return "INT_MIN" if self.op == "max" else "INT_MAX"


@dataclass(frozen=True)
class Loop:
    """A loop of the function: `for (var = init; var op bound; var += step)` as far as it
    has that shape (`while`/`do` loops have no variable), with its dependence facts."""

    id: int
    kind: str  # "for" | "while" | "do"
    var: str
    parent: int | None
    depth: int
    init: Index
    op: str
    bound: Index
    step: Index
    span: Span
    """The whole statement (the node a loop replacement replaces)."""
    header: Span
    body: Span
    pragma: str | None = None
    """`#pragma unroll` just before it: the factor as written, "" for a bare `#pragma unroll`."""
    pragma_span: Span | None = None
    reductions: tuple[Reduction, ...] = ()
    carried: tuple[str, ...] = ()
    """Why iterations may depend on each other (other than through recognised reductions)."""
    barrier: bool = False
    """A `__syncthreads()`, warp shuffle or vote, or a call of a function holding one, inside."""
    exits: bool = False
    """A `return`, `break` or `goto` inside."""

    @property
    def trip(self) -> int | None:
        """The iteration count when init, bound and step are integer constants."""
        start, end, step = (x.value if isinstance(x, Affine) else None for x in (self.init, self.bound, self.step))
        if start is None or end is None or not step or self.op not in ("<", "<=", ">", ">=", "!="):
            return None
        end += 1 if self.op == "<=" else -1 if self.op == ">=" else 0
        if self.op == "!=":
            return (end - start) // step if (end - start) % step == 0 and (end - start) // step >= 0 else None
        span = end - start
        return max(0, -(-span // step)) if step > 0 else max(0, -(-span // step))

    @property
    def independent(self) -> bool:
        """Iterations may run in any order (recognised reductions reassociated)."""
        return not self.carried and self.kind == "for"

    @property
    def distribute_blockers(self) -> tuple[str, ...]:
        """Why the loop's iterations may not be shared out over threads (empty: they may)."""
        out = list(self.carried)
        if self.kind != "for" or not self.var:
            out.append("not a counted for loop")
        if self.barrier:
            out.append("a barrier or warp-level operation inside the loop")
        if self.exits:
            out.append("a return, break or goto inside the loop")
        if not isinstance(self.step, Affine) or not isinstance(self.bound, Affine):
            out.append("its bound or step is not affine")
        return tuple(out)

    @property
    def distributable(self) -> bool:
        return not self.distribute_blockers

    @property
    def stride_loop(self) -> str | None:
        """`block` for a loop that shares elements out over the threads of a block one per
        turn (`for (i = threadIdx.x; ...; i += blockDim.x)`), `grid` over the threads of
        the grid (`i = blockIdx.x * blockDim.x + threadIdx.x; ...; i += blockDim.x *
        gridDim.x`), start and step as the analysis reads them (through locals); None for
        any other loop, or one inside another."""
        if self.parent is not None or self.kind != "for" or not self.var:
            return None
        if not isinstance(self.init, Affine) or not isinstance(self.step, Affine):
            return None
        return _STRIDE_SHAPES.get((str(self.init), str(self.step)))


@dataclass(frozen=True)
class MemoryAccess:
    """One subscript (or `*p`, or `&a[i]` passed to an atomic) of a global or shared buffer."""

    buffer: str
    space: str
    element: str
    read: bool
    write: bool
    index: Index
    """The element offset from the buffer's base (shared arrays: flattened row-major)."""
    subscripts: tuple[Index, ...]
    """One index per dimension as written (`tile[ty + j][tx]`: two)."""
    text: str
    span: Span
    line: int
    function: str
    loops: tuple[int, ...]
    """Ids of the enclosing loops, outermost first."""
    guards: tuple[Guard, ...]
    via: tuple[str, ...] = ()
    """Locals through which a block index reaches the index."""
    atomic: bool = False
    update_op: str = ""
    """The compound operator of an update in place (`+=`), "" otherwise."""
    asynchronous: bool = False
    """A write made by an asynchronous copy (`__pipeline_memcpy_async`): it lands when the
    writing thread waits for the copy's group, not where it is written."""

    @property
    def affine(self) -> bool:
        return isinstance(self.index, Affine)

    def stride(self, variable: str) -> Affine | None:
        """The coefficient of `variable` in the index (None when the index is not affine)."""
        return self.index.coefficient(variable) if isinstance(self.index, Affine) else None

    @property
    def contiguous(self) -> bool:
        """Consecutive threadIdx.x touch consecutive elements (stride exactly 1)."""
        return isinstance(self.index, Affine) and self.index.stride("threadIdx.x") == 1

    @property
    def thread_invariant(self) -> bool:
        """The index depends on no thread index: every thread of a block touches the same element."""
        return isinstance(self.index, Affine) and not self.index.symbols & set(THREAD_AXES)

    @property
    def depends(self) -> frozenset[str]:
        """Index builtins the index depends on (`blockIdx.y`, `threadIdx.x`)."""
        return frozenset(s for s in self.index.symbols if "." in s and not s.startswith("sizeof"))

    @property
    def block_axes(self) -> frozenset[str]:
        return frozenset(d[-1] for d in self.depends if d.startswith("blockIdx."))

    @property
    def mode(self) -> str:
        return "read+write" if self.read and self.write else "write" if self.write else "read"

    def describe_index(self) -> str:
        return str(self.index) if isinstance(self.index, Affine) else str(self.index)


def not_affine_reason(index: Index) -> str | None:
    return index.reason if isinstance(index, NotAffine) else None
