"""Change a launch site: its grid, block, dynamic shared memory or template arguments, and
the launcher's declarations the launch reads (`dim3 block(16, 16)`, `const int
block_size = 128;`).

A launch dimension is followed to where its value is written (`Written`): the launch's
own expression, a field of the `dim3` it names, or the initializer of a constant local
that one reads. Edits replace only the tokens that change, so every other byte of the
file stays as it was (byte-minimal): the literal `16` in `dim3 block(16, 16)`, the `255`
and `256` of a grid `(n + 255) / 256`. A grid follows a new block size through the
ceil-division spellings real launches use (`(n + B - 1) / B`, `(n + 255) / 256`,
`ceil((float)n / B)`, `n / B + 1`, reads of `block.x`): the literal block size in the
grid's expression becomes the new name, and the literal one less than it, added, becomes
`NAME - 1`.

Pass-neutral: the launch pass sets block sizes with it; a pass that changes template
arguments or shared memory at a launch uses `replace_config` and `replace_template_args`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from kxform.engine.edits import Edit
from kxform.engine.policy import LaunchBinding
from kxform.frontend.c_expr import c_to_expr
from kxform.frontend.launches import LaunchConfig, dim3_vars, host_vars
from kxform.frontend.model import Function, LaunchSite, SourceModel, Span
from kxform.frontend.queries import angle_brackets, int_literals, int_value

WrittenKind = Literal["literal", "constant", "parameter", "expression"]
LAUNCH_PARAMETERS = ("BLOCK_X", "BLOCK_Y", "BLOCK_Z", "MAX_THREADS", "MIN_BLOCKS")
"""What a kernel's launch parameters are called after its name (`GELU_FORWARD_BLOCK_X`)."""


def parameter_name(kernel: str, what: str) -> str:
    """`gelu_forward`, `BLOCK_X` -> `GELU_FORWARD_BLOCK_X`; `transposeNaive` -> `TRANSPOSE_NAIVE_...`.
    One convention for every pass, so a pass can tell a launch parameter from a tile size."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", kernel)
    return f"{snake.upper()}_{what}"


def launch_parameters(kernel: str) -> frozenset[str]:
    """Every name a launch parameter of `kernel` can have."""
    return frozenset(parameter_name(kernel, what) for what in LAUNCH_PARAMETERS)


_NAME_RE = re.compile(r"[A-Za-z_]\w*")
_CAP_RE = re.compile(r"(?:std::)?(?:min|MIN)\s*(?:<\s*\w+\s*>)?\s*\((?P<size>.+),\s*(?P<cap>\d+)[uU]?\s*\)", re.S)


@dataclass(frozen=True)
class Written:
    """Where one launch dimension's value is written, after following `dim3` variables and
    constant locals from the launch.

    kind: `literal` (`256`, wherever it sits), `constant` (a macro or a file-scope
    constant: `text` names it), `parameter` (a parameter of the launching function, or of
    its template: a value from its callers), `expression` (anything else).
    """

    kind: WrittenKind
    text: str
    span: Span
    via: tuple[str, ...] = ()
    """The host variables followed to get here (`block`, `block_size`)."""
    argument_of: str | None = None
    """The launching function's parameter this value is passed as, at its one call site."""
    caps: str | None = None
    """The expression this literal caps (`std::min(d, 1024)`): the block is the smaller."""

    @property
    def value(self) -> int | None:
        return int_value(self.text) if self.kind == "literal" else None


def _strip(data: bytes, span: Span) -> Span:
    """`span` without surrounding whitespace and enclosing parentheses."""
    start, end = span.start, span.end
    while True:
        while start < end and data[start : start + 1].isspace():
            start += 1
        while end > start and data[end - 1 : end].isspace():
            end -= 1
        if data[start : start + 1] == b"(" and data[end - 1 : end] == b")" and _closes(data, start) == end - 1:
            start, end = start + 1, end - 1
            continue
        return Span(start, end)


def _closes(data: bytes, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(data)):
        depth += data[i] == ord("(")
        depth -= data[i] == ord(")")
        if depth == 0:
            return i
    return None


def arg_spans(data: bytes, span: Span) -> tuple[Span, ...]:
    """The top-level comma-separated parts of `span` (`16, 16` -> two spans), stripped."""
    parts, depth, start = [], 0, span.start
    angles = {span.start + i for i in angle_brackets(data[span.start : span.end].decode("latin-1"))}
    for i in range(span.start, span.end):
        char = data[i : i + 1]
        depth += char in (b"(", b"[", b"{") or (char == b"<" and i in angles)
        depth -= char in (b")", b"]", b"}") or (char == b">" and i in angles)
        if char == b"," and depth == 0:
            parts.append(_strip(data, Span(start, i)))
            start = i + 1
    parts.append(_strip(data, Span(start, span.end)))
    return tuple(p for p in parts if p.end > p.start)


def _host(model: SourceModel, site: LaunchSite) -> Function | None:
    return next((f for f in model.functions if f.name == site.function and f.body.contains(site.span)), None)


def dim_spans(model: SourceModel, config: LaunchConfig, which: int) -> tuple[tuple[Span, ...], tuple[str, ...]]:
    """The spans of the grid (`which` 0) or block (1) dimensions as the launch writes them:
    the `dim3` variable's arguments, an inline `dim3(...)`'s, or the launch expression
    itself (one dimension); and the `dim3` variable followed, if any."""
    data = model.source.data
    site = config.site
    var = config.grid_var if which == 0 else config.block_var
    if var is not None:
        return arg_spans(data, var.args_span), (var.name,)
    if len(site.config_spans) <= which:
        return (), ()
    span = _strip(data, site.config_spans[which])
    if re.match(rb"dim3\s*\(", data[span.start : span.end]):
        open_at = data.index(b"(", span.start)
        close = _closes(data, open_at)
        if close is not None:
            return arg_spans(data, Span(open_at + 1, close)), ()
    return (span,), ()


def written(model: SourceModel, config: LaunchConfig, which: int, axis: int) -> Written | None:
    """Where dimension `axis` of the grid (`which` 0) or block (1) is written; None when
    the launch leaves it at 1."""
    spans, via = dim_spans(model, config, which)
    if axis >= len(spans):
        return None
    host = _host(model, config.site)
    return _follow(model, host, config.site.span.start, spans[axis], via)


def divide_grid(model: SourceModel, config: LaunchConfig, axis: int, name: str, origin: str) -> Edit | None:
    """The edit that divides grid dimension `axis` of the launch by `name`, rounding up
    (`((grid) + name - 1) / name`: a thread takes `name` blocks' worth of work); None when
    the launch writes no such dimension."""
    spans = dim_spans(model, config, 0)[0]
    if axis >= len(spans):
        return None
    text = model.source.data[spans[axis].start : spans[axis].end].decode("utf-8")
    return Edit(spans[axis].start, spans[axis].end, f"(({text}) + {name} - 1) / {name}", origin)


def _follow(
    model: SourceModel, host: Function | None, before: int, span: Span, via: tuple[str, ...], depth: int = 0
) -> Written:
    data = model.source.data
    span = _strip(data, span)
    text = data[span.start : span.end].decode("utf-8")
    if int_value(text) is not None:
        return Written("literal", text, span, via)
    cap = _CAP_RE.fullmatch(text)
    if cap is not None:  # `std::min(d, 1024)`: the literal caps a size from the problem
        at = span.start + len(text[: cap.start("cap")].encode("utf-8"))
        return Written("literal", cap.group("cap"), Span(at, at + len(cap.group("cap"))), via, caps=text)
    if not _NAME_RE.fullmatch(text) or depth > 4:
        return Written("expression", text, span, via)
    if host is not None:
        local = next((v for v in reversed(host_vars(model, host)) if v.name == text and v.span.end <= before), None)
        if local is not None:
            return _follow(model, host, before, _initializer(data, local.span), (*via, text), depth + 1)
        if any(p.name == text for p in host.params) or text in host.template_names:
            return Written("parameter", text, span, via)  # a template's argument: its caller decides too
    return Written("constant", text, span, via)


def spelled_in(model: SourceModel, function: Function, place: Written) -> int | None:
    """Where `function`'s body spells the block size its launch writes at `place` other than
    as `blockDim`: the constant's name (`blockIdx.x * NUM_THREADS`) or the literal scaling
    a block index (`blockIdx.x * 256`); the offset, or None. A rewrite that changes the
    block's shape must refuse such a body: it is written for that one value."""
    body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
    if place.kind == "constant":
        pattern = rf"(?<![\w.]){re.escape(place.text)}(?!\w)"
    elif place.kind == "literal" and place.value is not None:
        pattern = rf"\bblockIdx\.[xyz]\s*\*\s*\(?{place.value}[uU]?\b|\b{place.value}[uU]?\s*\*\s*blockIdx\.[xyz]\b"
    else:
        return None
    found = re.search(pattern, body)
    return function.body.start + len(body[: found.start()].encode("utf-8")) if found else None


def through_caller(model: SourceModel, config: LaunchConfig, place: Written) -> tuple[Written | None, tuple[int, ...]]:
    """A block size that is a parameter of the launching function, followed to its value at
    the function's call sites in this file: the literal passed there when there is one
    call (kind `literal`, `argument_of` the parameter), else None; and the lines of the calls."""
    host = _host(model, config.site)
    if host is None or place.kind != "parameter" or not any(p.name == place.text for p in host.params):
        return None, ()
    index = next(i for i, p in enumerate(host.params) if p.name == place.text)
    calls = [c for c in model.calls if c.callee == host.name]
    lines = tuple(model.source.line_col(c.span.start)[0] for c in calls)
    if len(calls) != 1 or calls[0].arg_count != len(host.params):
        return None, lines
    args = calls[0].args_span
    span = arg_spans(model.source.data, Span(args.start + 1, args.end - 1))[index]
    text = model.source.data[span.start : span.end].decode("utf-8")
    if int_value(text) is None and not _NAME_RE.fullmatch(text):
        return None, lines
    kind: WrittenKind = "literal" if int_value(text) is not None else "constant"
    return Written(kind, text, span, (*place.via, place.text), place.text), lines


def _initializer(data: bytes, statement: Span) -> Span:
    """The initializer of `const int x = EXPR;` (the statement's span)."""
    equals = data.index(b"=", statement.start, statement.end)
    return Span(equals + 1, statement.end - 1)


def grid_spans(model: SourceModel, config: LaunchConfig, axis: int) -> tuple[Span, ...]:
    """Every span whose text computes grid dimension `axis`: the launch's (or its `dim3`'s)
    expression, and the initializers of the constant locals it reads, transitively."""
    spans, _ = dim_spans(model, config, 0)
    if axis >= len(spans):
        return ()
    return _computing(model, config, spans[axis])


def shared_spans(model: SourceModel, config: LaunchConfig) -> tuple[Span, ...]:
    """Every span whose text computes the launch's dynamic shared memory (`block_size *
    sizeof(float)`, through the constant locals it reads); () when the launch has none."""
    if len(config.site.config_spans) < 3:
        return ()
    return _computing(model, config, _strip(model.source.data, config.site.config_spans[2]))


def _computing(model: SourceModel, config: LaunchConfig, first: Span) -> tuple[Span, ...]:
    host = _host(model, config.site)
    data = model.source.data
    locals_ = {v.name: v for v in host_vars(model, host) if v.span.end <= config.site.span.start} if host else {}
    out, todo = [first], [first]
    while todo:
        span = todo.pop()
        for name in set(_NAME_RE.findall(data[span.start : span.end].decode("utf-8"))):
            var = locals_.pop(name, None)
            if var is not None:
                out.append(_initializer(data, var.span))
                todo.append(out[-1])
    return tuple(out)


def set_written(place: Written, text: str, origin: str) -> Edit:
    """Write `text` where the dimension's value is written (the literal or the name only)."""
    return Edit(place.span.start, place.span.end, text, origin)


def follow_block(
    model: SourceModel, config: LaunchConfig, axis: int, old: Written, name: str, origin: str, shared: bool = False
) -> list[Edit]:
    """Edits that make grid dimension `axis` divide by `name` where it divided by the
    block's old value: the literal itself (`256` -> `NAME`), and the literal one less that
    a ceil-division adds (`+ 255` -> `+ NAME - 1`); a constant's name, or the launching
    function's parameter (`ceil_div(N, block_size)`), becomes `name`. Spans that hold
    `old` itself are left to `set_written`. `shared`: the dynamic shared memory's
    expression follows too (`block_size * sizeof(float)`: memory per thread of the block)."""
    data = model.source.data
    edits: list[Edit] = []
    spans = grid_spans(model, config, axis) + (shared_spans(model, config) if shared else ())
    for span in spans:
        if span.contains(old.span) or old.span.contains(span):
            continue
        if old.kind in ("constant", "parameter"):
            for match in re.finditer(
                rb"(?<![.\w])" + re.escape(old.text.encode()) + rb"(?![\w])", data[span.start : span.end]
            ):
                edits.append(Edit(span.start + match.start(), span.start + match.end(), name, origin))
            continue
        value = old.value
        if value is None:
            continue
        literals = [lit for lit in int_literals(model, span)]
        if not any(lit.value == value for lit in literals):
            continue
        for lit in literals:
            if lit.value == value:
                edits.append(Edit(lit.span.start, lit.span.end, name, origin))
            elif lit.value == value - 1 and data[: lit.span.start].rstrip().endswith(b"+"):
                edits.append(Edit(lit.span.start, lit.span.end, f"{name} - 1", origin))
    return edits


def multiply_block(model: SourceModel, config: LaunchConfig, factor: str, origin: str) -> Edit:
    """The launch's one-dimensional block multiplied by `factor` where the launch writes it:
    `block_size` -> `block_size * F`, a `dim3` variable `block` -> `block.x * F` (the
    variable keeps the value other code, a grid over `block.x`, reads), an inline
    `dim3(n)` -> `dim3((n) * F)`."""
    data = model.source.data
    span = _strip(data, config.site.config_spans[1])
    text = data[span.start : span.end].decode("utf-8")
    if config.block_var is not None and text == config.block_var.name:
        return Edit(span.start, span.end, f"{text}.x * {factor}", origin)
    inline, _ = dim_spans(model, config, 1)
    if not config.block_var and len(inline) == 1 and inline[0] != span:
        inner = data[inline[0].start : inline[0].end].decode("utf-8")
        return Edit(inline[0].start, inline[0].end, f"{_operand(inner)} * {factor}", origin)
    return Edit(span.start, span.end, f"{_operand(text)} * {factor}", origin)


def _operand(text: str) -> str:
    """`text` as an operand of `*`: a name, a literal or a call as it is, else parenthesised."""
    simple = re.fullmatch(r"[A-Za-z_][\w:.]*(?:\s*\((?:[^()]|\([^()]*\))*\))?|\d+[uUlL]*", text.strip())
    return text.strip() if simple else f"({text.strip()})"


AXIS_NAMES = ("x", "y", "z")


def override(name: str, caller: str) -> str:
    """A launch parameter `name` in place of a value the launcher's callers pass: `name`
    where it is set above 0, the caller's value at 0 (the parameter's default)."""
    return f"({name} > 0 ? {name} : {caller})"


def override_of(place: Written, name: str | None = None) -> str | None:
    """The caller's parameter of a dimension written as `override(name, caller)` (any
    name when `name` is None); None for anything else."""
    word = re.escape(name) if name else r"[A-Za-z_]\w*"
    found = re.fullmatch(rf"\(?\s*(?P<n>{word})\s*>\s*0\s*\?\s*(?P=n)\s*:\s*(?P<caller>[A-Za-z_]\w*)\s*\)?", place.text)
    return found.group("caller") if found and place.kind == "expression" else None


def run_time_inputs(model: SourceModel, config: LaunchConfig) -> tuple[tuple[str, str], ...]:
    """The launch's dimensions written as a parameter of the launching function (a block
    size its caller passes, through `dim3` variables and locals or not, or overridden by a
    launch parameter: `override`), as `(name, "block.x")`: the verifier reads each from the
    spec's launch of the original (`LaunchBinding.inputs`), so a rewritten launch over
    `block_size` can be evaluated."""
    out: dict[str, str] = {}
    for which, what in ((1, "block"), (0, "grid")):
        for axis in range(3):
            place = written(model, config, which, axis)
            name = place.text if place is not None and place.kind == "parameter" else None
            name = name or (override_of(place) if place is not None else None)  # at its default, the caller's
            if name is not None and name not in out:
                out[name] = f"{what}.{AXIS_NAMES[axis]}"
    return tuple(out.items())


def replace_config(site: LaunchSite, index: int, text: str, origin: str) -> Edit:
    """Replace element `index` of the launch configuration (0 grid, 1 block, 2 dynamic
    shared memory, 3 stream) as written at the launch."""
    span = site.config_spans[index]
    return Edit(span.start, span.end, text, origin)


def replace_template_args(model: SourceModel, site: LaunchSite, text: str, origin: str) -> Edit:
    """Replace the template argument list of a templated launch (`<float, 64>` -> `text`)."""
    data = model.source.data
    start = data.index(site.kernel.encode(), site.span.start) + len(site.kernel)
    while data[start : start + 1].isspace():
        start += 1
    if data[start : start + 1] != b"<" or site.template_args is None:
        raise ValueError(f"{origin}: the launch of '{site.kernel}' has no template arguments")
    end = start + len(site.template_args.encode("utf-8"))
    return Edit(start, end, text, origin)


def define_parameter(model: SourceModel, before: int, name: str, value: int, origin: str) -> list[Edit]:
    """An overridable definition of `name` (`#ifndef NAME / #define NAME value / #endif`),
    inserted before the line holding `before`: a build or a tuner sets it with `-DNAME=`."""
    source = model.source
    at = source.insertion_point(before)
    newline = source.newline
    return [Edit(at, at, f"#ifndef {name}{newline}#define {name} {value}{newline}#endif{newline}", origin)]


def launch_binding(
    model: SourceModel,
    kernel: Function,
    config: LaunchConfig,
    names: Iterable[str],
    values: Mapping[str, int],
    defaults: Mapping[str, int],
    fixed: Mapping[str, int] | None = None,
    aliases: Mapping[str, str] | None = None,
    inputs: Iterable[tuple[str, str]] | None = None,
    every: bool = False,
) -> LaunchBinding | None:
    """The launch of `config` as expressions over the kernel's parameters and `names`: the
    host variables passed to the kernel are renamed to the parameters they are passed as
    (`rows` passed as `N`). A dimension that reads none of `names` stays the spec's own;
    None when one that does reads what the kernel does not receive. `aliases` renames host
    names first (a launching function's parameter to the name its value is lifted into).
    `inputs`: the launcher's run-time values and the spec dimension each is read from
    (`run_time_inputs` of the original launch; default: of `config` itself). `every`: each
    dimension is read, none left to the spec (a launch read from a file of its own)."""
    inputs = tuple(inputs if inputs is not None else run_time_inputs(model, config))
    names = set(names)
    aliases = dict(aliases or {})
    runtime = {n for n, _ in inputs}
    host_to_param = {
        arg.strip(): param.name
        for arg, param in zip(config.site.args, kernel.params)
        if _NAME_RE.fullmatch(arg.strip())
    }

    def translate(text: str) -> str | None | bool:
        text = _NAME_RE.sub(lambda m: aliases.get(m.group(0), m.group(0)), text)
        if not every and not set(_NAME_RE.findall(text)) & names:
            return True
        renamed = _NAME_RE.sub(
            lambda m: host_to_param.get(m.group(0), m.group(0)) if m.group(0) not in runtime else m.group(0), text
        )
        return c_to_expr(renamed, names | runtime | set(host_to_param.values()), fixed, logic=True)

    dims: list[tuple[str | None, ...]] = []
    for exprs in (config.grid, config.block):
        out: list[str | None] = []
        for text in exprs:
            found = translate(text)
            if found is None:
                return None
            out.append(None if found is True else str(found))
        dims.append(tuple(out))
    shared = translate(config.shared) if config.shared else True
    if shared is None:
        return None
    line = model.source.line_col(config.site.span.start)[0]
    read = {n for d in (*dims[0], *dims[1], None if shared is True else str(shared)) if d for n in _NAME_RE.findall(d)}
    return LaunchBinding(
        dims[0],
        dims[1],
        None if shared is True else str(shared),
        tuple(values.items()),
        tuple(defaults.items()),
        f"{model.source.path}:{line}",
        inputs=tuple((n, d) for n, d in inputs if n in read),
    )


def other_uses(model: SourceModel, function: Function, name: str, allowed: Iterable[Span]) -> int | None:
    """The line of the first read of host variable `name` in `function` outside `allowed`
    spans (the launches and declarations a rewrite keeps consistent); None when there is none."""
    data = model.source.data
    allowed = tuple(allowed)
    declared = [v.span for v in (*host_vars(model, function), *dim3_vars(model, function)) if v.name == name]
    for match in re.finditer(
        rb"(?<![.\w])" + re.escape(name.encode()) + rb"(?![\w])", data[function.body.start : function.body.end]
    ):
        at = Span(function.body.start + match.start(), function.body.start + match.end())
        if not any(s.contains(at) for s in (*allowed, *declared)):
            return model.source.line_col(at.start)[0]
    return None
