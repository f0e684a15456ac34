"""The edits of the `rows` pass, on the engine's primitives.

* two overridable parameters before the kernel (`KERNEL_LANES`: G, the row's lanes;
  `KERNEL_ROWS`: rows per block), written with the launch-site primitive's `#ifndef`
  definition;
* in the kernel: each read of `threadIdx.x` becomes `(threadIdx.x / LANES)` and of
  `blockDim.x` `(blockDim.x / LANES)`, so the code that finds a thread's row finds it for
  all G lanes of the row; the lane is declared at entry (`rows_lane`);
* each distributed loop starts at its first element plus the lane's share and strides by
  G steps (element j is handled by lane j % G: consecutive lanes touch consecutive
  elements, so the loop's accesses along the row coalesce); its bound stays the guard, so
  lanes past a short row's end do nothing;
* after each loop, its reductions are combined over the lanes and broadcast
  (kxform.passes.rows.reduce), helpers placed once per translation unit; a sum whose
  initial value is not the identity keeps it in lane 0 only;
* at the launch: the block size, where it is written, becomes `ROWS` (the grid over rows
  follows it, as it followed the block) and the block is `ROWS * LANES` threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis.records import Loop, Reduction
from kxform.engine.edits import Edit
from kxform.engine.launch_site import Written, follow_block, replace_config, set_written, written
from kxform.engine.rewrite import RewriteRefused, insert_at_entry, place_helpers, stride_loop
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.rows.plan import LANE, Plan
from kxform.passes.rows.reduce import WARP, Combine, block_helper, call, warp_helper

_IDENTITY_TEXT = {"0", "0.0", "0.f", "0.0f", "0.0F", "0u", "0.", "0.0L"}


@dataclass(frozen=True)
class Names:
    lanes: str
    rows: str

    @classmethod
    def of(cls, kernel: str) -> Names:
        base = re.sub(r"\W", "_", kernel).upper()
        return cls(f"{base}_LANES", f"{base}_ROWS")


@dataclass(frozen=True)
class Site:
    """The kernel's one launch and where its block size is written."""

    config: LaunchConfig
    block: Written


def launch_site(model: SourceModel, kernel: Function) -> Site:
    configs = launch_configs(model, kernel.name)
    if len(configs) != 1:
        raise RewriteRefused(f"'{kernel.name}' has {len(configs)} launches in this file; the pass changes exactly one")
    config = configs[0]
    line = model.source.line_col(config.site.span.start)[0]
    if len(config.block) != 1 or written(model, config, 1, 1) is not None:
        raise RewriteRefused(
            f"the block of '{kernel.name}' is not one-dimensional ({', '.join(config.block)}; line {line})"
        )
    place = written(model, config, 1, 0)
    if place is None or place.kind not in ("literal", "constant") or place.caps:
        raise RewriteRefused(
            f"the block size of '{kernel.name}' is not a literal or a constant where it is written (line {line})"
        )
    return Site(config, place)


def block_value(model: SourceModel, place: Written) -> int | None:
    """The block size as written: a literal, or a macro of this file defined as one (the
    launch pass's lifted block size, `#define K_BLOCK_X 128`)."""
    if place.kind == "literal":
        return place.value
    found = re.search(rb"#\s*define\s+" + re.escape(place.text.encode()) + rb"\s+(\d+)\s*$", model.source.data, re.M)
    return int(found.group(1)) if found else None


def edits(model: SourceModel, kernel: Function, plan: Plan, lanes: int, rows: int, origin: str) -> list[Edit]:
    names = Names.of(kernel.name)
    site = launch_site(model, kernel)
    block = lanes > WARP
    out = _parameters(model, kernel, names, lanes, rows, origin)
    out += _thread_index(model, kernel, names, origin)
    combines = sorted({Combine(r.op, r.ctype) for r in plan.reductions}, key=lambda c: c.suffix)
    entry = [f"const int {LANE} = threadIdx.x % {names.lanes};"]
    entry += (
        [
            f"__shared__ {c.ctype_c} {c.partial_name}[32];"
            for c in sorted({c.partial_name: c for c in combines}.values(), key=lambda c: c.suffix)
        ]
        if block
        else []
    )
    out.append(insert_at_entry(model, kernel, entry, origin))
    for loop in plan.loops:
        out += _distribute(model, loop, names, origin)
        out += _combine(model, loop, plan.reductions_of(loop), names, block, origin)
    helper = block_helper if block else warp_helper
    out += place_helpers(model, [(helper(c), kernel.span.start) for c in combines], origin)
    out += _launch(model, site, names, origin)
    return out


def _parameters(model: SourceModel, kernel: Function, names: Names, lanes: int, rows: int, origin: str) -> list[Edit]:
    source = model.source
    at = source.insertion_point(kernel.span.start)
    nl = source.newline
    text = "".join(
        f"#ifndef {n}{nl}#define {n} {v}{nl}#endif{nl}" for n, v in ((names.lanes, lanes), (names.rows, rows))
    )
    return [Edit(at, at, text, f"{origin}: parameters")]


def _thread_index(model: SourceModel, kernel: Function, names: Names, origin: str) -> list[Edit]:
    data = model.source.data
    out = []
    for match in re.finditer(rb"\b(threadIdx|blockDim)\s*\.\s*x\b", data[kernel.body.start : kernel.body.end]):
        start = kernel.body.start + match.start()
        text = data[start : kernel.body.start + match.end()].decode()
        out.append(Edit(start, kernel.body.start + match.end(), f"({text} / {names.lanes})", f"{origin}: row index"))
    return out


def _distribute(model: SourceModel, loop: Loop, names: Names, origin: str) -> list[Edit]:
    return stride_loop(model, loop, LANE, names.lanes, f"{origin}: lanes")


def _combine(
    model: SourceModel, loop: Loop, reductions: tuple[Reduction, ...], names: Names, block: bool, origin: str
) -> list[Edit]:
    source = model.source
    nl, indent = source.newline, source.indent_at(loop.span.start)
    out = []
    for r in reductions:
        if r.op == "+" and r.init.strip() not in _IDENTITY_TEXT:  # the initial value counts once, in lane 0
            at = source.line_start(loop.span.start)
            out.append(
                Edit(
                    at,
                    at,
                    f"{indent}if ({LANE} != 0){nl}{indent}    {r.var} = {r.identity};{nl}",
                    f"{origin}: {r.var} starts at the identity in lanes other than 0",
                )
            )
    text = "".join(f"{nl}{indent}{call(Combine(r.op, r.ctype), r.var, names.lanes, block)}" for r in reductions)
    if text:
        out.append(Edit(loop.span.end, loop.span.end, text, f"{origin}: combine over the row's lanes"))
    return out


def _launch(model: SourceModel, site: Site, names: Names, origin: str) -> list[Edit]:
    data = model.source.data
    config_span = site.config.site.config_spans[1]
    old = site.block
    out = follow_block(model, site.config, 0, old, names.rows, f"{origin}: grid over rows")
    if config_span.contains(old.span):
        out.append(replace_config(site.config.site, 1, f"{names.rows} * {names.lanes}", f"{origin}: block"))
        return out
    out.append(set_written(old, names.rows, f"{origin}: rows per block"))
    end = config_span.end
    while data[end - 1 : end].isspace():
        end -= 1
    out.append(Edit(end, end, f" * {names.lanes}", f"{origin}: block"))
    return out
