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

import re

from kxform.engine import launch_site
from kxform.engine.edits import apply_edits
from kxform.engine.params import Config
from kxform.engine.policy import LaunchBinding, OutputCompare, VerifyPolicy
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import SourceModel
from kxform.frontend.source import SourceText
from kxform.passes.launch.bounds import added_min_blocks
from kxform.passes.launch.geometry import Geometry
from kxform.passes.launch.rewrite import lift_edits

COMMUNICATES_RE = re.compile(
    r"__shared__|__syncthreads|__syncwarp|__shfl\w*|\batomic\w+\s*\(|\bthis_thread_block\b|"
    r"\btiled_partition\b|__ballot\w*|__any_sync|__all_sync"
)


def communication(model: SourceModel, closure: frozenset[str]) -> str | None:
    """The first way the kernel's threads communicate, as `what (line N)`; None when they do not."""
    for function in model.functions:
        if function.name in closure:
            text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
            match = COMMUNICATES_RE.search(text)
            if match:
                return f"{match.group(0).rstrip('( ')} (line {model.source.line_col(function.body.start + match.start())[0]})"
    return None


def launch_binding(model: SourceModel, geometry: Geometry, config: Config) -> LaunchBinding | None:
    """The rewritten launch over the kernel's parameters and the block parameters."""
    text = apply_edits(model.source, lift_edits(model, geometry, config)).data
    new = parse_model(SourceText(model.source.path, text))
    launches = launch_configs(new, geometry.kernel.name)
    kernel = next((k for k in new.kernels if k.name == geometry.kernel.name), None)
    if not launches or kernel is None:
        return None
    values = {d.name: int(config.get(d.name, d.value)) for d in geometry.dims}
    aliases = {d.places[0].argument_of: d.name for d in geometry.dims if d.places[0].argument_of}
    return launch_site.launch_binding(
        new,
        kernel,
        launches[0],
        geometry.names,
        values,
        geometry.defaults(),
        aliases=aliases,
        inputs=launch_site.run_time_inputs(model, geometry.launches[0]),
    )


def verify_policy(model: SourceModel, geometry: Geometry, closure: frozenset[str], config: Config) -> VerifyPolicy:
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
    binding = launch_binding(model, geometry, config)
    launch = binding if binding is not None else LaunchBinding(grid=("unknown",), origin="no readable launch")
    how = communication(model, closure)
    if how is None:
        compare = OutputCompare(
            "exact",
            reason="the kernel's threads do not communicate: each output is computed the "
            "same way whatever the block size",
        )
    else:
        compare = OutputCompare(
            "spec",
            2.0,
            f"the threads communicate ({how}): partial results may combine in an "
            "order that depends on the block size; both orders are within the spec's tolerance "
            "of the exact result, so within twice it of each other",
        )
    return VerifyPolicy(launch, compare, required=True)
