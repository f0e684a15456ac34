"""The edits that lift a kernel's block size into a parameter and set it.

At the original values: an overridable definition before the first launching function,

    #ifndef GELU_FORWARD_BLOCK_X
    #define GELU_FORWARD_BLOCK_X 256
    #endif

the literal (or header macro) where each launch writes the block dimension replaced by
the name, and each grid that divided by the literal made to divide by the name
(`(n + 255) / 256` -> `(n + GELU_FORWARD_BLOCK_X - 1) / GELU_FORWARD_BLOCK_X`); a grid
that reads the local or the `dim3` field (`block_size`, `block.x`) follows by itself. At
another value the definition's literal changes too. A dimension already lifted changes
only its definition's literal. A block size the launcher's callers pass (`block_size`)
is read as `(NAME > 0 ? NAME : block_size)` where the launch and the grids read it, the
definition 0: the caller's value until a build or a tuner sets NAME.
"""

from __future__ import annotations

import re

from kxform.engine import launch_site
from kxform.engine.edits import Edit
from kxform.engine.params import Config
from kxform.frontend.launches import LaunchConfig
from kxform.frontend.model import SourceModel
from kxform.passes.launch.bounds import added_bound_edits, added_min_blocks, bound_edits
from kxform.passes.launch.geometry import BlockDim, Geometry


def lift_edits(model: SourceModel, geometry: Geometry, config: Config) -> list[Edit]:
    edits: dict[tuple[int, int], Edit] = {}
    definitions: list[Edit] = []
    start = _function_start(
        model,
        min([lc.site.span.start for lc in geometry.launches] + [p.span.start for d in geometry.dims for p in d.places]),
    )
    added = added_min_blocks(geometry.kernel.name, config)
    if added:  # the attribute reads the block's names: define them before the kernel
        start = min(start, geometry.kernel.span.start)
    for dim in geometry.dims:
        value = int(config.get(dim.name, dim.value))
        origin = f"launch: {geometry.kernel.name}: {dim.name}"
        if dim.lifted:
            if value != dim.value:
                edit = _definition_edit(model, dim, value, origin)
                edits[(edit.start, edit.end)] = edit
            continue
        definitions += launch_site.define_parameter(model, start, dim.name, value, f"{origin}: definition")
        for launch, place in zip(geometry.launches, dim.places):
            text = launch_site.override(dim.name, place.text) if dim.caller else dim.name
            edit = launch_site.set_written(place, text, f"{origin}: block")
            edits[(edit.start, edit.end)] = edit
            follows = launch_site.follow_block(
                model, launch, dim.axis, place, text, f"{origin}: grid", shared=_follows_shared(launch, dim)
            )
            for follow in follows:
                edits[(follow.start, follow.end)] = follow
    ints = {k: int(v) for k, v in config.items()}
    for edit in bound_edits(model, geometry.kernel, geometry.bounds, ints):
        edits[(edit.start, edit.end)] = edit
    for edit in added_bound_edits(model, geometry.kernel, geometry.names, added):
        if edit.start == edit.end and edit.text.startswith("#ifndef"):
            definitions.append(edit)  # beside the block's definitions, after them
        else:
            edits[(edit.start, edit.end)] = edit
    if definitions:  # one insertion, the dimensions in order (x, y, z)
        first = definitions[0]
        edits[(first.start, first.end)] = Edit(
            first.start, first.end, "".join(d.text for d in definitions), first.origin
        )
    return sorted(edits.values())


def _follows_shared(launch: LaunchConfig, dim: BlockDim) -> bool:
    """A caller's block size that also sizes the launch's dynamic shared memory (`block_size *
    sizeof(float)`) is overridden there too, where the block is one-dimensional."""
    return dim.caller is not None and len(launch.block) == 1


def _function_start(model: SourceModel, offset: int) -> int:
    inside = [f for f in model.functions if f.span.start <= offset < f.span.end]
    return min(inside, key=lambda f: f.span.end - f.span.start).span.start if inside else offset


def _definition_edit(model: SourceModel, dim: BlockDim, value: int, origin: str) -> Edit:
    macro = model.macro(dim.name)
    assert macro is not None and macro.body_span is not None, f"{dim.name}: lifted but not defined"
    body = model.source.data[macro.body_span.start : macro.body_span.end].decode("utf-8")
    match = re.search(r"\d+", body)
    assert match is not None, f"{dim.name}: no literal in {body!r}"
    start = macro.body_span.start + len(body[: match.start()].encode("utf-8"))
    return Edit(start, start + len(match.group(0)), str(value), f"{origin}: {dim.value} -> {value}")
