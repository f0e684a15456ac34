"""Proposers: who suggests which instance of a pass to try on a kernel.

The deterministic proposer uses the user's explicit options or the pass's documented
default rule. Other proposers (an LLM) return the same `Proposal` type and are equally
untrusted: the driver checks every proposal the same way.
"""

from __future__ import annotations

from typing import Protocol

from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal


class Proposer(Protocol):
    name: str

    def propose(self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """Proposals to try, best first (may be empty)."""


class DeterministicProposer:
    """The pass's own default choice: reproducible, explained in the remark, unmeasured."""

    name = "deterministic"

    def propose(self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        proposal = pass_.default_proposal(ctx, analysis)
        return [proposal] if proposal is not None else []
