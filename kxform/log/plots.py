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


def timings_plot(rows: Sequence[tuple[str, Timing]], key: str = "timings") -> str | None:
    """Speedup (original time / rewritten time) per kernel: kernels of very different
    run times share one axis, and 1.0 (no change) is marked."""
    if not rows or not available()[0]:
        return None
    figure = _figure(6.4, 0.6 + 0.4 * len(rows))
    axes = figure.add_subplot()
    labels = [label for label, _ in rows]
    speedups = [t.speedup for _, t in rows]
    axes.barh(
        labels, [s - 1.0 for s in speedups], left=1.0, color=["#31a354" if s >= 1.0 else "#de2d26" for s in speedups]
    )
    for y, (s, (_, t)) in enumerate(zip(speedups, rows)):  # labels right of the bar or of the 1.0 line
        axes.annotate(
            f"{s:.3f}x ({t.original_ms:.4g} -> {t.rewritten_ms:.4g} ms)",
            (max(s, 1.0), y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    axes.axvline(1.0, color="#333", linewidth=0.8)
    axes.invert_yaxis()
    axes.set_xlabel("speedup of the rewrite (original time / rewritten time)")
    axes.margins(x=0.6)
    return _svg(figure, key)


def convergence_plot(series: TuneSeries, original_ms: float | None = None) -> str | None:
    """Every evaluation's time (dots), the best so far (steps), the best found (a line
    labelled with its time) and the original's time when known. Failed evaluations have
    no time: they are drawn apart, in a strip below, one row per failure class."""
    if not series.evaluations or not available()[0]:
        return None
    failed = [e for e in series.evaluations if e.time_ms is None]
    figure = _figure(8.0, 3.4 if failed else 3.0)
    if failed:
        axes, strip = figure.subplots(2, 1, sharex=True, height_ratios=[5, 1 + 0.3 * len({e.status for e in failed})])
    else:
        axes, strip = figure.add_subplot(), None
    timed = [(e.index, e.time_ms) for e in series.evaluations if e.time_ms is not None]
    if timed:
        axes.scatter([i for i, _ in timed], [t for _, t in timed], s=14, color="#3182bd", label="evaluation", zorder=3)
    best = [(e.index, b) for e, b in zip(series.evaluations, series.best_so_far()) if b is not None]
    if best:
        axes.step([i for i, _ in best], [b for _, b in best], where="post", color="#fd8d3c", label="best so far")
    found = series.best
    if found is not None and found.time_ms is not None:
        axes.axhline(
            found.time_ms,
            color="#31a354",
            linestyle="--",
            linewidth=1,
            label=f"best {found.time_ms:.4g} ms (evaluation {found.index})",
        )
    if original_ms is not None:
        axes.axhline(original_ms, color="#555", linestyle=":", linewidth=1, label=f"original {original_ms:.4g} ms")
    axes.set_ylabel("time (ms)")
    axes.set_title(f"{series.kernel} ({series.strategy or 'tune'})", fontsize="medium")
    if timed or original_ms is not None:  # beside the plot: never over an evaluation
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        axes.text(0.5, 0.5, "no evaluation ran successfully", transform=axes.transAxes, ha="center")
    if strip is not None:
        classes = sorted({e.status for e in failed})
        strip.scatter(
            [e.index for e in failed], [classes.index(e.status) for e in failed], marker="x", color="#cb181d", zorder=3
        )
        strip.set_yticks(range(len(classes)), classes, fontsize="small")
        strip.set_ylim(-0.6, len(classes) - 0.4)
        strip.set_ylabel("failed", fontsize="small")
        strip.set_xlabel("evaluation")
    else:
        axes.set_xlabel("evaluation")
    return _svg(figure, f"tune-{series.file}-{series.kernel}-{series.strategy}")


def parameters_plot(series: TuneSeries) -> str | None:
    """Time against each tuned parameter (one panel per parameter taking more than one
    value; values in their natural order, as categories): where the time goes as a value
    changes, the best configuration ringed. Failures sit apart, in a row above the panel."""
    names = [n for n in _param_names(series) if len({_key(e.params.get(n)) for e in series.evaluations}) > 1]
    if not names or not available()[0]:
        return None
    columns = min(3, len(names))
    rows = (len(names) + columns - 1) // columns
    figure = _figure(6.4, 0.4 + 2.2 * rows)
    best = series.best
    for slot, name in enumerate(names):
        axes = figure.add_subplot(rows, columns, slot + 1)
        values = sorted({_key(e.params.get(name)) for e in series.evaluations})
        position = {v: i for i, v in enumerate(values)}
        timed = [(position[_key(e.params.get(name))], e.time_ms) for e in series.evaluations if e.time_ms is not None]
        axes.scatter([x for x, _ in timed], [t for _, t in timed], s=12, color="#3182bd", alpha=0.7, zorder=3)
        if best is not None and best.time_ms is not None:
            axes.scatter(
                [position[_key(best.params.get(name))]],
                [best.time_ms],
                s=70,
                facecolors="none",
                edgecolors="#31a354",
                linewidths=1.5,
                zorder=4,
            )
        failed = [position[_key(e.params.get(name))] for e in series.evaluations if e.time_ms is None]
        if failed:  # above the plot area, in axes coordinates: a failure has no time to plot
            axes.scatter(
                failed,
                [1.04] * len(failed),
                marker="x",
                color="#cb181d",
                s=14,
                clip_on=False,
                transform=axes.get_xaxis_transform(),
            )
        axes.set_xticks(
            range(len(values)), [_label(v) for v in values], fontsize="x-small", rotation=45 if len(values) > 6 else 0
        )
        axes.set_xlabel(name, fontsize="small")
        if slot % columns == 0:
            axes.set_ylabel("time (ms)", fontsize="small")
    figure.suptitle(f"{series.kernel}: time against each parameter (ringed: best; x above: failed)", fontsize="medium")
    return _svg(figure, f"params-{series.file}-{series.kernel}-{series.strategy}")


def _param_names(series: TuneSeries) -> list[str]:
    names: dict[str, None] = {}
    for e in series.evaluations:
        names.update(dict.fromkeys(e.params))
    return list(names)


def _key(value: Any) -> tuple[int, float, str]:
    """A sort key for parameter values of mixed types (numbers in order, then the rest by text)."""
    if isinstance(value, bool) or value is None:
        return (0, float(bool(value)) if value is not None else -1.0, repr(value))
    if isinstance(value, (int, float)):
        return (1, float(value), repr(value))
    return (2, 0.0, str(value))


def _label(key: tuple[int, float, str]) -> str:
    return key[2] if key[0] != 1 else (str(int(key[1])) if key[1].is_integer() else f"{key[1]:g}")


def l2_plot(pset: PredictionSet, chosen: str | None = None) -> str | None:
    """Per block order, the predicted L2 hit rate (left) and DRAM bytes, reads and writes
    stacked (right); the chosen order in orange, row-major (the original) in grey."""
    rows = [p for p in pset.predictions if p.dram_read_bytes is not None]
    if not rows or not available()[0]:
        return None
    figure = _figure(7.2, 0.9 + 0.32 * len(rows))
    hit_axes, dram_axes = figure.subplots(1, 2, sharey=True, width_ratios=[2, 3])
    colors = [
        "#e6550d" if chosen and p.pattern == chosen else "#969696" if p.pattern == "row" else "#756bb1" for p in rows
    ]
    labels = [p.pattern for p in rows]
    hits = hit_axes.barh(labels, [100 * (p.l2_hit_rate or 0.0) for p in rows], color=colors)
    hit_axes.bar_label(
        hits,
        labels=["?" if p.l2_hit_rate is None else f"{100 * p.l2_hit_rate:.0f}%" for p in rows],
        fontsize="small",
        padding=2,
    )
    hit_axes.set_xlim(0, 125)
    hit_axes.set_xticks([0, 50, 100])
    hit_axes.set_title("L2 hit rate (%)", fontsize="small")
    hit_axes.invert_yaxis()
    scale, unit = (1e9, "GB") if max((p.dram_read_bytes or 0.0) for p in rows) >= 1e9 else (1e6, "MB")
    reads = [(p.dram_read_bytes or 0.0) / scale for p in rows]
    writes = [(p.dram_write_bytes or 0.0) / scale for p in rows]
    dram_axes.barh(labels, reads, color=colors)
    stacked = dram_axes.barh(labels, writes, left=reads, color=colors, alpha=0.45)
    dram_axes.bar_label(
        stacked, labels=[f"{r:.3g} + {w:.3g}" for r, w in zip(reads, writes)], fontsize="small", padding=2
    )
    dram_axes.set_title(f"DRAM {unit}: read + write (lighter)", fontsize="small")
    dram_axes.margins(x=0.35)
    figure.suptitle(
        f"{pset.kernel}: L2 model ({pset.hw or 'hw ?'}, size {pset.size or '?'}; "
        f"{'orange: proposed, ' if chosen else ''}grey: row-major)",
        fontsize="medium",
    )
    return _svg(figure, f"l2-{pset.file}-{pset.kernel}-{pset.size}")
