"""The swizzle pass's default choice for one kernel, and how it fares against a measured sweep.

`default_order` asks the pass and the deterministic proposer exactly what
`kxform apply --pass swizzle` asks them (analyse, then `DeterministicProposer.propose`:
the default proposal, from the locality model where the kernel has a harness spec, then
the pass's other candidates ranked by the model), so the order reported is the order a
run would try. `judge_default` compares that order with the timings of the exhaustive
sweep. Both run without a GPU (the model runs on the CPU runtime).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kxform.hw import HwProfile
from kxform.passes.swizzle.patterns import RemapConfig
from kxform.verify.measure import Timing

TOLERANCE = 0.02
"""A version "reaches the best" when its median is within the measured spreads, or this
share of the best median, of the best version's."""


@dataclass(frozen=True)
class DefaultOrder:
    """What the default proposer does with one kernel."""

    proposals: tuple[RemapConfig, ...]
    """The configurations it would try, first one first (empty: it leaves the kernel alone)."""
    first_rationale: str
    """The first proposal's rationale, or why nothing is proposed."""
    fallback: tuple[RemapConfig, ...]
    """The pass's candidates in the model's rank order (what a search would try next)."""
    modelled: bool
    """Whether the locality model judged the kernel (else the documented rule applied)."""


def default_order(source_path: str, kernel: str, hw: HwProfile) -> DefaultOrder:
    """The default proposer's order for `kernel` of the file at `source_path` on `hw`."""
    from kxform.engine.pass_api import PassContext, RunOptions
    from kxform.engine.proposer import DeterministicProposer
    from kxform.engine.registry import default_registry
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.log.remarks import RemarkSink
    from kxform.passes.swizzle.judgement import LocalityJudgement
    from kxform.passes.swizzle.swizzle import config_of

    model = parse_model(read_source(source_path))
    pass_ = default_registry().get("swizzle")()
    ctx = PassContext(model, hw, RunOptions(kernels=(kernel,)), RemarkSink())
    analysis = pass_.analyse(ctx).get(kernel)
    if analysis is None:
        raise LookupError(f"{source_path}: no kernel '{kernel}'")
    if analysis.blockers:
        return DefaultOrder((), "; ".join(b.message for b in analysis.blockers), (), False)
    proposals = DeterministicProposer().propose(pass_, ctx, analysis)
    configs = tuple(config_of(p) for p in proposals)
    if proposals:
        why = proposals[0].rationale
    else:
        why = pass_.missed_reason(analysis, ctx)[1]
    fallback = tuple(config_of(p) for p in pass_.candidates(ctx, analysis))
    judged = ctx.analyses.cached(LocalityJudgement, model, analysis.kernel)
    return DefaultOrder(configs, why, fallback, judged is not None and judged.verdict is not None)


# -------------------------------------------------------------------------- judging


def reaches(candidate: Timing, best: Timing, tolerance: float = TOLERANCE) -> bool:
    """Whether `candidate` is as fast as `best` within the spreads or `tolerance` of it."""
    slack = max(candidate.spread_ms + best.spread_ms, tolerance * best.median_ms)
    return candidate.median_ms <= best.median_ms + slack


def slower(candidate: Timing, original: Timing) -> bool:
    """Slower beyond both spreads (the rule `kxform apply --measure` rejects by)."""
    return candidate.median_ms - candidate.spread_ms > original.median_ms + original.spread_ms


def faster(candidate: Timing, original: Timing) -> bool:
    """Faster beyond both spreads (the rule `kxform apply --measure` keeps by)."""
    return candidate.median_ms + candidate.spread_ms < original.median_ms - original.spread_ms


@dataclass(frozen=True)
class Judgement:
    """The default proposer against the sweep of one kernel."""

    best: str
    """The fastest version's order key (the original's key when nothing beats it)."""
    best_is_original: bool
    first: str | None
    """The first proposal's order key (None: the kernel is left alone)."""
    verdict: str
    """`regression`, `faster`, `no difference`, `not measured` (the first proposal has no
    timing), `leave alone (correct)` or `leave alone (misses a gain)`."""
    evaluations_to_best: int | None
    """Versions the default proposer times, in its order, until one reaches the best
    (0: it leaves the kernel alone and the original is the best; None: never)."""
    fallback_to_best: int | None
    """The same count along the model's candidate ranking (for kernels left alone)."""

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"


def judge_default(
    order: Sequence[str],
    fallback: Sequence[str],
    timings: Mapping[str, Timing],
    original: str,
    tolerance: float = TOLERANCE,
) -> Judgement:
    """Judge the default proposer's `order` (order keys, first first) against `timings`
    (order key -> timing; the original's key is `original`; versions that did not verify
    or measure are absent: an evaluation that cannot reach anything)."""
    if original not in timings:
        raise ValueError("the original has no timing")
    best_key = min(timings, key=lambda k: (timings[k].median_ms, k != original))
    best = timings[best_key]
    best_is_original = best_key == original or reaches(timings[original], best, tolerance)
    base = timings[original]

    def count(keys: Sequence[str]) -> int | None:
        for index, key in enumerate(keys, start=1):
            if key in timings and reaches(timings[key], best, tolerance):
                return index
        return None

    if not order:
        verdict = "leave alone (correct)" if best_is_original else "leave alone (misses a gain)"
        return Judgement(best_key, best_is_original, None, verdict, 0 if best_is_original else None, count(fallback))
    first = order[0]
    if first not in timings:
        verdict = "not measured"
    elif slower(timings[first], base):
        verdict = "regression"
    elif faster(timings[first], base):
        verdict = "faster"
    else:
        verdict = "no difference"
    return Judgement(best_key, best_is_original, first, verdict, count(order), count(fallback))
