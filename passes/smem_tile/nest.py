"""Which kernels `smem_tile` can rewrite: a thread-mapped output nest with one reduction loop.

The form (every name may differ; the row may also be the guard's only bound, as in SYRK):

    int j = blockIdx.x * blockDim.x + threadIdx.x;      // the output column
    int i = blockIdx.y * blockDim.y + threadIdx.y;      // the output row
    if (i < M && j < N) {                               // the output's guard
        float acc = INIT;                               // the reduction's declaration
        for (int k = 0; k < K; k++)
            acc += TERM;                                // one statement; its operands affine
        EPILOGUE                                        // what is done with acc
    }

The facts come from the shared access analysis (the loop, its reduction, each access's
affine index and its dependence on the thread's row or column); the statement layout is
read from the kernel's text. Each operand read in the loop must depend on the reduction
index and on exactly one of the row and the column (an operand of the row is staged as
a BM x BK tile, one of the column as a BK x BN tile). Anything else is a `Refusal` with
the line it concerns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis import AccessAnalysis, Loop, MemoryAccess, Reduction
from kxform.analysis.affine import Affine
from kxform.analysis.manager import AnalysisInput
from kxform.analysis.prelude import leading_statements, split_prelude
from kxform.engine import launch_site
from kxform.engine.pass_api import PassContext
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import Function, Span

_NAME = re.compile(r"[A-Za-z_]\w*")
_COORD = re.compile(
    r"(?:const\s+)?(?P<type>int|unsigned|unsigned int|size_t|long)\s+(?P<name>\w+)\s*=\s*"
    r"(?:blockIdx\.(?P<a1>[xy])\s*\*\s*blockDim\.(?P=a1)\s*\+\s*threadIdx\.(?P=a1)|"
    r"threadIdx\.(?P<a2>[xy])\s*\+\s*blockIdx\.(?P=a2)\s*\*\s*blockDim\.(?P=a2))\s*;"
)
_KEYWORDS = frozenset(
    {
        "size_t",
        "int",
        "long",
        "unsigned",
        "float",
        "double",
        "const",
        "sizeof",
        "min",
        "max",
        "fminf",
        "fmaxf",
        "expf",
        "sqrtf",
    }
)


@dataclass(frozen=True)
class Refusal:
    key: str
    message: str
    offset: int


@dataclass(frozen=True)
class Operand:
    """One operand read of the reduction: staged as a tile along `axis` ("row" or "col")."""

    access: MemoryAccess
    axis: str
    k_contiguous: bool
    """Its index has stride 1 in the reduction index (consecutive threads load along k)."""
    m_contiguous: bool = False
    """Its index has stride 1 in its output coordinate (a vector load may run along m)."""


@dataclass(frozen=True)
class Nest:
    kernel: Function
    coord_type: str
    row: str
    col: str
    row_bound: str
    """An exclusive upper bound of the row (kernel parameters only), from the guard."""
    col_bound: str
    guard: str
    acc: Reduction
    acc_type: str
    init: str
    loop: Loop
    k_bound: str
    term: str
    """The update statement, operands replaced by `{0}`, `{1}`, ... and the accumulator by `{acc}`."""
    operands: tuple[Operand, ...]
    epilogue: str
    """The statements after the loop, the accumulator replaced by `{acc}` (braces doubled)."""
    launch: LaunchConfig
    block: tuple[int, int]
    """The original launch's block (x, y); 0 where the launcher's caller passes it (read from the spec's block)."""
    below: str = ""
    """`col` when the guard bounds the column by the row (`j <= i`: a lower triangle), `row`
    for the converse: whole blocks on the other side of the diagonal have nothing to do."""
    prelude: tuple[str, ...] = ()
    """Constants declared between the coordinates and the guard, kept at the body's start."""


@dataclass(frozen=True)
class NestAnalysis:
    """The kernel's nest or the reason it has none: computed once per kernel and version
    (`ctx.analysis(NestAnalysis, kernel)`)."""

    positional: ClassVar[bool] = True
    found: Nest | Refusal

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> NestAnalysis:
        return cls(recognise(ctx, kernel))  # type: ignore[arg-type]


def recognise(ctx: PassContext, kernel: Function) -> Nest | Refusal:
    data = ctx.model.source.data
    body_start, body_end = kernel.body.start + 1, kernel.body.end - 1
    text = data[body_start:body_end].decode("utf-8")
    analysis = ctx.analysis(AccessAnalysis, kernel)
    at = kernel.span.start
    if any(b.space == "shared" for b in analysis.buffers) or "__shared__" in text:
        return Refusal("AlreadyShared", f"'{kernel.name}' already uses shared memory", at)
    if analysis.barriers:
        return Refusal("HasBarrier", f"'{kernel.name}' already synchronises its block", analysis.barriers[0].start)
    coords: dict[str, tuple[str, str]] = {}
    pos = 0
    while True:
        m = _COORD.match(text, pos + len(text[pos:]) - len(text[pos:].lstrip()))
        if m is None:
            break
        coords[m.group("a1") or m.group("a2")] = (m.group("name"), m.group("type"))
        pos = m.end()
    if set(coords) != {"x", "y"}:
        return Refusal(
            "NoOutputCoordinates",
            "the kernel does not start by computing its output row and column as "
            "blockIdx * blockDim + threadIdx in y and x",
            at,
        )
    (col, ctype), (row, _) = coords["x"], coords["y"]
    statements = leading_statements(text, pos)
    prelude = split_prelude(statements, {row, col})
    if prelude.refused is not None or prelude.per_index:
        why, offset = prelude.refused or (f"`{prelude.per_index[0]}` reads the output coordinates", statements[0][0])
        return Refusal(
            "Prelude", f"{why}: only constants may stand between the coordinates and the guard", body_start + offset
        )
    if prelude.rest:
        last_at, last = statements[prelude.rest - 1]
        pos = last_at + len(last)
    rest = text[pos:].lstrip()
    if_at = body_start + len(text) - len(text[pos:].lstrip())
    m = re.match(r"if\s*\(", rest)
    if m is None:
        return Refusal("NoGuard", "the coordinates are not followed by one `if (guard) { ... }`", if_at)
    close = _match(rest, m.end() - 1, "(", ")")
    open_brace = close + 1 + len(rest[close + 1 :]) - len(rest[close + 1 :].lstrip())
    if close < 0 or rest[open_brace : open_brace + 1] != "{":
        return Refusal("NoGuard", "the guard's body is not a braced block", if_at)
    end_brace = _match(rest, open_brace, "{", "}")
    if end_brace < 0 or rest[end_brace + 1 :].strip():
        return Refusal("NoGuard", "statements follow the guarded block", if_at)
    guard = rest[m.end() : close].strip()
    found_bounds = _bounds(guard, row, col)
    if found_bounds is None:
        return Refusal(
            "GuardBounds",
            f"the guard `{guard}` does not bound the row `{row}` and the column `{col}` by kernel parameters",
            if_at,
        )
    bounds, below = found_bounds[:2], found_bounds[2]
    names = {p.name for p in kernel.params} | {mac.name for mac in ctx.model.macros}
    if any(set(_NAME.findall(b)) - names for b in bounds):
        return Refusal("GuardBounds", f"a bound in `{guard}` reads more than the kernel's parameters", if_at)
    loops = analysis.loops
    if not loops:
        return Refusal("NoReduction", f"'{kernel.name}' has no loop: there is no reduction to stage", if_at)
    if len(loops) > 1:
        inner = loops[1]
        return Refusal(
            "LoopNest",
            f"'{kernel.name}' has {len(loops)} loops (`{loops[0].var or loops[0].kind}`, then "
            f"`{inner.var or inner.kind}` at line {span_line(ctx, inner.span)}): a reduction over nested "
            "loops (a convolution's window) is not the one-loop form",
            inner.span.start,
        )
    loop = loops[0]
    found = _loop(ctx, analysis, kernel, loop, row, col, names)
    if isinstance(found, Refusal):
        return found
    acc, term, operands, k_bound = found
    inner_start = if_at + open_brace + 1
    inner = data[inner_start : loop.span.start].decode("utf-8")
    decl = re.fullmatch(r"\s*(?P<type>[\w ]+?)\s+" + re.escape(acc.var) + r"\s*=\s*(?P<init>[^;]+);\s*", inner)
    if decl is None:
        return Refusal(
            "LoopNest",
            f"the guarded block does not start with the declaration of `{acc.var}` and then the loop",
            inner_start,
        )
    epilogue = data[loop.span.end : if_at + end_brace].decode("utf-8")
    if re.search(r"\b" + re.escape(loop.var) + r"\b", epilogue) or "return" in epilogue:
        return Refusal("Epilogue", "the statements after the loop read its index or return", loop.span.end)
    launches = launch_configs(ctx.model, kernel.name)
    if len(launches) != 1:
        return Refusal(
            "Launch",
            f"'{kernel.name}' has {len(launches)} launches in this file; the rewrite changes the one launch it has",
            at,
        )
    launch = launches[0]
    block = [launch_site.written(ctx.model, launch, 1, axis) for axis in (0, 1)]
    values = [w.value if w is not None else None for w in block]
    values = [0 if w is not None and w.kind == "parameter" else v for w, v in zip(block, values)]
    if values[0] is None or values[1] is None:
        return Refusal(
            "Launch",
            "the launch's block size is neither a literal nor a parameter of the launching function; its original "
            "shape is not known",
            launch.site.span.start,
        )
    alias = _alias(launch, kernel, operands, frozenset(a.buffer for a in analysis.accesses if a.write))
    if alias:
        return Refusal("InPlaceAlias", alias, launch.site.span.start)
    return Nest(
        kernel,
        ctype,
        row,
        col,
        bounds[0],
        bounds[1],
        guard,
        acc,
        decl.group("type").strip(),
        decl.group("init").strip(),
        loop,
        k_bound,
        term,
        operands,
        _braces(re.sub(r"\b" + re.escape(acc.var) + r"\b", "\0", epilogue)).replace("\0", "{acc}"),
        launch,
        (values[0], values[1]),
        "col" if below == col else "row" if below == row else "",
        prelude.once,
    )


def _loop(
    ctx: PassContext, analysis: AccessAnalysis, kernel: Function, loop: Loop, row: str, col: str, names: set[str]
) -> tuple[Reduction, str, tuple[Operand, ...], str] | Refusal:
    data = ctx.model.source.data
    zero = Affine.const(0)
    if loop.kind != "for" or not loop.var or loop.init != zero or loop.op != "<" or loop.step != Affine.const(1):
        return Refusal("LoopNest", "the reduction loop is not `for (k = 0; k < K; k++)`", loop.span.start)
    if loop.carried:
        return Refusal("Dependence", f"iterations of the loop depend on each other: {loop.carried[0]}", loop.span.start)
    sums = [r for r in loop.reductions if r.op == "+"]
    if len(loop.reductions) != 1 or not sums:
        return Refusal("NoReduction", "the loop does not carry exactly one `+` reduction", loop.span.start)
    acc = sums[0]
    header = data[loop.header.start : loop.header.end].decode("utf-8")
    m = re.search(r";\s*" + re.escape(loop.var) + r"\s*<\s*(?P<bound>[^;]+);", header)
    if m is None or set(_NAME.findall(m.group("bound"))) - names:
        return Refusal("LoopNest", "the loop's bound reads more than the kernel's parameters", loop.span.start)
    (update,) = acc.updates
    body = data[loop.body.start : loop.body.end].decode("utf-8").strip()
    statement = data[update.start : update.end].decode("utf-8")
    if body.strip("{} \t\r\n;") != statement.strip().rstrip(";"):
        return Refusal("LoopNest", "the loop's body is more than the one accumulation", loop.body.start)
    inside = sorted((a for a in analysis.accesses if loop.id in a.loops), key=lambda a: a.span.start)
    operands = []
    for access in inside:
        if access.write or access.space != "global":
            return Refusal("Dependence", f"the loop writes `{access.text}`", access.span.start)
        if not isinstance(access.index, Affine):
            return Refusal(
                "NonAffine", f"the index of `{access.text}` is not affine: {access.index}", access.span.start
            )
        symbols = access.index.symbols
        on_row = bool(symbols & {"threadIdx.y", "blockIdx.y"})
        on_col = bool(symbols & {"threadIdx.x", "blockIdx.x"})
        used = set(_NAME.findall(access.text)) - names - _KEYWORDS - {access.buffer}
        if loop.var not in symbols or on_row == on_col or used - {loop.var, row if on_row else col}:
            return Refusal(
                "NotATileOperand",
                f"`{access.text}` does not depend on the reduction index and exactly one of the output row and column",
                access.span.start,
            )
        if not update.contains(access.span):
            return Refusal("LoopNest", f"`{access.text}` is outside the accumulation", access.span.start)
        thread = "threadIdx.y" if on_row else "threadIdx.x"
        operands.append(
            Operand(
                access,
                "row" if on_row else "col",
                access.index.coefficient(loop.var) == Affine.const(1),
                access.index.coefficient(thread) == Affine.const(1),
            )
        )
    if not operands:
        return Refusal("NotATileOperand", "the accumulation reads no operand from memory", update.start)
    term = statement
    for n, op in reversed(list(enumerate(operands))):
        a, b = op.access.span.start - update.start, op.access.span.end - update.start
        term = term[:a] + f"\0{n}\1" + term[b:]
    term = re.sub(r"\b" + re.escape(acc.var) + r"\b", "\2", term)
    if set(_NAME.findall(term)) & {row, col, loop.var}:
        return Refusal(
            "NotATileOperand",
            "the accumulated term reads the output coordinates or the reduction index outside its operands",
            update.start,
        )
    term = _braces(term).replace("\0", "{").replace("\1", "}").replace("\2", "{acc}")
    return acc, term, tuple(operands), m.group("bound").strip()


def _bounds(guard: str, row: str, col: str) -> tuple[str, str, str] | None:
    """Exclusive upper bounds of row and column from a conjunction (`i < M && j < N`; `j <= i`
    bounds the column by the row's bound)."""
    if "||" in guard:
        return None
    found: dict[str, str] = {}
    below: dict[str, str] = {}
    for part in guard.split("&&"):
        m = re.fullmatch(r"\s*\(?\s*(\w+)\s*(<=|<)\s*(.+?)\s*\)?\s*", part)
        if m is None:
            return None
        var, op, rhs = m.groups()
        if var not in (row, col):
            return None
        if rhs in (row, col):
            below[var] = rhs
        elif op == "<":
            found[var] = rhs
        else:
            return None
    for var, other in below.items():
        if var not in found and other in found:
            found[var] = found[other]
    lower = next(iter(below), "")
    return (found[row], found[col], lower) if row in found and col in found else None


def _alias(
    launch: LaunchConfig, kernel: Function, operands: tuple[Operand, ...], written: frozenset[str]
) -> str | None:
    """Why a buffer the kernel writes may be an operand read in the loop (the same buffer, or
    the same host pointer passed for both)."""
    args = dict(zip((p.name for p in kernel.params), (a.strip() for a in launch.site.args)))
    for op in operands:
        for out in sorted(written):
            if op.access.buffer == out or args.get(op.access.buffer, "?") == args.get(out, "!"):
                return (
                    f"the output `{out}` is also read as the operand `{op.access.text}`: tiles staged from it "
                    "would read values the kernel overwrites (an in-place update)"
                )
    return None


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _match(text: str, at: int, open_: str, close: str) -> int:
    depth = 0
    for n in range(at, len(text)):
        depth += text[n] == open_
        depth -= text[n] == close
        if depth == 0:
            return n
    return -1


def span_line(ctx: PassContext, span: Span) -> int:
    return ctx.model.source.line_col(span.start)[0]
