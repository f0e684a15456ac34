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
from kxform.engine.policy import LaunchBinding
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import SourceModel

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
) -> LaunchBinding | None:
    """The first launch of `kernel_name` in the rewritten file `new` over the kernel's
    parameters and the pass's `names` (kxform.engine.launch_site.launch_binding); None where
    the file has no such launch or it reads what the kernel does not receive."""
    launches = launch_configs(new, kernel_name)
    kernel = next((k for k in new.kernels if k.name == kernel_name), None)
    if not launches or kernel is None:
        return None
    return launch_site.launch_binding(new, kernel, launches[0], names, values, defaults, fixed=fixed, aliases=aliases)


def readable(binding: LaunchBinding | None) -> LaunchBinding:
    """`binding`, or the unreadable launch where there is none."""
    return binding if binding is not None else UNREADABLE


def rewritten_binding(new: SourceModel, kernel_name: str, name: str, width: int) -> LaunchBinding | None:
    """The rewritten launch over the kernel's parameters, the width or factor `name` and
    those of the kernel's earlier vectorize or coarsen rewrites (all at 1 give the
    original's launch). Overridable parameters of the file (`#ifndef NAME`: a lifted block
    size) are names too, at their values; in a pipeline the earlier rewrite's policy
    supplies their original values (VerifyPolicy.then). Other integer macros are read at
    their values."""
    text = new.source.data
    defined = {m.group(1).decode(): int(m.group(2)) for m in _DEFINE_RE.finditer(text)}
    mine = {n for n in defined if n in (f"{kernel_name.upper()}_VEC", f"{kernel_name.upper()}_COARSEN")} | {name}
    lifted = {n for n in defined if re.search(rb"#\s*ifndef\s+" + n.encode() + rb"\b", text)} - mine
    values = {**{n: defined[n] for n in mine | lifted if n in defined}, name: width}
    defaults = {**{n: 1 for n in mine}, **{n: defined[n] for n in lifted}}
    fixed = {n: v for n, v in defined.items() if n not in mine | lifted}
    return rewritten_launch(new, kernel_name, mine | lifted, values, defaults, fixed=fixed)
