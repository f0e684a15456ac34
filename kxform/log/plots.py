"""Plots for the HTML report, drawn by matplotlib (the optional `report` extra) as inline SVG.

Without matplotlib every function returns None and the report shows tables only (and
says why). The SVG is self-contained: text stays text (`svg.fonttype = none`, so it is
small and searchable), no date metadata (reports of the same log are identical), no
DOCTYPE (it would name a remote DTD), and ids are salted per plot so several plots
in one page never share an id (the salt is the plot's name, not a counter).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

from kxform.log.figures import PredictionSet, Timing, TuneSeries

_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)


def available() -> tuple[bool, str]:
    """Whether plots can be drawn, and why not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False, "plots need matplotlib: pip install 'kxform[report]'"
    return True, ""


def _svg(figure: Any, key: str) -> str:
    """`key` names the plot within its page: it salts the SVG ids (distinct per plot, and
    the same on every render, so a report of one log is the same bytes each time)."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"kxform-{key}"}):
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return _scope_ids(_PROLOGUE.sub("", buffer.getvalue(), count=1), re.sub(r"[^A-Za-z0-9_-]", "-", key))


def _scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id and reference to one (matplotlib names groups `figure_1`,
    `patch_1`, ... in every SVG), so ids stay unique in a page holding several plots."""
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    return re.sub(r'((?:xlink:)?href)="#([^"]+)"', rf'\1="#{prefix}-\2"', svg)


def _figure(width: float = 6.4, height: float = 3.0) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure


def timings_plot(rows: Sequence[tuple[str, Timing]]) -> str | None:
    """Speedup (original time / rewritten time) per kernel: kernels of very different
    run times share one axis, and 1.0 (no change) is marked."""
    if not rows or not available()[0]:
        return None
    figure = _figure(6.4, 0.6 + 0.4 * len(rows))
    axes = figure.add_subplot()
    labels = [label for label, _ in rows]
    speedups = [t.speedup for _, t in rows]
    axes.barh(labels, [s - 1.0 for s in speedups], left=1.0,
              color=["#31a354" if s >= 1.0 else "#de2d26" for s in speedups])
    for y, (s, (_, t)) in enumerate(zip(speedups, rows)):  # labels right of the bar or of the 1.0 line
        axes.annotate(f"{s:.3f}x ({t.original_ms:.4g} -> {t.rewritten_ms:.4g} ms)", (max(s, 1.0), y),
                      xytext=(4, 0), textcoords="offset points", va="center", fontsize="small")
    axes.axvline(1.0, color="#333", linewidth=0.8)
    axes.invert_yaxis()
    axes.set_xlabel("speedup of the rewrite (original time / rewritten time)")
    axes.margins(x=0.6)
    return _svg(figure, "timings")


def convergence_plot(series: TuneSeries) -> str | None:
    """Every evaluation's time (dots; failures as crosses on the axis) and the best so far (line)."""
    if not series.evaluations or not available()[0]:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    timed = [(e.index, e.time_ms) for e in series.evaluations if e.time_ms is not None]
    failed = [e.index for e in series.evaluations if e.time_ms is None]
    if timed:
        axes.scatter([i for i, _ in timed], [t for _, t in timed], s=14, color="#3182bd", label="evaluation",
                     zorder=3)
    best = [(e.index, b) for e, b in zip(series.evaluations, series.best_so_far()) if b is not None]
    if best:
        axes.step([i for i, _ in best], [b for _, b in best], where="post", color="#fd8d3c", label="best so far")
    if failed:
        low = min((t for _, t in timed), default=1.0)
        axes.scatter(failed, [low] * len(failed), marker="x", color="#cb181d", label="failed", zorder=3)
    axes.set_xlabel("evaluation")
    axes.set_ylabel("time (ms)")
    axes.set_title(f"{series.kernel} ({series.strategy or 'tune'})", fontsize="medium")
    axes.legend(fontsize="small")
    return _svg(figure, f"tune-{series.file}-{series.kernel}-{series.strategy}")


def l2_plot(pset: PredictionSet, chosen: str | None = None) -> str | None:
    """Predicted DRAM reads per block order, with the L2 hit rate as a label (chosen order highlighted)."""
    rows = [p for p in pset.predictions if p.dram_read_bytes is not None]
    if not rows or not available()[0]:
        return None
    figure = _figure(6.4, 0.5 + 0.4 * len(rows))
    axes = figure.add_subplot()
    colors = ["#e6550d" if chosen and p.pattern == chosen else "#756bb1" for p in rows]
    values = [(p.dram_read_bytes or 0.0) / 1e6 for p in rows]
    bars = axes.barh([p.pattern for p in rows], values, color=colors)
    axes.bar_label(bars, labels=["" if p.l2_hit_rate is None else f"L2 hit {100 * p.l2_hit_rate:.0f}%" for p in rows],
                   fontsize="small", padding=3)
    axes.invert_yaxis()
    axes.set_xlabel("predicted DRAM reads (MB)")
    axes.set_title(f"{pset.kernel}: L2 model ({pset.hw or 'hw ?'}, size {pset.size or '?'})", fontsize="medium")
    axes.margins(x=0.25)
    return _svg(figure, f"l2-{pset.file}-{pset.kernel}-{pset.size}")
