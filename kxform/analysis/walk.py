"""The structured walk of one function body that the access analysis is built from.

Statements are visited in program order with an environment of what each local holds
at that point (kxform.analysis.evaluate): a local assigned again at the top level is
followed to its new value (a transpose's `xIndex = blockIdx.y * TILE + threadIdx.x`);
one assigned under a condition or inside a loop is no longer a known form after it
(and inside the loop from its start). Every subscript of a buffer becomes a
`MemoryAccess` with the loops and guards around it; loops are recorded with their
bounds, and `#pragma unroll` before them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kxform.analysis.affine import BLOCK_AXES, Affine, NotAffine
from kxform.analysis.evaluate import Env, Evaluated, Pointer, evaluate, evaluate_name, short, subscript_chain, text
from kxform.analysis.records import Buffer, Guard, Loop, MemoryAccess
from kxform.analysis.syntax import (
    assigned_names,
    bounds,
    declared_here,
    declared_name,
    early_exit,
    has_jump,
    loop_bound,
    loop_init,
    loop_step,
    node_span,
    unwrap,
)
from kxform.frontend.model import Function, SourceModel, Span

BARRIER_RE = re.compile(
    r"^(__syncthreads\w*|__syncwarp|__shfl\w*|__ballot\w*|__any\w*|__all\w*|__activemask|"
    r"__threadfence\w*|grid\.sync|cooperative_groups::\w+|__reduce_\w+_sync|__match\w*|"
    r"(nvcuda::)?wmma::\w+)$"
)
WARP_COLLECTIVE_RE = re.compile(r"^(nvcuda::)?wmma::\w+$")
"""Warp-collective calls whose array arguments are fragments they may write."""
ATOMIC_RE = re.compile(r"^atomic\w+$")
MEMORY_INTRINSICS: dict[str, tuple[str, ...]] = {
    "__pipeline_memcpy_async": ("async-write", "read"),
    **{name: ("read",) for name in ("__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv")},
    **{name: ("write",) for name in ("__stcg", "__stcs", "__stwb", "__stwt")},
}
"""What intrinsics do with the element whose address is their argument (by position): the
load hints read it, the store hints write it, an asynchronous copy writes its first
argument (when its thread waits for the copy) and reads its second."""
_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast"})
_ONE = "1"
"""The step of `++` and `--` (evaluated like the right side of `+= 1`)."""


@dataclass
class LoopDraft:
    """A loop while its body is walked (facts added as they are found)."""

    loop: Loop
    node: Any


@dataclass
class WalkState:
    """What the walk collects for one function."""

    model: SourceModel
    function: Function
    buffers: dict[str, Buffer]
    loops: list[LoopDraft] = field(default_factory=list)
    accesses: list[MemoryAccess] = field(default_factory=list)
    barriers: list[Span] = field(default_factory=list)
    atomics: list[Span] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    declared_at: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Local name -> the loop stack at its (latest) declaration."""
    pragmas: dict[int, tuple[str, Span]] = field(default_factory=dict)
    """Loop start offset -> (`#pragma unroll` factor as written, its span)."""


class Walker:
    """Walks statements; `loop_stack` and `guards` describe the current program point."""

    def __init__(self, state: WalkState, env: Env) -> None:
        self.state = state
        self.env = env
        self.loop_stack: tuple[int, ...] = ()
        self.guards: tuple[Guard, ...] = ()

    # -- statements -------------------------------------------------------------------

    def statement(self, node: Any) -> None:
        kind = node.type
        if kind == "compound_statement":
            self.block(node)
        elif kind == "declaration":
            self.declaration(node)
        elif kind == "if_statement":
            self.if_statement(node)
        elif kind in ("for_statement", "while_statement", "do_statement"):
            self.loop(node)
        elif kind in ("expression_statement", "return_statement"):
            for child in node.named_children:
                self.expression(child)
        elif kind in ("comment", "break_statement", "continue_statement", "goto_statement", "labeled_statement"):
            for child in node.named_children:
                if child.type.endswith("statement"):
                    self.statement(child)
        else:
            for child in node.named_children:
                (self.statement if child.type.endswith("statement") else self.expression)(child)

    def block(self, node: Any) -> None:
        """A `{ ... }` scope: what it declares is gone after it (an outer name it shadowed
        comes back); assignments to outer names stay."""
        saved = self.guards
        declared = {n: self.env.names.get(n) for n in declared_here(node)}
        for child in node.named_children:
            self.statement(child)
            exit_cond = early_exit(child)
            if exit_cond is not None:
                self.guards = self.guards + (
                    Guard(short(exit_cond), False, node_span(child), "exit", bounds(exit_cond, False, self.env)),
                )
        self.guards = saved
        for name, outer in declared.items():
            if outer is None:
                self.env.names.pop(name, None)
            else:
                self.env.names[name] = outer

    def declaration(self, node: Any) -> None:
        if any(text(c) == "__shared__" for c in node.children if c.type == "type_qualifier"):
            return  # shared arrays are collected before the walk
        local_arrays = {n for n, b in self.state.buffers.items() if b.space == "local"}
        for declarator in node.children_by_field_name("declarator"):
            value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
            target = (
                declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
            )
            name_node = declared_name(target)
            if value is not None:
                self.expression(value)
            if name_node is None:
                continue
            name = text(name_node)
            self.state.declared_at[name] = self.loop_stack
            if name in local_arrays and target is not None and target.type == "array_declarator":
                self.bind(name, Evaluated(Pointer(name, Affine())))
                continue
            if value is not None and value.type != "initializer_list":
                self.bind(name, evaluate(value, self.env))
            else:
                self.bind(name, Evaluated(NotAffine(f"`{name}` has no initial value kxform reads")))

    def bind(self, name: str, value: Evaluated) -> None:
        self.env.names[name] = value

    def if_statement(self, node: Any) -> None:
        condition = node.child_by_field_name("condition")
        cond = unwrap(condition)
        self.expression(cond)
        where = node_span(node)
        before = self.env
        branches = [
            (
                node.child_by_field_name("consequence"),
                Guard(short(cond), True, where, "if", bounds(cond, True, self.env)),
            )
        ]
        alternative = node.child_by_field_name("alternative")
        if alternative is not None:
            inner = alternative.named_children[-1] if alternative.type == "else_clause" else alternative
            branches.append((inner, Guard(short(cond), False, where, "else", bounds(cond, False, self.env))))
        assigned: set[str] = set()
        for branch, guard in branches:
            if branch is None:
                continue
            self.env = before.copy()
            saved = self.guards
            self.guards = self.guards + (guard,)
            self.statement(branch)
            self.guards = saved
            assigned |= assigned_names(branch)
        self.env = before
        line = self.state.model.source.line_col(node.start_byte)[0]
        self._forget(assigned, f"is assigned under a condition (line {line})")

    def _forget(self, names: set[str], why: str) -> None:
        for name in names:
            bound = self.env.names.get(name)
            if bound is not None and isinstance(bound.value, Pointer):
                self.bind(name, Evaluated(Pointer(bound.value.buffer, NotAffine(f"`{name}` {why}"))))
            elif bound is not None:
                self.bind(name, Evaluated(NotAffine(f"`{name}` {why}")))

    def loop(self, node: Any) -> None:
        state = self.state
        kind = node.type.split("_")[0]
        body = node.child_by_field_name("body")
        init = node.child_by_field_name("initializer")
        before = self.env.copy()
        var, init_value = "", Evaluated(NotAffine("no initializer"))
        if init is not None:
            self.statement(init) if init.type == "declaration" else self.expression(init)
            var, init_value = loop_init(init, before)
        line = state.model.source.line_col(node.start_byte)[0]
        changing = assigned_names(node) - {var}
        self._forget(changing, f"changes in the loop at line {line}")
        loop_id = len(state.loops)
        if var:
            self.bind(var, Evaluated(Affine.symbol(var)))
            self.env.variables = self.env.variables | {var}
            state.declared_at.setdefault(var, self.loop_stack)
        cond = node.child_by_field_name("condition")
        op, bound = loop_bound(unwrap(cond) if cond is not None else None, var, self.env)
        step = loop_step(node.child_by_field_name("update"), var, self.env)
        header_end = body.start_byte if body is not None and kind == "for" else node.end_byte
        pragma = state.pragmas.get(node.start_byte)
        record = Loop(
            loop_id,
            kind,
            var,
            self.loop_stack[-1] if self.loop_stack else None,
            len(self.loop_stack),
            init_value.index,
            op,
            bound,
            step,
            node_span(node),
            Span(node.start_byte, header_end),
            node_span(body) if body is not None else node_span(node),
            pragma[0] if pragma else None,
            pragma[1] if pragma else None,
            exits=has_jump(body),
        )
        state.loops.append(LoopDraft(record, node))
        outer = self.loop_stack
        self.loop_stack = outer + (loop_id,)
        if cond is not None:
            self.expression(cond)
        if body is not None:
            self.statement(body)
        update = node.child_by_field_name("update")
        if update is not None:
            self.expression(update)
        self.loop_stack = outer
        self.env.variables = before.variables
        self._forget(changing, f"changes in the loop at line {line}")
        if var and var in before.names and init is not None and init.type != "declaration":
            self.bind(var, Evaluated(NotAffine(f"`{var}` is the variable of the loop at line {line}")))
        elif var and init is not None and init.type == "declaration":
            self.env.names.pop(var, None)
            if var in before.names:
                self.env.names[var] = before.names[var]

    # -- expressions ------------------------------------------------------------------

    def expression(self, node: Any) -> None:
        """Record the accesses, calls and assignments in an expression (in evaluation order)."""
        kind = node.type
        if kind == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            op = text(node.child_by_field_name("operator"))
            self.expression(right)
            if left.type == "identifier":
                self.assign(text(left), op, right)
                return
            self.access(left, read=op != "=", write=True, update="" if op == "=" else op)
            return
        if kind == "update_expression":
            argument = node.child_by_field_name("argument")
            if argument is not None and argument.type == "identifier":
                self.assign(text(argument), "+=" if "++" in text(node) else "-=", _ONE)
            elif argument is not None:
                self.access(argument, read=True, write=True, update="+=" if "++" in text(node) else "-=")
            return
        if kind == "subscript_expression":
            self.access(node, read=True, write=False)
            return
        if kind == "pointer_expression" and text(node.child_by_field_name("operator")) == "*":
            self.access(node, read=True, write=False)
            return
        if kind == "call_expression":
            self.call(node)
            return
        for child in node.named_children:
            self.expression(child)

    def assign(self, name: str, op: str, right: Any) -> None:
        """Straight-line semantics: the branch and loop handlers forget what is assigned
        under them once they are left."""
        value = evaluate(right, self.env)
        if op == "=":
            self.bind(name, value)
            return
        old = self.env.names.get(name) or evaluate_name(name, self.env)
        if op in ("+=", "-=") and not isinstance(value.value, Pointer):
            step = value.value if op == "+=" else (-value.value if isinstance(value.value, Affine) else value.value)
            if isinstance(old.value, Pointer):
                offset = (
                    old.value.offset + step
                    if isinstance(old.value.offset, Affine) and isinstance(step, Affine)
                    else NotAffine(f"`{name}` is moved by `{op}` a value that is {step}")
                )
                self.bind(name, Evaluated(Pointer(old.value.buffer, offset), old.via | value.via))
                return
            if isinstance(old.value, Affine) and isinstance(step, Affine):
                self.bind(name, Evaluated(old.value + step, old.via | value.via))
                return
        if isinstance(old.value, Pointer):
            self.bind(name, Evaluated(Pointer(old.value.buffer, NotAffine(f"`{name}` is updated with `{op}`"))))
        else:
            self.bind(name, Evaluated(NotAffine(f"`{name}` is updated with `{op}`")))

    def call(self, node: Any) -> None:
        name = text(node.child_by_field_name("function"))
        args = node.child_by_field_name("arguments")
        span = node_span(node)
        if BARRIER_RE.match(name):
            self.state.barriers.append(span)
        self.state.calls.append(name)
        atomic = bool(ATOMIC_RE.match(name))
        if atomic:
            self.state.atomics.append(span)
        roles = MEMORY_INTRINSICS.get(name, ())
        for i, arg in enumerate(args.named_children if args is not None else ()):
            target = addressed_element(arg) if i < len(roles) else None
            if target is not None:
                role = roles[i]
                self.access(target, read=role == "read", write=role != "read", asynchronous=role == "async-write")
                continue
            if (
                atomic
                and i == 0
                and arg.type == "pointer_expression"
                and text(arg.child_by_field_name("operator")) == "&"
            ):
                target = arg.child_by_field_name("argument")
                if target is not None and target.type == "subscript_expression":
                    self.access(target, read=True, write=True, atomic=True)
                    continue
            if arg.type == "subscript_expression" and self._by_reference(name, i):
                self.access(arg, read=True, write=True)  # bound to a reference parameter: the callee may write
                continue
            if arg.type == "pointer_expression" and text(arg.child_by_field_name("operator")) == "&":
                target = arg.child_by_field_name("argument")
                if target is not None and target.type == "subscript_expression":
                    self.access(target, read=True, write=True)  # the callee may do either
                    continue
            self.expression(arg)

    def _by_reference(self, callee: str, position: int) -> bool:
        if WARP_COLLECTIVE_RE.match(callee):
            return True
        for function in self.state.model.functions_named(callee):
            if position < len(function.params) and "&" in function.params[position].ctype:
                return True
        return False

    def access(
        self, node: Any, read: bool, write: bool, atomic: bool = False, update: str = "", asynchronous: bool = False
    ) -> None:
        if node.type == "pointer_expression":
            element = addressed_element(node.child_by_field_name("argument"))
            if element is not None:  # `*reinterpret_cast<float4*>(&x[i])`: x[i], read or written as another type
                self.access(element, read, write, atomic, update)
                return
            pointer = evaluate(node.child_by_field_name("argument"), self.env)
            if isinstance(pointer.value, Pointer):
                self._record(
                    node,
                    pointer.value.buffer,
                    pointer.value.offset,
                    (pointer.value.offset,),
                    pointer,
                    read,
                    write,
                    atomic,
                    update,
                )
            self.expression(node.child_by_field_name("argument"))
            return
        base, indices = subscript_chain(node)
        for index in indices:
            self.expression(index)
        target = evaluate(base, self.env) if base.type in ("identifier", "field_expression") else None
        if target is None or not isinstance(target.value, Pointer):
            if base.type not in ("identifier", "field_expression"):
                self.expression(base)
            if base.type == "identifier" and (
                text(base) in self.env.names or text(base) in {p.name for p in self.state.function.params}
            ):
                self._unknown(node, text(base), read, write, atomic, update)
            return
        pointer = target.value
        values = [evaluate(i, self.env) for i in indices]
        buffer = self.state.buffers[pointer.buffer]
        flat = _flatten(pointer.offset, [v.index for v in values], buffer.extents if buffer.space != "global" else ())
        via = Evaluated(flat, target.via.union(*(v.via for v in values)))
        self._record(
            node, pointer.buffer, flat, tuple(v.index for v in values), via, read, write, atomic, update, asynchronous
        )

    def _unknown(self, node: Any, name: str, read: bool, write: bool, atomic: bool, update: str) -> None:
        """A subscript of a local that does not point into a known buffer: recorded (in the
        space "unknown") so that no write goes unseen."""
        if name not in self.state.buffers:
            self.state.buffers[name] = Buffer(name, "unknown", "")
        why = NotAffine(f"`{name}` does not point into a buffer kxform can name")
        self._record(node, name, why, (why,), Evaluated(why), read, write, atomic, update)

    def _record(
        self,
        node: Any,
        buffer_name: str,
        index: Any,
        subscripts: tuple[Any, ...],
        via: Evaluated,
        read: bool,
        write: bool,
        atomic: bool,
        update: str = "",
        asynchronous: bool = False,
    ) -> None:
        state = self.state
        buffer = state.buffers[buffer_name]
        carriers = tuple(sorted(n for n in via.via if n in self.env.names and _mentions_block(self.env.names[n].value)))
        state.accesses.append(
            MemoryAccess(
                buffer.name,
                buffer.space,
                buffer.element,
                read,
                write,
                index,
                subscripts,
                short(node),
                node_span(node),
                state.model.source.line_col(node.start_byte)[0],
                state.function.name,
                self.loop_stack,
                self.guards,
                carriers,
                atomic,
                update,
                asynchronous,
            )
        )


def addressed_element(node: Any) -> Any:
    """The subscript whose address `node` is, through casts and parentheses
    (`reinterpret_cast<const float4*>(&x[i])`, `(float2*)&x[i]`), or None."""
    node = unwrap(node)
    while node is not None:
        if node.type == "cast_expression":
            node = unwrap(node.child_by_field_name("value"))
        elif node.type == "call_expression" and _cast_name(node) in _CASTS:
            args = node.child_by_field_name("arguments")
            node = unwrap(args.named_children[0]) if args is not None and len(args.named_children) == 1 else None
        else:
            break
    if node is None or node.type != "pointer_expression" or text(node.child_by_field_name("operator")) != "&":
        return None
    target = unwrap(node.child_by_field_name("argument"))
    return target if target is not None and target.type == "subscript_expression" else None


def _cast_name(node: Any) -> str:
    function = node.child_by_field_name("function")
    if function is None or function.type != "template_function":
        return ""
    return text(function.child_by_field_name("name"))


def _mentions_block(value: Any) -> bool:
    symbols = value.offset.symbols if isinstance(value, Pointer) else value.symbols
    return bool(symbols & set(BLOCK_AXES))


def _flatten(offset: Any, indices: list[Any], extents: tuple[Affine | None, ...]) -> Any:
    """Row-major element offset of `base[i0][i1]...` (extents of the inner dimensions known)."""
    if len(indices) == 1:
        index = indices[0]
        if isinstance(index, NotAffine) or isinstance(offset, NotAffine):
            bad = index if isinstance(index, NotAffine) else offset
            return NotAffine(bad.reason, index.symbols | offset.symbols)
        return offset + index
    if any(isinstance(i, NotAffine) for i in indices):
        bad = next(i for i in indices if isinstance(i, NotAffine))
        return NotAffine(bad.reason, frozenset().union(*(i.symbols for i in indices)))
    if len(extents) != len(indices) or any(e is None for e in extents[1:]):
        return NotAffine(
            "a multi-dimensional subscript of an array whose extents kxform cannot read",
            frozenset().union(*(i.symbols for i in indices)),
        )
    flat = Affine()
    for index, extent in zip(indices, extents):
        flat = flat * (extent or Affine.const(1)) + index
    return flat
