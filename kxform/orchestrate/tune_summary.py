"""What a tuning run reports: the summary (the pass log's `tune` record, what `--json`
prints) and what a pipeline run concludes against the original.

The original (every pass off: the code as it is) is evaluated in the same run as the
configurations, so both times come from the same inputs and conditions. A configuration
replaces it only when it verified and its median is below the original's by more than
the larger of the two spreads (half the interquartile range of each): the default
never makes code slower, and a difference inside the noise is no evidence. When
nothing qualifies the original is kept, and says why.
"""

from __future__ import annotations

from typing import Any

from kxform.runtime.base import RuntimeError_
from kxform.search.kernel_objective import KernelObjective
from kxform.search.objective import Objective
from kxform.search.tuner import Step, TuneResult


def tune_summary(
    result: TuneResult,
    file: str,
    kernel: str,
    objective: Objective,
    recording: str | None,
    seed: int,
    db_path: str,
) -> dict[str, Any]:
    """The `tune` record of one kernel's run (docs/pass-log.md)."""
    best = result.best
    return {
        "file": file,
        "kernel": kernel,
        "objective": objective.name,
        "recording": recording,
        "hardware": objective.hardware,
        "strategy": result.strategy,
        "seed": seed,
        "space_size": result.space_size,
        "evaluated": result.counted,
        "measured": result.measured,
        "from_database": sum(1 for s in result.steps if s.source != "measured"),
        "failed": sum(1 for s in result.steps if not s.evaluation.ok and not s.evaluation.pruned),
        "cut_off": sum(1 for s in result.steps if s.evaluation.cut_off),
        "pruned": sum(1 for s in result.steps if s.evaluation.pruned),
        "stopped": result.stopped,
        "cost_s": round(result.cost_s, 6),
        "strategy_s": round(result.strategy_s, 6),
        "prior": list(result.prior_sources),
        "database": db_path,
        "best": None
        if best is None
        else {
            "config": best.config,
            "time_ms": best.evaluation.time_ms,
            "spread_ms": best.evaluation.spread_ms,
            "found_at": best.index + 1,
        },
        "evaluations": [evaluation_json(step) for step in result.steps],
        "phases_s": phase_totals(objective),
        "cost_model": result.model_agreement(),
        "stages": list(result.stages),
    }


def evaluation_json(step: Step) -> dict[str, Any]:
    """One evaluation in the shape the log viewers read (docs/pass-log.md, `tune`): the
    measured time beside the time the cost model predicted before it was built."""
    e = step.evaluation
    out = {
        "eval": step.index + 1,
        "params": step.config,
        "time_ms": e.time_ms,
        "status": e.status,
        "source": step.source,
        "spread_ms": e.spread_ms,
        "cost_s": e.cost_s,
        "detail": e.detail,
    }
    if e.prediction is not None:
        out["predicted_ms"] = e.prediction.estimate_ms
        out["bound_ms"] = e.prediction.lower_ms
        out["limiter"] = e.prediction.limiter
    return out


def phase_totals(objective: Objective) -> dict[str, float] | None:
    """Seconds the run's configurations spent rewriting, compiling, verifying and timing,
    summed (None for an objective that does not record them): where a tune's time went."""
    if not isinstance(objective, KernelObjective) or not objective.phases:
        return None
    totals = {"rewrite": 0.0, "predict": 0.0, "compile": 0.0, "verify": 0.0, "time": 0.0}
    for recorded in objective.phases.values():
        totals["rewrite"] += recorded.rewrite_s
        totals["predict"] += recorded.predict_s
        totals["compile"] += recorded.compile_s
        totals["verify"] += recorded.verify_s
        totals["time"] += recorded.time_s
    return {name: round(value, 3) for name, value in totals.items()}


def measured_original(objective: Objective) -> dict[str, Any]:
    """For a measuring objective: the timing size and the unmodified kernel's time there."""
    if not isinstance(objective, KernelObjective):
        return {}
    try:
        original: float | None = objective.baseline().median_ms
    except RuntimeError_:
        original = None
    return {"size": objective.size.name, "original_ms": original}


def pipeline_result(objective: Objective, result: TuneResult, baseline_ms: float | None) -> dict[str, Any]:
    """The `result` object of a summary (docs/search.md, "Pipelines"); {} for an objective
    that rewrites nothing (a recorded space)."""
    if not isinstance(objective, KernelObjective):
        return {}
    space = objective.space
    original = _original_step(result, space.defaults())
    original_ms = original.evaluation.time_ms if original is not None else baseline_ms
    original_spread = original.evaluation.spread_ms if original is not None else 0.0
    best = result.best
    base: dict[str, Any] = {
        "original_ms": original_ms,
        "original_spread_ms": original_spread,
        "considered": list(space.passes),
        "not_offered": [{"pass": name, "reason": why} for name, why in space.not_offered],
    }
    why = _why_kept(best, original_ms, original_spread, space.applied(best.config) if best else ())
    if why is not None or best is None:
        return {
            **base,
            "kept_original": True,
            "reason": why,
            "passes": [],
            "values": {},
            "pipeline": "",
            "time_ms": original_ms,
            "spread_ms": original_spread,
            "speedup": 1.0 if original_ms else None,
        }
    time_ms = best.evaluation.time_ms
    assert time_ms is not None and original_ms is not None
    return {
        **base,
        "kept_original": False,
        "reason": None,
        "passes": list(space.applied(best.config)),
        "values": space.won(best.config),
        "pipeline": space.spec(best.config),
        "time_ms": time_ms,
        "spread_ms": best.evaluation.spread_ms,
        "speedup": round(original_ms / time_ms, 4),
    }


def _original_step(result: TuneResult, defaults: dict[str, Any]) -> Step | None:
    return next((s for s in result.steps if s.config == defaults and s.evaluation.ok), None)


def _why_kept(
    best: Step | None, original_ms: float | None, original_spread: float, applied: tuple[str, ...]
) -> str | None:
    if best is None:
        return "no configuration was verified and timed"
    if not applied:
        return "no verified configuration was faster than the original"
    if original_ms is None:
        return "the original could not be timed, so no speed-up can be shown"
    time_ms = best.evaluation.time_ms
    assert time_ms is not None
    margin = max(original_spread, best.evaluation.spread_ms)
    if time_ms >= original_ms - margin:
        return (
            f"the fastest verified configuration ({time_ms:.4g} ms) is not faster than the original "
            f"({original_ms:.4g} ms) by more than the spread ({margin:.2g} ms)"
        )
    return None
