"""Launch contracts: what a rewrite of a kernel requires of every launch of it in the run.

A pass checks its rewrite against the launches of its own file, and a differential run
gives every buffer an allocation of its own at sizes of the spec's choosing. Neither sees
a launch in another file of the run, two arguments of one launch that point into one
allocation, or a grid that no longer covers the work at sizes the spec lacks. So a pass
whose rewrite changes a kernel's geometry or assumes distinct buffers states a contract
(`Pass.launch_contract`), and the driver checks it against every launch of the kernel
the run shows (`check_contract`), before the rewrite goes further:

* `geometry`: the rewritten kernel needs the launch its own file was given (rows per
  block, a tile): a launch of it in another file of the run, which the rewrite does not
  change, refuses it (`LaunchElsewhere`);
* `max_threads`: the rewrite declares `__launch_bounds__` of this many threads: every
  launch elsewhere must be readable and within it (`LaunchBoundsExceeded`);
* `distinct`: pairs of pointer parameters the rewrite assumes do not overlap: at every
  launch their arguments are followed to their allocations
  (kxform.analysis.provenance); one allocation refuses (`ArgumentsAlias`), unknown
  provenance refuses unless the rewrite checks the overlap at run time
  (`AliasUnknown`); both parameters `__restrict__` is the programmer's promise;
* `axes`: items per block along a grid axis before and after: each launch of the file,
  rewritten, must still cover what it covered, proven for every size
  (kxform.analysis.grid_cover; `GridNotFollowed`), and `block`, when given, is the block
  each rewritten launch must have (`BlockNotFollowed`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kxform.analysis.grid_cover import prove_cover
from kxform.analysis.provenance import relation
from kxform.engine.run_files import RunFiles
from kxform.engine.status import Status
from kxform.errors import CheckFailed
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import FunctionKind, SourceModel
from kxform.frontend.queries import int_value


@dataclass(frozen=True)
class AxisItems:
    """Items one block covers along grid axis `axis` (0 x, 1 y, 2 z), before and after."""

    axis: int
    old: int
    new: int


@dataclass(frozen=True)
class LaunchContract:
    """What a rewrite of `kernel` requires of every launch of it (see the module docstring)."""

    kernel: str
    geometry: bool = False
    max_threads: int | None = None
    distinct: tuple[tuple[str, str], ...] = ()
    """Pointer parameters (by name) whose arguments must not overlap."""
    checked_at_run_time: bool = False
    """The rewrite tests the `distinct` pairs for overlap when it runs (and takes a path
    that needs no assumption when they do): unknown provenance is then enough."""
    why_distinct: str = ""
    """What the rewrite does that needs them apart (for the refusal)."""
    axes: tuple[AxisItems, ...] = ()
    block: tuple[int, ...] | None = None
    old_values: tuple[tuple[str, int], ...] = ()
    """Values of names the original launches read that the file does not define as
    integer macros (a constant from a header, the launcher's parameter at its one call)."""
    new_values: tuple[tuple[str, int], ...] = ()
    """The same for the rewritten launches (the pass's parameters are read from the file)."""


def check_contract(
    model: SourceModel, contract: LaunchContract, rewritten: SourceModel | None, run: RunFiles
) -> list[tuple[str, Status, str]]:
    """The contract's checks against every launch of the kernel the run shows (`rewritten`:
    the file as the rewrite of this kernel alone leaves it, whose launches the `axes` and
    `block` checks read; kxform.engine.rewritten.edited_file). Returns (check, status,
    detail) records; raises CheckFailed with the reason's key on the first violation."""
    records: list[tuple[str, Status, str]] = []
    own = launch_configs(model, contract.kernel)
    others = list(_launches_elsewhere(model, contract.kernel, run))
    if others and contract.geometry:
        other, config = others[0]
        raise CheckFailed(
            "launches",
            f"'{contract.kernel}' is also launched at {_where(other, config)}, in another file of the run, which "
            "this rewrite does not change: that launch would no longer match the rewritten kernel",
            key="LaunchElsewhere",
        )
    if contract.max_threads is not None:
        for other, config in others:
            threads = _threads(other, config)
            if threads is None or threads > contract.max_threads:
                got = "a block kxform cannot read" if threads is None else f"{threads} threads per block"
                raise CheckFailed(
                    "launches",
                    f"the rewrite declares __launch_bounds__ of {contract.max_threads} threads, but "
                    f"'{contract.kernel}' is launched at {_where(other, config)} with {got}",
                    key="LaunchBoundsExceeded",
                )
    if others and not contract.geometry:
        records.append(("launches", Status.PASSED, f"{len(others)} launch(es) in other files of the run checked"))
    if contract.distinct:
        records.append(_check_alias(model, contract, [(model, c) for c in own] + others, run))
    if contract.axes or contract.block is not None:
        if rewritten is None:
            raise ValueError("a contract with axes or a block is checked against the rewritten file")
        records.append(_check_geometry(model, contract, own, rewritten))
    return records


def _launches_elsewhere(model: SourceModel, kernel: str, run: RunFiles) -> Iterable[tuple[SourceModel, LaunchConfig]]:
    """Launches of `kernel` in the run's other files that do not define a kernel of that name."""
    own = os.path.realpath(model.source.path)
    for other in run.mentioning(kernel):
        if os.path.realpath(other.source.path) == own:
            continue
        if any(f.name == kernel and f.kind is FunctionKind.KERNEL for f in other.functions):
            continue
        for config in launch_configs(other, kernel):
            yield other, config
        for site in other.launches:  # a launch kxform cannot read the configuration of still counts
            if site.kernel == kernel and len(site.config) < 2:
                yield other, LaunchConfig(site, (), (), None, None, None)


def _where(model: SourceModel, config: LaunchConfig) -> str:
    return f"{model.source.path}:{model.source.line_col(config.site.span.start)[0]}"


def constants(model: SourceModel) -> dict[str, int]:
    """Object-like macros of the file whose value is an integer (through other such macros)."""
    bodies = {m.name: m.body.strip() for m in model.macros if not m.is_function_like}
    out: dict[str, int] = {}
    for name in bodies:
        text, seen = bodies[name], {name}
        while text in bodies and text not in seen:
            seen.add(text)
            text = bodies[text]
        value = int_value(text.strip("() "))
        if value is not None:
            out[name] = value
    return out


def block_dimension(model: SourceModel, kernel: str, axis: int) -> int | None:
    """The block's dimension `axis` at every launch of `kernel` in the file, where they all
    give one value kxform can read (what a pass that gives each thread several items along
    `axis` states as the old items per block), else None."""
    env = constants(model)
    found = {
        _evaluate(config.block[axis], env) if axis < len(config.block) else 1
        for config in launch_configs(model, kernel)
    }
    return found.pop() if len(found) == 1 and None not in found else None


def _threads(model: SourceModel, config: LaunchConfig) -> int | None:
    env = constants(model)
    total = 1
    for text in config.block or ("",):
        value = _evaluate(text, env)
        if value is None:
            return None
        total *= value
    return total


def _evaluate(text: str, env: Mapping[str, int]) -> int | None:
    from kxform.expr import parse_expr
    from kxform.frontend.c_expr import normalize

    try:
        return parse_expr(normalize(text)).evaluate_int(env)
    except Exception:  # not an expression of constants kxform reads
        return None


def _check_alias(
    model: SourceModel,
    contract: LaunchContract,
    launches: list[tuple[SourceModel, LaunchConfig]],
    run: RunFiles,
) -> tuple[str, Status, str]:
    kernel = next(f for f in model.functions if f.name == contract.kernel and f.kind is FunctionKind.KERNEL)
    index = {p.name: i for i, p in enumerate(kernel.params)}
    unknown: list[str] = []

    def calling(name: str) -> Iterable[SourceModel]:
        return run.mentioning(name, model)

    for where, config in launches:
        site = config.site
        for first, second in contract.distinct:
            i, j = index[first], index[second]
            if max(i, j) >= len(site.args):
                continue
            pair = relation(where, site.function, site.span.start, (site.args[i], site.args[j]), calling)
            at = _where(where, config)
            if pair.relation == "alias":
                raise CheckFailed(
                    "aliasing",
                    f"at {at} '{contract.kernel}' is launched with '{site.args[i]}' as '{first}' and "
                    f"'{site.args[j]}' as '{second}', which {pair.detail}; "
                    f"{contract.why_distinct or 'the rewrite assumes they do not overlap'}",
                    key="ArgumentsAlias",
                )
            if pair.relation == "unknown":
                if not contract.checked_at_run_time:
                    raise CheckFailed(
                        "aliasing",
                        f"at {at} kxform cannot tell whether '{first}' and '{second}' of '{contract.kernel}' "
                        f"overlap ({pair.detail}); {contract.why_distinct or 'the rewrite assumes they do not'}: "
                        "declare both __restrict__ if they never do",
                        key="AliasUnknown",
                    )
                unknown.append(f"{first}/{second} at {at}")
    if unknown:
        return (
            "aliasing",
            Status.PASSED,
            f"overlap checked at run time where provenance is unknown ({', '.join(unknown[:3])})",
        )
    return ("aliasing", Status.PASSED, f"arguments of {len(launches)} launch(es) point into distinct allocations")


def _check_geometry(
    model: SourceModel, contract: LaunchContract, old: tuple[LaunchConfig, ...], new_model: SourceModel
) -> tuple[str, Status, str]:
    new = launch_configs(new_model, contract.kernel)
    if len(new) != len(old):
        raise CheckFailed(
            "launches",
            f"the rewrite leaves {len(new)} launch(es) of '{contract.kernel}' where the file had {len(old)}",
            key="LaunchesChanged",
        )
    old_env = {**constants(model), **dict(contract.old_values)}
    new_env = {**constants(new_model), **dict(contract.new_values)}
    proven: list[str] = []
    for before, after in zip(old, new):
        where = _where(model, before)
        for axis in contract.axes:
            old_grid = before.grid[axis.axis] if axis.axis < len(before.grid) else "1"
            new_grid = after.grid[axis.axis] if axis.axis < len(after.grid) else "1"
            cover = prove_cover(old_grid, axis.old, new_grid, axis.new, old_env, new_env)
            if cover.verdict in ("refuted", "unknown"):
                raise CheckFailed(
                    "grid",
                    f"the launch at {where}: grid.{'xyz'[axis.axis]}: {cover.detail}",
                    key="GridNotFollowed",
                )
            proven.append(f"{where} grid.{'xyz'[axis.axis]}: {cover.verdict}")
        if contract.block is not None:
            got = [_evaluate(t, new_env) for t in after.block]
            if got + [1] * (3 - len(got)) != list(contract.block) + [1] * (3 - len(contract.block)):
                shown = ", ".join(after.block)
                raise CheckFailed(
                    "grid",
                    f"the launch at {where} has block ({shown}), the rewritten kernel needs "
                    f"({', '.join(map(str, contract.block))})",
                    key="BlockNotFollowed",
                )
    return ("grid", Status.PASSED, "; ".join(proven) or "the rewritten launches give the block the kernel needs")
