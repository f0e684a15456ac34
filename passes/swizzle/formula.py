"""Custom block remaps: a small integer expression language of kxform's own.

A proposer (a person, a lock file, a language model) may write its own remap instead
of naming a library pattern. The text is data, never code: kxform tokenizes and parses
it itself, rejects anything outside the grammar, evaluates it in Python with the
semantics of C's 32-bit `unsigned` arithmetic (formula_eval.py), emits it as the same
kind of `__device__` helper the library patterns emit, and proves that helper a
bijection exactly as it proves theirs (bijection.py).

    per   = gx <= 536870911 ? 8 * gx : 4294967295   # statements: NAME = EXPR, one a line or `;`
    first = (pid / per) * 8
    size  = min(gy - first, 8)
    lx    = (pid % per) / size        # lx and ly must be assigned: the logical tile
    ly    = first + (pid % per) % size

Names: the physical block `bx`, `by`, the grid `gx`, `gy`, `pid` (= by*gx + bx),
`total` (= gx*gy) and earlier statements' names (each assigned once). Operators, with
C's precedence: `* / %`, `+ -`, `<< >>`, `< <= > >=`, `== !=`, `&`, `^`, `|`, `&&`,
`||`, `c ? a : b`, unary `~ !`; functions `min(a, b)`, `max(a, b)`, `select(c, a, b)`
(= `c ? a : b`). Constants are decimal or hex (`0x1f`), optionally with a `u` suffix.
Values are unsigned 32-bit: `/` truncates, and any step that would wrap (a
subtraction below zero, a sum or product of 2^32 or more), a division or modulo by
zero, or a shift by 32 or more is a rejection with the grid, block and subexpression.
There is no unary minus, no assignment to inputs, no comments, no preprocessor text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

INPUTS = ("bx", "by", "gx", "gy")
DERIVED = {"pid": "by * gx + bx", "total": "gx * gy"}
OUTPUTS = ("lx", "ly")
FUNCTIONS = {"min": 2, "max": 2, "select": 3}

MAX_TEXT = 2000
"""Longest formula text: a remap worth having fits in a few lines."""
MAX_STATEMENTS = 24
MAX_NODES = 300
MAX_DEPTH = 24
MAX_NAME = 24
U32_MAX = 2**32 - 1

C_LOCAL_PREFIX = "kx_"
"""Statement names are emitted as `kx_<name>`: they can never meet a macro or keyword of
the file the helper is inserted into."""

_RESERVED = (
    frozenset(
        """
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
bool true false class namespace template typename this new delete operator private public protected virtual
friend using asm and or not xor bitand bitor compl lambda def import
""".split()
    )
    | frozenset(FUNCTIONS)
    | frozenset(INPUTS)
    | frozenset(DERIVED)
)

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r]+)
  | (?P<nl>\n)
  | (?P<num>0[xX][0-9a-fA-F]+[uU]?|[0-9]+[uU]?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^~!?:(),;=])
""",
    re.X,
)

_BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", "<=", ">", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
)


class FormulaError(Exception):
    """The formula is not acceptable. `kind` is a stable key (`grammar`, `size`,
    `overflow`, `division-by-zero`, `shift`), `str()` one line for logs and proposers."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(f"{kind}: {message}")


# --- syntax tree ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Call:
    """`min`, `max` or `select` (`select` and `c ? a : b` are the same node)."""

    fn: str
    args: tuple[Node, ...]


Node = Num | Var | Unary | Binary | Call


def show(node: Node) -> str:
    """Canonical text of a node: fully parenthesised, so it reads back the same."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Unary):
        return f"{node.op}{_wrap(node.operand)}"
    if isinstance(node, Binary):
        return f"{_wrap(node.left)} {node.op} {_wrap(node.right)}"
    if node.fn == "select":
        return f"{_wrap(node.args[0])} ? {_wrap(node.args[1])} : {_wrap(node.args[2])}"
    return f"{node.fn}({', '.join(show(a) for a in node.args)})"


def _wrap(node: Node) -> str:
    return show(node) if isinstance(node, (Num, Var, Call)) and not _is_ternary(node) else f"({show(node)})"


def _is_ternary(node: Node) -> bool:
    return isinstance(node, Call) and node.fn == "select"


def _count(node: Node) -> int:
    if isinstance(node, (Num, Var)):
        return 1
    if isinstance(node, Unary):
        return 1 + _count(node.operand)
    if isinstance(node, Binary):
        return 1 + _count(node.left) + _count(node.right)
    return 1 + sum(_count(a) for a in node.args)


# --- parsing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text.startswith(("//", "/*"), pos):
            raise FormulaError("grammar", f"comments are not allowed (at offset {pos}); `/` is unsigned division")
        match = _TOKEN.match(text, pos)
        if match is None:
            char = text[pos]
            raise FormulaError(
                "grammar",
                f"character {char!r} at offset {pos} is not part of the formula language "
                "(only names, integer constants and + - * / % << >> & | ^ ~ ! < > = ? : ( ) , ;)",
            )
        kind = match.lastgroup or ""
        if kind != "ws":
            tokens.append(_Tok("sep" if kind == "nl" else kind, match.group(), pos))
        pos = match.end()
    tokens.append(_Tok("end", "", len(text)))
    return tokens


class _Parser:
    """Recursive descent over C's precedence levels (binary levels from a table)."""

    def __init__(self, tokens: list[_Tok], defined: set[str]) -> None:
        self.tokens = tokens
        self.i = 0
        self.defined = defined
        self.depth = 0

    def peek(self) -> _Tok:
        return self.tokens[self.i]

    def take(self, text: str | None = None) -> _Tok:
        tok = self.tokens[self.i]
        if text is not None and tok.text != text:
            found = repr(tok.text) if tok.text else "the end of the statement"
            raise FormulaError("grammar", f"expected {text!r} at offset {tok.pos}, found {found}")
        self.i += 1
        return tok

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise FormulaError("size", f"expression nested deeper than {MAX_DEPTH} levels")
        cond = self.binary(0)
        if self.peek().text == "?":
            self.take("?")
            yes = self.expr()
            self.take(":")
            cond = Call("select", (cond, yes, self.expr()))
        self.depth -= 1
        return cond

    def binary(self, level: int) -> Node:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek().kind == "op" and self.peek().text in _BINARY_LEVELS[level]:
            op = self.take().text
            left = Binary(op, left, self.binary(level + 1))
        return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok.text in ("~", "!"):
            self.take()
            return Unary(tok.text, self.unary())
        if tok.text in ("-", "+"):
            raise FormulaError(
                "grammar",
                f"unary {tok.text!r} at offset {tok.pos} is not allowed (values are unsigned; write a - b with a >= b)",
            )
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "num":
            value = int(tok.text.rstrip("uU"), 0)
            if value > U32_MAX:
                raise FormulaError("overflow", f"constant {tok.text} does not fit in 32 bits")
            return Num(value)
        if tok.text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if tok.kind == "name":
            if self.peek().text == "(":
                return self.call(tok)
            if tok.text not in self.defined:
                raise FormulaError(
                    "grammar",
                    f"unknown name {tok.text!r} at offset {tok.pos} (defined: {', '.join(sorted(self.defined))})",
                )
            return Var(tok.text)
        found = repr(tok.text) if tok.text else "the end of the statement"
        raise FormulaError("grammar", f"expected a name, a constant or '(' at offset {tok.pos}, found {found}")

    def call(self, tok: _Tok) -> Node:
        arity = FUNCTIONS.get(tok.text)
        if arity is None:
            raise FormulaError(
                "grammar", f"unknown function {tok.text!r} at offset {tok.pos} (functions: {', '.join(FUNCTIONS)})"
            )
        self.take("(")
        args = [self.expr()]
        while self.peek().text == ",":
            self.take(",")
            args.append(self.expr())
        self.take(")")
        if len(args) != arity:
            raise FormulaError("grammar", f"{tok.text}() takes {arity} arguments, got {len(args)}")
        return Call(tok.text, tuple(args))


@dataclass(frozen=True)
class Formula:
    """A parsed remap: statements in order, the last assignments of `lx`/`ly` included."""

    statements: tuple[tuple[str, Node], ...]
    uses: frozenset[str] = field(default=frozenset())
    """Derived inputs (`pid`, `total`) the statements read."""

    @property
    def canonical(self) -> str:
        """The formula re-printed from its tree: the text kxform emits, logs and hashes."""
        return "\n".join(f"{name} = {show(node)}" for name, node in self.statements)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical.encode()).hexdigest()[:10]

    @property
    def nodes(self) -> int:
        return sum(_count(node) for _, node in self.statements)


def parse_formula(text: object) -> Formula:
    """Parse and validate `text`; raise FormulaError (grammar, size) naming the cause."""
    if not isinstance(text, str):
        raise FormulaError("grammar", f"a formula is text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise FormulaError("size", f"formula is {len(text)} characters long (at most {MAX_TEXT})")
    if not text.strip():
        raise FormulaError("grammar", "empty formula")
    tokens = _tokenize(text)
    defined = set(INPUTS) | set(DERIVED)
    parser = _Parser(tokens, defined)
    statements: list[tuple[str, Node]] = []
    while parser.peek().kind != "end":
        if parser.peek().text in (";",) or parser.peek().kind == "sep":
            parser.take()
            continue
        statements.append(_statement(parser, defined))
        if len(statements) > MAX_STATEMENTS:
            raise FormulaError("size", f"more than {MAX_STATEMENTS} statements")
        if parser.peek().kind != "end" and parser.peek().text != ";" and parser.peek().kind != "sep":
            tok = parser.peek()
            raise FormulaError(
                "grammar", f"unexpected {tok.text!r} at offset {tok.pos} (statements end with ';' or a new line)"
            )
    missing = [name for name in OUTPUTS if name not in {n for n, _ in statements}]
    if missing:
        raise FormulaError("grammar", f"the formula must assign {' and '.join(missing)} (the logical block)")
    formula = Formula(tuple(statements), frozenset(n for n in DERIVED if _reads(statements, n)))
    if formula.nodes > MAX_NODES:
        raise FormulaError("size", f"formula has {formula.nodes} syntax nodes (at most {MAX_NODES})")
    return formula


def _statement(parser: _Parser, defined: set[str]) -> tuple[str, Node]:
    tok = parser.take()
    if tok.kind != "name":
        found = repr(tok.text) if tok.text else "the end"
        raise FormulaError("grammar", f"a statement is NAME = EXPR; found {found} at offset {tok.pos}")
    name = tok.text
    if name in INPUTS or name in DERIVED:
        raise FormulaError("grammar", f"{name!r} is an input and cannot be assigned")
    if (
        name in _RESERVED
        or name.startswith("_")
        or name.lower().startswith("kx")
        or len(name) > MAX_NAME
        or not re.fullmatch(r"[a-z][a-z0-9_]*", name)
    ):
        raise FormulaError(
            "grammar",
            f"{name!r} is not an allowed name (lower-case letters, digits and _, at most "
            f"{MAX_NAME} characters, not a C keyword or function)",
        )
    if name in defined:
        raise FormulaError("grammar", f"{name!r} is assigned twice (each name is assigned once)")
    parser.take("=")
    node = parser.expr()
    defined.add(name)
    return name, node


def _reads(statements: list[tuple[str, Node]], name: str) -> bool:
    def walk(node: Node) -> bool:
        if isinstance(node, Var):
            return node.name == name
        if isinstance(node, Unary):
            return walk(node.operand)
        if isinstance(node, Binary):
            return walk(node.left) or walk(node.right)
        if isinstance(node, Call):
            return any(walk(a) for a in node.args)
        return False

    return any(walk(node) for _, node in statements)


# --- C emission ----------------------------------------------------------------------------


def c_expr(node: Node) -> str:
    """C text of `node` over `unsigned` values: every operation parenthesised, constants
    with a `u` suffix, comparisons cast back to unsigned, min/max as conditionals."""
    if isinstance(node, Num):
        return f"{node.value}u"
    if isinstance(node, Var):
        return node.name if node.name in INPUTS or node.name in DERIVED else C_LOCAL_PREFIX + node.name
    if isinstance(node, Unary):
        inner = c_expr(node.operand)
        return f"(~{inner})" if node.op == "~" else f"((unsigned)!{inner})"
    if isinstance(node, Binary):
        text = f"({c_expr(node.left)} {node.op} {c_expr(node.right)})"
        return f"((unsigned){text})" if node.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||") else text
    args = [c_expr(a) for a in node.args]
    if node.fn == "select":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    op = "<" if node.fn == "min" else ">"
    return f"({args[0]} {op} {args[1]} ? {args[0]} : {args[1]})"


def c_body(formula: Formula) -> str:
    """The helper body: derived inputs, one `const unsigned` per statement, the return."""
    lines = [f"const unsigned {name} = {expr};" for name, expr in DERIVED.items() if name in formula.uses]
    lines += [f"const unsigned {C_LOCAL_PREFIX}{name} = {c_expr(node)};" for name, node in formula.statements]
    lines.append(f"return make_uint2({C_LOCAL_PREFIX}lx, {C_LOCAL_PREFIX}ly);")
    return "\n".join(lines)


@dataclass(frozen=True)
class FormulaRemap:
    """A custom remap with the interface of `patterns.RemapConfig` (label, helper name and
    source, Python reference), so the swizzle pass emits and checks it the same way."""

    formula: Formula

    @property
    def values(self) -> tuple[tuple[str, int | str], ...]:
        return (("formula", self.formula.digest),)

    def label(self) -> str:
        return f"custom({self.formula.digest})"

    def helper_name(self) -> str:
        return f"kxform_swizzle_custom_{self.formula.digest}"

    def stages(self) -> tuple[str, ...]:
        """The remap as formula text, one stage (what the solver proves)."""
        return (self.formula.canonical,)

    def apply(self, bx: int, by: int, gx: int, gy: int) -> tuple[int, int]:
        from kxform.passes.swizzle.formula_eval import evaluate_point

        return evaluate_point(self.formula, bx, by, gx, gy)

    def helper_source(self, newline: str = "\n") -> str:
        """The complete `__device__` helper definition, ending with a newline."""
        shown = self.formula.canonical.split("\n")
        lines = [
            f"/* kxform swizzle {self.label()}: logical block (x, y) for physical block (bx, by), from the formula",
            *(f"     {line}" for line in shown),
            "   (unsigned 32-bit; proven by kxform a bijection on every grid with gx*gy < 2^32). */",
            f"static __device__ __forceinline__ uint2 {self.helper_name()}(",
            "    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)",
            "{",
            *("    " + line for line in c_body(self.formula).split("\n")),
            "}",
        ]
        return newline.join(lines) + newline


def formula_remap(text: object) -> FormulaRemap:
    """Parse `text` into a remap ready to check and emit (FormulaError if not acceptable)."""
    return FormulaRemap(parse_formula(text))
