"""Loads a thread repeats once it computes several outputs along an axis.

A kernel written one output per thread indexes with `v = blockIdx.a * blockDim.a +
threadIdx.a`. Coarsened (kxform.passes.coarsen), a thread runs the same body for the
outputs `v0 + f`, f = 0..F-1. A global load `A[e]` whose index is affine in `v`,

    e = c * v + r        (c and r free of the axis: other indices, launch parameters)

reads the element `c * (v0 + f) + r` at output f. Two loads of one buffer with the same
`c` and `r - r' = c * d` (d an integer) read the same element at outputs f and f + d, so
one register can serve both: a *group* of loads, each with its *shift* d relative to the
group's first load. With `c == 0` every output reads the same element.

Reusing a register is exact only when nothing stores to the element in between. This
module proves the part that can be proven from the code alone: the loaded buffer is
never written by the kernel and never escapes it (every use is a subscript the access
analysis records), and every store of the kernel is a subscript of a pointer parameter
with an index of the same form, so that the elements a thread stores to lie in a range
it can compute (`StoreSite`). Whether a stored buffer overlaps a loaded one is a fact of
the launch, not of the code: the caller checks it at run time, or takes `__restrict__`
on both as the programmer's promise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis.access import AccessAnalysis, analyse_function, closure_functions
from kxform.analysis.affine import Affine
from kxform.analysis.records import Buffer, MemoryAccess
from kxform.frontend.lexical import blank_comments_and_strings
from kxform.frontend.model import Function, SourceModel

SCALAR_ELEMENTS = frozenset(
    {
        "float",
        "double",
        "int",
        "unsigned",
        "unsigned int",
        "long",
        "long long",
        "unsigned long",
        "unsigned long long",
        "short",
        "unsigned short",
        "char",
        "unsigned char",
        "signed char",
        "size_t",
        "int64_t",
        "uint64_t",
        "int32_t",
        "uint32_t",
        "int16_t",
        "uint16_t",
        "int8_t",
        "uint8_t",
        "half",
        "__half",
        "__nv_bfloat16",
        "__hip_bfloat16",
        "float2",
        "float4",
        "double2",
        "int2",
        "int4",
        "half2",
        "__half2",
        "__nv_bfloat162",
    }
)
"""Element types a register holds as a value (a load of a struct would copy the struct)."""

_ASSIGNED = r"(?:\+\+|--)\s*{0}\b|\b{0}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\b{0}\s*(?:\+\+|--)"


@dataclass(frozen=True)
class Split:
    """An index `step * v + rest`, `v` the coarsened axis's thread index."""

    step: Affine
    rest: Affine


@dataclass(frozen=True)
class SharedLoad:
    access: MemoryAccess
    shift: int
    """At output f this load reads the group's element f + shift (0 for a `step == 0` group)."""


@dataclass(frozen=True)
class LoadGroup:
    """Loads of one buffer whose elements coincide for some pair of outputs."""

    buffer: Buffer
    step: Affine
    rest: Affine
    """`rest` of the first load (shift 0)."""
    loads: tuple[SharedLoad, ...]

    @property
    def low(self) -> int:
        return min(load.shift for load in self.loads)

    @property
    def high(self) -> int:
        return max(load.shift for load in self.loads)

    def slots(self, factor: int) -> int:
        """Distinct elements the group reads over `factor` outputs."""
        if self.step.value == 0:
            return 1
        return factor + self.high - self.low

    def slot(self, load: SharedLoad) -> int:
        """The register a load uses at output 0 (it uses `slot + f` at output f)."""
        return 0 if self.step.value == 0 else load.shift - self.low

    def shares(self, factor: int) -> bool:
        """Some element is read twice by the `factor` outputs of a thread."""
        if self.step.value == 0:
            return factor > 1 or len(self.loads) > 1
        hits = [f + load.shift for load in self.loads for f in range(factor)]
        return len(hits) > len(set(hits))


@dataclass(frozen=True)
class StoreSite:
    """A store `B[step * v + rest]` of the kernel: the elements a thread writes lie between
    its first and last output's."""

    buffer: Buffer
    split: Split
    access: MemoryAccess


@dataclass(frozen=True)
class Reuse:
    """The groups (shared or not) and the stores a run-time overlap check must cover."""

    groups: tuple[LoadGroup, ...]
    stores: tuple[StoreSite, ...]
    scalars: frozenset[str]
    """Kernel scalar parameters the indices read (never assigned in the kernel)."""

    def shared(self, factor: int) -> tuple[LoadGroup, ...]:
        return tuple(g for g in self.groups if g.shares(factor))

    def restricted(self, factor: int) -> bool:
        """Every buffer cached at `factor` and every stored buffer is `__restrict__`: no
        store can reach a cached element, by the programmer's promise."""
        return all(g.buffer.restrict and s.buffer.restrict for g in self.shared(factor) for s in self.stores)


def split_index(index: Affine, axis: str) -> Split | None:
    """`index` as `step * (blockIdx.a * blockDim.a + threadIdx.a) + rest`, None when it
    reads the axis any other way (`threadIdx.a` alone, `gridDim.a`)."""
    thread, block, dim = f"threadIdx.{axis}", f"blockIdx.{axis}", f"blockDim.{axis}"
    step = index.coefficient(thread)
    if index.coefficient(block) != step * Affine.symbol(dim):
        return None
    rest = index - step * (Affine.symbol(block) * Affine.symbol(dim) + Affine.symbol(thread))
    moving = {thread, block, f"gridDim.{axis}"}
    if any(moving & set(m) for m, _ in rest.terms) or any(moving & set(m) for m, _ in step.terms):
        return None
    return Split(step, rest)


def shift_between(first: Split, other: Split) -> int | None:
    """d with `other.rest - first.rest == d * step` (same step), None when there is none."""
    if other.step != first.step:
        return None
    diff = other.rest - first.rest
    if first.step.value == 0:
        return 0 if diff == Affine() else None
    monomial, coeff = first.step.terms[0]
    got = dict(diff.terms).get(monomial, 0)
    if got % coeff:
        return None
    d = got // coeff
    return d if diff == first.step.scaled(d) else None


@dataclass(frozen=True)
class Cacheable:
    """Which global buffers of a kernel a register may hold elements of, and the symbols an
    index may read for its split to mean the same at every output."""

    kernel: Function
    data: bytes
    pointers: dict[str, Buffer]
    registers: frozenset[str]
    """Pointer parameters whose element a register holds as a value (`Cacheable.scalar`)."""
    escaped: frozenset[str]
    """Pointer parameters used other than as `name[...]` (passed on, copied, offset)."""
    written: frozenset[str]
    scalars: frozenset[str]
    allowed: frozenset[str]
    writers: tuple[str, ...] = ()
    """Functions of this file the kernel reaches that store to memory (or update it
    atomically): their stores are not the kernel's accesses, so no register is safe."""

    def load(self, access: MemoryAccess, axis: str, loop_var: str = "") -> Split | None:
        """The split of a load a register may serve (None: it may not): a direct subscript
        of a pointer parameter the kernel never writes and never lets escape, of a scalar
        element type, whose value is taken (not its address)."""
        buffer = self.pointers.get(access.buffer)
        if (
            buffer is None
            or not access.read
            or access.write
            or access.atomic
            or access.buffer in self.written
            or access.buffer in self.escaped
            or not _direct(access)
            or access.buffer not in self.registers
            or _address_taken(self.data, access)
            or "volatile" in _param_type(self.kernel, buffer.name)
        ):
            return None
        return _split(access, axis, self.allowed | ({loop_var} if loop_var else set()))


def cacheable(model: SourceModel, kernel: Function, analysis: AccessAnalysis) -> Cacheable:
    data = model.source.data
    body = data[kernel.body.start : kernel.body.end].decode("utf-8", "replace")
    scalars = frozenset(
        p.name
        for p in kernel.params
        if p.name not in {b.name for b in analysis.buffers} and not re.search(_ASSIGNED.format(re.escape(p.name)), body)
    )
    allowed = scalars | {f"{b}.{a}" for b in ("threadIdx", "blockIdx", "blockDim", "gridDim") for a in "xyz"}
    pointers = {b.name: b for b in analysis.buffers if b.space == "global"}
    direct: dict[str, int] = {}
    for access in analysis.accesses:
        if access.buffer in pointers and _direct(access):
            direct[access.buffer] = direct.get(access.buffer, 0) + 1
    code = blank_comments_and_strings(body)  # a member (`threadIdx.x`) is not a use of a buffer named `x`
    uses = {name: len(re.findall(rf"(?<![.\w])(?<!->){re.escape(name)}\b", code)) for name in pointers}
    escaped = frozenset(name for name in pointers if uses[name] != direct.get(name, 0))
    written = frozenset(a.buffer for a in analysis.accesses if a.write)
    writers = tuple(f.name for f in closure_functions(model, kernel)[1:] if stores_memory(model, f))
    text = data.decode("utf-8", "replace")
    registers = frozenset(name for name, b in pointers.items() if _register_type(text, b.element))
    return Cacheable(kernel, data, pointers, registers, escaped, written, scalars, frozenset(allowed), writers)


def _register_type(text: str, element: str) -> bool:
    """A register holds the element as a value: a scalar or vector type, or a name the file
    `text` makes one (`typedef float DATA_TYPE;`, `#define real double`, `using T = float;`)."""
    if element in SCALAR_ELEMENTS:
        return True
    name = re.escape(element)
    for pattern in (
        rf"\btypedef\s+([\w\s]+?)\s+{name}\s*;",
        rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]+([\w \t]+?)[ \t]*$",
        rf"\busing\s+{name}\s*=\s*([\w\s]+?)\s*;",
    ):
        found = re.search(pattern, text, flags=re.MULTILINE)
        if found and " ".join(found.group(1).split()) in SCALAR_ELEMENTS:
            return True
    return False


def analyse_reuse(
    model: SourceModel, kernel: Function, analysis: AccessAnalysis, axis: str, able: Cacheable | None = None
) -> Reuse | str:
    """The load groups (outside loops) and store sites of `kernel` along `axis`, or why no
    load can be served from a register (one line). `able`: the kernel's `cacheable` facts,
    when the caller has them (they do not depend on the axis)."""
    able = able or cacheable(model, kernel, analysis)
    if able.writers:
        return f"the kernel calls `{able.writers[0]}`, which stores to memory the analysis does not see as the kernel's"
    stores = []
    for access in analysis.accesses:
        if not access.write or access.space == "local":
            continue
        where = f"line {access.line}"
        if access.space != "global" or access.buffer in able.escaped or not _direct(access):
            return f"the store `{access.text}` ({where}) is not a subscript of a pointer parameter used only so"
        if access.loops:
            return f"the store `{access.text}` ({where}) is inside a loop: its elements have no range per thread"
        split = _split(access, axis, able.allowed)
        if split is None:
            return f"the store `{access.text}` ({where}) is not affine in the thread index"
        stores.append(StoreSite(able.pointers[access.buffer], split, access))
    groups: list[tuple[Buffer, Split, list[SharedLoad]]] = []
    for access in analysis.accesses:
        split = able.load(access, axis) if not access.loops else None
        if split is None:
            continue
        buffer = able.pointers[access.buffer]
        for group_buffer, first, loads in groups:
            shift = shift_between(first, split) if group_buffer.name == buffer.name else None
            if shift is not None:
                loads.append(SharedLoad(access, shift))
                break
        else:
            groups.append((buffer, split, [SharedLoad(access, 0)]))
    if not groups:
        return "no load outside a loop reads a buffer the kernel never writes with an index affine in the thread index"
    return Reuse(
        tuple(LoadGroup(b, s.step, s.rest, tuple(loads)) for b, s, loads in groups), tuple(stores), able.scalars
    )


def stores_memory(model: SourceModel, function: Function) -> bool:
    """`function` may store to memory: a store or atomic the analysis records, or any
    assignment through a subscript or a dereference (a global pointer variable is no
    buffer of the analysis's; a local array counts too: conservative)."""
    if any((a.write and a.space != "local") or a.atomic for a in analyse_function(model, function).accesses):
        return True
    body = blank_comments_and_strings(
        model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
    )
    return (
        re.search(r"(?:\]|\*\s*[A-Za-z_]\w*|->\s*\w+)\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\batomic\w*\s*\(", body) is not None
    )


def _split(access: MemoryAccess, axis: str, allowed: set[str] | frozenset[str]) -> Split | None:
    if not isinstance(access.index, Affine) or len(access.subscripts) != 1:
        return None
    if any(symbol not in allowed for symbol in access.index.symbols):
        return None
    return split_index(access.index, axis)


def _direct(access: MemoryAccess) -> bool:
    """`name[...]`: a subscript of the buffer itself (not through a local pointer or `*p`)."""
    return re.match(rf"{re.escape(access.buffer)}\s*\[", access.text) is not None


def _address_taken(data: bytes, access: MemoryAccess) -> bool:
    """`&A[i]` (a pointer, not a load); `a & A[i]` is refused alike."""
    before = data[max(0, access.span.start - 64) : access.span.start].rstrip()
    return before.endswith(b"&") and not before.endswith(b"&&")


def _param_type(kernel: Function, name: str) -> str:
    return next((p.ctype for p in kernel.params if p.name == name), "")
