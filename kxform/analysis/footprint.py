"""What one thread of a kernel does at a concrete launch: memory accesses, the bytes the
memory system moves for them, arithmetic, barriers.

The access analysis (kxform.analysis.access) gives each access its loops and its index
as an affine form in the thread and block indices, loop variables and launch
parameters. Given the values of those parameters at one launch (scalar arguments,
`blockDim`, `gridDim`), each access is counted once per iteration of its loops, and
its *sector bytes* are what a warp's request costs the memory system per thread: the
32-byte sectors the 32 lanes touch, from the stride of the index in `threadIdx.x`
(stride 1 over 4-byte elements: four sectors for 32 lanes, 4 bytes a thread; a stride of
eight elements or more: one sector per lane, 32 bytes a thread; stride 0, a broadcast:
one sector for the warp). Arithmetic is counted from the syntax: every arithmetic
operator, and a math library call as several operations, times the iterations of the
loops around it. Loop counts that do not evaluate (a `while`, a bound loaded from
memory) count one iteration and are named in `unresolved`.

The tuner's cost model (kxform.search.cost) turns a footprint into a predicted time;
nothing here is specific to a pass: the footprint of a rewritten kernel is computed
from its own source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kxform.analysis.access import AccessAnalysis
from kxform.analysis.affine import THREAD_AXES, Affine, Index
from kxform.analysis.records import Loop, MemoryAccess
from kxform.frontend.model import SourceModel

SECTOR_BYTES = 32
WARP = 32
ELEMENT_BYTES = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "bool": 1,
    "short": 2,
    "unsigned short": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "__hip_bfloat16": 2,
    "nv_bfloat16": 2,
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "half2": 4,
    "__half2": 4,
    "__nv_bfloat162": 4,
    "double": 8,
    "long": 8,
    "long long": 8,
    "unsigned long": 8,
    "unsigned long long": 8,
    "size_t": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "float2": 8,
    "int2": 8,
    "float4": 16,
    "int4": 16,
    "uint4": 16,
    "double2": 16,
}
"""Bytes of the element types a kernel subscripts (an unknown type, a template `T`, counts 4)."""
MATH_CALL_OPS = 8
"""Operations a math library call counts for (`expf`, `sqrtf`, `tanhf`: a few instructions
each on the special-function unit plus their range reduction)."""
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"})
_COMPOUND = frozenset({"+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="})
_MATH_PREFIXES = ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "pow", "erf", "__expf", "__logf", "__powf")


@dataclass(frozen=True)
class Footprint:
    """Per thread, at one launch: global loads and stores (element accesses), the bytes
    they carry and the sector bytes the memory system moves for them, shared-memory
    accesses, arithmetic operations, barriers, and the static shared memory of a block."""

    loads: float
    stores: float
    useful_bytes: float
    sector_bytes: float
    shared_accesses: float
    ops: float
    barriers: float
    shared_bytes: int
    unresolved: tuple[str, ...] = ()
    """What did not evaluate (a loop count, an element size), counted as one iteration or 4 bytes."""


def footprint(model: SourceModel, access: AccessAnalysis, values: Mapping[str, int]) -> Footprint:
    """The footprint of the function `access` describes at the launch parameters `values`
    (scalar argument names, `blockDim.x`, `gridDim.y`, ...; thread and block indices are
    taken at 0, the first thread, whose loops are the longest)."""
    unresolved: list[str] = []
    trips = {loop.id: _trip(loop, values, unresolved) for loop in access.loops}
    loads = stores = useful = sectors = shared = 0.0
    for a in access.accesses:
        count = math.prod(trips[i] for i in a.loops)
        if a.space == "shared":
            shared += count * ((1 if a.read else 0) + (1 if a.write else 0))
            continue
        if a.space != "global":
            continue
        size = _element_bytes(a.element, unresolved)
        per_thread = _sector_bytes(access, a, size, values)
        for happens in (a.read, a.write):
            if not happens:
                continue
            useful += count * size
            sectors += count * per_thread
        loads += count if a.read else 0.0
        stores += count if a.write else 0.0
    ops, barriers = _arithmetic(model, access, trips)
    return Footprint(
        loads,
        stores,
        useful,
        sectors,
        shared,
        ops,
        barriers,
        _shared_bytes(access, values, unresolved),
        tuple(dict.fromkeys(unresolved)),
    )


def value_at(index: Index, values: Mapping[str, int]) -> float | None:
    """`index` evaluated with `values` (thread and block indices at 0); None when a symbol
    has no value or the index is not affine."""
    if not isinstance(index, Affine):
        return None
    total = 0.0
    for monomial, coeff in index.terms:
        term = float(coeff)
        for symbol in monomial:
            if symbol in THREAD_AXES or symbol.startswith("blockIdx."):
                term = 0.0
                break
            if symbol not in values:
                return None
            term *= values[symbol]
        total += term
    return total


def _trip(loop: Loop, values: Mapping[str, int], unresolved: list[str]) -> float:
    start, end, step = (value_at(x, values) for x in (loop.init, loop.bound, loop.step))
    if start is None and _lane_start(loop):
        start = 0.0  # the first thread's lane: its loop is the longest
    if loop.kind != "for" or start is None or end is None or not step:
        unresolved.append(f"the count of a {loop.kind} loop (`{loop.var or loop.kind}`)")
        return 1.0
    end += 1 if loop.op == "<=" else -1 if loop.op == ">=" else 0
    return max(0.0, math.ceil((end - start) / step))


def _element_bytes(element: str, unresolved: list[str]) -> int:
    size = ELEMENT_BYTES.get(element)
    if size is None:
        unresolved.append(f"the size of '{element}'")
        return 4
    return size


def _lane_start(loop: Loop) -> bool:
    """The loop starts at a per-thread offset the analysis cannot write affinely
    (`i = threadIdx.x % LANES`): a lane-stride loop, whose first thread starts at 0."""
    return not isinstance(loop.init, Affine) and any(s in THREAD_AXES for s in loop.init.symbols)


def _sector_bytes(access: AccessAnalysis, a: MemoryAccess, size: int, values: Mapping[str, int]) -> float:
    """Bytes per thread the memory system moves for one execution of `a` by a warp."""
    stride = access.thread_stride(a)
    lanes = values.get("blockDim.x", WARP)
    if stride is None:
        group = _lane_group(access, a, values)
        if group is None:
            return float(max(size, SECTOR_BYTES))  # a gather: a sector per lane, at worst
        return math.ceil(WARP / group) * math.ceil(group * size / SECTOR_BYTES) * SECTOR_BYTES / WARP
    elements = value_at(stride, values)
    if elements is None:
        return float(max(size, SECTOR_BYTES))
    if elements == 0 or lanes <= 1:
        return SECTOR_BYTES / WARP if elements == 0 else float(max(size, SECTOR_BYTES))
    span = min(WARP, lanes) * abs(elements) * size  # bytes between the warp's first and last lane
    if abs(elements) * size >= SECTOR_BYTES:
        return float(SECTOR_BYTES) if size <= SECTOR_BYTES else float(size)
    return math.ceil(span / SECTOR_BYTES) * SECTOR_BYTES / min(WARP, lanes)


def _lane_group(access: AccessAnalysis, a: MemoryAccess, values: Mapping[str, int]) -> int | None:
    """Consecutive threads that touch consecutive elements when `a` is not affine in the
    thread index only because it sits in a lane-stride loop (`for (i = lane; i < n; i +=
    LANES)`: LANES threads start at consecutive elements and step over each other's);
    None for any other index the analysis cannot write affinely."""
    for loop in reversed(access.loops_of(a)):
        if _lane_start(loop):
            step = value_at(loop.step, values)
            return int(min(WARP, step)) if step is not None and step >= 1 else None
    return None


def _shared_bytes(access: AccessAnalysis, values: Mapping[str, int], unresolved: list[str]) -> int:
    total = 0
    for buffer in access.buffers:
        if buffer.space != "shared" or not buffer.extents:
            continue
        count = 1.0
        for extent in buffer.extents:
            value = value_at(extent, values) if extent is not None else None
            if value is None:
                unresolved.append(f"the extent of shared '{buffer.name}'")
                value = 0.0
            count *= value
        total += int(count) * _element_bytes(buffer.element, unresolved)
    return total


def _arithmetic(model: SourceModel, access: AccessAnalysis, trips: Mapping[int, float]) -> tuple[float, float]:
    """(operations, barriers) per thread: each counted once per iteration of its loops."""
    root = model.body_node(access.function)
    if root is None:
        return 0.0, 0.0
    loops = sorted(access.loops, key=lambda loop: loop.body.start)
    ops = barriers = 0.0
    stack = [root]
    while stack:
        node = stack.pop()
        weight = _weight(node, loops, trips) if _counts(node) else 0.0
        if node.type == "call_expression":
            name = _callee(node)
            if name.startswith("__syncthreads"):
                barriers += weight
            elif name.startswith(_MATH_PREFIXES):
                ops += weight * MATH_CALL_OPS
            elif name.startswith(("__shfl", "max", "min", "fmax", "fmin", "fabs")):
                ops += weight
        elif node.type in ("binary_expression", "assignment_expression"):
            operator = node.child_by_field_name("operator")
            text = operator.type if operator is not None else ""
            ops += weight if text in _ARITHMETIC or text in _COMPOUND else 0.0
        stack.extend(node.named_children)
    return ops, barriers


def _counts(node: Any) -> bool:
    return node.type in ("call_expression", "binary_expression", "assignment_expression")


def _weight(node: Any, loops: list[Loop], trips: Mapping[int, float]) -> float:
    """Iterations of every loop whose body holds `node`."""
    weight = 1.0
    for loop in loops:
        if loop.body.start <= node.start_byte and node.end_byte <= loop.body.end:
            weight *= trips[loop.id]
    return weight


def _callee(node: Any) -> str:
    function = node.child_by_field_name("function")
    return function.text.decode("utf-8", "replace") if function is not None and function.text else ""
