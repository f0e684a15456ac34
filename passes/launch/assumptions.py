"""What a kernel assumes about its block size: constraints on the lifted dimensions, or
refusals, each with the source line it comes from.

Read from the kernel and the device functions it calls:

| the code | becomes |
|---|---|
| `__launch_bounds__(256)` | `X * Y <= 256` |
| whole warps (`blockDim.x / 32`, `% 32`, lane ids, shuffles, `warpSize`) | `(X * Y) % 32 == 0` |
| a tree reduction halving `blockDim.x` (`s >>= 1`, `s /= 2`) | `is_pow2(X)` |
| `__shared__ float s[256]` where 256 is the block size | `X * Y <= 256` (one element per thread) |
| `if (threadIdx.x < 64)` (or an alias: `tid < 64`) | `X >= 64` (the first 64 threads exist) |
| always | `X * Y <= hw.max_threads_per_block` |

Refused: the body spells the block size itself where the block belongs, a loop striding
by it (`i += 256`) or an index scaled by it (`blockIdx.x * 256`): the kernel is written
for that one value. Tensor-core fragments fix the block's warps: refused too.
"""

from __future__ import annotations

import re

from kxform.engine.params import Constraint
from kxform.frontend.model import Function, SourceModel
from kxform.frontend.queries import int_literals, loops, shared_decls, int_value
from kxform.passes.launch.geometry import Geometry, Refusal

WARP_RE = re.compile(
    r"\bwarpSize\b|\bblockDim\.[xyz]\s*(?:/|>>)\s*(?:32|5)\b|%\s*32\b|&\s*31\b|__shfl\w*|"
    r"\blane\w*\b|__ballot\w*|\bwarp_?id\b|\bwid\b"
)
HARDWARE_SHAPE_RE = re.compile(r"\bwmma::|\bmma_sync\b|\bmma\.sync\b|\bwgmma\b")
_AXES = "xyz"


def _origin(model: SourceModel, offset: int) -> str:
    return f"{model.source.path}:{model.source.line_col(offset)[0]}"


def _bodies(model: SourceModel, closure: frozenset[str]) -> list[Function]:
    return [f for f in model.functions if f.name in closure]


def _threads(geometry: Geometry) -> str:
    return " * ".join(d.name for d in geometry.dims)


def derive(model: SourceModel, geometry: Geometry, closure: frozenset[str]) -> tuple[list[Constraint], list[Refusal]]:
    """The constraints the kernel's code puts on the lifted dimensions, and its refusals."""
    if not geometry.dims:
        return [], []
    refusals = _hand_written(model, geometry, closure) + _hardware(model, closure)
    threads = _threads(geometry)
    where = _origin(model, geometry.launches[0].site.span.start)
    out = [Constraint.parse(f"{threads} <= hw.max_threads_per_block", "threads per block", where)]
    out += _launch_bounds(model, geometry, threads)
    out += _warps(model, closure, threads)
    out += _halving(model, geometry, closure)
    out += _shared(model, geometry, closure, threads)
    out += _guards(model, geometry, closure)
    seen: set[str] = set()
    unique = [c for c in out if not (c.text in seen or seen.add(c.text))]  # type: ignore[func-returns-value]
    return unique, refusals


def _launch_bounds(model: SourceModel, geometry: Geometry, threads: str) -> list[Constraint]:
    bounds = geometry.kernel.launch_bounds
    lifted = next((b for b in geometry.bounds if b.kind == "MAX_THREADS"), None)
    if lifted is not None:
        where = f"{model.source.path}:{lifted.line}"
        return [
            Constraint.parse(
                f"{threads} <= {lifted.name}",
                f"__launch_bounds__: the kernel is compiled for at most {lifted.name} threads per block",
                where,
            ),
            Constraint.parse(
                f"{lifted.name} <= hw.max_threads_per_block",
                "launch bounds within the hardware's threads per block",
                where,
            ),
        ]
    if not bounds:
        return []
    inner = re.sub(r"^\s*__launch_bounds__\s*", "", bounds).strip()
    first = inner.strip("()").split(",")[0].strip()
    value = int_value(first)
    if value is None:
        return []
    return [
        Constraint.parse(
            f"{threads} <= {value}",
            f"__launch_bounds__({first}): the kernel is compiled for at most {value} threads per block",
            _origin(model, geometry.kernel.span.start),
        )
    ]


def _warps(model: SourceModel, closure: frozenset[str], threads: str) -> list[Constraint]:
    for function in _bodies(model, closure):
        text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
        match = WARP_RE.search(text)
        if match:
            return [
                Constraint.parse(
                    f"({threads}) % 32 == 0",
                    f"the code assumes whole warps ({match.group(0)})",
                    _origin(model, function.body.start + match.start()),
                )
            ]
    return []


def _halving(model: SourceModel, geometry: Geometry, closure: frozenset[str]) -> list[Constraint]:
    out = []
    for dim in geometry.dims:
        axis = _AXES[dim.axis]
        for function in _bodies(model, closure):
            for loop in loops(model, function.body):
                step = loop.step.replace(" ", "")
                if step in (">>1", "/2") and re.search(rf"\bblockDim\.{axis}\b", loop.init):
                    out.append(
                        Constraint.parse(
                            f"is_pow2({dim.name})",
                            f"the reduction halves blockDim.{axis} down to 1",
                            _origin(model, loop.header.start),
                        )
                    )
    return out


def _shared(model: SourceModel, geometry: Geometry, closure: frozenset[str], threads: str) -> list[Constraint]:
    total = 1
    for dim in geometry.dims:
        total *= dim.value
    out = []
    for decl in shared_decls(model):
        if decl.function not in closure or decl.dynamic or len(decl.extents) != 1:
            continue
        extent = (
            int_value(decl.extents[0])
            if decl.extents[0].strip() not in _constants(geometry)
            else _constants(geometry)[decl.extents[0].strip()]
        )
        if extent is not None and extent == total:
            out.append(
                Constraint.parse(
                    f"{threads} <= {extent}",
                    f"'{decl.name}[{extent}]' holds one element per thread of the original block",
                    _origin(model, decl.span.start),
                )
            )
    return out


def _aliases(model: SourceModel, function: Function, axis: str) -> set[str]:
    body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
    found = re.findall(
        rf"\b(?:const\s+)?(?:unsigned\s+)?(?:int|unsigned)\s+([A-Za-z_]\w*)\s*=\s*threadIdx\.{axis}\s*;", body
    )
    return {f"threadIdx.{axis}", *found}


def _guards(model: SourceModel, geometry: Geometry, closure: frozenset[str]) -> list[Constraint]:
    out = []
    for dim in geometry.dims:
        axis = _AXES[dim.axis]
        for function in _bodies(model, closure):
            names = "|".join(re.escape(a) for a in sorted(_aliases(model, function, axis)))
            body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
            for match in re.finditer(rf"(?<![\w.])(?:{names})\s*<\s*(\d+)\b", body):
                bound = int(match.group(1))
                if 1 < bound <= (dim.value or 1024):  # a caller's block size: any guard may bind it
                    out.append(
                        Constraint.parse(
                            f"{dim.name} >= {bound}",
                            f"'{match.group(0)}' assumes the first {bound} threads exist",
                            _origin(model, function.body.start + match.start()),
                        )
                    )
    return out


def _constants(geometry: Geometry) -> dict[str, int]:
    """Block sizes written as a macro of a header: its name -> the original value."""
    return {p.text: d.value for d in geometry.dims for p in d.places if p.kind == "constant" and p.text != d.name}


def _hand_written(model: SourceModel, geometry: Geometry, closure: frozenset[str]) -> list[Refusal]:
    """A loop step or an index scale in the body that spells a block dimension's value, or
    the header macro the launch writes it with."""
    named = _named_block(model, geometry, closure)
    if named:
        return named
    for dim in geometry.dims:
        if dim.value < 4:
            continue
        for function in _bodies(model, closure):
            steps = [lp.step.strip() for lp in loops(model, function.body)]
            for literal in int_literals(model, function.body):
                if literal.value != dim.value:
                    continue
                line = model.source.line_col(literal.span.start)[0]
                before = model.source.data[max(function.body.start, literal.span.start - 40) : literal.span.start]
                scaled = re.search(rb"blockIdx\.[xyz]\s*\*\s*$", before) is not None
                if literal.text in steps or scaled:
                    what = "an index scale" if scaled else "a loop step"
                    return [
                        Refusal(
                            "HandWrittenBlockSize",
                            f"line {line} spells {dim.value}, the block size of "
                            f"'{geometry.kernel.name}', as {what}: the kernel is written for that one value",
                            literal.span.start,
                        )
                    ]
    return []


def _named_block(model: SourceModel, geometry: Geometry, closure: frozenset[str]) -> list[Refusal]:
    """The kernel reads the header macro its launch sizes the block with, other than as a
    shared extent (a bound on the new size): a loop step, an index scale, a guard."""
    for name in _constants(geometry):
        for function in _bodies(model, closure):
            body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
            for match in re.finditer(rf"(?<![\w.]){re.escape(name)}(?!\w)", body):
                offset = function.body.start + match.start()
                if any(
                    d.function == function.name and any(s.start <= offset < s.end for s in d.extent_spans)
                    for d in shared_decls(model)
                ):
                    continue
                line = model.source.line_col(offset)[0]
                return [
                    Refusal(
                        "HandWrittenBlockSize",
                        f"line {line} reads {name}, the macro the launch sizes the "
                        f"block of '{geometry.kernel.name}' with: the kernel is written for its value; "
                        "lift it where it is defined",
                        offset,
                    )
                ]
    return []


def _hardware(model: SourceModel, closure: frozenset[str]) -> list[Refusal]:
    for function in _bodies(model, closure):
        text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
        match = HARDWARE_SHAPE_RE.search(text)
        if match:
            line = model.source.line_col(function.body.start + match.start())[0]
            return [
                Refusal(
                    "HardwareFixedShape",
                    f"the kernel computes with tensor-core fragments (line {line}): "
                    "their shapes fix how its warps split the work",
                    function.body.start + match.start(),
                )
            ]
    return []
