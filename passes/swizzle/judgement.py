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
        verdict, not_modelled = judge(
            ctx.model.source, kernel.name, ctx.hw, two_d, ctx.model, unit_flags(ctx.toolchain, ctx.model.source.path)
        )
        return cls(verdict, not_modelled)


def prediction_remark(ctx: Any, kernel: Function, verdict: Any) -> None:
    """An Analysis remark (`LocalityPrediction`) with the model's figures for every order
    it ranked, so the pass log holds them (docs/pass-log.md: the report's L2 figure):
    `args` are `hw`, `size`, `chosen` (the order proposed, or null) and `predictions`
    (`pattern`, `l2_hit_rate`, `dram_read_bytes`, `dram_write_bytes`, `rank`, `margin`)."""
    from kxform.log.remarks import RemarkKind

    data = verdict.ranking
    rows = [
        {
            "pattern": str(o["order"]),
            "l2_hit_rate": o.get("l2_hit_rate"),
            "dram_read_bytes": o.get("dram_read_bytes"),
            "dram_write_bytes": o.get("dram_write_bytes"),
            "rank": o.get("rank"),
            "margin": o.get("margin_to_identity"),
        }
        for o in data.get("orders") or ()
    ]
    listed = "; ".join(
        f"{r['pattern']} L2 hit {float(r['l2_hit_rate'] or 0):.0%}, DRAM read "
        f"{float(r['dram_read_bytes'] or 0) / 1e9:.3g} GB"
        for r in rows
    )
    # the first clause (the best order) is what a terminal line shows
    ctx.remark(
        RemarkKind.ANALYSIS,
        "swizzle",
        "LocalityPrediction",
        kernel.span.start,
        kernel.name,
        f"locality model: {listed} ({data.get('hw')}, size {data.get('size')})",
        hw=data.get("hw"),
        size=data.get("size"),
        chosen=data.get("chosen"),
        predictions=rows,
    )
