"""A configuration read from a recording, typed into a kernel's composed tuning space.

A recorded space (Kernel Tuner's cache format) names parameters bare (`TILE`) and holds
values as its writer stored them: data, never code. Before a recorded best can be
written, each name must be exactly one parameter of the passes' composed space (`TILE`
-> `tile.TILE`), each value must have that parameter's type and be one of its values
(`Param.typed`: the string "32" is not the integer 32, and no text is pasted into the
source; an integer is the value of an enum whose domain spells it, `factor=2` -> "2", as
Kernel Tuner records such options), the passes it names apply (a pass's own switch, as `tune --export` records
it, `tile: false`, says whether it does),  and the composed constraints hold. What comes out is
a pass pipeline spec that `kxform apply` then runs with every check and a differential
run (kxform.orchestrate.tune_write).
"""

from __future__ import annotations

from collections.abc import Mapping

from kxform.engine.params import ParamValue
from kxform.errors import CheckFailed, UsageError, printable
from kxform.search.kernel_space import KernelSpace


def qualified_name(space: KernelSpace, name: str) -> str:
    """The composed space's parameter a recorded name stands for; CheckFailed when it is
    none or more than one."""
    names = space.space.names
    if name in names and "." in name:
        return name
    matches = [n for n in names if n.endswith(f".{name}")]
    if len(matches) != 1:
        why = "is not a parameter" if not matches else f"is ambiguous ({', '.join(matches)})"
        shown = ", ".join(n for n in names if "." in n)
        raise CheckFailed(
            "space", printable(f"recorded name {name!r:.60} {why} of '{space.kernel}' (parameters: {shown})")
        )
    return matches[0]


def recorded_config(space: KernelSpace, recorded: Mapping[str, object], hw: object) -> dict[str, ParamValue]:
    """The composed configuration a recording's configuration stands for: typed, its
    passes applied, every constraint holding; CheckFailed naming what is wrong."""
    config = space.defaults()
    switches = {str(name): value for name, value in recorded.items() if str(name) in space.passes}
    for name, value in recorded.items():
        if str(name) in switches:
            continue
        qualified = qualified_name(space, str(name))
        config[qualified] = _typed(space, qualified, value)
        config[qualified.split(".", 1)[0]] = True  # the pass whose parameter it is applies
    for name, value in switches.items():  # a recording of a composed space (`tune --export`) says which apply
        config[name] = _typed(space, name, value)
    broken = space.space.violations(config, hw)
    if broken:
        raise CheckFailed("constraints", printable(f"{space.space.label(config)} breaks {broken[0].describe()}"))
    return config


def _typed(space: KernelSpace, name: str, value: object) -> ParamValue:
    param = space.space.param(name)
    if param.kind == "enum" and type(value) is int and str(value) in param.values:
        # Kernel Tuner records a numeric option as the number (vectorize's width=4, coarsen's
        # factor=2): it stands for the domain's own value of that spelling, nothing is parsed
        value = str(value)
    try:
        return param.typed(value)
    except UsageError as exc:
        raise CheckFailed("space", printable(exc.cause)) from None


def recorded_pipeline(space: KernelSpace, recorded: Mapping[str, object], hw_name: str) -> str:
    """The `--pass` spec of a recorded configuration ("" when it is the code as it is)."""
    from kxform.hw import load_profile

    return space.spec(recorded_config(space, recorded, load_profile(hw_name)))
