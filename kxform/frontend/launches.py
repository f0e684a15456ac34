"""Launch sites with their configuration as expressions: grid, block and dynamic shared
memory, read through the `dim3` variables a launch names (`dim3 block(TILE, TILE);`) and
the constant scalar host variables those read (`const int blocks = (n + BLOCK - 1) /
BLOCK;`), with the spans of every declaration involved, so a pass can tell a launch's
use of a constant from any other host use and can rewrite the launch consistently.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kxform.frontend.cuda import mask_for_parse
from kxform.frontend.model import Function, FunctionKind, LaunchSite, SourceModel, Span, once
from kxform.frontend.queries import split_args


@dataclass(frozen=True)
class Dim3Var:
    """`dim3 block(TILE, TILE);` (or `= dim3(...)`, `{...}`) in a host function."""

    name: str
    args: tuple[str, ...]
    span: Span
    args_span: Span
    function: str | None


@dataclass(frozen=True)
class HostVar:
    """`const int blocks = (n + 255) / 256;`: a constant scalar host variable and its initializer."""

    name: str
    text: str
    span: Span
    function: str | None


@dataclass(frozen=True)
class LaunchConfig:
    """A launch with its configuration resolved through the dim3 variables it names and the
    scalar host variables those read (`blocks` -> `(n + BLOCK - 1) / BLOCK`)."""

    site: LaunchSite
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str | None
    grid_var: Dim3Var | None
    block_var: Dim3Var | None
    variables: tuple[HostVar, ...] = ()


def _masked(model: SourceModel) -> bytes:
    return once(model, "masked_for_parse", lambda: mask_for_parse(model.source.data))


def dim3_vars(model: SourceModel, function: Function) -> tuple[Dim3Var, ...]:
    """`dim3 name(...)` declarations of `function` (once per function and model: a host
    function launching many kernels is asked once per kernel)."""
    return once(model, f"dim3_vars@{function.span.start}", lambda: _dim3_vars(model, function))


def _dim3_vars(model: SourceModel, function: Function) -> tuple[Dim3Var, ...]:
    data = _masked(model)
    body = function.body
    out = []
    for match in re.finditer(rb"\bdim3\s+([A-Za-z_]\w*)\s*(=\s*dim3\s*)?([({])", data[body.start : body.end]):
        open_at = body.start + match.start(3)
        close = _matching(data, open_at)
        if close is None:
            continue
        end = data.find(b";", close)
        inner = data[open_at + 1 : close].decode("utf-8")
        out.append(
            Dim3Var(
                match.group(1).decode(),
                tuple(split_args(inner)),
                Span(body.start + match.start(), end + 1),
                Span(open_at + 1, close),
                function.name,
            )
        )
    return tuple(out)


def _matching(data: bytes, open_at: int) -> int | None:
    pairs = {ord("("): ord(")"), ord("{"): ord("}")}
    close, depth = pairs[data[open_at]], 0
    for i in range(open_at, min(len(data), open_at + 2000)):
        if data[i] == data[open_at]:
            depth += 1
        elif data[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return None


_SCALAR = rb"(?:unsigned\s+int|unsigned|int|size_t|long\s+long|long|uint|int64_t|auto)"
_HOST_VAR_RE = re.compile(rb"\b(?:const|constexpr)\s+" + _SCALAR + rb"\s+([A-Za-z_]\w*)\s*=")
_LOCAL_VAR_RE = re.compile(rb"(?<![\w.>])" + _SCALAR + rb"\s+([A-Za-z_]\w*)\s*=(?!=)")


def host_vars(model: SourceModel, function: Function) -> tuple[HostVar, ...]:
    """Scalar declarations with one declarator whose value does not change: `const int
    blocks = EXPR;`, and `int threads = 256;` when nothing in the function assigns,
    increments or takes the address of `threads` afterwards (once per function and model)."""
    return once(model, f"host_vars@{function.span.start}", lambda: _host_vars(model, function))


def _host_vars(model: SourceModel, function: Function) -> tuple[HostVar, ...]:
    data = _masked(model)
    body = function.body
    out = []
    for pattern, constant in ((_HOST_VAR_RE, True), (_LOCAL_VAR_RE, False)):
        for match in pattern.finditer(data, body.start, body.end):
            end = _statement_end(data, match.end(), body.end)
            if end is None or (not constant and _changed(data, match.group(1), end, body.end)):
                continue
            if not constant and re.search(
                rb"\b(?:const|constexpr)\s+$", data[max(body.start, match.start() - 12) : match.start()]
            ):
                continue  # already read as a constant
            text = data[match.end() : end].decode("utf-8").strip()
            out.append(HostVar(match.group(1).decode(), text, Span(match.start(), end + 1), function.name))
    return tuple(sorted(out, key=lambda v: v.span))


def _changed(data: bytes, name: bytes, start: int, limit: int) -> bool:
    """Whether `name` is assigned, incremented or has its address taken in [start, limit)."""
    word = re.escape(name)
    return (
        re.search(
            rb"(?<![\w.])"
            + word
            + rb"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--)\s*"
            + word
            + rb"\b|\b"
            + word
            + rb"\s*(?:\+\+|--)|&\s*"
            + word
            + rb"\b(?!\s*[\[.])",
            data[start:limit],
        )
        is not None
    )


def _statement_end(data: bytes, start: int, limit: int) -> int | None:
    """The `;` ending the initializer at `start`; None when a top-level comma declares more."""
    depth = 0
    for i in range(start, limit):
        char = data[i : i + 1]
        if char in (b"(", b"[", b"{"):
            depth += 1
        elif char in (b")", b"]", b"}"):
            depth -= 1
        elif char == b"," and depth == 0:
            return None
        elif char == b";" and depth == 0:
            return i
    return None


def launch_configs(model: SourceModel, kernel: str) -> tuple[LaunchConfig, ...]:
    out = []
    for site in model.launches:
        if site.kernel != kernel or len(site.config) < 2:
            continue
        host = next((f for f in model.functions if f.name == site.function and f.body.contains(site.span)), None)
        variables = {v.name: v for v in dim3_vars(model, host) if v.span.end <= site.span.start} if host else {}
        scalars = (
            {v.name: v for v in host_vars(model, host) if v.span.end <= site.span.start and v.name not in site.args}
            if host
            else {}
        )
        used: dict[str, HostVar] = {}
        fields: dict[str, tuple[str, ...]] = {name: var.args for name, var in variables.items()}
        fields.update(_function_macros(model))
        fields.update(helper_functions(model))
        grid, grid_var = _dims(site.config[0], variables)
        block, block_var = _dims(site.config[1], variables)
        grid, block = (tuple(_expand(t, scalars, used, fields) for t in dims) for dims in (grid, block))
        shared = _expand(site.config[2], scalars, used, fields) if len(site.config) > 2 else None
        out.append(LaunchConfig(site, grid, block, shared, grid_var, block_var, tuple(used.values())))
    return tuple(out)


_MACRO_HEAD_RE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\(([^)]*)\)")
_MACRO_KEY = "<macro>"


def _function_macros(model: SourceModel) -> dict[str, tuple[str, ...]]:
    """Function-like macros of the file as `<macro>NAME` -> (body, parameter, ...), so a
    launch's `DIV_UP(n, 256)` is read as what it expands to."""
    out = {}
    for macro in model.macros:
        if not macro.is_function_like:
            continue
        head = _MACRO_HEAD_RE.match(model.source.data[macro.span.start : macro.span.end].decode("utf-8", "replace"))
        if head is not None and head.group(1) == macro.name:
            params = tuple(p.strip() for p in head.group(2).split(",") if p.strip())
            out[_MACRO_KEY + macro.name] = (" ".join(macro.body.split()), *params)
    return out


_RETURN_RE = re.compile(r"\{\s*return\s+(?P<expr>[^;{}]+);\s*\}", re.S)


def helper_functions(model: SourceModel) -> dict[str, tuple[str, ...]]:
    """Host helpers of the file whose body is one `return EXPR;` (`int ceil_div(int a, int
    b) { return (a + b - 1) / b; }`, a template too), in the form of `_function_macros`: a
    launch's `ceil_div(N, block_size)` is read as what the helper returns. Once per model."""
    return once(model, "launch_helpers", lambda: _helper_functions(model))


def _helper_functions(model: SourceModel) -> dict[str, tuple[str, ...]]:
    data = _masked(model)
    out: dict[str, tuple[str, ...]] = {}
    host = [f for f in model.functions if f.kind is FunctionKind.HOST or f.host_too]
    names = [f.name for f in model.functions]
    for function in host:
        if names.count(function.name) != 1 or not function.params:
            continue  # an overload set: which one a call takes is the compiler's to say
        found = _RETURN_RE.fullmatch(data[function.body.start : function.body.end].decode("utf-8", "replace"))
        if found is not None:
            body = " ".join(found.group("expr").split())
            out[_MACRO_KEY + function.name] = (body, *(p.name for p in function.params))
    return out


def expand_function_macros(text: str, fields: dict[str, tuple[str, ...]]) -> str:
    """`text` with each call of a function-like macro (or a helper function: a template's
    arguments `<int>` dropped) replaced by its body, the arguments (parenthesised) in place
    of the parameters."""
    for _ in range(4):
        match = next(
            (
                m
                for m in re.finditer(r"(?<![.\w])([A-Za-z_]\w*)\s*(?:<[^<>();]*>\s*)?\(", text)
                if _MACRO_KEY + m.group(1) in fields
            ),
            None,
        )
        if match is None:
            return text
        depth, end = 0, None
        for i in range(match.end() - 1, len(text)):
            depth += text[i] == "("
            depth -= text[i] == ")"
            if depth == 0:
                end = i
                break
        if end is None:
            return text
        body, *params = fields[_MACRO_KEY + match.group(1)]
        args = split_args(text[match.end() : end])
        if len(args) != len(params):
            return text
        values = dict(zip(params, args))
        expanded = re.sub(r"(?<![.\w])[A-Za-z_]\w*", functools.partial(_argument_of, values), body)
        text = f"{text[: match.start()]}({expanded}){text[end + 1 :]}"
    return text


def dim3_field(text: str, fields: dict[str, tuple[str, ...]]) -> str:
    """`text` with each read of a `dim3` variable's field (`block.x`) replaced by that
    argument of its declaration (`dim3 block(32, 8)`: `block.y` -> `(8)`; a missing one is 1)."""

    def one(match: re.Match[str]) -> str:
        args = fields[match.group(1)]
        index = "xyz".index(match.group(2))
        return f"({args[index]})" if index < len(args) else "1"

    names = "|".join(re.escape(n) for n in fields if not n.startswith(_MACRO_KEY))
    if not names:
        return text
    return re.sub(rf"(?<![.\w])({names})\s*\.\s*([xyz])\b", one, text)


def _expand(
    text: str,
    scalars: dict[str, HostVar],
    used: dict[str, HostVar],
    fields: dict[str, tuple[str, ...]] | None = None,
    depth: int = 0,
) -> str:
    """`text` with the scalar host variables it reads replaced by their initializers, and
    the `dim3` fields it reads (`block.x`) by the values they were declared with."""
    if depth > 4:
        return text
    text = expand_function_macros(dim3_field(text, fields or {}), fields or {})

    def one(match: re.Match[str]) -> str:
        var = scalars.get(match.group(0))
        if var is None:
            return match.group(0)
        used[var.name] = var
        return f"({_expand(var.text, scalars, used, fields, depth + 1)})"

    return re.sub(r"(?<![.\w])[A-Za-z_]\w*(?!\s*\()", one, text)


def _dims(text: str, variables: dict[str, Dim3Var]) -> tuple[tuple[str, ...], Dim3Var | None]:
    text = text.strip()
    if text in variables:
        return variables[text].args, variables[text]
    call = re.fullmatch(r"dim3\s*\((.*)\)", text, re.S)
    return (tuple(split_args(call.group(1))) if call else (text,)), None


def _argument_of(values: dict[str, str], match: re.Match[str]) -> str:
    """A macro parameter's argument, parenthesised; any other name as it is."""
    name = match.group(0)
    return f"({values[name]})" if name in values else name
