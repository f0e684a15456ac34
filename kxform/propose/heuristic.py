"""`heuristic`: the pass's documented rule (the default proposer).

It is the engine's deterministic proposer under the name users choose it by; when the
L2 model's ranking exists, this is where it plugs in.
"""

from __future__ import annotations

from dataclasses import replace

from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal
from kxform.engine.proposer import DeterministicProposer


class HeuristicProposer(DeterministicProposer):
    """The documented rule of each pass: reproducible, explained in the remark, unmeasured."""

    name = "heuristic"

    def propose(self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return [replace(p, proposer=self.name) for p in super().propose(pass_, ctx, analysis)]
