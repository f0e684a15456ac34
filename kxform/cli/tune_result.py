"""What a pipeline tuning run concludes: which passes and values won, against the original.

The original (every pass off: the code as it is) is evaluated in the same run as the
configurations, so both times come from the same inputs and conditions. A configuration
replaces it only when it verified and its median is below the original's by more than
the larger of the two spreads (half the interquartile range of each): the default
never makes code slower, and a difference inside the noise is no evidence. When
nothing qualifies the original is kept, and says why.
"""

from __future__ import annotations

from typing import Any

from kxform.search.objective import Objective
from kxform.search.tuner import Step, TuneResult


def pipeline_result(objective: Objective, result: TuneResult, baseline_ms: float | None) -> dict[str, Any]:
    """The `result` object of a summary (docs/search.md, "Pipelines"); {} for an objective
    that rewrites nothing (a recorded space)."""
    from kxform.search.kernel_objective import KernelObjective

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


def result_line(summary: dict[str, Any]) -> str:
    """One line for the terminal: what won, or why the original was kept."""
    result = summary.get("result") or {}
    if not result:
        return ""
    if result["kept_original"]:
        return f"kept the original: {result['reason']}"
    return (
        f"applied: {result['pipeline']}: {result['time_ms']:.4g} ms +- {result['spread_ms']:.2g} against "
        f"{result['original_ms']:.4g} ms +- {result['original_spread_ms']:.2g}: speed-up {result['speedup']:.3f}x"
    )


TABLE_HEADER = ("FILE", "KERNEL", "PASSES", "VALUES", "ORIGINAL ms", "BEST ms", "SPREAD ms", "SPEED-UP")


def table_row(summary: dict[str, Any]) -> tuple[str, ...]:
    """A kernel's row in the `tune DIR` table (reasons go below it: `table_note`)."""
    result = summary.get("result") or {}
    if "error" in summary:
        return (summary["file"], summary["kernel"], "-", "(error)", "-", "-", "-", "-")
    values = ", ".join(f"{k}={v}" for k, v in result.get("values", {}).items()) or "(original kept)"
    timed = result.get("time_ms") is not None
    return (
        summary["file"],
        summary["kernel"],
        ",".join(result.get("passes", [])) or "-",
        values,
        _ms(result.get("original_ms")),
        _ms(result.get("time_ms")),
        _ms(result.get("spread_ms")) if timed else "-",
        f"{result['speedup']:.3f}x" if result.get("speedup") else "-",
    )


def table_note(summary: dict[str, Any]) -> str:
    """The line below the table for a kernel that failed or kept its original."""
    result = summary.get("result") or {}
    if "error" in summary:
        return f"{summary['kernel']}: error: {summary['error']}"
    if result.get("kept_original"):
        return f"{summary['kernel']}: original kept: {result['reason']}"
    return ""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
