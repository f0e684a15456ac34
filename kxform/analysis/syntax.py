"""Shapes of the syntax tree the walk reads: loop headers (variable, bound, step), early
exits, jumps, declarations of a block, names assigned under a node, and the bounds a
condition establishes. Pure functions of tree-sitter nodes and an environment."""

from __future__ import annotations

from typing import Any

from kxform.analysis.affine import Affine, NotAffine
from kxform.analysis.evaluate import Env, Evaluated, evaluate, short, text
from kxform.analysis.records import Comparison
from kxform.frontend.model import Span

JUMPS = ("return_statement", "break_statement", "goto_statement")

_NEGATED = {"<": ">=", ">=": "<", ">": "<=", "<=": ">", "==": "!=", "!=": "=="}


def bounds(cond: Any, holds: bool, env: Env) -> tuple[Comparison, ...]:
    """The comparisons that hold when `cond` evaluates to `holds`: a conjunction when it
    holds, a disjunction when it does not (De Morgan); () for any other shape."""
    joiner = "&&" if holds else "||"
    parts: list[Any] = []
    stack = [unwrap(cond)]
    while stack:
        node = stack.pop()
        if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == joiner:
            stack += [unwrap(node.child_by_field_name("right")), unwrap(node.child_by_field_name("left"))]
        else:
            parts.append(node)
    out = []
    for part in parts:
        op = text(part.child_by_field_name("operator")) if part.type == "binary_expression" else ""
        if op not in _NEGATED:
            return ()
        left, right = (evaluate(part.child_by_field_name(k), env).index for k in ("left", "right"))
        out.append(Comparison(left, op if holds else _NEGATED[op], right))
    return tuple(out)


def declared_here(block: Any) -> set[str]:
    """Names declared by the statements of this block itself (not nested blocks)."""
    out = set()
    for child in block.named_children:
        if child.type == "declaration":
            for declarator in child.children_by_field_name("declarator"):
                target = (
                    declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                )
                name = declared_name(target)
                if name is not None:
                    out.add(text(name))
    return out


def node_span(node: Any) -> Span:
    return Span(node.start_byte, node.end_byte)


def unwrap(node: Any) -> Any:
    while node is not None and node.type in ("condition_clause", "parenthesized_expression") and node.named_children:
        node = node.named_children[-1]
    return node


def declared_name(node: Any) -> Any:
    while node is not None and node.type not in ("identifier",):
        inner = node.child_by_field_name("declarator")
        if inner is None:
            return None
        node = inner
    return node


def early_exit(node: Any) -> Any:
    """`if (cond) return;` (or `continue;`, `break;`: what follows in the block runs only
    when the condition is false), with no else: the condition, else None."""
    if node.type != "if_statement" or node.child_by_field_name("alternative") is not None:
        return None
    consequence = node.child_by_field_name("consequence")
    if consequence is None:
        return None
    last = (
        consequence.named_children[-1]
        if consequence.type == "compound_statement" and consequence.named_children
        else consequence
    )
    if last.type not in ("return_statement", "continue_statement", "break_statement"):
        return None
    return unwrap(node.child_by_field_name("condition"))


def has_jump(node: Any) -> bool:
    if node is None:
        return False
    stack = list(node.named_children) if node.type != "return_statement" else [node]
    while stack:
        current = stack.pop()
        if current.type in JUMPS:
            if current.type == "break_statement" and inside_nested_loop(current, node):
                continue
            return True
        if current.type not in ("lambda_expression",):
            stack.extend(current.named_children)
    return False


def inside_nested_loop(jump: Any, body: Any) -> bool:
    node = jump.parent
    while node is not None and node != body:
        if node.type in ("for_statement", "while_statement", "do_statement", "switch_statement"):
            return True
        node = node.parent
    return False


def assigned_names(node: Any) -> set[str]:
    """Locals assigned or incremented anywhere under `node`."""
    out: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        target = None
        if current.type == "assignment_expression":
            target = current.child_by_field_name("left")
        elif current.type == "update_expression":
            target = current.child_by_field_name("argument")
        if target is not None and target.type == "identifier":
            out.add(text(target))
        stack.extend(current.named_children)
    return out


def loop_init(init: Any, env: Env) -> tuple[str, Evaluated]:
    if init.type == "declaration":
        declarator = init.child_by_field_name("declarator")
        if declarator is not None and declarator.type == "init_declarator":
            name = declared_name(declarator.child_by_field_name("declarator"))
            value = declarator.child_by_field_name("value")
            if name is not None and value is not None:
                return text(name), evaluate(value, env)
    if init.type == "assignment_expression" and init.child_by_field_name("left").type == "identifier":
        return text(init.child_by_field_name("left")), evaluate(init.child_by_field_name("right"), env)
    return "", Evaluated(NotAffine("the loop's initializer is not `var = value`"))


def loop_bound(cond: Any, var: str, env: Env) -> tuple[str, Any]:
    if cond is None or not var or cond.type != "binary_expression":
        return "", NotAffine("the condition is not `var OP bound`")
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    op = text(cond.child_by_field_name("operator"))
    if text(left) == var:
        return op, evaluate(right, env).index
    if text(right) == var:
        flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        return flipped, evaluate(left, env).index
    return op, NotAffine(f"the condition `{short(cond)}` does not compare `{var}` with a bound")


def loop_step(update: Any, var: str, env: Env) -> Any:
    if update is None or not var:
        return NotAffine("no update")
    if update.type == "update_expression" and text(update.child_by_field_name("argument")) == var:
        return Affine.const(1 if "++" in text(update) else -1)
    if update.type == "assignment_expression" and text(update.child_by_field_name("left")) == var:
        op = text(update.child_by_field_name("operator"))
        right = evaluate(update.child_by_field_name("right"), env).index
        if op == "+=":
            return right
        if op == "-=" and isinstance(right, Affine):
            return -right
        return NotAffine(f"the update `{short(update)}` is not an addition")
    return NotAffine(f"the update `{short(update)}` does not step `{var}`")
