"""Where a kernel's block size is written at its launches, and whether it can be lifted.

Each block dimension larger than 1 is followed from every launch of the kernel in the
file (kxform.engine.launch_site.written): a literal at the launch (`<<<g, 256>>>`), in a
`dim3` (`dim3 block(16, 16)`, `dim3(32, 8)`), in a constant local the launch reads
(`const int block_size = 128;`), or a macro from an included header. It becomes a
parameter named after the kernel (`GELU_FORWARD_BLOCK_X`) when every launch writes it
the same way and nothing else reads what is rewritten. A parameter of the launching
function (`block_size`, its callers decide it at run time) is followed to the literal its
one caller in the file passes, else it becomes a parameter that overrides it where set
(`(NAME > 0 ? NAME : block_size)`; 0, the default, keeps the caller's value). Refused,
with the reason:

* an expression (`BlockExpression`), launches that disagree (`LaunchesDisagree`), no
  launch in the file;
* a file-scope constant of this file (`TileParameter`): the tile pass lifts those, with
  the kernel's uses of them, so each value has one owner;
* a launch variable other code also reads (`HostUse`), or that launches another kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.engine.launch_site import (
    Written,
    dim_spans,
    grid_spans,
    other_uses,
    override_of,
    parameter_name,
    shared_spans,
    through_caller,
    written,
)
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.frontend.queries import constant_defs, int_value
from kxform.passes.launch.bounds import LaunchBound, find_bounds

AXES = "XYZ"


def param_name(kernel: str, axis: int) -> str:
    """`gelu_forward`, 0 -> `GELU_FORWARD_BLOCK_X`; `transposeNaive` -> `TRANSPOSE_NAIVE_BLOCK_X`."""
    return parameter_name(kernel, f"BLOCK_{AXES[axis]}")


@dataclass(frozen=True)
class BlockDim:
    """One lifted block dimension: its parameter, original value and where each launch writes it."""

    name: str
    axis: int
    value: int
    places: tuple[Written, ...]
    """Per launch (in `Geometry.launches` order)."""
    lifted: bool
    """Already a parameter (the launches read the guarded macro `name`)."""
    line: int
    caller: str | None = None
    """The launching function's parameter the block size is, where its callers decide it at
    run time (`block_size`): `name` overrides it where set above 0, and its default, 0,
    leaves the caller's value (`value` is then 0)."""


@dataclass(frozen=True)
class Refusal:
    key: str
    message: str
    offset: int


@dataclass(frozen=True)
class Geometry:
    """What the launch pass learned about one kernel's launches."""

    kernel: Function
    launches: tuple[LaunchConfig, ...]
    dims: tuple[BlockDim, ...]
    refusals: tuple[Refusal, ...]
    bounds: tuple[LaunchBound, ...] = ()
    """The kernel's `__launch_bounds__`, lifted beside the block size."""

    @property
    def names(self) -> tuple[str, ...]:
        """The block parameters (what the launches read)."""
        return tuple(d.name for d in self.dims)

    def defaults(self) -> dict[str, int]:
        return {d.name: d.value for d in self.dims}

    def all_defaults(self) -> dict[str, int]:
        """Block and launch-bounds parameters at their original values."""
        return {**self.defaults(), **{b.name: b.value for b in self.bounds}}

    @property
    def lifted(self) -> bool:
        return all(d.lifted for d in self.dims) and all(b.lifted for b in self.bounds)


def find_geometry(model: SourceModel, kernel: Function, values: dict[str, int | None]) -> Geometry:
    """`values`: integer values of the names the launches read (macros from headers included)."""
    launches = launch_configs(model, kernel.name)
    if not launches:
        return Geometry(
            kernel,
            (),
            (),
            (
                Refusal(
                    "NoLaunchSite",
                    f"'{kernel.name}' is not launched in this file, so its block size is set elsewhere",
                    kernel.span.start,
                ),
            ),
        )
    dims, refusals = [], []
    for axis in range(3):
        places = [written(model, lc, 1, axis) for lc in launches]
        if all(p is None for p in places):
            continue
        dim, refusal = _dimension(model, kernel, launches, axis, places, values)
        if refusal is not None:
            refusals.append(refusal)
        elif dim is not None:
            dims.append(dim)
    return Geometry(kernel, launches, tuple(dims), tuple(refusals), find_bounds(model, kernel) if dims else ())


def constant_names(model: SourceModel, kernel: Function) -> tuple[str, ...]:
    """The macros and constants the launches of `kernel` write block dimensions with (after
    following a launching function's parameter to its caller): their values come from the
    compiler (kxform.frontend.constants)."""
    names = set()
    for config in launch_configs(model, kernel.name):
        for axis in range(3):
            place = written(model, config, 1, axis)
            if place is not None:
                place = _caller_value(model, config, place)
                if place.kind == "constant":
                    names.add(place.text)
    return tuple(sorted(names))


def _value(place: Written, values: dict[str, int | None]) -> int | None:
    return place.value if place.kind == "literal" else values.get(place.text) if place.kind == "constant" else None


def _dimension(
    model: SourceModel,
    kernel: Function,
    launches: tuple[LaunchConfig, ...],
    axis: int,
    places: list[Written | None],
    values: dict[str, int | None],
) -> tuple[BlockDim | None, Refusal | None]:
    name = param_name(kernel.name, axis)
    line = model.source.line_col
    where = launches[0].site.span.start
    if any(p is None for p in places):
        return None, Refusal(
            "LaunchesDisagree", f"the launches of '{kernel.name}' give the block different numbers of dimensions", where
        )
    present = [_caller_value(model, lc, p) for lc, p in zip(launches, places) if p is not None]
    if any(p.kind == "parameter" or override_of(p, name) for p in present):
        return _run_time(model, kernel, launches, axis, present, name)
    for place in present:
        refusal = _refuse_place(model, kernel, place, name, values)
        if refusal is not None:
            return None, refusal
    found = {_value(p, values) for p in present}
    if len(found) != 1 or None in found:
        shown = ", ".join(f"{p.text} (line {line(p.span.start)[0]})" for p in present)
        return None, Refusal(
            "LaunchesDisagree",
            f"the launches of '{kernel.name}' write block.{'xyz'[axis]} as "
            f"{shown}: one parameter cannot follow them all",
            where,
        )
    value = found.pop()
    assert value is not None
    if value == 1:
        return None, None  # a dimension of 1 is the block's shape, not a size to tune
    leak = _holder_leak(model, kernel, launches, present)
    if leak is not None:
        return None, leak
    lifted = all(p.kind == "constant" and p.text == name for p in present)
    return BlockDim(name, axis, value, tuple(present), lifted, line(present[0].span.start)[0]), None


def _run_time(
    model: SourceModel,
    kernel: Function,
    launches: tuple[LaunchConfig, ...],
    axis: int,
    places: list[Written],
    name: str,
) -> tuple[BlockDim | None, Refusal | None]:
    """A block size the launching function's callers pass: a parameter `name` that
    overrides it where set (0, its default, keeps the caller's value). Every launch must
    take it from a parameter, and nothing else in the launcher may read that parameter
    (the override would not reach it: a shared-memory size, an allocation)."""
    line = model.source.line_col
    callers = [override_of(p, name) or (p.text if p.kind == "parameter" else None) for p in places]
    if None in callers:
        shown = ", ".join(f"{p.text} (line {line(p.span.start)[0]})" for p in places)
        return None, Refusal(
            "LaunchesDisagree",
            f"the launches of '{kernel.name}' write block.{'xyz'[axis]} as {shown}: some from a caller, some not",
            launches[0].site.span.start,
        )
    for config, place, caller in zip(launches, places, callers):
        host = next((f for f in model.functions if f.name == config.site.function), None)
        block, _ = dim_spans(model, config, 1)  # `dim3 block(side, side)`: each axis gets its own parameter
        grids = [span for axis in range(3) for span in grid_spans(model, config, axis)]
        shared = shared_spans(model, config) if len(block) == 1 else ()  # a 1-D block's shared size follows it
        allowed = [place.span, *block, *grids, *shared]
        use = other_uses(model, host, caller, allowed) if host is not None and caller is not None else None
        if use is not None:
            return None, Refusal(
                "HostUse",
                f"'{caller}', the block size the callers of '{config.site.function}' pass to '{kernel.name}', is also "
                f"read by host code (line {use}): a block size set in its place would not reach that code",
                place.span.start,
            )
    lifted = all(override_of(p, name) for p in places)
    macro = model.macro(name) if lifted else None
    value = (int_value(macro.body) if macro is not None else None) or 0  # lifted: the value it is set to
    return BlockDim(name, axis, value, tuple(places), lifted, line(places[0].span.start)[0], callers[0]), None


def _caller_value(model: SourceModel, config: LaunchConfig, place: Written) -> Written:
    """A launching function's parameter followed to the literal its one caller passes."""
    if place.kind != "parameter":
        return place
    found, _ = through_caller(model, config, place)
    return found if found is not None else place


def _refuse_place(
    model: SourceModel, kernel: Function, place: Written, name: str, values: dict[str, int | None]
) -> Refusal | None:
    line = model.source.line_col(place.span.start)[0]
    if place.kind == "parameter":
        return Refusal(
            "RunTimeBlockSize",
            f"the block size of '{kernel.name}' is '{place.text}', a parameter of the "
            f"launching function (line {line}): its callers set it at run time, and it is not one literal "
            "passed at one call site in this file",
            place.span.start,
        )
    if place.kind == "expression":
        return Refusal(
            "BlockExpression",
            f"the block size of '{kernel.name}' is '{place.text}' (line {line}), an "
            "expression kxform does not follow to one literal",
            place.span.start,
        )
    if place.kind == "constant" and place.text != name:
        if any(d.name == place.text and d.function is None for d in constant_defs(model)):
            return Refusal(
                "TileParameter",
                f"the block size of '{kernel.name}' is {place.text} (line {line}), a "
                "file-scope constant of this file: those are the tile pass's to lift, with the kernel's own "
                "uses of them (kxform inspect --pass tile says whether it does)",
                place.span.start,
            )
        if place.text in kernel.template_names:
            return Refusal(
                "TemplateParameter",
                f"the block size of '{kernel.name}' is its template parameter "
                f"{place.text} (line {line}): tune it where the template is instantiated",
                place.span.start,
            )
        if values.get(place.text) is None:
            return Refusal(
                "BlockExpression",
                f"the block size of '{kernel.name}' is '{place.text}' (line {line}), "
                "whose value kxform cannot evaluate",
                place.span.start,
            )
    return None


def _dependents(config: LaunchConfig, holders: tuple[str, ...]) -> list[str]:
    """The holders and the launch's locals computed from them (`blocks` from `threads`):
    everything whose value changes with the block size."""
    out = list(holders)
    changed = True
    while changed:
        changed = False
        for var in config.variables:
            if var.name not in out and set(re.findall(r"[A-Za-z_]\w*", var.text)) & set(out):
                out.append(var.name)
                changed = True
    return out


def _holder_leak(
    model: SourceModel, kernel: Function, launches: tuple[LaunchConfig, ...], places: list[Written]
) -> Refusal | None:
    """A `dim3` or local on the way to the block size that other code reads: rewriting it
    would change that code too."""
    allowed = [lc.site.span for lc in launches]
    allowed += [v.span for lc in launches for v in (lc.grid_var, lc.block_var) if v is not None]
    allowed += [v.span for lc in launches for v in lc.variables]
    others = [s for s in model.launches if s.kernel != kernel.name]
    for lc, place in zip(launches, places):
        host = next((f for f in model.functions if f.name == lc.site.function and f.kind is FunctionKind.HOST), None)
        for holder in _dependents(lc, place.via):
            shared = next(
                (
                    s
                    for s in others
                    if s.function == lc.site.function and holder in re.findall(r"[A-Za-z_]\w*", " ".join(s.config))
                ),
                None,
            )
            if shared is not None:
                return Refusal(
                    "SharedWithOtherKernels",
                    f"'{holder}', which changes with the block size of "
                    f"'{kernel.name}', also launches '{shared.kernel}' (line "
                    f"{model.source.line_col(shared.span.start)[0]})",
                    place.span.start,
                )
            use = other_uses(model, host, holder, allowed) if host is not None else None
            if use is not None:
                return Refusal(
                    "HostUse",
                    f"'{holder}', which changes with the block size of '{kernel.name}', is also "
                    f"read by host code (line {use}): an allocation or a loop sized by it would change with "
                    "it",
                    place.span.start,
                )
    return None
