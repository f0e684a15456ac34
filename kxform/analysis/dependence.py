"""Dependence facts of a loop: its reductions, and what else ties one iteration to the next.

A scalar declared outside the loop and updated inside it is a *reduction* when every
mention of it in the loop is one of its updates with one operator (`acc += e`,
`acc = acc + e`, `acc = fmaxf(acc, e)`, `acc = min(e, acc)`, `acc *= e`) and `e` does
not read it: the updates may then be reassociated (Halide's rfactor condition).
Anything else assigned in the loop and declared outside it is *carried*. Memory
carries a dependence when a buffer written in the loop is touched there at another
index (or every iteration writes the same element); distinct pointer parameters are
assumed not to alias (`Buffer.restrict` says where the source promises it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kxform.analysis.affine import Affine
from kxform.analysis.evaluate import short, text
from kxform.analysis.records import Loop, MemoryAccess, Reduction
from kxform.analysis.syntax import assigned_names
from kxform.analysis.walk import WalkState
from kxform.frontend.model import Span

_CALL_OPS = {
    "fmaxf": "max",
    "fmax": "max",
    "max": "max",
    "fminf": "min",
    "fmin": "min",
    "min": "min",
    "__hmax": "max",
    "__hmin": "min",
}
_COMPOUND_OPS = {"+=": "+", "-=": "+", "*=": "*"}


def loop_facts(state: WalkState) -> None:
    """Fill in each loop's reductions, carried dependences and barrier flag."""
    for draft in state.loops:
        loop, node = draft.loop, draft.node
        body = node.child_by_field_name("body")
        reductions, carried = _scalars(state, loop, node)
        in_memory, array_reductions = _memory(
            loop, [a for a in state.accesses if loop.id in a.loops], [d.loop for d in state.loops]
        )
        carried += in_memory
        reductions += array_reductions
        barrier = any(loop.body.contains(s) for s in state.barriers) if body is not None else False
        draft.loop = replace(loop, reductions=tuple(reductions), carried=tuple(carried), barrier=barrier)
    _outermost_array_carriers(state)


def _outermost_array_carriers(state: WalkState) -> None:
    """An accumulation found in a loop and in the loops around it (as far as they carry it
    too) names the outermost of them: for a scalar that is where its declaration stops
    it, for an array element where the element stops being the same."""
    for draft in state.loops:
        loop = draft.loop
        fixed = []
        for reduction in loop.reductions:
            outer = loop
            while outer.parent is not None and any(
                r.var == reduction.var and r.op == reduction.op for r in state.loops[outer.parent].loop.reductions
            ):
                outer = state.loops[outer.parent].loop
            fixed.append(replace(reduction, loop=outer.id, read_after=_read_after(state, reduction.var, outer)))
        draft.loop = replace(loop, reductions=tuple(fixed))


def _read_after(state: WalkState, name: str, carrier: Loop) -> tuple[Span, ...]:
    """Where the accumulated value is read after the loop that carries it, within the
    scope of its declaration (the function body when that is not found)."""
    node = state.loops[carrier.id].node
    declaration = _visible_declaration(state, node, name)
    scope = declaration[0].parent if declaration is not None else node.parent
    while scope is not None and scope.type != "compound_statement":
        scope = scope.parent
    if scope is None:
        return ()
    uses = sorted(_mentions(scope, name), key=lambda u: u.start_byte)
    return tuple(
        Span(use.start_byte, use.end_byte)
        for use in uses
        if use.start_byte >= carrier.span.end
        and not (
            use.parent.type == "assignment_expression"
            and use.parent.child_by_field_name("left") == use
            and text(use.parent.child_by_field_name("operator")) == "="
        )
    )


def _scalars(state: WalkState, loop: Loop, node: Any) -> tuple[list[Reduction], list[str]]:
    reductions: list[Reduction] = []
    carried: list[str] = []
    body = node.child_by_field_name("body")
    if loop.var and body is not None and loop.var in assigned_names(body):
        carried.append(f"the loop variable `{loop.var}` is assigned in the body")
    for name in sorted(assigned_names(node) - {loop.var}):
        if _declarations(node, name):
            continue  # declared inside the loop: private to an iteration
        found = _reduction(state, loop, node, name)
        if isinstance(found, Reduction):
            reductions.append(found)
        else:
            carried.append(found)
    return reductions, carried


def _reduction(state: WalkState, loop: Loop, node: Any, name: str) -> Reduction | str:
    """The reduction into `name` in this loop, or why it is not one."""
    ops: set[str] = set()
    updates: list[Span] = []
    for use in _mentions(node, name):
        update = _update_of(use, name)
        if update is None:
            return (
                f"`{name}` is assigned in one iteration and read in another (line "
                f"{state.model.source.line_col(use.start_byte)[0]})"
            )
        statement, op = update
        ops.add(op)
        span = Span(statement.start_byte, statement.end_byte)
        if span not in updates:
            updates.append(span)
    if len(ops) != 1:
        return f"`{name}` is accumulated with several operators ({', '.join(sorted(ops))})"
    declaration = _visible_declaration(state, node, name)
    ctype, init, where = "", "", -1
    if declaration is not None:
        decl, declarator = declaration
        value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
        ctype, init, where = (
            short(decl.child_by_field_name("type")),
            short(value) if value is not None else "",
            decl.start_byte,
        )
    return Reduction(name, ops.pop(), ctype, init, tuple(updates), _outermost_carrier(state, loop, where))


def _outermost_carrier(state: WalkState, loop: Loop, declared: int) -> int:
    """The outermost loop around `loop` (itself included) that does not contain the declaration."""
    current = loop
    while (
        current.parent is not None
        and not state.loops[current.parent].loop.span.start <= declared < state.loops[current.parent].loop.span.end
    ):
        current = state.loops[current.parent].loop
    return current.id


def _declarations(node: Any, name: str) -> list[tuple[Any, Any]]:
    """(declaration, declarator) pairs under `node` that declare `name`."""
    out = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in ("declaration", "parameter_declaration"):
            for declarator in current.children_by_field_name("declarator"):
                target = (
                    declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                )
                while target is not None and target.type not in ("identifier",):
                    target = target.child_by_field_name("declarator")
                if target is not None and text(target) == name:
                    out.append((current, declarator))
        stack.extend(current.named_children)
    return out


def _visible_declaration(state: WalkState, loop_node: Any, name: str) -> tuple[Any, Any] | None:
    """The declaration of `name` in scope at the loop: the last one before it in a block
    (or parameter list) that encloses it."""
    scope = loop_node.parent
    while scope is not None:
        if scope.type in ("compound_statement", "for_statement", "function_definition"):
            found = [
                d
                for d in _declarations(scope, name)
                if d[0].start_byte < loop_node.start_byte and _encloses(d[0].parent, loop_node)
            ]
            if found:
                return max(found, key=lambda d: d[0].start_byte)
        scope = scope.parent
    return None


def _encloses(scope: Any, node: Any) -> bool:
    return scope is not None and scope.start_byte <= node.start_byte and node.end_byte <= scope.end_byte


def _mentions(node: Any, name: str) -> list[Any]:
    out = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "identifier" and text(current) == name:
            out.append(current)
        stack.extend(current.named_children)
    return out


def _update_of(use: Any, name: str) -> tuple[Any, str] | None:
    """(the assignment, its operator) when `use` is the target of an accumulation into
    `name` or its own operand there; None otherwise."""
    parent = use.parent
    if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == use:
        return _accumulation(parent, name)
    node = use
    while node.parent is not None and node.parent.type in (
        "parenthesized_expression",
        "argument_list",
        "binary_expression",
        "call_expression",
        "cast_expression",
    ):
        node = node.parent
    assignment = node.parent
    if assignment is None or assignment.type != "assignment_expression":
        return None
    left = assignment.child_by_field_name("left")
    if left is None or text(left) != name:
        return None
    return _accumulation(assignment, name)


def _accumulation(assignment: Any, name: str) -> tuple[Any, str] | None:
    op = text(assignment.child_by_field_name("operator"))
    right = assignment.child_by_field_name("right")
    if op in _COMPOUND_OPS:
        return (assignment, _COMPOUND_OPS[op]) if not _mentions(right, name) else None
    if op != "=" or right is None:
        return None
    right = _strip(right)
    if right.type == "binary_expression" and text(right.child_by_field_name("operator")) in ("+", "*"):
        sides = [_strip(right.child_by_field_name(k)) for k in ("left", "right")]
        mine = [s for s in sides if s.type == "identifier" and text(s) == name]
        others = [s for s in sides if s not in mine]
        if len(mine) == 1 and len(others) == 1 and not _mentions(others[0], name):
            return assignment, text(right.child_by_field_name("operator"))
        return None
    if right.type == "call_expression":
        function = text(right.child_by_field_name("function"))
        args = right.child_by_field_name("arguments")
        named = [_strip(a) for a in args.named_children] if args is not None else []
        mine = [a for a in named if a.type == "identifier" and text(a) == name]
        if (
            function in _CALL_OPS
            and len(named) == 2
            and len(mine) == 1
            and not any(_mentions(a, name) for a in named if a not in mine)
        ):
            return assignment, _CALL_OPS[function]
    return None


def _strip(node: Any) -> Any:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    return node


def _memory(loop: Loop, accesses: list[MemoryAccess], loops: list[Loop]) -> tuple[list[str], list[Reduction]]:
    """Carried dependences through memory, and reductions into array elements
    (`acc[i][j] += a[i] * b[j]` over a loop the index does not depend on)."""
    out: list[str] = []
    reductions: dict[str, Reduction] = {}
    private = {b for b in {a.buffer for a in accesses if a.space == "local"} if _private(b, loop, accesses, loops)}
    for write in (a for a in accesses if a.write and a.buffer not in private):
        if not isinstance(write.index, Affine):
            out.append(f"{write.text} is written at an index that is {write.index}")
            continue
        if loop.var and write.index.stride(loop.var) == 0 and not write.atomic:
            reduction = _array_reduction(loop, write, accesses)
            if reduction is not None:
                reductions.setdefault(write.buffer, reduction)
                continue
            out.append(f"every iteration writes {write.text} (the index does not depend on `{loop.var}`)")
            continue
        for other in accesses:
            if other is write or other.buffer != write.buffer:
                continue
            if not isinstance(other.index, Affine) or other.index != write.index:
                out.append(
                    f"{write.buffer} is written at [{write.index}] and accessed at [{other.index}] in the "
                    "loop: iterations may depend on each other"
                )
                break
    return list(dict.fromkeys(out)), list(reductions.values())


def _array_reduction(loop: Loop, write: MemoryAccess, accesses: list[MemoryAccess]) -> Reduction | None:
    """Every access of the buffer in the loop is one compound update (`+=`, `-=`, `*=`) at
    one index: an accumulation into that element."""
    mine = [a for a in accesses if a.buffer == write.buffer]
    ops = {_COMPOUND_OPS.get(a.update_op) for a in mine}
    if len(ops) != 1 or None in ops or any(a.index != write.index for a in mine) or write.space == "global":
        return None
    return Reduction(write.buffer, ops.pop() or "+", write.element, "", tuple(a.span for a in mine), loop.id)


def _private(buffer: str, loop: Loop, accesses: list[MemoryAccess], loops: list[Loop]) -> bool:
    """A local array whose first access in the loop is a write and every read of which is at
    an index written before it in the loop (registers reloaded each iteration). Indices
    are compared with the variables of inner loops named by their range, so `b[i]` written
    in one `for (i = 0; i < 4; ++i)` covers `b[j]` read in a `for (j = 0; j < 4; ++j)`."""
    mine = sorted((a for a in accesses if a.buffer == buffer), key=lambda a: a.span.start)
    if not mine or not mine[0].write or mine[0].read:
        return False
    written: set[object] = set()
    for access in mine:
        index = _by_range(access, loop, loops)
        if access.read and index not in written:
            return False
        if access.write:
            written.add(index)
    return True


def _by_range(access: MemoryAccess, loop: Loop, loops: list[Loop]) -> object:
    index = access.index
    if not isinstance(index, Affine):
        return index
    inner = access.loops[access.loops.index(loop.id) + 1 :] if loop.id in access.loops else ()
    for loop_id in inner:
        other = loops[loop_id]
        if other.var:
            index = index.substitute(other.var, Affine.symbol(f"<{other.init};{other.op}{other.bound};{other.step}>"))
    return index
