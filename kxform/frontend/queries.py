"""Generic queries over a parsed file: the facts a pass asks about, whatever the pass.

`SourceModel` holds what every pass needs (functions, calls, launches, macros). These
queries answer narrower questions on demand, from the same tree-sitter tree, with byte
spans the edit engine can use: shared-memory declarations and their extents, uses of
threadIdx/blockDim, integer literals, uses of given names with the operator they sit
under, `for` loops with their bound and step, named integer constants (object-like
macros and `constexpr` variables), `#pragma unroll` factors and template parameters. Launch configurations are in
kxform.frontend.launches; values of constants come from kxform.frontend.constants
(libclang).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import tree_sitter

from kxform.frontend.cuda import _language
from kxform.frontend.model import Function, SourceModel, Span, once

_QUERIES = {
    "shared": "(declaration (type_qualifier) @q) @decl",
    "field": "(field_expression argument: (identifier) @base field: (field_identifier) @axis) @use",
    "number": "(number_literal) @num",
    "name": "[(identifier) (type_identifier)] @name",
    "for": "(for_statement) @loop",
    "constexpr": "(declaration (type_qualifier) @q (init_declarator declarator: (identifier) @name value: (_) @value)) "
    "@decl",
}
PRAGMA_UNROLL_RE = re.compile(rb"^[ \t]*#[ \t]*pragma[ \t]+unroll\b[ \t]*\(?[ \t]*([A-Za-z_]\w*|\d+)?", re.M)


@functools.cache
def _query(name: str) -> tree_sitter.Query:
    return tree_sitter.Query(_language(), _QUERIES[name])


def _captures(name: str, node: tree_sitter.Node) -> dict[str, list[tree_sitter.Node]]:
    return tree_sitter.QueryCursor(_query(name)).captures(node)


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8") if node is not None and node.text is not None else ""


def _span(node: tree_sitter.Node) -> Span:
    return Span(node.start_byte, node.end_byte)


def enclosing_function(model: SourceModel, offset: int) -> Function | None:
    """The innermost function whose definition contains `offset`."""
    inside = [f for f in model.functions if f.span.start <= offset < f.span.end]
    return min(inside, key=lambda f: f.span.end - f.span.start) if inside else None


def _owner(model: SourceModel, node: tree_sitter.Node) -> str | None:
    function = enclosing_function(model, node.start_byte)
    return function.name if function is not None else None


def int_value(text: str) -> int | None:
    """The value of a C integer literal (`16`, `0x10`, `256u`), or None."""
    bare = text.strip().rstrip("uUlL")
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", bare):
        return int(bare, 16)
    return int(bare) if re.fullmatch(r"0|[1-9]\d*", bare) else None


@dataclass(frozen=True)
class SharedDecl:
    """`__shared__ T name[E0][E1]`: extents as written (empty for `extern __shared__ T x[]`)."""

    name: str
    ctype: str
    extents: tuple[str, ...]
    extent_spans: tuple[Span, ...]
    span: Span
    function: str | None
    dynamic: bool


def shared_decls(model: SourceModel) -> tuple[SharedDecl, ...]:
    return once(model, "shared_decls", lambda: _shared_decls(model))


def _shared_decls(model: SourceModel) -> tuple[SharedDecl, ...]:
    out: list[SharedDecl] = []
    for decl in _captures("shared", model.tree.root_node).get("decl", []):
        if not any(_text(c) == "__shared__" for c in decl.children if c.type == "type_qualifier"):
            continue
        ctype = _text(decl.child_by_field_name("type"))
        for top in decl.children_by_field_name("declarator"):
            extents: list[tree_sitter.Node | None] = []
            declarator: tree_sitter.Node | None = top
            while declarator is not None and declarator.type == "array_declarator":
                extents.insert(0, declarator.child_by_field_name("size"))
                declarator = declarator.child_by_field_name("declarator")
            if declarator is None or declarator.type != "identifier":
                continue
            present = [e for e in extents if e is not None]
            dynamic = any(_text(c) == "extern" for c in decl.children) or len(present) != len(extents)
            out.append(
                SharedDecl(
                    _text(declarator),
                    ctype,
                    tuple(_text(e) for e in present),
                    tuple(_span(e) for e in present),
                    _span(decl),
                    _owner(model, decl),
                    dynamic,
                )
            )
    return tuple(out)


@dataclass(frozen=True)
class BuiltinUse:
    """`threadIdx.x`, `blockDim.y`, ...: a read of a CUDA built-in with its axis."""

    builtin: str
    axis: str
    span: Span
    function: str | None


def builtin_uses(model: SourceModel, builtins: tuple[str, ...] = ("threadIdx", "blockDim")) -> tuple[BuiltinUse, ...]:
    caps = _captures("field", model.tree.root_node)
    out = []
    for use in caps.get("use", []):
        base = use.child_by_field_name("argument")
        axis = use.child_by_field_name("field")
        if base is not None and _text(base) in builtins:
            out.append(BuiltinUse(_text(base), _text(axis), _span(use), _owner(model, use)))
    return tuple(sorted(out, key=lambda u: u.span))


@dataclass(frozen=True)
class IntLiteral:
    value: int
    text: str
    span: Span
    function: str | None


def int_literals(model: SourceModel, within: Span | None = None) -> tuple[IntLiteral, ...]:
    root = model.tree.root_node
    out = []
    for node in _captures("number", root).get("num", []):
        value = int_value(_text(node))
        if value is None or (within is not None and not within.contains(_span(node))):
            continue
        out.append(IntLiteral(value, _text(node), _span(node), _owner(model, node)))
    return tuple(sorted(out, key=lambda lit: lit.span))


@dataclass(frozen=True)
class NameUse:
    """An identifier naming one of the asked-for names, outside its own definition.

    `operator` is the operator of the binary expression it is an operand of ("*", "+",
    "<", ...; "" when none); `function` is None for uses in macro bodies and at file scope.
    """

    name: str
    span: Span
    function: str | None
    operator: str
    other: str
    """The other operand of that binary expression ("" when none)."""
    statement: Span
    """The innermost statement or declaration holding the use (the whole directive in a macro)."""
    decides: str = ""
    """When the name is a threshold in an expression that decides control flow (loop
    headers excepted): it divides (`x / NAME`, `x % NAME`) in a comparison or in the
    condition of an `if`, `while` or `?:`, or a comparison holds it and constants alone
    on one side and the function's parameters alone on the other (`n > NAME`): that
    comparison or condition's text, else empty."""


_STATEMENTS = (
    "expression_statement",
    "declaration",
    "for_statement",
    "return_statement",
    "if_statement",
    "while_statement",
    "preproc_def",
    "preproc_function_def",
    "field_declaration",
    "init_declarator",
)


def name_uses(model: SourceModel, names: frozenset[str] | set[str]) -> tuple[NameUse, ...]:
    wanted = {n.encode() for n in names}
    out = []
    for node in _captures("name", model.tree.root_node).get("name", []):
        if node.text not in wanted:
            continue
        parent = node.parent
        if parent is not None and (
            parent.type in ("preproc_def", "preproc_function_def")
            and parent.child_by_field_name("name") == node
            or parent.type == "init_declarator"
            and parent.child_by_field_name("declarator") == node
        ):
            continue  # the definition itself
        operator = other = ""
        if parent is not None and parent.type == "binary_expression":
            operator = _text(parent.child_by_field_name("operator"))
            left, right = parent.child_by_field_name("left"), parent.child_by_field_name("right")
            other = _text(right if left == node else left)
        statement = parent
        while statement is not None and statement.type not in _STATEMENTS:
            statement = statement.parent
        function = enclosing_function(model, node.start_byte)
        params = {p.name for p in function.params} if function is not None else set()
        out.append(
            NameUse(
                _text(node),
                _span(node),
                function.name if function is not None else None,
                operator,
                other,
                _span(statement) if statement is not None else _span(node),
                _decides(node, set(names), params),
            )
        )
    return tuple(sorted(out, key=lambda u: u.span))


_COMPARISONS = ("<", ">", "<=", ">=", "==", "!=")
_DECIDING = ("if_statement", "while_statement", "do_statement", "conditional_expression")


def _decides(node: tree_sitter.Node, constants: set[str], params: set[str]) -> str:
    """The comparison or condition in which `node` is a threshold (see NameUse.decides), or ""."""
    divides, found = False, ""
    child, parent = node, node.parent
    while parent is not None and parent.type not in ("compound_statement", "translation_unit"):
        if parent.type == "for_statement":
            return ""  # a loop header: the tile pass's loop roles
        if not found and parent.type == "binary_expression":
            operator = _text(parent.child_by_field_name("operator"))
            if operator in ("/", "%") and parent.child_by_field_name("right") == child:
                divides = True
            elif operator in _COMPARISONS:
                left, right = parent.child_by_field_name("left"), parent.child_by_field_name("right")
                other = right if left == child else left
                if divides or (_names(child) <= constants and _names(other) and _names(other) <= params):
                    found = _text(parent)
                divides = False
        if not found and divides and parent.type in _DECIDING and parent.child_by_field_name("condition") == child:
            found = _text(child)
        child, parent = parent, parent.parent
    return found


def _names(node: tree_sitter.Node | None) -> set[str]:
    """The identifiers an expression reads (members and calls included by name)."""
    return set(re.findall(r"\b[A-Za-z_]\w*", _text(node)))


def macro_body_uses(model: SourceModel, names: frozenset[str] | set[str]) -> dict[str, tuple[str, ...]]:
    """Macro name -> the asked-for names its body mentions (bodies are not parsed as code)."""
    word = re.compile(r"[A-Za-z_]\w*")
    return {
        m.name: tuple(sorted(set(word.findall(m.body)) & set(names)))
        for m in model.macros
        if set(word.findall(m.body)) & set(names)
    }


@dataclass(frozen=True)
class Loop:
    """A `for` loop: `for (var = init; var OP bound; var += step)` as far as it has that shape."""

    var: str
    init: str
    op: str
    bound: str
    step: str
    """`1` for `++v`, the right-hand side of `v += s`, `*2` for `v *= 2`, `>>1` for `v >>= 1`."""
    header: Span
    body: Span
    function: str | None


def loops(model: SourceModel, within: Span | None = None) -> tuple[Loop, ...]:
    out = []
    for node in _captures("for", model.tree.root_node).get("loop", []):
        if within is not None and not within.contains(_span(node)):
            continue
        init, cond, update, body = (node.child_by_field_name(k) for k in ("initializer", "condition", "update", "body"))
        var, start = _loop_init(init)
        op = bound = ""
        if cond is not None and cond.type == "binary_expression" and _text(cond.child_by_field_name("left")) == var:
            op, bound = _text(cond.child_by_field_name("operator")), _text(cond.child_by_field_name("right"))
        header_end = body.start_byte if body is not None else node.end_byte
        out.append(
            Loop(
                var,
                start,
                op,
                bound,
                _loop_step(update, var),
                Span(node.start_byte, header_end),
                _span(body) if body is not None else _span(node),
                _owner(model, node),
            )
        )
    return tuple(sorted(out, key=lambda loop: loop.header))


def _loop_init(init: tree_sitter.Node | None) -> tuple[str, str]:
    if init is None:
        return "", ""
    if init.type == "declaration":
        decl = init.child_by_field_name("declarator")
        if decl is not None and decl.type == "init_declarator":
            return _text(decl.child_by_field_name("declarator")), _text(decl.child_by_field_name("value"))
    if init.type == "assignment_expression":
        return _text(init.child_by_field_name("left")), _text(init.child_by_field_name("right"))
    return "", ""


def _loop_step(update: tree_sitter.Node | None, var: str) -> str:
    if update is None:
        return ""
    if update.type == "update_expression":
        return "1" if "++" in _text(update) else "-1"
    if update.type == "assignment_expression" and _text(update.child_by_field_name("left")) == var:
        op = _text(update.child_by_field_name("operator"))
        right = _text(update.child_by_field_name("right"))
        return {
            "+=": right,
            "-=": f"-({right})",
            "*=": f"*{right}",
            ">>=": f">>{right}",
            "<<=": f"<<{right}",
            "/=": f"/{right}",
        }.get(op, "")
    return ""


@dataclass(frozen=True)
class ConstantDef:
    """A named integer constant as written: `#define TILE 16` or `constexpr int T = 16;`."""

    name: str
    kind: str  # "macro" | "constexpr"
    text: str
    """The value as written (macro body, initializer)."""
    value_span: Span
    span: Span
    function: str | None


def _uncommented(text: str) -> str:
    return re.sub(r"//.*|/\*.*?\*/", "", text, flags=re.S).strip()


def constant_defs(model: SourceModel) -> tuple[ConstantDef, ...]:
    return once(model, "constant_defs", lambda: _constant_defs(model))


def _constant_defs(model: SourceModel) -> tuple[ConstantDef, ...]:
    out = [
        ConstantDef(m.name, "macro", _uncommented(m.body), m.body_span, m.span, None)
        for m in model.macros
        if not m.is_function_like and m.body_span is not None and _uncommented(m.body)
    ]
    for decl in _captures("constexpr", model.tree.root_node).get("decl", []):
        if not any(_text(c) == "constexpr" for c in decl.children if c.type == "type_qualifier"):
            continue
        ctype = _text(decl.child_by_field_name("type"))
        if not re.search(r"\b(int|unsigned|long|short|size_t|int\d+_t|uint\d*_t|uint)\b", ctype):
            continue
        inner = decl.child_by_field_name("declarator")
        if inner is None or inner.type != "init_declarator":
            continue
        name, value = inner.child_by_field_name("declarator"), inner.child_by_field_name("value")
        if name is None or value is None:
            continue
        out.append(ConstantDef(_text(name), "constexpr", _text(value), _span(value), _span(decl), _owner(model, decl)))
    return tuple(sorted(out, key=lambda c: c.span))


@dataclass(frozen=True)
class Pragma:
    """`#pragma unroll [N]` with its factor as written (None: full unroll)."""

    factor: str | None
    span: Span
    function: str | None


def unroll_pragmas(model: SourceModel) -> tuple[Pragma, ...]:
    out = []
    for match in PRAGMA_UNROLL_RE.finditer(model.source.data):
        function = enclosing_function(model, match.start())
        factor = match.group(1).decode() if match.group(1) else None
        out.append(Pragma(factor, Span(match.start(), match.end()), function.name if function else None))
    return tuple(out)


@dataclass(frozen=True)
class TemplateParam:
    name: str
    kind: str  # "type" | "value"
    ctype: str
    default: str | None


def template_params(function: Function) -> tuple[TemplateParam, ...]:
    if not function.template_params:
        return ()
    out = []
    for part in split_args(function.template_params.strip()[1:-1]):
        head, _, default = part.partition("=")
        words = head.split()
        if not words:
            continue
        kind = "type" if words[0] in ("typename", "class") else "value"
        out.append(TemplateParam(words[-1], kind, " ".join(words[:-1]), default.strip() or None))
    return tuple(out)


_TEMPLATE_ARGS_RE = re.compile(r"(?<=\w)(\s*<)[\w\s,:*&]*>")


def angle_brackets(text: str) -> frozenset[int]:
    """The offsets of the `<` and `>` in `text` that bracket template arguments
    (`std::min<int>`, `<float, 64>`), not comparisons (`n > 0 ? n : 1`)."""
    out: set[int] = set()
    for match in _TEMPLATE_ARGS_RE.finditer(text):
        out.update((match.end(1) - 1, match.end() - 1))
    return frozenset(out)


def split_args(text: str) -> list[str]:
    """Split at top-level commas (commas inside (), template <>, [] and {} stay)."""
    parts, depth, current = [], 0, ""
    angles = angle_brackets(text)
    for i, char in enumerate(text):
        depth += char in "([{" or (char == "<" and i in angles)
        depth -= char in ")]}" or (char == ">" and i in angles)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts
