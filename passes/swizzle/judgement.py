"""The locality model's judgement of one kernel, as an analysis: asked once per kernel and
source version (it runs the CPU runtime's traces), then read by the default proposal,
the ranking of the fallback candidates and the remark of a kernel left alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kxform.analysis.manager import AnalysisInput
from kxform.frontend.model import Function
from kxform.harness.request import unit_flags
from kxform.passes.swizzle.index_usage import IndexUsage


@dataclass(frozen=True)
class LocalityJudgement:
    """`verdict` (kxform.locality.propose.Verdict) or None, with why the model was not asked."""

    positional: ClassVar[bool] = False

    verdict: Any
    not_modelled: str

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> LocalityJudgement:
        from kxform.locality.propose import judge  # the locality model (docs/locality-model.md)

        two_d = ctx.analysis(IndexUsage, kernel).dims >= 2
        verdict, not_modelled = judge(ctx.model.source, kernel.name, ctx.hw, two_d, ctx.model,
                                      unit_flags(ctx.toolchain, ctx.model.source.path))
        return cls(verdict, not_modelled)
