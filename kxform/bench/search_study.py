"""The search study of tools/bench_pipeline.py (`--study`): where `kxform tune` spends its
budget on a GPU, before and after the cost model, the early cut-off and the transfer
prior (docs/search.md, "Spending the budget where the speed is").

Per naive kernel, `kxform tune` runs without `--pass` (the pipeline a user gets):

* `before`: `--budget 40 --no-cost-model --no-cut-off --no-transfer`, a database of its own;
* `after`: `--budget 40`, one database shared by the kernels in the manifest's order (a
  kernel starts from what the ones tuned before it taught: the transfer prior);
* `reference`: `--budget 200`, a shared database of its own.

and the study reports, per kernel and over the corpus: the best found at 40 against
the best found at 200 (the goal: within 10% for every kernel), the share of evaluations
timed slower than twice the original (the goal: at most 10%; a pruned configuration is
not timed, a cut-off one is timed on its first launches), how many were pruned and cut
off, the evaluation cost spent, and the cost model's rank correlation per kernel.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Runner = Callable[[list[str], float, str], "tuple[int | None, str, str]"]
"""Runs a command in a folder within a time limit: (exit code, None past it; stdout; stderr)."""

VARIANTS = {
    "before": (40, ("--no-cost-model", "--no-cut-off", "--no-transfer"), False),
    "after": (40, (), True),
    "reference": (200, (), True),
}
"""Name -> (budget, extra flags, whether the kernels share one database)."""
NEAR = 0.10
"""The goal: the best at budget 40 within this of the best at 200."""
SLOW = 2.0
"""An evaluation slower than this times the original counts as a wasted one."""


def command(base: list[str], budget: int, flags: tuple[str, ...], db: Path) -> list[str]:
    """`base` (tools/bench_pipeline.py's tune command) with the variant's budget, flags and
    database, and no `--pass`: the study tunes the pipeline a user gets."""
    out: list[str] = []
    words = iter(base)
    for word in words:
        if word in ("--budget", "--db", "--pass"):
            next(words, None)  # and its value
            continue
        out.append(word)
    return [*out, "--budget", str(budget), "--db", str(db), *flags]


def variant_column(summary: dict[str, Any]) -> dict[str, Any]:
    """What one tune run found and where it spent its budget."""
    evaluations = summary.get("evaluations") or []
    original = summary.get("original_ms")
    timed = [e for e in evaluations if e.get("time_ms") is not None]
    slow = [e for e in timed if original and e["time_ms"] > SLOW * original]
    best = summary.get("best") or {}
    return {
        "best_ms": best.get("time_ms"),
        "best_config": best.get("config"),
        "original_ms": original,
        "evaluated": summary.get("evaluated"),
        "timed": len(timed),
        "slow": len(slow),
        "pruned": summary.get("pruned", 0),
        "cut_off": summary.get("cut_off", 0),
        "failed": summary.get("failed"),
        "cost_s": summary.get("cost_s"),
        "kendall_tau": (summary.get("cost_model") or {}).get("kendall_tau"),
        "stages": summary.get("stages"),
        "speedup": original / best["time_ms"] if original and best.get("time_ms") else None,
    }


def study_column(base: Callable[[Path], list[str]], run: Runner, shared: Path, timeout_s: float) -> dict[str, Any]:
    """The three variants of one kernel. `base`: the kernel's `kxform tune --json` command
    given a scratch folder (tools/bench_pipeline.py's); `run`: runs a command in a folder
    within a time limit ((exit code or None past it, stdout, stderr)); `shared`: the folder
    of the shared databases."""
    out: dict[str, Any] = {}
    for name, (budget, flags, share) in VARIANTS.items():
        with tempfile.TemporaryDirectory(prefix="kxform-study-") as scratch:
            db = shared / f"{name}.sqlite" if share else Path(scratch) / "tune.sqlite"
            code, stdout, stderr = run(command(base(Path(scratch)), budget, flags, db), timeout_s, scratch)
        if code is None:
            out[name] = {"status": "timed out", "detail": f"ran past {timeout_s:g} s"}
            continue
        try:
            summary = json.loads(stdout) if code == 0 else None
        except json.JSONDecodeError:
            summary = None
        if summary is None:
            said = (stderr or stdout).strip().splitlines()
            out[name] = {"status": "failed", "detail": said[-1] if said else f"exit {code}"}
            continue
        out[name] = {"status": "tuned", **variant_column(summary)}
    return out


def study_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Over the kernels: how many reach the goal at 40, and the shares of slow evaluations."""
    studied = [r["study"] for r in rows if "study" in r]
    near: list[bool] = []
    for study in studied:
        after, reference = study.get("after", {}), study.get("reference", {})
        if after.get("best_ms") and reference.get("best_ms"):
            near.append(after["best_ms"] <= reference["best_ms"] * (1 + NEAR))
    out: dict[str, Any] = {"kernels": len(studied), "within_10pct_at_40": sum(near), "compared": len(near)}
    for name in VARIANTS:
        columns = [s[name] for s in studied if s.get(name, {}).get("status") == "tuned"]
        timed = sum(c["timed"] for c in columns)
        out[name] = {
            "kernels": len(columns),
            "timed": timed,
            "slow_share": sum(c["slow"] for c in columns) / timed if timed else None,
            "pruned": sum(c["pruned"] for c in columns),
            "cut_off": sum(c["cut_off"] for c in columns),
            "cost_s": round(sum(c["cost_s"] or 0.0 for c in columns), 1),
            "geomean_speedup": _geomean([c["speedup"] for c in columns if c.get("speedup")]),
        }
    return out


def print_study(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    header = ("KERNEL", "ORIGINAL ms", "BEFORE@40", "AFTER@40", "AFTER@200", "40/200", "SLOW before/after", "TAU")
    table = [header]
    for row in rows:
        study = row.get("study")
        if not study:
            continue
        before, after, reference = (study.get(n, {}) for n in VARIANTS)
        ratio = (
            after.get("best_ms") / reference["best_ms"] if after.get("best_ms") and reference.get("best_ms") else None
        )
        table.append(
            (
                row["name"],
                _ms(after.get("original_ms") or before.get("original_ms")),
                _ms(before.get("best_ms")),
                _ms(after.get("best_ms")),
                _ms(reference.get("best_ms")),
                "-" if ratio is None else f"{ratio:.3f}",
                f"{_share(before)} / {_share(after)}",
                "-" if after.get("kendall_tau") is None else f"{after['kendall_tau']:+.2f}",
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    print(
        f"\nbest at 40 within {NEAR:.0%} of the best at 200: {summary['within_10pct_at_40']} of "
        f"{summary['compared']} kernels"
    )
    for name in VARIANTS:
        s = summary[name]
        share = "-" if s["slow_share"] is None else f"{s['slow_share']:.0%}"
        print(
            f"{name}: {s['timed']} evaluations timed over {s['kernels']} kernels, {share} slower than "
            f"{SLOW:g}x the original; {s['pruned']} pruned, {s['cut_off']} cut off; evaluation cost "
            f"{s['cost_s']} s; geometric-mean speed-up {_x(s['geomean_speedup'])}"
        )


def _share(column: dict[str, Any]) -> str:
    return f"{column['slow']}/{column['timed']}" if column.get("timed") is not None else "-"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None
