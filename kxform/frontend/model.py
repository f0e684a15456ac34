"""The source model: what the passes need to know about a CUDA/HIP file.

Plain frozen records with byte spans into the file, so passes can reason about
structure and hand exact ranges to the edit engine. Built by `kxform.frontend.cuda`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import networkx as nx

if TYPE_CHECKING:
    import tree_sitter

    from kxform.frontend.source import SourceText


@dataclass(frozen=True, order=True)
class Span:
    """Half-open byte range [start, end)."""

    start: int
    end: int

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end


class FunctionKind(enum.Enum):
    KERNEL = "kernel"  # __global__
    DEVICE = "device"  # __device__ (possibly also __host__)
    HOST = "host"


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str
    span: Span


@dataclass(frozen=True)
class Function:
    """A function definition (kernel, device or host function)."""

    name: str
    kind: FunctionKind
    span: Span
    body: Span
    params_span: Span
    params: tuple[Param, ...]
    template_params: str | None = None
    launch_bounds: str | None = None
    host_too: bool = False
    attribute_macro: str | None = None
    """Set when the kernel/device attribute came through a macro (`KERNEL void f()`)."""

    @property
    def template_names(self) -> frozenset[str]:
        """Names of the template parameters (`T`, `TILE`): `T(0)` is a conversion, not a call."""
        if not self.template_params:
            return frozenset()
        parts = self.template_params.strip()[1:-1].split(",")
        names = (re.findall(r"[A-Za-z_]\w*", part.split("=")[0]) for part in parts)
        return frozenset(found[-1] for found in names if found)


@dataclass(frozen=True)
class IndexRead:
    """One read of a block-index builtin: `blockIdx.y`, `gridDim.x`, `hipBlockIdx_x`.

    `axis` is "" when the whole `dim3`/`uint3` is used (`dim3 b = blockIdx;`).
    `macro` names the macro whose definition holds the read (the span is then inside
    the `#define`), and `function` is None for reads in macros and outside functions.
    """

    builtin: str  # "blockIdx" | "gridDim"
    axis: str
    span: Span
    function: str | None
    spelling: str  # the exact source text
    macro: str | None = None


@dataclass(frozen=True)
class LaunchSite:
    """A kernel launch in host code."""

    kernel: str
    template_args: str | None
    config: tuple[str, ...]  # grid, block[, shared bytes[, stream]]
    args: tuple[str, ...]
    span: Span
    style: str  # "chevron" | "hipLaunchKernelGGL" | "cudaLaunchKernel"
    function: str | None
    config_spans: tuple[Span, ...] = ()
    """Where each element of `config` is written (for edits of one launch element)."""


@dataclass(frozen=True)
class CallSite:
    """A plain call inside a function body (`helper(a, b)`), with its argument list span."""

    caller: str
    callee: str
    span: Span
    args_span: Span
    arg_count: int


@dataclass(frozen=True)
class MacroDef:
    name: str
    span: Span
    body: str
    body_span: Span | None
    is_function_like: bool


@dataclass(frozen=True)
class MacroUse:
    """An identifier in a function body that names a macro defined in this file."""

    name: str
    span: Span
    function: str


@dataclass(frozen=True)
class Include:
    target: str
    system: bool
    span: Span


@dataclass(frozen=True)
class SyntaxIssue:
    span: Span
    missing: bool  # a MISSING node rather than an ERROR node


@dataclass
class SourceModel:
    """Everything the frontend found in one file; `call_graph` has one node per function name
    (plus `<macro NAME>` nodes for macros that hold index reads) and an edge caller -> callee."""

    source: SourceText
    tree: tree_sitter.Tree
    functions: tuple[Function, ...]
    index_reads: tuple[IndexRead, ...]
    launches: tuple[LaunchSite, ...]
    calls: tuple[CallSite, ...]
    macros: tuple[MacroDef, ...]
    macro_uses: tuple[MacroUse, ...]
    includes: tuple[Include, ...]
    syntax_issues: tuple[SyntaxIssue, ...]
    call_graph: nx.DiGraph = field(repr=False)

    @property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.kind is FunctionKind.KERNEL)

    def functions_named(self, name: str) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.name == name)

    def reads_in(self, function: str) -> tuple[IndexRead, ...]:
        return tuple(r for r in self.index_reads if r.function == function)

    def macro(self, name: str) -> MacroDef | None:
        for macro in self.macros:
            if macro.name == name:
                return macro
        return None

    def closure(self, root: str) -> set[str]:
        """Names of `root` and every function and macro it reaches."""
        if root not in self.call_graph:
            return {root}
        return {root} | nx.descendants(self.call_graph, root)
