"""The memory-access analysis a proposer reasons with: which buffers a kernel touches,
indexed by which block and thread indices, and what neighbouring blocks share.

Two sources, both kxform's own:
* the source model (static): every `buffer[...]` subscript of a pointer parameter in
  the kernel and the device functions it reaches, read or written, and the index
  builtins its subscript depends on, followed through local definitions
  (`row = blockIdx.y * TILE + ty` makes `A[row * K + k]` depend on blockIdx.y);
* with a harness spec, the CPU runtime's sector traces (measured): the 32-byte sectors
  block (0,0) touches, and the share of them its x-neighbour (1,0) and y-neighbour
  (0,1) touch too, per buffer, at the spec's largest check size.
A buffer whose subscript does not depend on blockIdx.x is read alike by every block of
a grid row: that is the reuse a remap can bring into L2 together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kxform.frontend.model import Function, SourceModel

_BUILTIN = re.compile(r"\b(blockIdx|threadIdx|blockDim|gridDim)\s*\.\s*([xyz])\b|\bhip(BlockIdx|ThreadIdx)_([xyz])\b")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_COMPOUND = ("+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^=")


@dataclass(frozen=True)
class Access:
    """One subscript of a global buffer."""

    function: str
    buffer: str
    text: str
    line: int
    read: bool
    write: bool
    depends: tuple[str, ...]
    """Index builtins the subscript depends on (`blockIdx.y`, `threadIdx.x`), sorted."""
    via: tuple[str, ...]
    """Locals through which a block index reaches the subscript."""

    @property
    def block_axes(self) -> frozenset[str]:
        return frozenset(d[-1] for d in self.depends if d.startswith("blockIdx."))

    def describe(self) -> str:
        mode = "read+write" if self.read and self.write else "write" if self.write else "read"
        deps = ", ".join(self.depends) or "no index builtin"
        via = f" (via {', '.join(self.via)})" if self.via else ""
        return f"{self.text}  [{mode}, line {self.line}] depends on {deps}{via}"


@dataclass(frozen=True)
class Sharing:
    """Measured: the share of block (0,0)'s sectors of a buffer its neighbours touch too."""

    buffer: str
    sectors: int
    along_x: float | None
    along_y: float | None


@dataclass(frozen=True)
class AccessReport:
    kernel: str
    accesses: tuple[Access, ...]
    sharing: tuple[Sharing, ...] = ()
    trace_note: str = ""

    def render(self) -> str:
        lines = []
        buffers = dict.fromkeys(a.buffer for a in self.accesses)
        for buffer in buffers:
            mine = [a for a in self.accesses if a.buffer == buffer]
            axes = frozenset().union(*(a.block_axes for a in mine))
            helpers = sorted({a.function for a in mine if a.function != self.kernel})
            if not axes and helpers:
                summary = (f"subscripted in device function {', '.join(helpers)} through its parameters; its "
                           "dependence on the block index is not visible there (see the traces)")
            else:
                summary = _reuse(axes)
            lines.append(f"- {buffer}: {summary}")
            lines.extend(f"    {a.describe()}" for a in mine[:8])
            if len(mine) > 8:
                lines.append(f"    ... and {len(mine) - 8} more subscripts")
        if not lines:
            lines.append("- no subscripted global buffer found in the kernel's source")
        if self.sharing:
            lines.append("Measured on kxform's CPU runtime (sector traces, 32-byte sectors): share of block (0,0)'s "
                         "sectors that its neighbours also touch:")
            for s in self.sharing:
                lines.append(f"- {s.buffer}: {s.sectors} sectors; x-neighbour (1,0) {_pct(s.along_x)}, "
                             f"y-neighbour (0,1) {_pct(s.along_y)}")
        if self.trace_note:
            lines.append(self.trace_note)
        return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _reuse(axes: frozenset[str]) -> str:
    if not axes:
        return "subscript independent of the block index: every block touches the same elements"
    if axes == {"y"}:
        return ("depends on blockIdx.y only: blocks of one grid row (same blockIdx.y) touch the same "
                "elements; neighbours along x share them")
    if axes == {"x"}:
        return ("depends on blockIdx.x only: blocks of one grid column (same blockIdx.x) touch the same "
                "elements; neighbours along y share them")
    return f"depends on blockIdx.{' and blockIdx.'.join(sorted(axes))}: each block has its own part (by the index)"


def static_accesses(model: SourceModel, functions: tuple[Function, ...]) -> tuple[Access, ...]:
    """Subscripts of each function's pointer parameters, with their index dependencies."""
    out: list[Access] = []
    for function in functions:
        buffers = {p.name for p in function.params if "*" in p.ctype or "[" in p.ctype}
        if not buffers:
            continue
        defs = _definitions(model, function)
        for node in _nodes(model, function, "subscript_expression"):
            target = node.child_by_field_name("argument")
            if target is None or target.type != "identifier":
                continue
            name = _text(model, target)
            if name not in buffers:
                continue
            index = node.child_by_field_name("indices")
            depends, via = _resolve(_text(model, index) if index is not None else "", defs)
            read, write = _mode(model, node)
            out.append(Access(function.name, name, " ".join(_text(model, node).split()),
                              model.source.line_col(node.start_byte)[0], read, write, depends, via))
    return tuple(out)


def _text(model: SourceModel, node: Any) -> str:
    return model.source.data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _nodes(model: SourceModel, function: Function, kind: str) -> Iterator[Any]:
    stack = [model.tree.root_node]
    while stack:
        node = stack.pop()
        if node.end_byte <= function.body.start or node.start_byte >= function.body.end:
            continue
        if node.type == kind and function.body.start <= node.start_byte:
            yield node
        stack.extend(reversed(node.children))


def _definitions(model: SourceModel, function: Function) -> dict[str, set[str]]:
    """Local name -> names and builtins its definitions and assignments read."""
    defs: dict[str, set[str]] = {}
    for node in _nodes(model, function, "init_declarator"):
        name, value = node.child_by_field_name("declarator"), node.child_by_field_name("value")
        if name is not None and value is not None and name.type == "identifier":
            defs.setdefault(_text(model, name), set()).update(_refs(_text(model, value)))
    for node in _nodes(model, function, "assignment_expression"):
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and right is not None and left.type == "identifier":
            defs.setdefault(_text(model, left), set()).update(_refs(_text(model, right)))
    return defs


def _refs(text: str) -> set[str]:
    builtins = {f"{m.group(1) or m.group(3)[0].lower() + m.group(3)[1:]}.{m.group(2) or m.group(4)}"
                for m in _BUILTIN.finditer(text)}
    stripped = _BUILTIN.sub(" ", text)
    return builtins | set(_IDENT.findall(stripped))


def _resolve(text: str, defs: dict[str, set[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Builtins `text` depends on through local definitions, and the locals that carry a
    block index on the way."""
    found: set[str] = set()
    via: set[str] = set()
    seen: set[str] = set()

    def visit(name: str, carrier: str | None) -> None:
        if "." in name:
            found.add(name)
            if carrier and name.startswith("blockIdx."):
                via.add(carrier)
            return
        if name in seen or name not in defs:
            return
        seen.add(name)
        for ref in defs[name]:
            visit(ref, carrier or name)

    for ref in _refs(text):
        visit(ref, None)
    return tuple(sorted(found)), tuple(sorted(via))


def _mode(model: SourceModel, node: Any) -> tuple[bool, bool]:
    """(read, write): the left side of `=` is written; of `+=` read and written."""
    parent = node.parent
    if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
        operator = parent.child_by_field_name("operator")
        op = _text(model, operator) if operator is not None else "="
        return op in _COMPOUND, True
    if parent is not None and parent.type == "update_expression":
        return True, True
    return True, False
