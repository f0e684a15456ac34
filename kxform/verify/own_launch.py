"""Each version of a kernel launched as its own launcher says: what `kxform verify ORIGINAL
REWRITTEN` uses when no pass states the rewritten launch.

A structural rewrite (rows, smem-tile, vectorize, coarsen, launch) changes the launch
with the kernel, so launching the rewritten kernel at the original's grid and block
compares outputs it was never asked to write. Here both files' launches of the kernel are
read (kxform.frontend.launches: `dim3` variables, locals, helpers, macros), each as
expressions over the kernel's scalar parameters, the integer macros its file defines (or
an included header does, as the compiler evaluates them) and the launcher's run-time
values (a block size its caller passes, read from the spec). The original's launch must
give the spec's at every size (its reading is then trusted); the rewritten one is
evaluated in the same terms. Launches that read alike leave the spec's launch to both; a
launch that cannot be read, or cannot be anchored to the spec, makes the verdict "could
not tell", never a mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dataclasses import replace

from kxform.engine.launch_site import launch_binding, run_time_inputs
from kxform.engine.policy import SPEC_LAUNCH, LaunchBinding, OutputCompare, VerifyPolicy
from kxform.errors import KxformError
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.model import SourceModel
from kxform.frontend.queries import int_value
from kxform.frontend.source import SourceText

_NAME_RE = re.compile(r"[A-Za-z_]\w*")
STRUCTURAL = OutputCompare(
    "spec",
    reason="the launch changed with the kernel (a structural rewrite may reorder arithmetic): within the spec's "
    "tolerance",
)
"""How versions whose launches differ compare when no pass is there to derive a bound: the
spec's tolerance is what its author accepts of any version."""


@dataclass(frozen=True)
class OwnLaunch:
    """How the rewritten version is launched, and the sentence that says so."""

    binding: LaunchBinding
    note: str


def pair_policy(
    original: SourceText, rewritten: SourceText, kernel: str, flags: Sequence[str] = ()
) -> tuple[VerifyPolicy, str]:
    """How `kxform verify ORIGINAL REWRITTEN` runs the two versions of `kernel` (its base
    name): each at its own launch, bit-exact where the launches read alike (or the spec's
    tolerance where the kernel accumulates floats with atomics), within the spec's tolerance
    where they differ; and the sentence that says so."""
    from kxform.verify.differential import default_policy

    own = own_launch(original, rewritten, kernel, flags)
    policy = replace(default_policy(original), launch=own.binding)
    if not own.binding.is_spec and policy.compare.mode == "exact":
        policy = replace(policy, compare=STRUCTURAL)
    return policy, f"{own.note}; outputs {policy.compare.describe()}"


def own_launch(original: SourceText, rewritten: SourceText, kernel: str, flags: Sequence[str] = ()) -> OwnLaunch:
    """The rewritten version's launch read from its own file, anchored by the original's."""
    try:
        models = parse_model(original), parse_model(rewritten)
    except KxformError as exc:
        return _unknown(f"a file does not parse ({exc})")
    found = [launch_configs(m, kernel) for m in models]
    if not found[1]:
        return OwnLaunch(SPEC_LAUNCH, f"the spec's launch for both ({rewritten.path} does not launch '{kernel}')")
    if found[0] and _texts(found[0][0]) == _texts(found[1][0]):
        return OwnLaunch(SPEC_LAUNCH, f"the spec's launch for both (the two files launch '{kernel}' alike)")
    if not found[0]:
        return _unknown(f"{original.path} does not launch '{kernel}': the rewritten launch has nothing to anchor it")
    values = [_macros(m, c[0], flags) for m, c in zip(models, found)]
    inputs = dict(run_time_inputs(models[0], found[0][0]))
    for name, dim in run_time_inputs(models[1], found[1][0]):
        inputs.setdefault(name, dim)
    read = [_read(m, c[0], kernel, v, inputs) for m, c, v in zip(models, found, values)]
    if read[0] is None or read[1] is None:
        which = original.path if read[0] is None else rewritten.path
        return _unknown(f"the launch of '{kernel}' in {which} reads what kxform cannot evaluate")
    binding = LaunchBinding(
        read[1].grid,
        read[1].block,
        read[1].shared_bytes,
        tuple(values[1].items()),
        tuple(values[0].items()),
        read[1].origin,
        inputs=tuple(inputs.items()),
        anchor=read[0],
    )
    return OwnLaunch(
        binding,
        f"ORIGINAL as its launcher says ({read[0].origin}; it must give the spec's launch), REWRITTEN as its "
        f"launcher says: {binding.describe()}",
    )


def _unknown(why: str) -> OwnLaunch:
    return OwnLaunch(LaunchBinding(grid=("unknown",), origin=why), f"could not tell the rewritten launch: {why}")


def _texts(config: LaunchConfig) -> tuple[str, ...]:
    return tuple(" ".join(t.split()) for t in (*config.grid, "|", *config.block, "|", config.shared or "0"))


def _macros(model: SourceModel, config: LaunchConfig, flags: Sequence[str]) -> dict[str, int]:
    """The integer macros and constants the launch reads, at their values in this file (an
    included header's as the compiler evaluates them)."""
    read = {n for t in (*config.grid, *config.block, config.shared or "") for n in _NAME_RE.findall(t)}
    out = {m.name: v for m in model.macros if not m.is_function_like and (v := int_value(m.body)) is not None}
    unknown = sorted(read - set(out) - set(config.site.args))
    if unknown:
        from kxform.frontend.constants import evaluate_constants

        found = evaluate_constants(model.source.path, model.source.data, unknown, list(flags))
        out.update({n: v for n, v in found.items() if v is not None})
    return {n: v for n, v in out.items() if n in read}


def _read(
    model: SourceModel, config: LaunchConfig, kernel: str, values: dict[str, int], inputs: dict[str, str]
) -> LaunchBinding | None:
    function = next((k for k in model.kernels if k.name == kernel), None)
    if function is None:
        return None
    return launch_binding(model, function, config, values, values, values, inputs=tuple(inputs.items()), every=True)
