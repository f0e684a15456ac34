"""Where proposers meet the engine: the few functions to re-point when the engine's
pass API gains typed option spaces and typed proposals.

* `space_of(pass_, ctx, analysis)`: the typed parameter space a proposer may choose
  from. Today swizzle's is built here from its pattern library (plus `custom`, a
  formula); a pass that exposes `param_space(ctx, analysis)` or a `space` attribute
  is asked directly (the engine rework gives every pass one).
* `make_proposal(...)`: a `Proposal` from typed values, a payload and provenance. Today
  values become strings (`Param.format`) and the payload rides on `PayloadProposal`;
  provenance (proposer, model, cost) goes into the proposer name and the rationale.
* `option_params(pass_name, config)`: which of a configuration's values the pass takes
  (swizzle patterns take different parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kxform.engine.params import Param, ParamSpace, ParamValue
from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal
from kxform.propose.payload import with_payload

CUSTOM = "custom"


def space_of(pass_: Pass, ctx: PassContext | None = None, analysis: KernelAnalysis | None = None) -> ParamSpace | None:
    """The typed space a proposer chooses from for `pass_` on one kernel, or None when
    the pass has none (a proposer then has nothing to offer)."""
    own = getattr(pass_, "param_space", None)
    if callable(own):
        space: Any = own(ctx, analysis)
        return space if isinstance(space, ParamSpace) else None
    if isinstance(getattr(pass_, "space", None), ParamSpace):
        return getattr(pass_, "space")  # type: ignore[no-any-return]
    if pass_.name == "swizzle":
        return _swizzle_space(ctx, analysis)
    return None


def _swizzle_space(ctx: PassContext | None, analysis: KernelAnalysis | None) -> ParamSpace:
    from kxform.passes.swizzle.patterns import PATTERNS

    dims = 2
    if analysis is not None and "usage" in analysis.facts:
        dims = min(analysis.facts["usage"].dims, 2)
    names = [p.name for p in PATTERNS.values() if p.name != "row" and dims in p.dims] + [CUSTOM]
    xcds = ctx.hw.xcds if ctx is not None else 8
    return ParamSpace((
        Param.enum("pattern", names, names[0], doc="a library pattern, or `custom` for a remap written as a formula"),
        Param.int_range("group", 1, 64, 8, doc="rows (along=y) or columns (along=x) walked together"),
        Param.enum("along", ("y", "x"), "y", doc="the axis grouped tiles are taken along"),
        Param.int_range("xcds", 1, 64, max(1, min(xcds, 64)), doc="chiplets blocks are dispatched round-robin to"),
    ))


def pattern_params(pattern: str) -> tuple[str, ...]:
    """The parameters a swizzle pattern takes (`custom` takes only its formula)."""
    from kxform.passes.swizzle.patterns import get_pattern

    return () if pattern == CUSTOM else tuple(p.name for p in get_pattern(pattern).params)


def option_params(pass_name: str, config: Mapping[str, ParamValue]) -> tuple[str, ...]:
    """The names in `config` the pass takes for this configuration, in order."""
    if pass_name == "swizzle":
        return ("pattern", *pattern_params(str(config["pattern"])))
    return tuple(config)


def make_proposal(pass_: Pass, kernel: str, config: Mapping[str, ParamValue], rationale: str, proposer: str,
                  payload: str | None = None, space: ParamSpace | None = None, digest: str | None = None) -> Proposal:
    """A proposal from typed values (formatted as the pass's spec writes them) and an
    optional payload (a formula: its digest joins the parameters so labels differ)."""
    names = option_params(pass_.name, config)
    fmt = (lambda n, v: space.param(n).format(v)) if space is not None else (lambda n, v: str(v))
    params = tuple((n, fmt(n, config[n])) for n in names)
    if digest is not None:
        params += (("formula", digest),)
    proposal = Proposal(pass_.name, kernel, params, rationale, proposer=proposer)
    return with_payload(proposal, payload) if payload else proposal
