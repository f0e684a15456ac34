"""How `kxform tune` shows what a run found: a kernel's best and what won against the
original, the table of a directory or of several sizes, a cluster's job lines. Results
go to stdout, the closing counts and the log's path to stderr; with `--json` only the
record goes to stdout (kxform.cli.tune prints it) and the lines a script may still
need (a refused write) to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

from kxform.errors import printable
from kxform.orchestrate.tune_request import TuneOutcome
from kxform.search.spread import JobResult

TABLE_HEADER = ("FILE", "KERNEL", "PASSES", "VALUES", "ORIGINAL ms", "BEST ms", "SPREAD ms", "SPEED-UP")
SIZES_HEADER = ("SIZE", "VARIABLES", "PASSES", "VALUES", "ORIGINAL ms", "BEST ms", "SPEED-UP")


def print_kernel(outcome: TuneOutcome, as_json: bool) -> None:
    summary = outcome.record
    if not as_json:
        _print_summary(summary, outcome.log_path or "")
        workers = summary.get("workers")
        if workers:
            print(
                f"kxform: {len(workers['workers'])} workers, {workers['wall_s']:.1f} s, "
                f"{workers['resubmitted']} resubmitted",
                file=sys.stderr,
            )
    if outcome.refused:
        print(printable(f"kxform: --write: {summary['file']}: not written: {outcome.refused}"), file=sys.stderr)


def _print_summary(summary: dict[str, Any], log_path: str) -> None:
    best = summary["best"]
    if best is None:
        print(f"kxform: no configuration ran successfully in {summary['evaluated']} evaluations", file=sys.stderr)
    else:
        values = printable(", ".join(f"{k}={v}" for k, v in best["config"].items()))  # recorded values are data
        print(f"best: {best['time_ms']:.4g} ms ({values}), found at evaluation {best['found_at']}")
        if summary.get("original_ms"):
            print(
                f"original: {summary['original_ms']:.4g} ms at size {summary['size']}: speedup "
                f"{summary['original_ms'] / best['time_ms']:.3f}x"
            )
    line = result_line(summary)
    if line:
        print(format_table([TABLE_HEADER, table_row(summary)]))
        print(line)
    model = summary.get("cost_model") or {}
    if model.get("pairs"):
        print(
            f"cost model: rank correlation {model['kendall_tau']:.2f} (Kendall) over {model['pairs']} "
            f"measured configurations; {summary.get('pruned', 0)} pruned, {summary.get('cut_off', 0)} cut off"
        )
    print(
        f"kxform: {summary['evaluated']} evaluations ({summary['measured']} measured, "
        f"{summary['from_database']} from the database, {summary['failed']} failed) of {summary['space_size']} "
        f"configurations, stopped: {summary['stopped']}, cost {summary['cost_s']:.1f} s. Log: {log_path}",
        file=sys.stderr,
    )


def print_directory(outcome: TuneOutcome, as_json: bool) -> None:
    if as_json:
        return
    summaries = outcome.summaries
    print(format_table([TABLE_HEADER, *(table_row(s) for s in summaries)]))
    for note in (n for n in map(table_note, summaries) if n):
        print(note)
    print(f"kxform: {len(summaries)} kernels tuned, {outcome.failed} failed. Log: {outcome.log_path}", file=sys.stderr)


def print_sizes(outcome: TuneOutcome, as_json: bool) -> None:
    if as_json:
        return
    rows = [SIZES_HEADER]
    for summary in outcome.record["sizes"]:
        result = summary.get("result") or {}
        values = ", ".join(f"{k}={v}" for k, v in result.get("values", {}).items()) or "(original kept)"
        size = ",".join(f"{k}={v}" for k, v in summary.get("size_values", {}).items())
        rows.append(
            (
                summary.get("size") or "-",
                size,
                ",".join(result.get("passes", [])) or "-",
                printable(values),
                _ms(result.get("original_ms")),
                _ms(result.get("time_ms")),
                f"{result['speedup']:.3f}x" if result.get("speedup") else "-",
            )
        )
    print(format_table(rows))
    dispatch = outcome.record["dispatch"]
    if dispatch:
        print(f"kxform: wrote {dispatch['path']} ({len(dispatch['classes'])} size classes)", file=sys.stderr)
    print(f"kxform: {len(outcome.record['sizes'])} sizes tuned. Log: {outcome.log_path}", file=sys.stderr)


def print_cluster(outcome: TuneOutcome, as_json: bool) -> None:
    if as_json:
        return
    for skipped in outcome.record["skipped"]:
        print(f"skipped {skipped['kernel']}: {skipped['reason']}", file=sys.stderr)


def print_left_out(kernel: str, name: str, why: str) -> None:
    """A pass named with `--pass` that has nothing to tune in the kernel (the others are
    tuned without it), on stderr before the search."""
    print(printable(f"kxform: {name} left out of the tuning of '{kernel}': {why}"), file=sys.stderr)


def print_job(result: JobResult) -> None:
    """One finished job of a cluster run, as it finishes."""
    best = result.best()
    if result.error:
        print(f"{result.label}: failed: {result.error}")
    elif best is None:
        print(f"{result.label}: no configuration ran ({len(result.steps)} evaluations) on {result.host}")
    else:
        values = ", ".join(f"{k}={v}" for k, v in best[0].items())
        print(
            f"{result.label}: best {best[1].time_ms:.4g} ms ({values}) of {len(result.steps)} evaluations "
            f"on {result.host} GPU {result.devices}"
        )


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
