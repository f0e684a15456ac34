"""Symbolic evaluation of a C expression (a tree-sitter node) to an affine form.

The environment binds the names of one program point: locals to what their definition
evaluated to (followed, so `int i = blockIdx.x*blockDim.x + threadIdx.x; int row = i;`
makes `A[row]` affine in the indices), buffers (pointer parameters, pointer locals
`const float* x = inp + row * C`, shared arrays) to a base and offset, file-scope
integer constants to their value. A name bound nowhere is a parameter of the launch
(a scalar kernel parameter, a template parameter, an unresolved constant). Variables
are the thread and block indices and the induction variables of the enclosing loops;
a product of two variables is not affine, and says so.
"""

from __future__ import annotations

import threading

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kxform.analysis.affine import INDEX_VARIABLES, Affine, Index, NotAffine
from kxform.frontend.queries import int_value

BUILTIN_STRUCTS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
HIP_BUILTINS = {f"hip{b[0].upper()}{b[1:]}_{a}": f"{b}.{a}" for b in BUILTIN_STRUCTS for a in "xyz"}
SIZEOF = {
    "float": 4,
    "double": 8,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "char": 1,
    "short": 2,
    "long": 8,
    "long long": 8,
    "size_t": 8,
    "float2": 8,
    "float4": 16,
    "int4": 16,
    "int2": 8,
    "double2": 16,
    "half2": 4,
    "__half2": 4,
}


@dataclass(frozen=True)
class Pointer:
    """A pointer into a buffer: `buffer + offset` (in elements)."""

    buffer: str
    offset: Index


@dataclass(frozen=True)
class Evaluated:
    """What an expression evaluated to, and the locals followed on the way."""

    value: Index | Pointer
    via: frozenset[str] = frozenset()

    @property
    def index(self) -> Index:
        if isinstance(self.value, Pointer):
            return NotAffine(f"a pointer into {self.value.buffer}", frozenset())
        return self.value


Binding = Index | Pointer


@dataclass
class Env:
    """Names of one program point (copied on entry to a branch or loop)."""

    names: dict[str, Evaluated] = field(default_factory=dict)
    variables: frozenset[str] = INDEX_VARIABLES
    constants: Mapping[str, int] = field(default_factory=dict)
    macros: Mapping[str, Any] = field(default_factory=dict)
    """Object-like macros whose body is an expression (`#define ROW (blockIdx.y * 16 + threadIdx.y)`):
    name -> the parsed body, evaluated where the name is used."""
    expanding: frozenset[str] = frozenset()

    def copy(self) -> Env:
        return Env(dict(self.names), self.variables, self.constants, self.macros, self.expanding)


def text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def short(node: Any) -> str:
    return " ".join(text(node).split())


MAX_DEPTH = 200
"""Nesting of an expression the evaluation follows (a macro's body as deep as a function's):
deeper is not affine, never a recursion overflow."""
_DEPTH = threading.local()


def evaluate(node: Any, env: Env) -> Evaluated:
    """The value of `node` under `env` (never raises: what it cannot read is NotAffine).
    A plain string is an integer literal (the step of `++`)."""
    if isinstance(node, str):
        return Evaluated(Affine.const(int(node)))
    kind = node.type
    handler = _HANDLERS.get(kind)
    if handler is None:
        return Evaluated(
            NotAffine(f"`{short(node)}` is not an integer expression kxform reads", _depends_below(node, env))
        )
    depth = getattr(_DEPTH, "value", 0)
    if depth >= MAX_DEPTH:
        return Evaluated(NotAffine(f"an expression nested more than {MAX_DEPTH} levels deep"))
    _DEPTH.value = depth + 1
    try:
        return handler(node, env)
    finally:
        _DEPTH.value = depth


def _number(node: Any, env: Env) -> Evaluated:
    value = int_value(text(node))
    if value is None:
        return Evaluated(NotAffine(f"`{text(node)}` is not an integer"))
    return Evaluated(Affine.const(value))


def evaluate_name(name: str, env: Env) -> Evaluated:
    """The value of the name `name` at this point (a local, a constant, a parameter)."""
    return _named(name, env)


def _identifier(node: Any, env: Env) -> Evaluated:
    return _named(text(node), env)


def _named(name: str, env: Env) -> Evaluated:
    if name in env.names:
        bound = env.names[name]
        return Evaluated(bound.value, bound.via | {name})
    if name in HIP_BUILTINS:
        return Evaluated(Affine.symbol(HIP_BUILTINS[name]))
    if name in env.constants:
        return Evaluated(Affine.const(env.constants[name]))
    if name in env.macros and name not in env.expanding:
        inner = Env(env.names, env.variables, env.constants, env.macros, env.expanding | {name})
        expanded = evaluate(env.macros[name], inner)
        return Evaluated(expanded.value, expanded.via | {name})
    return Evaluated(Affine.symbol(name))


def _field(node: Any, env: Env) -> Evaluated:
    base, member = node.child_by_field_name("argument"), node.child_by_field_name("field")
    if base is not None and base.type == "identifier" and text(base) in BUILTIN_STRUCTS and text(member) in "xyz":
        return Evaluated(Affine.symbol(f"{text(base)}.{text(member)}"))
    depends = _depends_below(base, env) if base is not None else frozenset()
    return Evaluated(NotAffine(f"`{short(node)}` is a member access", depends))


def _inner(node: Any, env: Env) -> Evaluated:
    named = [c for c in node.named_children if c.type != "comment"]
    return evaluate(named[-1], env) if named else Evaluated(NotAffine("an empty expression"))


def _cast(node: Any, env: Env) -> Evaluated:
    value = node.child_by_field_name("value")
    return evaluate(value, env) if value is not None else _inner(node, env)


def _unary(node: Any, env: Env) -> Evaluated:
    op = text(node.child_by_field_name("operator"))
    arg = evaluate(node.child_by_field_name("argument"), env)
    if op == "+":
        return arg
    if op == "-" and isinstance(arg.value, Affine):
        return Evaluated(-arg.value, arg.via)
    return Evaluated(NotAffine(f"the operator `{op}` in `{short(node)}`", _symbols(arg)), arg.via)


def _symbols(e: Evaluated) -> frozenset[str]:
    value = e.value
    if isinstance(value, Pointer):
        return value.offset.symbols
    return value.symbols


def _binary(node: Any, env: Env) -> Evaluated:
    op = text(node.child_by_field_name("operator"))
    left = evaluate(node.child_by_field_name("left"), env)
    right = evaluate(node.child_by_field_name("right"), env)
    via = left.via | right.via
    depends = _symbols(left) | _symbols(right)
    lv, rv = left.value, right.value
    if op in ("+", "-") and isinstance(lv, Pointer) and not isinstance(rv, Pointer):
        offset = _combine(op, lv.offset, rv, node, env, depends)
        return Evaluated(Pointer(lv.buffer, offset), via)
    if op == "+" and isinstance(rv, Pointer) and not isinstance(lv, Pointer):
        return Evaluated(Pointer(rv.buffer, _combine(op, rv.offset, lv, node, env, depends)), via)
    if isinstance(lv, Pointer) or isinstance(rv, Pointer):
        return Evaluated(NotAffine(f"pointer arithmetic `{short(node)}`", depends), via)
    return Evaluated(_combine(op, lv, rv, node, env, depends), via)


def _combine(op: str, lv: Index, rv: Index, node: Any, env: Env, depends: frozenset[str]) -> Index:
    for side in (lv, rv):
        if isinstance(side, NotAffine):
            return NotAffine(side.reason, depends)
    assert isinstance(lv, Affine) and isinstance(rv, Affine)
    if op == "+":
        return lv + rv
    if op == "-":
        return lv - rv
    if op == "*":
        product = lv * rv
        if product.degree_in(env.variables) > 1:
            return NotAffine(f"`{short(node)}` multiplies two varying values", depends)
        return product
    if op == "<<" and rv.value is not None and 0 <= rv.value < 63:
        return lv.scaled(2**rv.value)
    if lv.value is not None and rv.value is not None:
        folded = _fold(op, lv.value, rv.value)
        if folded is not None:
            return Affine.const(folded)
    words = {
        "/": "integer division",
        "%": "a remainder",
        ">>": "a right shift",
        "&": "a bitwise and",
        "|": "a bitwise or",
        "^": "an exclusive or",
    }
    what = words.get(op, f"the operator `{op}`")
    return NotAffine(f"{what} in `{short(node)}`", depends)


def _fold(op: str, a: int, b: int) -> int | None:
    """C semantics on constants (division truncates toward zero)."""
    if op in ("/", "%") and b == 0:
        return None
    if op == "/":
        return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    if op == "%":
        return a - b * _fold("/", a, b)  # type: ignore[operator]
    table = {">>": lambda: a >> b if b >= 0 else None, "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b}
    return table[op]() if op in table else None


def _pointer_expr(node: Any, env: Env) -> Evaluated:
    op = text(node.child_by_field_name("operator"))
    arg = node.child_by_field_name("argument")
    if op == "&" and arg is not None and arg.type == "subscript_expression":
        base, indices = subscript_chain(arg)
        target = evaluate(base, env)
        if isinstance(target.value, Pointer) and len(indices) == 1:
            index = evaluate(indices[0], env)
            offset = _combine("+", target.value.offset, index.index, node, env, _symbols(target) | _symbols(index))
            return Evaluated(Pointer(target.value.buffer, offset), target.via | index.via)
    inner = evaluate(arg, env) if arg is not None else Evaluated(NotAffine("an empty expression"))
    return Evaluated(
        NotAffine(
            f"`{short(node)}` is loaded from memory" if op == "*" else f"the address `{short(node)}`", _symbols(inner)
        ),
        inner.via,
    )


def _loaded(node: Any, env: Env) -> Evaluated:
    return Evaluated(NotAffine(f"`{short(node)}` is loaded from memory", _depends_below(node, env)))


def _call(node: Any, env: Env) -> Evaluated:
    name = text(node.child_by_field_name("function"))
    return Evaluated(NotAffine(f"the call `{name}(...)`", _depends_below(node, env)))


def _sizeof(node: Any, env: Env) -> Evaluated:
    spelled = short(node)[len("sizeof") :].strip().strip("()").strip()
    size = SIZEOF.get(spelled)
    return Evaluated(Affine.const(size)) if size is not None else Evaluated(Affine.symbol(f"sizeof({spelled})"))


def _conditional(node: Any, env: Env) -> Evaluated:
    return Evaluated(NotAffine(f"the conditional `{short(node)}`", _depends_below(node, env)))


def _depends_below(node: Any, env: Env) -> frozenset[str]:
    """Symbols of every identifier and builtin under `node`, locals followed."""
    out: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "field_expression":
            out |= _symbols(_field(current, env))
            continue
        elif current.type == "identifier":
            out |= _symbols(_identifier(current, env))
            continue
        stack.extend(current.named_children)
    return frozenset(out)


def subscript_chain(node: Any) -> tuple[Any, list[Any]]:
    """`a[i][j]` -> (`a`, [`i`, `j`]): the base and the indices, outermost dimension first."""
    indices: list[Any] = []
    while node.type == "subscript_expression":
        args = node.child_by_field_name("indices")
        named = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        indices.insert(0, named[0] if named else args)
        node = node.child_by_field_name("argument")
    return node, indices


_HANDLERS = {
    "number_literal": _number,
    "identifier": _identifier,
    "field_expression": _field,
    "parenthesized_expression": _inner,
    "cast_expression": _cast,
    "unary_expression": _unary,
    "binary_expression": _binary,
    "pointer_expression": _pointer_expr,
    "subscript_expression": _loaded,
    "call_expression": _call,
    "sizeof_expression": _sizeof,
    "conditional_expression": _conditional,
}
