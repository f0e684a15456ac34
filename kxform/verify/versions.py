"""How each version of a kernel is launched and compared, from the pass's verification policy
(kxform.engine.policy).

The original always runs at the harness spec's launch. The rewritten version runs at the
spec's launch too, unless its pass derived launch expressions from the source (a new
tile changes the grid and the block): those are evaluated per size with the kernel's
scalar arguments and the pass's parameters bound. Before they are trusted they must
reproduce the spec's launch at the original parameter values, at every size; when they
do not, the launch of the rewritten version is unknown and the verdict is "could not
tell", never "ok". A launcher that takes a dimension from its caller at run time (`block_size`)
names it as an input of the binding: its value at each size is the spec's launch of the
original at that dimension, so the rewritten launch is computed in the same terms
(`ceil_div(N, block_size / LANES)`). Scratch buffers the rewritten kernel takes after the
original's parameters (kxform.engine.policy.Scratch) are added to its arguments here,
sized at the rewritten launch; the request builder fills them with zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from kxform.engine.policy import LaunchBinding, OutputCompare, Scratch
from kxform.errors import SpecError
from kxform.expr import parse_logic
from kxform.harness.launch import ResolvedArg, ResolvedLaunch
from kxform.harness.model import CompareSpec
from kxform.runtime.base import KernelParam, RuntimeError_


class LaunchUndecided(RuntimeError_):
    """The rewritten version's launch cannot be derived (reported as a failed size)."""


def _scalars(resolved: ResolvedLaunch, params: Sequence[KernelParam]) -> dict[str, int]:
    """Kernel parameter name -> integer value of the spec argument at its position."""
    env: dict[str, int] = {}
    for param, arg in zip(params, resolved.args):
        if (
            arg.kind == "scalar"
            and arg.value is not None
            and float(arg.value).is_integer()
            and "float" not in arg.dtype
            and "double" not in param.ctype
        ):
            env[param.name] = int(arg.value)
    return env


def _dims(
    exprs: tuple[str | None, ...] | None, base: tuple[int, int, int], env: dict[str, int], what: str
) -> tuple[int, int, int]:
    if exprs is None:
        return base
    values = list(base)
    for i, text in enumerate(exprs[:3]):
        if text is not None:
            values[i] = _int(text, env, f"{what}[{i}]")
    return values[0], values[1], values[2]


def _int(text: str, env: dict[str, int], what: str) -> int:
    """A launch dimension: arithmetic, and the conditions a launcher chooses with
    (`n if n < 1024 else 1024`), in the logic grammar."""
    try:
        return parse_logic(text).evaluate_int(env)
    except SpecError as exc:
        raise LaunchUndecided(f"{what} '{text}': {exc.cause}") from None


def _inputs(resolved: ResolvedLaunch, binding: LaunchBinding) -> dict[str, int]:
    """The launcher's run-time values (`block_size`), read from the spec's launch."""
    launch = {
        **{f"grid.{a}": v for a, v in zip("xyz", resolved.grid)},
        **{f"block.{a}": v for a, v in zip("xyz", resolved.block)},
        "shared": resolved.shared_bytes,
    }
    out = {}
    for name, dim in binding.inputs:
        if dim not in launch:
            raise LaunchUndecided(f"could not tell: '{name}' is read from '{dim}', which is no launch dimension")
        out[name] = launch[dim]
    return out


def _launch(
    resolved: ResolvedLaunch, params: Sequence[KernelParam], binding: LaunchBinding, original: bool
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    inputs = _inputs(resolved, binding)
    scalars = _scalars(resolved, params)
    env = {**scalars, **binding.env(True), **inputs} if original else {**scalars, **inputs, **binding.env(False)}
    exprs = binding.anchor if original and binding.anchor is not None else binding
    grid = _dims(exprs.grid, resolved.grid, env, "grid")
    block = _dims(exprs.block, resolved.block, env, "block")
    shared = resolved.shared_bytes if exprs.shared_bytes is None else _int(exprs.shared_bytes, env, "shared")
    return grid, block, shared


def rewritten_launch(resolved: ResolvedLaunch, params: Sequence[KernelParam], binding: LaunchBinding) -> ResolvedLaunch:
    """The rewritten version's launch at the size of `resolved` (the spec's launch)."""
    if binding.is_spec:
        return resolved
    at_defaults = _launch(resolved, params, binding, original=True) if binding.anchored else None
    spec_launch = (resolved.grid, resolved.block, resolved.shared_bytes)
    if at_defaults is not None and at_defaults != spec_launch:
        raise LaunchUndecided(
            f"could not tell: the launch read from {binding.origin or 'the source'} gives grid {at_defaults[0]}, "
            f"block {at_defaults[1]}, {at_defaults[2]} B shared at the original values, the spec says grid "
            f"{resolved.grid}, block {resolved.block}, {resolved.shared_bytes} B: the rewritten launch is unknown"
        )
    grid, block, shared = _launch(resolved, params, binding, original=False)
    if math.prod(block) > 1024 or min(grid + block) < 1:
        raise LaunchUndecided(f"rewritten launch grid {grid} block {block} is not a valid launch")
    env = {
        **_scalars(resolved, params),
        **_inputs(resolved, binding),
        **binding.env(False),
        **{
            f"{what}_{axis}": dims[i]
            for what, dims in (("grid", grid), ("block", block))
            for i, axis in enumerate("xyz")
        },
    }
    extra = tuple(_scratch_arg(s, env) for s in binding.scratch)
    return replace(resolved, grid=grid, block=block, shared_bytes=shared, args=resolved.args + extra)


def _scratch_arg(scratch: Scratch, env: dict[str, int]) -> ResolvedArg:
    count = _int(scratch.count, env, f"scratch '{scratch.name}'")
    if count < 1:
        raise LaunchUndecided(f"scratch '{scratch.name}' has {count} elements at this size")
    return ResolvedArg(scratch.name, "buffer", scratch.dtype, "inout", (count,), scratch=True)


def scalars(resolved: ResolvedLaunch, params: Sequence[KernelParam]) -> dict[str, int]:
    """The integer scalar arguments of one size, by kernel parameter name (what a derived
    launch or tolerance is evaluated over)."""
    return _scalars(resolved, params)


def comparison(spec_compare: CompareSpec, policy: OutputCompare) -> CompareSpec:
    """The comparison of one output when no bound is measured: bit-exact, or the spec's
    scaled by the pass's factor. (A `bound` policy's outputs are compared within the bounds
    its reorder probe measures at each size: kxform.verify.probe.)"""
    if policy.mode == "exact" or spec_compare.mode == "exact":
        return CompareSpec("exact")
    if spec_compare.mode == "ulp":
        return CompareSpec("ulp", ulps=math.ceil(spec_compare.ulps * policy.scale))
    return CompareSpec("allclose", rtol=spec_compare.rtol * policy.scale, atol=spec_compare.atol * policy.scale)
