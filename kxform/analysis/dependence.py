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

from typing import Any

from kxform.analysis.affine import Affine
from kxform.analysis.evaluate import short, text
from kxform.analysis.records import Loop, MemoryAccess, Reduction
from kxform.analysis.walk import WalkState, assigned_names
from kxform.frontend.model import Span

_CALL_OPS = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min",
             "__hmax": "max", "__hmin": "min"}
_COMPOUND_OPS = {"+=": "+", "-=": "+", "*=": "*"}


def loop_facts(state: WalkState) -> None:
    """Fill in each loop's reductions, carried dependences and barrier flag."""
    for draft in state.loops:
        loop, node = draft.loop, draft.node
        body = node.child_by_field_name("body")
        reductions, carried = _scalars(state, loop, node)
        carried += _memory(loop, [a for a in state.accesses if loop.id in a.loops])
        barrier = any(loop.body.contains(s) for s in state.barriers) if body is not None else False
        draft.loop = type(loop)(**{**loop.__dict__, "reductions": tuple(reductions), "carried": tuple(carried),
                                   "barrier": barrier})


def _scalars(state: WalkState, loop: Loop, node: Any) -> tuple[list[Reduction], list[str]]:
    reductions: list[Reduction] = []
    carried: list[str] = []
    for name in sorted(assigned_names(node) - {loop.var}):
        declared = state.declared_at.get(name)
        if declared is None or loop.id in declared:
            continue  # declared inside the loop (private to an iteration) or not a local
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
            return f"`{name}` is assigned in one iteration and read in another (line " \
                   f"{state.model.source.line_col(use.start_byte)[0]})"
        statement, op = update
        ops.add(op)
        span = Span(statement.start_byte, statement.end_byte)
        if span not in updates:
            updates.append(span)
    if len(ops) != 1:
        return f"`{name}` is accumulated with several operators ({', '.join(sorted(ops))})"
    ctype, init = _declaration(state, name)
    outer = _outermost_carrier(state, loop, name)
    return Reduction(name, ops.pop(), ctype, init, tuple(updates), outer)


def _outermost_carrier(state: WalkState, loop: Loop, name: str) -> int:
    declared = state.declared_at.get(name, ())
    current = loop
    while current.parent is not None and current.parent not in declared:
        current = state.loops[current.parent].loop
    return current.id


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
    while node.parent is not None and node.parent.type in ("parenthesized_expression", "argument_list",
                                                           "binary_expression", "call_expression", "cast_expression"):
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
        if function in _CALL_OPS and len(named) == 2 and len(mine) == 1 and \
                not any(_mentions(a, name) for a in named if a not in mine):
            return assignment, _CALL_OPS[function]
    return None


def _strip(node: Any) -> Any:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    return node


def _declaration(state: WalkState, name: str) -> tuple[str, str]:
    """The declared type and initial value of local `name` (first declaration in the function)."""
    root = state.model.tree.root_node.descendant_for_byte_range(state.function.body.start, state.function.body.start)
    while root is not None and root.type != "compound_statement":
        root = root.parent
    stack = [root] if root is not None else []
    while stack:
        current = stack.pop()
        if current.type == "declaration":
            for declarator in current.children_by_field_name("declarator"):
                target = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" \
                    else declarator
                if target is not None and text(target) == name:
                    value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
                    return short(current.child_by_field_name("type")), short(value) if value is not None else ""
        stack.extend(reversed(current.named_children))
    return "", ""


def _memory(loop: Loop, accesses: list[MemoryAccess]) -> list[str]:
    out: list[str] = []
    for write in (a for a in accesses if a.write):
        if not isinstance(write.index, Affine):
            out.append(f"{write.text} is written at an index that is {write.index}")
            continue
        if loop.var and write.index.stride(loop.var) == 0 and not write.atomic:
            out.append(f"every iteration writes {write.text} (the index does not depend on `{loop.var}`)")
            continue
        for other in accesses:
            if other is write or other.buffer != write.buffer:
                continue
            if not isinstance(other.index, Affine) or other.index != write.index:
                out.append(f"{write.buffer} is written at [{write.index}] and accessed at [{other.index}] in the "
                           "loop: iterations may depend on each other")
                break
    return list(dict.fromkeys(out))
