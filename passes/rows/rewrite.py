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
* at every launch: the block size, where it is written, becomes `ROWS` (the grid over rows
  follows it, as it followed the block) and the block is `ROWS * LANES` threads; a block
  size the launcher's caller passes (`block_size`, a parameter of the launching function)
  becomes `ROWS_OF(block_size)`: the caller's threads per block, in whole warps, shared
  out `LANES` to a row (`ROWS` = 0, its default there; a value fixes it). A `dim3` block
  keeps its variable: the launch reads `block.x * LANES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.analysis.records import Loop, Reduction
from kxform.engine.edits import Edit
from kxform.engine.launch_site import (
    Written,
    follow_block,
    multiply_block,
    replace_config,
    set_written,
    spelled_in,
    written,
)
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
    rows_of: str
    """`K_ROWS_OF(threads)`: rows per block of a block its launcher's caller sizes."""

    @classmethod
    def of(cls, kernel: str) -> Names:
        base = re.sub(r"\W", "_", kernel).upper()
        return cls(f"{base}_LANES", f"{base}_ROWS", f"{base}_ROWS_OF")


@dataclass(frozen=True)
class Site:
    """One launch of the kernel and where its block size is written."""

    config: LaunchConfig
    block: Written

    @property
    def run_time(self) -> bool:
        """The block size is a parameter of the launching function: its caller decides."""
        return self.block.kind == "parameter"


def launch_sites(model: SourceModel, kernel: Function) -> tuple[Site, ...]:
    """Every launch of the kernel in the file, each with its one-dimensional block written
    as a literal or a constant (all the same), or each as a parameter of its launcher."""
    configs = launch_configs(model, kernel.name)
    if not configs:
        raise RewriteRefused(f"'{kernel.name}' is not launched in this file: its launch cannot follow the rows")
    sites = []
    for config in configs:
        line = model.source.line_col(config.site.span.start)[0]
        if len(config.block) != 1 or written(model, config, 1, 1) is not None:
            raise RewriteRefused(
                f"the block of '{kernel.name}' is not one-dimensional ({', '.join(config.block)}; line {line})"
            )
        place = written(model, config, 1, 0)
        if place is None or place.kind not in ("literal", "constant", "parameter") or place.caps:
            raise RewriteRefused(
                f"the block size of '{kernel.name}' is not a literal, a constant or a parameter of the launching "
                f"function where it is written (line {line})"
            )
        spelled = spelled_in(model, kernel, place)
        if spelled is not None:
            raise RewriteRefused(
                f"'{kernel.name}' spells its block size '{place.text}' at line {model.source.line_col(spelled)[0]} "
                "instead of reading blockDim.x: its rows per block would not follow the rewritten block"
            )
        sites.append(Site(config, place))
    if len({s.run_time for s in sites}) > 1 or len({s.block.text for s in sites if not s.run_time}) > 1:
        shown = ", ".join(f"{s.block.text} (line {model.source.line_col(s.block.span.start)[0]})" for s in sites)
        raise RewriteRefused(f"the launches of '{kernel.name}' write the block size differently: {shown}")
    return tuple(sites)


def block_value(model: SourceModel, place: Written) -> int | None:
    """The block size as written: a literal, or a macro of this file defined as one (the
    launch pass's lifted block size, `#define K_BLOCK_X 128`); None for a size the
    launcher's caller passes."""
    if place.kind == "literal":
        return place.value
    if place.kind != "constant":
        return None
    found = re.search(rb"#\s*define\s+" + re.escape(place.text.encode()) + rb"\s+(\d+)\s*$", model.source.data, re.M)
    return int(found.group(1)) if found else None


def edits(model: SourceModel, kernel: Function, plan: Plan, lanes: int, rows: int, origin: str) -> list[Edit]:
    names = Names.of(kernel.name)
    sites = launch_sites(model, kernel)
    block = lanes > WARP
    out = _parameters(model, kernel, names, lanes, rows, sites[0].run_time, origin)
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
    seen: set[tuple[int, int]] = set()
    for site in sites:
        for edit in _launch(model, site, names, origin):
            if (edit.start, edit.end) not in seen:  # launches sharing a local or a dim3 edit it once
                seen.add((edit.start, edit.end))
                out.append(edit)
    return out


def _parameters(
    model: SourceModel, kernel: Function, names: Names, lanes: int, rows: int, run_time: bool, origin: str
) -> list[Edit]:
    source = model.source
    at = source.insertion_point(kernel.span.start)
    nl = source.newline
    text = "".join(
        f"#ifndef {n}{nl}#define {n} {v}{nl}#endif{nl}" for n, v in ((names.lanes, lanes), (names.rows, rows))
    )
    if run_time:
        lanes_, rows_ = names.lanes, names.rows
        text += (
            f"/* rows per block of a block of `threads` threads, the size the launcher's caller passes: {rows_} "
            f"when set, else the{nl}   caller's threads, in whole warps (at least one), {lanes_} to a row; "
            f"one row where a block shares it */{nl}"
            f"#define {names.rows_of}(threads) (({rows_}) > 0 ? ({rows_}) : ({lanes_}) == 1 ? (threads) : "
            f"({lanes_}) > 32 ? 1 : ((threads) >= 32 ? (threads) / 32 * 32 : 32) / ({lanes_})){nl}"
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
    """Where the launch writes its block size, rows per block (`K_ROWS`, or `K_ROWS_OF(block_size)`
    for the caller's size); the grid follows it as it followed the block; the launch's
    block becomes rows per block times `K_LANES` (kxform.engine.launch_site)."""
    config_span = site.config.site.config_spans[1]
    old = site.block
    rows = f"{names.rows_of}({old.text})" if site.run_time else names.rows
    out = follow_block(model, site.config, 0, old, rows, f"{origin}: grid over rows")
    if config_span.contains(old.span):
        out.append(replace_config(site.config.site, 1, f"{rows} * {names.lanes}", f"{origin}: block"))
        return out
    out.append(set_written(old, rows, f"{origin}: rows per block"))
    out.append(multiply_block(model, site.config, names.lanes, f"{origin}: block"))
    return out
