"""Drafting buffer roles from a kernel's body: read only -> in, written only -> out, both -> inout.

A role that is too narrow makes verification vacuous: a buffer the kernel reads but the
spec declares `out` is poisoned, the poison propagates into every result, and two runs
that both compute NaN from it agree. So the draft reads the body (tree-sitter): every
access through a pointer parameter, through local pointers derived from it (`float *q =
c + off`), and through device functions of the file it is passed to, is classified as a
read, a write, or both (`+=`, `++`, atomics). Anything the syntax cannot classify
(the pointer passed to an unknown function, its address stored) counts as both, which
drafts `inout`: the safe side, since an `inout` buffer holds real data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from kxform.frontend.model import Function, SourceModel

ATOMIC_RE = re.compile(r"^atomic\w*$")
LOAD_RE = re.compile(r"^(__ldg|__ldca|__ldcg|__ldcs|__ldlu|__ldcv)$")
STORE_RE = re.compile(r"^(__stcg|__stcs|__stwb|__stwt)$")
CASTS = ("reinterpret_cast", "static_cast", "const_cast")
MAX_DEPTH = 4


@dataclass(frozen=True)
class Access:
    """How a kernel uses one pointer parameter."""

    read: bool = False
    written: bool = False
    opaque: bool = False
    """Used in a way the syntax cannot classify (counted as read and written)."""

    def __or__(self, other: Access) -> Access:
        return Access(self.read or other.read, self.written or other.written, self.opaque or other.opaque)

    def role(self, const: bool) -> str:
        if const or not (self.written or self.opaque):
            return "in"
        return "out" if self.written and not self.read and not self.opaque else "inout"


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text else ""


def _call_name(call: tree_sitter.Node) -> str:
    function = call.child_by_field_name("function")
    if function is not None and function.type == "template_function":
        function = function.child_by_field_name("name")
    return _text(function).rsplit("::", 1)[-1]


def _skip_parens(node: tree_sitter.Node) -> tree_sitter.Node | None:
    parent = node.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    return parent


def _climb_pointer(node: tree_sitter.Node) -> tree_sitter.Node:
    """From a pointer-valued expression up through `(p)`, `p + i`, casts, to the largest
    expression that is still the same pointer."""
    while True:
        parent = node.parent
        if parent is None:
            return node
        if parent.type in ("parenthesized_expression", "cast_expression"):
            node = parent
        elif (
            parent.type == "binary_expression"
            and _text(parent.child_by_field_name("operator")) in ("+", "-")
            and parent.child_by_field_name("left") == node
        ):
            node = parent
        elif (
            parent.type == "binary_expression"
            and _text(parent.child_by_field_name("operator")) == "+"
            and parent.child_by_field_name("right") == node
        ):
            node = parent
        elif (
            parent.type == "argument_list"
            and parent.parent is not None
            and parent.parent.type == "call_expression"
            and _call_name(parent.parent) in CASTS
        ):
            node = parent.parent
        else:
            return node


class _Analysis:
    def __init__(self, model: SourceModel) -> None:
        self.model = model
        self.cache: dict[tuple[str, int], Access] = {}

    def function_param(self, function: Function, index: int, depth: int) -> Access:
        key = (function.name, index)
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = Access(opaque=True)  # recursion: assume the worst until known
        if index >= len(function.params) or depth > MAX_DEPTH:
            return self.cache[key]
        body = self.model.tree.root_node.descendant_for_byte_range(function.body.start, function.body.end)
        result = self.uses(body, function.params[index].name, depth) if body is not None else Access(opaque=True)
        self.cache[key] = result
        return result

    def uses(self, body: tree_sitter.Node, name: str, depth: int) -> Access:
        aliases = _aliases(body, name)
        total = Access()
        stack = [body]
        while stack:
            node = stack.pop()
            if node.type == "identifier" and _text(node) in aliases and not _is_alias_definition(node):
                total = total | self.classify(_climb_pointer(node), depth)
            stack.extend(node.children)
        return total

    def classify(self, pointer: tree_sitter.Node, depth: int) -> Access:
        parent = _skip_parens(pointer)
        if parent is None:
            return Access(opaque=True)
        if (
            parent.type == "subscript_expression"
            and parent.child_by_field_name("argument") in (pointer, None)
            or parent.type == "pointer_expression"
            and _text(parent.child_by_field_name("operator")) == "*"
            or parent.type == "field_expression"
            and _text(parent.child_by_field_name("operator")) == "->"
        ):
            if parent.type == "subscript_expression" and parent.child_by_field_name("argument") != _outer(pointer):
                return Access(read=True)  # the pointer is the index (`x[p]`): not our access
            return self.element_use(parent, depth)
        if parent.type in ("init_declarator", "assignment_expression"):
            return Access()  # an alias: its own accesses are collected
        if parent.type == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression":
            return self.argument(parent.parent, parent, pointer, depth)
        if parent.type in ("binary_expression", "condition_clause", "unary_expression"):
            return Access()  # comparisons and tests of the pointer itself
        return Access(opaque=True)

    def argument(self, call: tree_sitter.Node, args: tree_sitter.Node, pointer: tree_sitter.Node, depth: int) -> Access:
        name = _call_name(call)
        if ATOMIC_RE.match(name):
            return Access(read=True, written=True)
        if LOAD_RE.match(name):
            return Access(read=True)
        if STORE_RE.match(name):
            return Access(written=True)
        index = [c for c in args.named_children if c.type != "comment"].index(_outer(pointer))
        callees = [f for f in self.model.functions_named(name) if len(f.params) > index]
        if len(callees) != 1:
            return Access(opaque=True)
        return self.function_param(callees[0], index, depth + 1)

    def element_use(self, access: tree_sitter.Node, depth: int) -> Access:
        """A dereference `p[i]`, `*p`, `p->f`: read, written or both, by where it stands. An
        element passed to a device function of the file by non-const reference is what
        that function does with its parameter."""
        node = access
        while True:
            parent = _skip_parens(node)
            if (
                parent is not None
                and parent.type == "field_expression"
                and _text(parent.child_by_field_name("operator")) == "."
                and parent.child_by_field_name("argument") == _outer(node)
            ):
                node = parent  # p[i].x: the member access stands where the element does
                continue
            break
        parent = _skip_parens(node)
        if parent is None:
            return Access(read=True)
        if parent.type == "assignment_expression" and parent.child_by_field_name("left") == _outer(node):
            return (
                Access(written=True)
                if _text(parent.child_by_field_name("operator")) == "="
                else Access(read=True, written=True)
            )
        if parent.type == "update_expression":
            return Access(read=True, written=True)
        if parent.type == "pointer_expression" and _text(parent.child_by_field_name("operator")) == "&":
            grand = _skip_parens(parent)
            if grand is not None and grand.type == "argument_list" and grand.parent is not None:
                name = _call_name(grand.parent)
                if ATOMIC_RE.match(name):
                    return Access(read=True, written=True)
                if LOAD_RE.match(name):
                    return Access(read=True)
            return Access(opaque=True)
        if parent.type == "argument_list" and parent.parent is not None and parent.parent.type == "call_expression":
            return self.by_reference(parent.parent, parent, node, depth)
        return Access(read=True)

    def by_reference(
        self, call: tree_sitter.Node, args: tree_sitter.Node, element: tree_sitter.Node, depth: int
    ) -> Access:
        callees = self.model.functions_named(_call_name(call))
        index = [c for c in args.named_children if c.type != "comment"].index(_outer(element))
        if len(callees) != 1 or index >= len(callees[0].params):
            return Access(read=True)  # a built-in or math function: takes values
        param = callees[0].params[index]
        if "&" not in param.ctype or re.search(r"\bconst\b", param.ctype):
            return Access(read=True)
        if depth > MAX_DEPTH:
            return Access(opaque=True)
        body = self.model.tree.root_node.descendant_for_byte_range(callees[0].body.start, callees[0].body.end)
        total = Access()
        stack = [body] if body is not None else []
        while stack:
            node = stack.pop()
            if node.type == "identifier" and _text(node) == param.name:
                total = total | self.element_use(node, depth + 1)
            stack.extend(node.children)
        return total


def _outer(node: tree_sitter.Node) -> tree_sitter.Node:
    while node.parent is not None and node.parent.type == "parenthesized_expression":
        node = node.parent
    return node


def _is_alias_definition(node: tree_sitter.Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in ("pointer_declarator", "reference_declarator"):
        parent = parent.parent
    return (
        parent is not None
        and parent.type in ("init_declarator", "declaration")
        and parent.child_by_field_name("value") != node
    )


def _aliases(body: tree_sitter.Node, name: str) -> set[str]:
    """`name` and every local pointer initialised or assigned from it (to a fixed point)."""
    names = {name}
    pairs: list[tuple[str, tree_sitter.Node]] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "init_declarator":
            declarator = node.child_by_field_name("declarator")
            value = node.child_by_field_name("value")
            if (
                declarator is not None
                and value is not None
                and declarator.type in ("pointer_declarator", "reference_declarator")
            ):
                inner = declarator.child_by_field_name("declarator")
                while inner is not None and inner.type in ("pointer_declarator", "reference_declarator"):
                    inner = inner.child_by_field_name("declarator")
                if inner is not None and inner.type == "identifier":
                    pairs.append((_text(inner), value))
        stack.extend(node.children)
    changed = True
    while changed:
        changed = False
        for alias, value in pairs:
            if alias not in names and _points_into(value, names):
                names.add(alias)
                changed = True
    return names


def _points_into(value: tree_sitter.Node, names: set[str]) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if node.type == "subscript_argument_list":
            continue  # an index, not the base pointer
        if node.type == "identifier" and _text(node) in names:
            return True
        stack.extend(node.children)
    return False


def draft_roles(model: SourceModel, kernel: Function) -> dict[str, Access]:
    """How the kernel uses each pointer parameter (by name)."""
    analysis = _Analysis(model)
    return {
        param.name: analysis.function_param(kernel, i, 0)
        for i, param in enumerate(kernel.params)
        if "*" in param.ctype or "[" in param.ctype
    }
