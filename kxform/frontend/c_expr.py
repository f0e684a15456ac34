"""C integer expressions of host and device code, read into kxform's expression language.

Passes state launch geometry and constraints as expressions over their parameters and the
kernel's scalar arguments (`(N + TILE - 1) / TILE`, `4 * TILE * (TILE + 1)`); the source
spells them in C: integer casts, `static_cast`, literal suffixes, `sizeof`, `std::min`.
A grid rounded up through floating point, `ceil(((float)n) / ((float)block))` or
`ceil(n / (double)256)`, is the integer `ceil_div(n, block)` for the operand ranges of a
launch, and is read as that; so are host helpers named for it (`iDivUp`, `cdiv`, `DIV_UP`).
Launches also choose with conditions (`n < 1024 ? n : 1024`, `a && b`): with `logic`, those
are read into the logic grammar's conditional expressions (`n if n < 1024 else 1024`), which
a launch binding evaluates; a harness spec's size expressions stay arithmetic. Anything else
the language lacks gives None: "not expressible", never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kxform.errors import SpecError
from kxform.expr import parse_expr, parse_logic

SIZEOF = {
    "char": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "short": 2,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "hip_bfloat16": 2,
    "bf16": 2,
    "int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "uint": 4,
    "float": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "double": 8,
    "long long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "float2": 8,
    "int2": 8,
    "float4": 16,
    "int4": 16,
    "double2": 16,
}
_CAST_RE = re.compile(
    r"\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long long|long|size_t|unsigned|short|uint|"
    r"int64_t|int32_t|uint32_t|uint64_t)\s*\)"
)
_FLOAT_CAST_RE = re.compile(r"\(\s*(?:float|double)\s*\)|static_cast<\s*(?:float|double)\s*>")
_FLOAT_LITERAL_RE = re.compile(r"\b(\d+)\.0*[fF]?(?![\w.])")
_CEIL_DIV_NAMES_RE = re.compile(
    r"(?<![.\w])(?:iDivUp|idivup|cdiv|ceildiv|ceilDiv|div_up|divUp|DIV_UP|CEIL_DIV|"
    r"CEILDIV|DIVUP)\s*\("
)
"""Host helpers named for rounding up a division (CUDA samples' `iDivUp`, `cdiv`, ...), read
as `ceil_div`; at the original values the launch read must still give the spec's."""
_CEIL_RE = re.compile(r"\b(?:std::)?ceil[fl]?\s*\(")


def _balanced(text: str, open_at: int) -> int | None:
    """The index of the parenthesis closing the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            return i
    return None


def _top_level_division(inner: str) -> tuple[str, str] | None:
    depth = 0
    for i, char in enumerate(inner):
        depth += char == "("
        depth -= char == ")"
        if char == "/" and depth == 0:
            return inner[:i], inner[i + 1 :]
    return None


def _ceil_to_ceil_div(text: str) -> str:
    """`ceil(A / B)` over float-cast integers -> `ceil_div(A, B)` (each occurrence)."""
    while True:
        match = _CEIL_RE.search(text)
        if match is None:
            return text
        close = _balanced(text, match.end() - 1)
        if close is None:
            return text
        raw = text[match.end() : close]
        if not _FLOAT_CAST_RE.search(raw) and not _FLOAT_LITERAL_RE.search(raw):
            return text  # `ceil(n / 256)` over ints divides first: not a rounding up
        inner = _FLOAT_LITERAL_RE.sub(r"\1", _FLOAT_CAST_RE.sub("", raw))
        parts = _top_level_division(" ".join(inner.split()).strip())
        while parts is None and inner.strip().startswith("(") and _balanced(inner.strip(), 0) == len(inner.strip()) - 1:
            inner = inner.strip()[1:-1]
            parts = _top_level_division(inner)
        if parts is None:
            return text
        text = f"{text[: match.start()]}ceil_div({parts[0].strip()}, {parts[1].strip()}){text[close + 1 :]}"


def c_to_expr(
    text: str, names: Iterable[str], fixed: Mapping[str, int] | None = None, logic: bool = False
) -> str | None:
    """A C integer expression over `names` (and literals) in kxform's expression language,
    or None when it reads anything else or uses what the language lacks. Names in `fixed`
    (constants that are not parameters) are replaced by their values. `logic`: conditions
    (`?:`, `&&`, `||`, `!`, comparisons) are read too, into the logic grammar."""
    out = _CEIL_DIV_NAMES_RE.sub("ceil_div(", _ceil_to_ceil_div(text))
    out = _CAST_RE.sub("", out)
    if fixed:
        out = re.sub(
            r"[A-Za-z_]\w*",
            lambda m: str(fixed[m.group(0)]) if m.group(0) in fixed and m.group(0) not in set(names) else m.group(0),
            out,
        )
    out = re.sub(r"static_cast<[^>]*>\s*", "", out)
    out = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", out)
    out = re.sub(r"(?<![.\w])(?:std::)?(min|max)\s*<[^<>()]*>\s*\(", r"\1(", out)
    out = re.sub(r"\bstd::(min|max)\b", r"\1", out)
    out = re.sub(r"\bsizeof\s*\(\s*([^)]*?)\s*\)", lambda m: str(SIZEOF.get(m.group(1), "sizeof")), out)
    out = " ".join(out.split())
    if logic and re.search(r"[?&|]|!(?!=)", out):
        out = _conditions(out)
        if out is None:
            return None
    try:
        expr = parse_logic(out) if logic else parse_expr(out)
    except SpecError:
        return None
    return out if expr.variables <= set(names) else None


def _conditions(text: str) -> str | None:
    """C's conditions in the logic grammar: `c ? a : b` -> `(a if c else b)` (nested and
    parenthesised ones too), `&&` -> `and`, `||` -> `or`, `!x` -> `not x`; None when a `?`
    has no matching `:`."""
    text = re.sub(r"&&", " and ", re.sub(r"\|\|", " or ", text))
    text = re.sub(r"!(?!=)", " not ", text)
    return _ternary(text)


def _ternary(text: str) -> str | None:
    depth, question = 0, None
    for i, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if char == "?" and depth == 0:
            question = i
            break
    if question is None:
        return _inside_parentheses(text)
    depth, nested = 0, 0
    for i in range(question + 1, len(text)):
        char = text[i]
        depth += char == "("
        depth -= char == ")"
        if depth:
            continue
        if char == "?":
            nested += 1
        elif char == ":" and nested:
            nested -= 1
        elif char == ":":
            parts = [_ternary(t) for t in (text[:question], text[question + 1 : i], text[i + 1 :])]
            if None in parts:
                return None
            test, body, orelse = (p.strip() for p in parts if p is not None)
            return f"(({body}) if ({test}) else ({orelse}))"
    return None


def _inside_parentheses(text: str) -> str | None:
    """`text` with a top-level `?:` in none of it, its parenthesised parts converted."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "(":
            out.append(text[i])
            i += 1
            continue
        close = _balanced(text, i)
        if close is None:
            return None
        inner = _ternary(text[i + 1 : close])
        if inner is None:
            return None
        out.append(f"({inner})")
        i = close + 1
    return "".join(out)
