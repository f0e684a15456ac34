"""The source model: what the passes need to know about a CUDA/HIP file.

Plain frozen records with byte spans into the file, so passes can reason about
structure and hand exact ranges to the edit engine. Built by `kxform.frontend.cuda`.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

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

    # Lookups by name are indexed once per model: a scan per kernel made passes quadratic
    # in the number of kernels of a file. The model is never changed after it is built.

    def body_node(self, function: Function) -> Any:
        """The tree's compound statement of `function`'s body; None where there is none."""
        node = self.tree.root_node.descendant_for_byte_range(function.body.start, function.body.end)
        while node is not None and not (node.type == "compound_statement" and node.start_byte == function.body.start):
            node = node.parent
        return node

    @functools.cached_property
    def derived(self) -> dict[str, object]:
        """Facts other modules derive from the whole file (queries over the tree), by name,
        computed once per model (`once` below): asked once per kernel, each
        was a scan of the file, quadratic in the kernels of a file."""
        return {}

    @functools.cached_property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.kind is FunctionKind.KERNEL)

    @functools.cached_property
    def _functions_by_name(self) -> dict[str, tuple[Function, ...]]:
        return _group(self.functions, lambda f: f.name)

    @functools.cached_property
    def _reads_by_function(self) -> dict[str | None, tuple[IndexRead, ...]]:
        return _group(self.index_reads, lambda r: r.function)

    @functools.cached_property
    def _reads_by_macro(self) -> dict[str | None, tuple[IndexRead, ...]]:
        return _group(self.index_reads, lambda r: r.macro)

    @functools.cached_property
    def _calls_by_caller(self) -> dict[str | None, tuple[CallSite, ...]]:
        return _group(self.calls, lambda c: c.caller)

    @functools.cached_property
    def _macros_by_name(self) -> dict[str, MacroDef]:
        out: dict[str, MacroDef] = {}
        for macro in self.macros:
            out.setdefault(macro.name, macro)  # the first definition, as a scan would find
        return out

    def functions_named(self, name: str) -> tuple[Function, ...]:
        return self._functions_by_name.get(name, ())

    def reads_in(self, function: str) -> tuple[IndexRead, ...]:
        return self._reads_by_function.get(function, ())

    def reads_through(self, macro: str) -> tuple[IndexRead, ...]:
        """Index reads made through the expansion of `macro`."""
        return self._reads_by_macro.get(macro, ())

    def calls_from(self, caller: str) -> tuple[CallSite, ...]:
        return self._calls_by_caller.get(caller, ())

    @functools.cached_property
    def _calls_by_callee(self) -> dict[str, tuple[CallSite, ...]]:
        return _group(self.calls, lambda c: c.callee)

    def calls_to(self, callee: str) -> tuple[CallSite, ...]:
        return self._calls_by_callee.get(callee, ())

    def macro(self, name: str) -> MacroDef | None:
        return self._macros_by_name.get(name)

    def closure(self, root: str) -> set[str]:
        """Names of `root` and every function and macro it reaches."""
        if root not in self.call_graph:
            return {root}
        return {root} | nx.descendants(self.call_graph, root)


_T = TypeVar("_T")
_K = TypeVar("_K")


def _group(items: Iterable[_T], key: Callable[[_T], _K]) -> dict[_K, tuple[_T, ...]]:
    """`items` by `key`, each group in the items' order."""
    out: dict[_K, list[_T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return {k: tuple(v) for k, v in out.items()}


T = TypeVar("T")


def once(model: SourceModel, name: str, compute: Callable[[], T]) -> T:
    """`compute()` for `model`, computed the first time it is asked (`SourceModel.derived`)."""
    if name not in model.derived:
        model.derived[name] = compute()
    return model.derived[name]  # type: ignore[return-value]
