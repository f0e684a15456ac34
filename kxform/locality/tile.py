"""Block orders under a tile configuration: the locality model on the tile pass's rewrite.

The swizzle pass asks the model which block order to give a kernel as it is. A tuner
weighing tile configurations can ask the same of the kernel rewritten at one: the tile
pass rewrites it (checked like any proposal), the rewrite is launched as the tile pass's
verification policy says (grid and block follow the new tile sizes) and every block order
is ranked there. No proposer uses it yet (docs/locality-model.md, "Tile configurations").
"""

from __future__ import annotations

from collections.abc import Mapping

from kxform.engine.params import ParamValue
from kxform.engine.pass_api import Outcome
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.hw import HwProfile
from kxform.locality.predict import Ranking, rank_orders
from kxform.locality.trace import ModelRefused, extract, resolve_size


def rank_tile_orders(
    source: SourceText,
    spec: KernelSpec,
    hw: HwProfile,
    config: Mapping[str, ParamValue],
    size: str | SizeSpec | None = None,
) -> Ranking:
    """Every candidate block order of `spec`'s kernel rewritten by the tile pass at `config`
    (tile parameter -> value), ranked against row-major at its own launch. ModelRefused
    when the tile pass refuses the configuration or its launch cannot be derived."""
    from kxform.core import rewrite_with
    from kxform.verify.versions import LaunchUndecided, rewritten_launch

    transform = rewrite_with(source.data, spec.name, config, "tile", path=source.path, hw=hw.name)
    result = next((r for r in transform.results if r.kernel == spec.name), None)
    if result is None or result.outcome not in (Outcome.APPLIED, Outcome.UNCHANGED):
        why = "; ".join(result.reasons) if result is not None else "no result for the kernel"
        raise ModelRefused(f"the tile pass does not rewrite '{spec.name}' at {dict(config)}: {why}")
    chosen = resolve_size(spec, size)
    try:
        launch = rewritten_launch(spec.launch(chosen), extract(source, spec).params, result.policy.launch)
    except LaunchUndecided as exc:
        raise ModelRefused(str(exc)) from None
    rewritten = validate_bytes(source.path, transform.new_data)
    return rank_orders(rewritten, spec, hw, chosen, launch=launch)
