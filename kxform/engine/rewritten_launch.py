"""The launch of a rewritten kernel, read from the rewritten file, for the verifier.

A pass that changes a kernel's launch (its block, its grid, a width or factor the grid
divides by) hands the verifier the rewritten launch as expressions over the kernel's
parameters and the pass's own parameters (kxform.engine.launch_site.launch_binding):
at the original values they must give the spec's launch. The passes read it from the
rewritten file the driver hands `Pass.verify_policy`, never by applying their edits again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kxform.engine import launch_site
from kxform.engine.edits import apply_edits
from kxform.engine.policy import LaunchBinding
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText

_DEFINE_RE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?(\d+)\)?[ \t]*$", re.M)

UNREADABLE = LaunchBinding(grid=("unknown",), origin="no readable launch")
"""The binding of a launch the verifier cannot read: verification says it could not tell."""


def rewritten_launch(
    new: SourceModel,
    kernel_name: str,
    names: Iterable[str],
    values: Mapping[str, int],
    defaults: Mapping[str, int],
    fixed: Mapping[str, int] | None = None,
    aliases: Mapping[str, str] | None = None,
    inputs: Iterable[tuple[str, str]] | None = None,
) -> LaunchBinding | None:
    """The first launch of `kernel_name` in the rewritten file `new` over the kernel's
    parameters and the pass's `names` (kxform.engine.launch_site.launch_binding; `inputs`:
    the original launcher's run-time values, `launch_site.run_time_inputs`); None where the
    file has no such launch or it reads what the kernel does not receive."""
    launches = launch_configs(new, kernel_name)
    kernel = next((k for k in new.kernels if k.name == kernel_name), None)
    if not launches or kernel is None:
        return None
    return launch_site.launch_binding(
        new, kernel, launches[0], names, values, defaults, fixed=fixed, aliases=aliases, inputs=inputs
    )


def readable(binding: LaunchBinding | None) -> LaunchBinding:
    """`binding`, or the unreadable launch where there is none."""
    return binding if binding is not None else UNREADABLE


def rewritten_binding(new: SourceModel, kernel_name: str, name: str, width: int) -> LaunchBinding | None:
    """The rewritten launch over the kernel's parameters, the width or factor `name` and
    those of the kernel's earlier vectorize or coarsen rewrites (all at 1 give the
    original's launch): `overridable_binding`."""
    earlier = (f"{kernel_name.upper()}_VEC", f"{kernel_name.upper()}_COARSEN")
    return overridable_binding(new, kernel_name, {name: width}, earlier)


def overridable_binding(
    new: SourceModel, kernel_name: str, values: Mapping[str, int], earlier: Iterable[str] = ()
) -> LaunchBinding | None:
    """The rewritten launch over the kernel's parameters and the pass's overridable
    parameters `values` (name -> this version's value; 1 gives the original's launch), with
    those of `earlier` that the file defines (at 1 too). Overridable parameters of the file
    (`#ifndef NAME`: a lifted block size) that the launch reads are names too, at their
    values (another kernel's are not this launch's); in a pipeline the
    earlier rewrite's policy supplies their original values (VerifyPolicy.then). Other
    integer macros are read at their values."""
    text = new.source.data
    launches = launch_configs(new, kernel_name)
    read = {n for c in launches[:1] for t in (*c.grid, *c.block, c.shared or "") for n in re.findall(r"\w+", t)}
    defined = {m.group(1).decode(): int(m.group(2)) for m in _DEFINE_RE.finditer(text)}
    mine = {n for n in defined if n in set(earlier)} | set(values)
    lifted = {n for n in defined if n in read and re.search(rb"#\s*ifndef\s+" + n.encode() + rb"\b", text)} - mine
    current = {**{n: defined[n] for n in mine | lifted if n in defined}, **values}
    defaults = {**{n: 1 for n in mine}, **{n: defined[n] for n in lifted}}
    fixed = {n: v for n, v in defined.items() if n not in mine | lifted}
    return rewritten_launch(new, kernel_name, mine | lifted, current, defaults, fixed=fixed)


def divided_grid_readable(model: SourceModel, kernel_name: str, axis: int) -> bool:
    """Whether the verifier can read the kernel's launches back with grid dimension `axis`
    divided by a factor (kxform.engine.launch_site.divide_grid): a grid the launch writes
    as an expression over the kernel's arguments, not one the launcher caps or reads from
    elsewhere. A question about the launch site, asked before a pass decides to divide."""
    name = f"{kernel_name.upper()}_KX_GRID_PROBE"
    found = [launch_site.divide_grid(model, c, axis, name, "") for c in launch_configs(model, kernel_name)]
    edits = [e for e in found if e is not None]
    if not edits:
        return False
    new = parse_model(SourceText(model.source.path, apply_edits(model.source, edits).data))
    return rewritten_binding(new, kernel_name, name, 2) is not None
