"""The access analysis of one function: its loops and memory accesses, with dependences.

`AccessAnalysis.compute(ctx, function)` (through `ctx.analysis(AccessAnalysis, kernel)`)
walks the function's body once (kxform.analysis.walk) and answers what the passes ask:
* loops: bounds, steps, nesting, trip counts, `#pragma unroll`, which are independent,
  which carry reductions (+, *, max, min, with identity) and which may be distributed
  over threads (`Loop.distribute_blockers` says why not);
* accesses of global (pointer parameters) and shared memory: the buffer, element type,
  read or write, the index as an affine form in threadIdx, blockIdx, blockDim, gridDim,
  loop variables and kernel parameters (or why it is not one), the guards around it,
  contiguity in threadIdx.x;
* between threads: barriers, atomics, warp-level operations, and writes every thread
  of a block makes to the same element.
Syntactic and within the file: a callee's accesses are its own analysis (through its
parameters); macros are not expanded (an index spelled through a function-like macro
reads as a call, hence not affine).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

from kxform.analysis.affine import Affine, Index, NotAffine
from kxform.analysis.dependence import loop_facts
from kxform.analysis.evaluate import Env, Evaluated, Pointer, evaluate
from kxform.analysis.manager import AnalysisInput
from kxform.analysis.records import Buffer, Loop, MemoryAccess, Reduction
from kxform.analysis.walk import WalkState, Walker
from kxform.frontend.constants import fold_constants
from kxform.frontend.cuda import parse_tree
from kxform.frontend.model import Function, FunctionKind, SourceModel, Span, once
from kxform.frontend.queries import constant_defs, shared_decls, template_params, unroll_pragmas

_EXPRESSION = re.compile(r"[\w\s.+\-*/%()<>&|^~]+")
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b|\*|&")


@dataclass(frozen=True)
class AccessAnalysis:
    """Loops and memory accesses of one function (a kernel or a device function)."""

    positional: ClassVar[bool] = True

    function: Function
    buffers: tuple[Buffer, ...]
    loops: tuple[Loop, ...]
    accesses: tuple[MemoryAccess, ...]
    barriers: tuple[Span, ...] = ()
    atomics: tuple[Span, ...] = ()
    calls: tuple[str, ...] = ()
    """Names called in the body, in order, once each."""

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> AccessAnalysis:
        return analyse_function(ctx.model, kernel)

    # -- questions ------------------------------------------------------------------

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def loop(self, loop_id: int) -> Loop:
        return self.loops[loop_id]

    def loops_of(self, access: MemoryAccess) -> tuple[Loop, ...]:
        return tuple(self.loops[i] for i in access.loops)

    def accesses_in(self, loop: Loop) -> tuple[MemoryAccess, ...]:
        return tuple(a for a in self.accesses if loop.id in a.loops)

    def in_thread_terms(self, access: MemoryAccess) -> Index:
        """The index with each enclosing loop's variable `v` written as `init + v'` (`v'`
        counting from 0 by the step), so that a grid-stride loop's `A[row * K + k]` shows
        its dependence on the thread index: what coalescing and vectorisation ask."""
        index = access.index
        for loop in reversed(self.loops_of(access)):
            if not isinstance(index, Affine):
                break
            if loop.var and isinstance(loop.init, Affine):
                index = index.substitute(loop.var, loop.init + Affine.symbol(loop.var))
            elif loop.var and loop.var in index.symbols:
                return NotAffine(f"the loop variable `{loop.var}` starts at a value that is {loop.init}", index.symbols)
        return index

    def thread_stride(self, access: MemoryAccess, axis: str = "x") -> Affine | None:
        """Elements between the accesses of threads `threadIdx.<axis>` and `+1` (None: not affine)."""
        index = self.in_thread_terms(access)
        return index.coefficient(f"threadIdx.{axis}") if isinstance(index, Affine) else None

    def contiguous(self, access: MemoryAccess) -> bool:
        """Consecutive threadIdx.x touch consecutive elements (loop starts included)."""
        stride = self.thread_stride(access)
        return stride is not None and stride.value == 1

    @property
    def reductions(self) -> tuple[Reduction, ...]:
        """Every reduction once (at the outermost loop that carries it)."""
        seen: dict[tuple[str, int], Reduction] = {}
        for loop in self.loops:
            for reduction in loop.reductions:
                seen.setdefault((reduction.var, reduction.loop), reduction)
        return tuple(seen.values())

    @property
    def distributable_loops(self) -> tuple[Loop, ...]:
        return tuple(loop for loop in self.loops if loop.distributable)

    @property
    def thread_shared_writes(self) -> tuple[MemoryAccess, ...]:
        """Global writes every thread of a block makes to the same element, unguarded by a
        thread-index condition (a race unless the values agree)."""
        return tuple(
            a
            for a in self.accesses
            if a.write
            and a.space == "global"
            and not a.atomic
            and a.thread_invariant
            and not any("threadIdx" in g.condition for g in a.guards)
        )

    @property
    def communicates(self) -> bool:
        """Threads exchange data: a barrier, a warp-level operation, shared memory or an atomic."""
        return bool(self.barriers or self.atomics or any(a.space == "shared" for a in self.accesses))


def analyse_function(model: SourceModel, function: Function) -> AccessAnalysis:
    buffers = _buffers(model, function)
    constants = _constants(model)
    env = Env(constants=constants, macros=_macro_expressions(model, constants))
    for param in function.params:
        if param.name in buffers:
            env.names[param.name] = Evaluated(Pointer(param.name, Affine()))
    for name, buffer in buffers.items():
        if buffer.space == "shared":
            env.names[name] = Evaluated(Pointer(name, Affine()))
    state = WalkState(model, function, buffers, pragmas=_pragmas(model, function))
    root = model.body_node(function)
    if root is not None:
        Walker(state, env).statement(root)
    loop_facts(state)
    return AccessAnalysis(
        function,
        tuple(buffers.values()),
        tuple(d.loop for d in state.loops),
        tuple(state.accesses),
        tuple(state.barriers),
        tuple(state.atomics),
        tuple(dict.fromkeys(state.calls)),
    )


def closure_functions(model: SourceModel, kernel: Function) -> tuple[Function, ...]:
    """The kernel and every device function of this file it reaches (by name), kernel first."""
    reached = sorted(model.closure(kernel.name) - {kernel.name})
    return (kernel,) + tuple(
        f for name in reached for f in model.functions_named(name) if f.kind is not FunctionKind.HOST
    )


def closure_names(model: SourceModel, kernel: Function) -> frozenset[str]:
    """The names of the kernel and the device functions it reaches (`closure_functions`)."""
    return frozenset(f.name for f in closure_functions(model, kernel))


def element_type(ctype: str) -> str:
    return " ".join(_QUALIFIERS.sub(" ", ctype).split())


def _buffers(model: SourceModel, function: Function) -> dict[str, Buffer]:
    out: dict[str, Buffer] = {}
    for param in function.params:
        if "*" in param.ctype or "[" in param.ctype:
            out[param.name] = Buffer(
                param.name,
                "global",
                element_type(param.ctype.replace("[]", "")),
                "restrict" in param.ctype,
                bool(re.search(r"\bconst\b", param.ctype)),
            )
    constants = _constants(model)
    for decl in shared_decls(model):
        inside = function.body.contains(decl.span)
        if not inside and not (decl.function is None and _uses(model, function, decl.name)):
            continue
        extents = tuple(_extent(e, Env(constants=constants)) for e in decl.extents)
        out[decl.name] = Buffer(decl.name, "shared", element_type(decl.ctype), False, False, extents)
    for name, ctype, sizes in _local_arrays(model, function):
        if name not in out:
            out[name] = Buffer(
                name,
                "local",
                element_type(ctype),
                False,
                False,
                tuple(_extent(e, Env(constants=constants)) for e in sizes),
            )
    return out


def _local_arrays(model: SourceModel, function: Function) -> list[tuple[str, str, list[str]]]:
    """`T name[E0][E1]` declared in the body, not `__shared__`: (name, type, extents)."""
    root = model.tree.root_node.descendant_for_byte_range(function.body.start, function.body.end)
    out = []
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if (
            node.type == "declaration"
            and function.body.start <= node.start_byte
            and not any(
                c.type in ("type_qualifier", "storage_class_specifier") and c.text in (b"__shared__", b"extern")
                for c in node.children
            )
        ):
            for declarator in node.children_by_field_name("declarator"):
                target = (
                    declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                )
                sizes: list[str] = []
                while target is not None and target.type == "array_declarator":
                    size = target.child_by_field_name("size")
                    sizes.insert(0, size.text.decode() if size is not None and size.text else "")
                    target = target.child_by_field_name("declarator")
                if sizes and target is not None and target.type == "identifier" and target.text:
                    type_node = node.child_by_field_name("type")
                    out.append(
                        (target.text.decode(), type_node.text.decode() if type_node and type_node.text else "", sizes)
                    )
        stack.extend(node.named_children)
    return out


def _extent(text: str, env: Env) -> Affine | None:
    """An array extent as an affine form of constants and template parameters, or None."""
    node = _parse_expression(text)
    value = evaluate(node, env).value if node is not None else None
    return value if isinstance(value, Affine) else None


def _parse_expression(text: str) -> Any:
    tree = parse_tree(f"int kxform_expr = ({text});".encode())
    if tree.root_node.has_error or not tree.root_node.named_children:
        return None
    declarator = tree.root_node.named_children[0].child_by_field_name("declarator")
    return declarator.child_by_field_name("value") if declarator is not None else None


def _uses(model: SourceModel, function: Function, name: str) -> bool:
    body = model.source.data[function.body.start : function.body.end]
    return re.search(rb"\b" + re.escape(name.encode()) + rb"\b", body) is not None


def _constants(model: SourceModel) -> dict[str, int]:
    return dict(once(model, "folded_constants", lambda: _folded_constants(model)))


def _folded_constants(model: SourceModel) -> dict[str, int]:
    defs = [d for d in constant_defs(model) if d.function is None]
    with warnings.catch_warnings():  # Python's parser warns about C literals (`1e-5f`) before refusing them
        warnings.simplefilter("ignore", SyntaxWarning)
        folded = fold_constants({d.name: d.text for d in defs})
    return {k: v for k, v in folded.items() if v is not None}


def _macro_expressions(model: SourceModel, constants: dict[str, int]) -> dict[str, Any]:
    """Object-like macros that are not integer constants, parsed as expressions."""
    out: dict[str, Any] = {}
    for macro in model.macros:
        body = re.sub(r"//.*|/\*.*?\*/", "", macro.body.replace("\\\n", " "), flags=re.S).strip()
        if macro.is_function_like or not body or macro.name in constants or not _EXPRESSION.fullmatch(body):
            continue
        value = _parse_expression(body)
        if value is not None:
            out[macro.name] = value
    return out


def _pragmas(model: SourceModel, function: Function) -> dict[int, tuple[str, Span]]:
    """Loop start -> the `#pragma unroll` right before it (only blanks between)."""
    data = model.source.data
    out: dict[int, tuple[str, Span]] = {}
    for pragma in unroll_pragmas(model):
        if not function.body.contains(pragma.span):
            continue
        line_end = data.find(b"\n", pragma.span.end)
        after = len(data) if line_end < 0 else line_end + 1
        rest = data[after:]
        start = after + (len(rest) - len(rest.lstrip()))
        if data[start : start + 3] in (b"for", b"whi") or data[start : start + 2] == b"do":
            out[start] = (pragma.factor or "", Span(model.source.line_start(pragma.span.start), after))
    return out


def template_value_names(function: Function) -> frozenset[str]:
    return frozenset(t.name for t in template_params(function) if t.kind == "value")
