"""How a new block size is verified: the rewritten launch, and how outputs compare.

Launch: read from the rewritten file's launch (kxform.engine.launch_site.launch_binding),
with the new parameters bound; at the original values it must give the spec's launch,
or the verdict is "could not tell".

Comparison: a kernel whose threads do not communicate (no shared memory, barriers,
shuffles or atomics in it or the functions it calls) computes each output the same way
whatever the block: bit-exact. One whose threads do may combine partial results in an
order that depends on the block: the spec's tolerance doubled (both orders are within
the spec's tolerance of the exact result), and the verify record says whether the
outputs were in fact bit-identical.
"""

from __future__ import annotations

from kxform.analysis.communication import Found
from kxform.engine import launch_site
from kxform.engine.params import Config
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy
from kxform.engine.rewritten_launch import readable, rewritten_launch
from kxform.frontend.model import SourceModel
from kxform.passes.launch.bounds import added_min_blocks
from kxform.passes.launch.geometry import Geometry


def launch_binding(model: SourceModel, new: SourceModel, geometry: Geometry, config: Config) -> LaunchBinding | None:
    """The rewritten launch (in `new`, the rewritten file) over the kernel's parameters and
    the block parameters; a block size the original's launcher takes from its caller is read
    from the spec's launch (`launch_site.run_time_inputs` of `model`, the original)."""
    values = {d.name: int(config.get(d.name, d.value)) for d in geometry.dims}
    aliases = {d.places[0].argument_of: d.name for d in geometry.dims if d.places[0].argument_of}
    inputs = launch_site.run_time_inputs(model, geometry.launches[0])
    return rewritten_launch(
        new, geometry.kernel.name, geometry.names, values, geometry.defaults(), aliases=aliases, inputs=inputs
    )


def verify_policy(
    model: SourceModel, new: SourceModel, geometry: Geometry, communicates: Found | None, config: Config
) -> VerifyPolicy:
    """`model`: the original file; `new`: the rewritten file."""
    added = added_min_blocks(geometry.kernel.name, config)
    if all(config.get(n, v) == v for n, v in geometry.all_defaults().items()) and not added:
        return VerifyPolicy(compare=OutputCompare("exact", reason="at the original values only names change"))
    if all(config.get(d.name, d.value) == d.value for d in geometry.dims):
        return VerifyPolicy(
            compare=OutputCompare(
                "exact", reason="only the launch bounds change: they steer register allocation, not arithmetic"
            ),
            required=True,
        )
    launch = readable(launch_binding(model, new, geometry, config))
    if communicates is None:
        compare = OutputCompare(
            "exact",
            reason="the kernel's threads do not communicate: each output is computed the "
            "same way whatever the block size",
        )
    else:
        compare = OutputCompare(
            "spec",
            2.0,
            f"the threads communicate ({communicates.how}): partial results may combine in an "
            "order that depends on the block size; both orders are within the spec's tolerance "
            "of the exact result, so within twice it of each other",
        )
    return VerifyPolicy(launch, compare, required=True)
