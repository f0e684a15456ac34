"""Proposers: who suggests which instance of a pass to try on a kernel.

The deterministic proposer (`heuristic`) uses the user's explicit options or the pass's documented
default rule, followed by the pass's other candidates (`Pass.candidates`) as fallbacks
for the later stages. Other proposers (an LLM, a tuner) return the same `Proposal` type
and are equally untrusted: the driver checks every proposal the same way. Every
proposer hears which of its earlier proposals the later stages refused and why
(`rejected`), so it can avoid them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal, Rejection


class Proposer(Protocol):
    name: str

    def propose(
        self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, rejected: Sequence[Rejection] = ()
    ) -> list[Proposal]:
        """Proposals to try, best first (may be empty). `rejected`: earlier proposals for
        this kernel that a check or a later stage refused, with the reason."""

    # Optional: `why_nothing(pass_, analysis) -> tuple[str, str] | None`, the remark key and
    # sentence when `propose` returned nothing for its own reason (the driver reports the
    # pass's `missed_reason` otherwise).


class DeterministicProposer:
    """The pass's own default choice, then its other candidates (unless the user fixed the
    options, or the pass has no fallback): reproducible, explained in the remark. This is
    the `heuristic` proposer of `kxform apply --proposer` (the default; `deterministic` is
    accepted as another name for it)."""

    name = "heuristic"

    def propose(
        self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, rejected: Sequence[Rejection] = ()
    ) -> list[Proposal]:
        proposal = pass_.default_proposal(ctx, analysis)
        if proposal is None:
            return []
        if pass_.explicit or not pass_.falls_back:
            return [proposal]
        seen = {proposal.label()}
        out = [proposal]
        for candidate in pass_.candidates(ctx, analysis):
            if candidate.label() not in seen:
                seen.add(candidate.label())
                out.append(candidate)
        return out
