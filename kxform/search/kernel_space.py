"""The tuning space of a kernel under a set of passes, and the pipeline at each point.

Which passes: those named by `--pass` that have something to tune in the kernel (no
blocker and a non-empty `Pass.tuning_space`; the others are left out, each with its
reason), or, without it, every registered pass that has, in the order the registry
derives from the passes' `requires`. What each contributes is
its own business (`Pass.tuning_space`: the tile pass its lifted tile sizes at powers of
two, swizzle its bound library remaps); `kxform.search.compose` namespaces and composes
them, with a per-pass "off" choice so the space's defaults are the code as it is.
Validity beyond the passes' constraints (ptxas resources, the rewritten launch, the
differential run) is decided per configuration by the objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kxform.engine.params import Config, ParamSpace, ParamValue
from kxform.engine.pass_api import Pass
from kxform.engine.registry import Registry, default_registry, order_passes
from kxform.errors import UsageError, did_you_mean
from kxform.search.compose import Composed, PassSpace, compose, label
from kxform.search.space import SearchSpace, iter_valid

__all__ = ["KernelSpace", "NothingToTune", "kernel_space", "label", "parse_passes"]


class NothingToTune(UsageError):
    """No pass (or not the one named) has anything to tune in the kernel: for one file a
    usage error; for a directory run the kernel's original is kept, with this reason.
    `refused` holds (pass, reason key, reason) for each pass, for callers that sort
    refusals by cause rather than read the message."""

    def __init__(self, message: str, refused: tuple[tuple[str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class KernelSpace:
    """A kernel's composed tuning space, and which passes were left out and why."""

    kernel: str
    composed: Composed
    not_offered: tuple[tuple[str, str], ...] = ()
    """(pass, reason) for every pass considered that has nothing to tune here."""

    @property
    def passes(self) -> tuple[str, ...]:
        return tuple(part.pass_.name for part in self.composed.parts)

    @property
    def space(self) -> ParamSpace:
        return self.composed.space

    def pipeline(self, config: Config) -> tuple[Pass, ...]:
        return self.composed.pipeline(config)

    def spec(self, config: Config) -> str:
        return self.composed.spec(config)

    def won(self, config: Config) -> dict[str, ParamValue]:
        return self.composed.won(config)

    def applied(self, config: Config) -> tuple[str, ...]:
        return tuple(part.pass_.name for part in self.composed.active(config))

    def search(self, hw: object | None = None, rng: np.random.Generator | None = None) -> SearchSpace:
        return self.composed.search(hw, rng)

    def defaults(self) -> dict[str, ParamValue]:
        return self.space.defaults()


def parse_passes(text: str, registry: Registry | None = None) -> tuple[str, ...]:
    """`--pass a,b`: registered pass names, each once (the order is the registry's)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    known = (registry or default_registry()).names()
    unknown = [n for n in names if n not in known]
    if not names or unknown or len(set(names)) != len(names):
        what = f"unknown pass '{unknown[0]}'" if unknown else "name each pass once" if names else "no pass named"
        hint = did_you_mean(unknown[0], known) if unknown else ""
        raise UsageError(f"--pass {text!r}: {what} (passes: {', '.join(known) or 'none'}){hint}")
    return names


def kernel_space(
    data: bytes,
    kernel: str,
    passes: Sequence[str] | None = None,
    *,
    path: str,
    hw: str,
    build_dir: str | None = None,
    require: tuple[str, ...] = (),
    registry: Registry | None = None,
) -> KernelSpace:
    """The tuning space of `kernel` under `passes` (None: every pass of `registry`, the
    default registry, that offers something), with the extra constraints `require`. A
    named pass with nothing to tune in the kernel is left out with its reason
    (`KernelSpace.not_offered`) and the others are tuned; NothingToTune, naming every
    reason, when none of them (or no pass at all) has anything to tune."""
    from kxform.core import analyse_kernel, kernel_context

    registry = registry or default_registry()
    names = tuple(passes) if passes is not None else tuple(registry.names())
    ordered = order_passes([registry.get(name)() for name in names])
    ctx = kernel_context(data, kernel, path=path, hw=hw, build_dir=build_dir)
    parts: list[PassSpace] = []
    refused: list[tuple[str, str]] = []
    for pass_ in ordered:
        analysis = analyse_kernel(pass_, ctx, kernel)
        space = pass_.tuning_space(ctx, analysis) if not analysis.blockers else ParamSpace()
        valid = bool(space.params) and next(iter_valid(space, ctx.hw), None) is not None
        if valid:
            parts.append(PassSpace(pass_, space))
            continue
        key, why = (
            (analysis.blockers[0].key, analysis.blockers[0].message)
            if analysis.blockers
            else ("NoValidConfig", "no configuration of its space meets its constraints")
            if space.params
            else ("NothingToTune", "it offers nothing to tune in this kernel")
        )
        refused.append((pass_.name, key, why))
    if not parts and passes is not None and len(refused) == 1:
        name, key, why = refused[0]
        raise NothingToTune(f"{path}: '{kernel}' has nothing to tune under {name}: {why}", tuple(refused))
    if not parts:
        shown = "; ".join(f"{name}: {why}" for name, _, why in refused) or "no pass is registered"
        which = "any pass named" if passes is not None else "any pass"
        raise NothingToTune(f"{path}: '{kernel}' has nothing to tune under {which} ({shown})", tuple(refused))
    return KernelSpace(kernel, compose(parts, require, kernel), tuple((name, why) for name, _, why in refused))
