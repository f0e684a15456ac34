"""Rewrite primitives: the edits passes compose, on the edit engine.

Each primitive returns `Edit`s that touch only the bytes its change needs (an insertion
at one offset, or the exact span of the node it replaces), in the file's newline style,
so a rewrite's diff is the change and nothing else (byte-minimal):
* `insert_at_entry`: statements at the start of a function body, indented like its
  first statement;
* `place_helpers`: a helper at file scope once per file and, through an include guard
  of its own, once per translation unit (kxform.engine.helper_placement);
* `add_template_params` and `instantiate`: template parameters with defaults (every
  existing launch keeps compiling) and an explicit instantiation at given values;
* `replace_loop` and `set_unroll`: a loop statement (the `Loop` of the access analysis)
  replaced, or its `#pragma unroll` set, changed or removed;
* `stride_loop`: a counted loop shared out over workers (lanes of a row, threads or blocks
  of a split reduction): worker k starts k steps in and strides by the number of workers;
* `loop_header` and `scale_loop`: a counted loop's header as written, and each turn made to
  take several iterations (a stride loop vectorised or coarsened).
Changing a launch site is kxform.engine.launch_site's job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kxform.analysis.affine import Affine

from kxform.analysis.records import Loop
from kxform.engine.edits import Edit
from kxform.engine.helper_placement import Helper, guarded, helper_offset
from kxform.errors import CheckFailed
from kxform.frontend.model import Function, SourceModel, Span
from kxform.frontend.queries import split_args, template_params

__all__ = [
    "Helper",
    "RewriteRefused",
    "add_template_params",
    "insert_at_entry",
    "instantiate",
    "place_helpers",
    "replace_loop",
    "set_unroll",
    "LoopHeader",
    "loop_header",
    "scale_loop",
    "stride_loop",
]


class RewriteRefused(CheckFailed):
    """The primitive cannot make this change in place (the reason says why)."""

    def __init__(self, cause: str) -> None:
        super().__init__("rewrite", cause)


def body_indent(model: SourceModel, function: Function) -> str:
    """The indentation of the body's first statement (one level inside the function's own)."""
    source = model.source
    rest = source.data[function.body.start + 1 : function.body.end]
    stripped = rest.lstrip(b" \t\r\n")
    first = function.body.start + 1 + (len(rest) - len(stripped))
    if stripped and not stripped.startswith(b"}"):
        indent = source.indent_at(first)
    else:
        indent = source.indent_at(function.body.start) + "    "
    return indent or "    "


def insert_at_entry(model: SourceModel, function: Function, lines: Sequence[str], origin: str) -> Edit:
    """`lines` (statements, without indentation) as the first lines of `function`'s body."""
    newline, indent = model.source.newline, body_indent(model, function)
    text = "".join(f"{newline}{indent}{line}" if line else newline for line in lines)
    return Edit(function.body.start + 1, function.body.start + 1, text, origin)


def place_helpers(model: SourceModel, uses: Sequence[tuple[Helper, int]], origin: str) -> list[Edit]:
    """One guarded definition per helper name, before the top-level item of its first use
    (`uses`: the helper and the offset of a function that calls it); none for a helper the
    file already defines (an earlier run)."""
    first: dict[str, tuple[int, Helper]] = {}
    for helper, offset in uses:
        known = first.get(helper.name)
        if known is None or offset < known[0]:
            first[helper.name] = (offset, helper)
    edits = []
    newline = model.source.newline
    for name, (offset, helper) in first.items():
        if f" {name}(".encode() in model.source.data:
            continue
        at = helper_offset(model, offset)
        edits.append(Edit(at, at, guarded(helper, newline) + newline, f"{origin}: helper {name}"))
    return edits


def add_template_params(model: SourceModel, function: Function, params: Sequence[str], origin: str) -> Edit:
    """Append `params` (`int BM = 64`, each with a default so existing launches still
    compile) to the function's template parameter list, or give it one."""
    if not params:
        raise RewriteRefused("no template parameter to add")
    if any("=" not in p for p in params):
        raise RewriteRefused("a new template parameter needs a default, or existing launches stop compiling")
    data = model.source.data
    if function.template_params:
        header = data.rfind(function.template_params.encode(), 0, function.span.start + 1)
        if header < 0:
            header = data.find(function.template_params.encode(), function.span.start)
        if header < 0:
            raise RewriteRefused(f"the template header of '{function.name}' is not where kxform parsed it")
        close = header + len(function.template_params.encode()) - 1
        return Edit(close, close, ", " + ", ".join(params), origin)
    at = model.source.insertion_point(function.span.start)
    if at != function.span.start and data[at : function.span.start].strip():
        raise RewriteRefused(f"'{function.name}' does not start its line; kxform adds a template header only there")
    indent = model.source.indent_at(function.span.start)
    return Edit(at, at, f"{indent}template <{', '.join(params)}>{model.source.newline}", origin)


def instantiate(
    model: SourceModel, function: Function, args: Sequence[str], origin: str, added: Sequence[str] = ()
) -> Edit:
    """An explicit instantiation of `function` at `args`, on the line after its definition;
    `added`: the template parameters `add_template_params` gives it in the same rewrite."""
    if not function.template_params and not added:
        raise RewriteRefused(f"'{function.name}' is not a template")
    params = model.source.data[function.params_span.start : function.params_span.end].decode("utf-8")
    qualifier = (
        "__global__ " if function.kind.value == "kernel" else "__device__ " if function.kind.value == "device" else ""
    )
    names = [p.name for p in template_params(function)] + [re.findall(r"\w+", a.split("=")[0])[-1] for a in added]
    if len(args) > len(names) or len(args) < len([p for p in template_params(function) if p.default is None]):
        raise RewriteRefused(f"'{function.name}' takes {len(names)} template argument(s), not {len(args)}")
    bound = dict(zip(names, args))
    types = re.sub(r"[A-Za-z_]\w*", lambda m: bound.get(m.group(0), m.group(0)), _types_only(params))
    newline = model.source.newline
    text = f"{newline}template {qualifier}void {function.name}<{', '.join(args)}>{types};"
    return Edit(function.span.end, function.span.end, text, origin)


def _types_only(params: str) -> str:
    """`(const float* __restrict__ a, int n)` -> `(const float* __restrict__, int)`: an
    instantiation names types; dropping the names keeps it valid whatever they are."""
    inner = params.strip()[1:-1]
    parts = []
    for part in split_args(inner):
        words = part.split("=")[0].rstrip()
        head, _, last = words.rpartition(" ")
        name_only = last.lstrip("*&")
        if head and name_only.isidentifier() and "[" not in last:
            parts.append((head + " " + last[: len(last) - len(name_only)]).rstrip())
        else:
            parts.append(words)
    return f"({', '.join(parts)})"


def replace_loop(model: SourceModel, loop: Loop, text: str, origin: str, with_pragma: bool = False) -> Edit:
    """Replace the loop statement (and, with `with_pragma`, the `#pragma unroll` line before
    it) by `text`; the loop's first line keeps its indentation."""
    if with_pragma and loop.pragma_span is not None:
        start = model.source.line_start(loop.pragma_span.start)
        return Edit(start, loop.span.end, model.source.indent_at(loop.span.start) + text, origin)
    return Edit(loop.span.start, loop.span.end, text, origin)


def set_unroll(model: SourceModel, loop: Loop, factor: str | None, origin: str) -> Edit:
    """Give the loop `#pragma unroll FACTOR` ("" for a bare `#pragma unroll`, None to remove
    the pragma): the pragma line is replaced or removed, or a line inserted before the loop."""
    source = model.source
    newline = source.newline
    if loop.pragma_span is not None:
        if factor is None:
            return Edit(loop.pragma_span.start, loop.pragma_span.end, "", origin)
        indent = source.indent_at(loop.pragma_span.start)
        line = f"{indent}#pragma unroll{' ' + factor if factor else ''}{newline}"
        return Edit(loop.pragma_span.start, loop.pragma_span.end, line, origin)
    if factor is None:
        raise RewriteRefused("the loop has no #pragma unroll to remove")
    at = source.line_start(loop.span.start)
    if source.data[at : loop.span.start].strip():
        raise RewriteRefused(
            f"the loop at line {source.line_col(loop.span.start)[0]} does not start its line; a "
            "pragma cannot be placed before it alone"
        )
    indent = source.indent_at(loop.span.start)
    return Edit(at, at, f"{indent}#pragma unroll{' ' + factor if factor else ''}{newline}", origin)


_HEADER_RE = re.compile(rb"for\s*\((?P<init>[^;]*);(?P<cond>[^;]*);(?P<inc>[^)]*)\)")


def stride_loop(model: SourceModel, loop: Loop, worker: str, workers: str, origin: str) -> list[Edit]:
    """Share `for (v = start; v < bound; v += step)` out over `workers` workers: worker
    `worker` (an expression in 0..workers-1) starts at `start + worker * step` and strides
    by `workers * step`, so iteration j runs on worker j % workers and the loop's bound
    still ends every worker's share. Only the start and the increment change."""
    data = model.source.data
    header = _HEADER_RE.match(data, loop.header.start)
    if header is None or "=" not in header.group("init").decode():
        raise RewriteRefused(f"the header of the loop over '{loop.var}' is not `for (v = start; v < bound; step)`")
    step = loop.step.value if isinstance(loop.step, Affine) else None
    share = worker if step == 1 else f"{worker} * {step}"
    stride = workers if step == 1 else f"{workers} * {step}"
    init_end = header.end("init")
    while data[init_end - 1 : init_end].isspace():
        init_end -= 1
    inc_start, inc_end = header.start("inc"), header.end("inc")
    while data[inc_start : inc_start + 1].isspace():
        inc_start += 1
    while data[inc_end - 1 : inc_end].isspace():
        inc_end -= 1
    equals = data.index(b"=", header.start("init")) + 1
    start = data[equals:init_end].strip()
    first = (
        Edit(init_end - len(start), init_end, share, f"{origin}: worker's first iteration")
        if start == b"0"
        else Edit(init_end, init_end, f" + {share}", f"{origin}: worker's first iteration")
    )
    return [first, Edit(inc_start, inc_end, f"{loop.var} += {stride}", f"{origin}: stride over the workers")]


@dataclass(frozen=True)
class LoopHeader:
    """`for (T v = START; v < BOUND; v += STEP)` as written: what a pass that changes how a
    loop's iterations are dealt out edits (byte spans) and repeats (texts)."""

    ctype: str
    """The type the header declares the variable with (`int`, `int64_t`)."""
    start: Span
    bound: str
    """The right side of `v < BOUND` ("" where the condition is not that)."""
    step: Span | None
    """The right side of `v += STEP` (None where the increment is not that)."""
    end: int
    """Just past the `)` that closes the header (where a body without braces may start)."""

    def text(self, model: SourceModel, span: Span) -> str:
        return model.source.data[span.start : span.end].decode("utf-8")


def loop_header(model: SourceModel, loop: Loop) -> LoopHeader | None:
    """The header of a counted `for` loop that declares its variable (`T v = START`), or None."""
    data = model.source.data
    header = _HEADER_RE.match(data, loop.header.start)
    if header is None or not loop.var:
        return None
    init = header.group("init").decode("utf-8", "replace")
    declared = re.fullmatch(rf"\s*(?P<t>[A-Za-z_][\w:<> ]*?[\s*&]*)\s*\b{re.escape(loop.var)}\s*=(?P<v>.+)", init, re.S)
    if declared is None:
        return None
    ctype = declared.group("t").strip()
    start = _stripped(data, header.start("init") + len(init[: declared.start("v")].encode()), header.end("init"))
    cond = header.group("cond").decode("utf-8", "replace")
    less = re.fullmatch(rf"\s*{re.escape(loop.var)}\s*<(?!=)(?P<b>.+)", cond, re.S)
    inc = header.group("inc").decode("utf-8", "replace")
    plus = re.fullmatch(rf"\s*{re.escape(loop.var)}\s*\+=(?P<s>.+)", inc, re.S)
    step = (
        _stripped(data, header.start("inc") + len(inc[: plus.start("s")].encode()), header.end("inc")) if plus else None
    )
    return LoopHeader(ctype, start, less.group("b").strip() if less else "", step, header.end())


def _stripped(data: bytes, start: int, end: int) -> Span:
    while start < end and data[start : start + 1].isspace():
        start += 1
    while end > start and data[end - 1 : end].isspace():
        end -= 1
    return Span(start, end)


def scale_loop(model: SourceModel, loop: Loop, factor: str, start: bool, origin: str) -> list[Edit]:
    """Each turn of `for (v = START; v < B; v += STEP)` takes `factor` iterations: the step
    becomes `(STEP) * factor`, and with `start` the start `(START) * factor` too (a turn's
    iterations adjacent, for a loop that deals out elements one per thread and turn)."""
    header = loop_header(model, loop)
    if header is None or header.step is None:
        raise RewriteRefused(f"the header of the loop over '{loop.var}' is not `for (v = START; ...; v += STEP)`")
    out = [Edit(header.step.start, header.step.end, f"({header.text(model, header.step)}) * {factor}", origin)]
    if start:
        out.append(
            Edit(header.start.start, header.start.end, f"({header.text(model, header.start)}) * {factor}", origin)
        )
    return out


def in_block(model: SourceModel, loop: Loop) -> bool:
    """The loop statement's parent is a compound statement (`{ ... for (...) ... }`), not
    another statement (`if (c) for (...)` without braces): only then can a rewrite add
    statements before or after it without changing what the other statement holds."""
    node = model.tree.root_node.descendant_for_byte_range(loop.span.start, loop.span.end)
    while node is not None and not (node.start_byte == loop.span.start and node.type.endswith("_statement")):
        node = node.parent
    return node is not None and node.parent is not None and node.parent.type == "compound_statement"
