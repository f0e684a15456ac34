"""`__launch_bounds__(MAX_THREADS, MIN_BLOCKS)` as parameters of the launch pass.

A kernel that declares launch bounds with literals gets them lifted beside its block
size: `KERNEL_MAX_THREADS` and `KERNEL_MIN_BLOCKS`, defined (overridable) before the
kernel, the literals in the attribute replaced by the names. The bounds only steer the
compiler's register allocation, so a value verifies bit-exact wherever the block size
alone would; the block must stay within the maximum (`X * Y <= KERNEL_MAX_THREADS`, a
derived constraint), or the launch fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.engine import launch_site
from kxform.engine.edits import Edit
from kxform.engine.params import Config
from kxform.frontend.model import Function, SourceModel, Span
from kxform.frontend.queries import int_value

KINDS = ("MAX_THREADS", "MIN_BLOCKS")
RANGES = {"MAX_THREADS": (1, 1024), "MIN_BLOCKS": (1, 32)}


@dataclass(frozen=True)
class LaunchBound:
    name: str
    kind: str  # "MAX_THREADS" | "MIN_BLOCKS"
    value: int
    span: Span
    """The literal (or the name, once lifted) in the attribute."""
    lifted: bool
    line: int


def bound_name(kernel: str, kind: str) -> str:
    return launch_site.parameter_name(kernel, kind)


def find_bounds(model: SourceModel, kernel: Function) -> tuple[LaunchBound, ...]:
    """The kernel's launch bounds, when each is a literal or the name it was lifted into."""
    data = model.source.data
    match = re.compile(rb"__launch_bounds__\s*\(").search(data, kernel.span.start, kernel.body.start)
    if match is None:
        return ()
    close = data.find(b")", match.end(), kernel.body.start)
    if close < 0:
        return ()
    out = []
    for kind, span in zip(KINDS, launch_site.arg_spans(data, Span(match.end(), close))):
        text = data[span.start : span.end].decode("utf-8")
        name = bound_name(kernel.name, kind)
        value = int_value(text)
        lifted = text == name
        if lifted:
            macro = model.macro(name)
            value = int_value(macro.body.strip()) if macro is not None else None
        if value is None:
            return ()  # an expression or an unknown name: the bounds stay as written
        out.append(LaunchBound(name, kind, value, span, lifted, model.source.line_col(span.start)[0]))
    return tuple(out)


def bound_edits(
    model: SourceModel, kernel: Function, bounds: tuple[LaunchBound, ...], values: dict[str, int]
) -> list[Edit]:
    """Definitions before the kernel and the names in the attribute; at another value, the
    definition's literal."""
    edits: list[Edit] = []
    definitions = ""
    for bound in bounds:
        value = values.get(bound.name, bound.value)
        origin = f"launch: {kernel.name}: {bound.name}"
        if bound.lifted:
            if value != bound.value:
                macro = model.macro(bound.name)
                assert macro is not None and macro.body_span is not None
                body = model.source.data[macro.body_span.start : macro.body_span.end].decode("utf-8")
                found = re.search(r"\d+", body)
                assert found is not None
                start = macro.body_span.start + found.start()
                edits.append(
                    Edit(start, start + len(found.group(0)), str(value), f"{origin}: {bound.value} -> {value}")
                )
            continue
        definitions += launch_site.define_parameter(model, kernel.span.start, bound.name, value, origin)[0].text
        edits.append(Edit(bound.span.start, bound.span.end, bound.name, f"{origin}: attribute"))
    if definitions:
        at = model.source.insertion_point(kernel.span.start)
        edits.append(Edit(at, at, definitions, f"launch: {kernel.name}: launch bounds"))
    return edits


ADDED_MIN_BLOCKS = (0, 1, 2, 4)
"""Values of an added `KERNEL_MIN_BLOCKS` (0: no attribute)."""


def added_bound_name(kernel: str) -> str:
    return launch_site.parameter_name(kernel, "MIN_BLOCKS")


def added_min_blocks(kernel: str, config: Config) -> int:
    """The added `KERNEL_MIN_BLOCKS` a configuration asks for (0: none)."""
    return int(config.get(added_bound_name(kernel), 0) or 0)


def added_bound_edits(model: SourceModel, kernel: Function, block_names: tuple[str, ...], value: int) -> list[Edit]:
    """`__launch_bounds__(BLOCK_X * ..., MIN_BLOCKS)` after `__global__`, with the name's
    definition before the kernel; nothing at 0 (the code as it is)."""
    if value <= 0 or not block_names:
        return []
    data = model.source.data
    match = re.compile(rb"__global__").search(data, kernel.span.start, kernel.body.start)
    if match is None:
        return []
    name = added_bound_name(kernel.name)
    origin = f"launch: {kernel.name}: {name}"
    definition = launch_site.define_parameter(model, kernel.span.start, name, value, f"{origin}: definition")
    attribute = f" __launch_bounds__({' * '.join(block_names)}, {name})"
    return [*definition, Edit(match.end(), match.end(), attribute, f"{origin}: attribute")]
