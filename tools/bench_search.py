#!/usr/bin/env python3
"""Replay kxform's search strategies and Kernel Tuner's on recorded tuning spaces.

    python tools/bench_search.py [--space FILE ...] [--seeds N] [--budget N] [--prior FILE ...] [--json OUT]

Every space (default: every recording in ../shared/bench-spaces/, found from the
repository root upwards, or $KXFORM_BENCH_SPACES) is replayed by each strategy for
`--seeds` seeds with the same budget of evaluations. Kernel Tuner (the optional extra
`bench`) runs every strategy it has in its own simulation mode on the same file; when
it is missing, the table has kxform's rows only and says so. kxform's default strategy
runs twice: without a prior, and with a prior from the other recordings of the same
kernel (`--prior` files, default: the other given spaces of the same kernel).

Per space and strategy the table gives the median and interquartile range of the
evaluations, and of the recorded GPU time (compile + verification + benchmark), to
reach a configuration within 5% and within 1% of the optimum, and the fraction of runs
that reach 1% within the budget. The goal lines compare kxform's default with Kernel
Tuner's best strategy on that space (the lowest median evaluations to 1%).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per worker process


import numpy as np

from kxform.bench.paths import spaces_dir
from kxform.errors import KxformError
from kxform.search.prior import PriorSource, build_prior
from kxform.search.recorded import Recording, load_definition, load_recording
from kxform.search.replay import Run, replay
from kxform.search.strategy import DEFAULT, Prior

THRESHOLDS = (0.05, 0.01)
KXFORM_STRATEGIES = ("model", "random")


def default_spaces() -> list[Path]:
    folder = spaces_dir()
    if folder is None:
        raise SystemExit("bench_search: no ../shared/bench-spaces found above the repository; pass --space FILE")
    return sorted(
        p for p in folder.iterdir() if p.name.endswith((".json.gz", ".json")) and not p.name.endswith(".space.json")
    )


# ---------------------------------------------------------------------- kxform runs

_LOADED: dict[str, Recording] = {}
_PRIORS: dict[str, Prior | None] = {}


def _recording(path: str) -> Recording:
    if path not in _LOADED:
        _LOADED[path] = load_recording(path)
    return _LOADED[path]


def _source(recording: Recording) -> PriorSource:
    search = recording.search
    return PriorSource(
        Path(recording.path).name,
        [(search.config(r), recording.objective.records[search.key(r)].time_ms) for r in range(len(search))],
    )


def _prior(path: str, prior_paths: tuple[str, ...]) -> Prior | None:
    key = path + "|" + ",".join(prior_paths)
    if key not in _PRIORS:
        _PRIORS[key] = build_prior(_recording(path).search, [_source(_recording(p)) for p in prior_paths])
    return _PRIORS[key]


def run_kxform(job: tuple[str, str, int, int, tuple[str, ...]]) -> dict[str, Any]:
    """One replay of a kxform strategy; stops once within 1% of the optimum (nothing
    after that changes the figures)."""
    path, strategy, seed, budget, prior_paths = job
    recording = _recording(path)
    optimum = min(recording.times().values())
    prior = _prior(path, prior_paths) if prior_paths else None
    run = replay(
        recording.search,
        recording.objective,
        strategy,
        seed,
        budget,
        prior=prior,
        stop_below=optimum * (1 + min(THRESHOLDS)),
    )
    return {"times": list(run.times), "costs": list(run.costs_s), "strategy_s": run.strategy_s}


# ---------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Row:
    label: str
    runs: int
    evals: dict[float, list[float]]
    gpu_s: dict[float, list[float]]
    errors: list[str]
    truncated: dict[float, tuple[int, ...]] | None = None
    """Per threshold, the evaluations made by the runs the per-run timeout cut before
    they reached it (counted as not reaching it)."""
    wall_s: float | None = None
    """Mean seconds per run (Kernel Tuner's rows, where recorded)."""

    def median_evals(self, within: float) -> float:
        return float(np.median(self.evals[within])) if self.evals[within] else float("inf")

    def median_exact(self, within: float) -> bool:
        """Whether the median stands although some runs were cut: each cut run stopped
        beyond it, so it would have ranked above the median wherever it ended."""
        return all(made >= self.median_evals(within) for made in (self.truncated or {}).get(within, ()))

    def reached(self, within: float) -> float:
        values = self.evals[within]
        return sum(np.isfinite(values)) / len(values) if values else 0.0

    def to_json(self) -> dict[str, Any]:
        cut = len((self.truncated or {}).get(min(THRESHOLDS), ()))
        out: dict[str, Any] = {
            "label": self.label,
            "runs": self.runs,
            "errors": self.errors[:3],
            "truncated_runs": cut,
            "mean_run_s": self.wall_s,
        }
        for within in THRESHOLDS:
            tag = f"{round(within * 100)}pct"
            out[f"evals_{tag}"] = _quartiles(self.evals[within])
            out[f"gpu_s_{tag}"] = _quartiles(self.gpu_s[within])
            out[f"reached_{tag}"] = self.reached(within)
            out[f"median_exact_{tag}"] = self.median_exact(within)
        return out


def _quartiles(values: list[float]) -> list[float | None]:
    if not values:
        return [None, None, None]
    q = np.percentile(np.asarray(values, dtype=float), [25, 50, 75], method="lower")
    return [float(v) if np.isfinite(v) else None for v in q]


def score(label: str, results: list[dict[str, Any]], optimum: float) -> Row:
    evals: dict[float, list[float]] = {w: [] for w in THRESHOLDS}
    gpu: dict[float, list[float]] = {w: [] for w in THRESHOLDS}
    errors = sorted(
        {r["error"] for r in results if "error" in r} | {r["error_note"] for r in results if "error_note" in r}
    )
    ok = [r for r in results if "error" not in r]
    truncated: dict[float, list[int]] = {w: [] for w in THRESHOLDS}
    for result in ok:
        run = Run(tuple(result["times"]), tuple(result["costs"]))
        for within in THRESHOLDS:
            reached = run.reach(optimum, within)
            evals[within].append(float(reached[0]) if reached else float("inf"))
            gpu[within].append(reached[1] if reached else float("inf"))
            if result.get("truncated") and reached is None:
                truncated[within].append(len(result["times"]))
    walls = [r["wall_s"] for r in ok if "wall_s" in r]
    return Row(
        label,
        len(ok),
        evals,
        gpu,
        errors,
        {w: tuple(v) for w, v in truncated.items()},
        float(np.mean(walls)) if walls else None,
    )


def _cell(values: list[float], budget_note: str, fmt: str) -> str:
    if not values:
        return "-"
    array = np.asarray(values, dtype=float)
    low, high = np.percentile(array, [25, 75], method="lower")
    mid = np.median(array)
    show = lambda v: format(v, fmt) if np.isfinite(v) else budget_note  # noqa: E731
    return f"{show(mid)} [{show(low)}-{show(high)}]"


def print_table(name: str, optimum: float, size: int, rows: list[Row], budget: int) -> None:
    print(f"\n## {name}: {size} valid configurations, optimum {optimum:.4g} ms, budget {budget}")
    print(
        f"{'strategy':<48}{'runs':>5}  {'evals to 5%':>20}{'evals to 1%':>20}{'GPU s to 5%':>24}"
        f"{'GPU s to 1%':>24}{'reach 1%':>9}"
    )
    for row in rows:
        if not row.runs:
            print(f"{row.label:<48}{0:>5}  not run: {row.errors[0] if row.errors else 'no cached run'}")
            continue
        over = f">{budget}"
        print(
            f"{row.label:<48}{row.runs:>5}  {_cell(row.evals[0.05], over, '.0f'):>20}"
            f"{_cell(row.evals[0.01], over, '.0f'):>20}{_cell(row.gpu_s[0.05], 'never', '.0f'):>24}"
            f"{_cell(row.gpu_s[0.01], 'never', '.0f'):>24}{row.reached(0.01):>9.2f}"
            + (
                f"  ({len(row.truncated[0.01])} cut by the timeout"
                + ("" if row.median_exact(0.01) else ", median not exact")
                + ")"
                if row.truncated and row.truncated[0.01]
                else ""
            )
        )


# ---------------------------------------------------------------------- driver


def _priors_for(path: Path, recording: Recording, spaces: list[Path], given: list[Path]) -> tuple[str, ...]:
    pool = given or spaces
    out = []
    for other in pool:
        if other.resolve() == path.resolve():
            continue
        candidate = load_recording(other)
        if candidate.kernel == recording.kernel and candidate.space.names == recording.space.names:
            out.append(str(other))
    return tuple(out)


def run_kernel_tuner(
    spaces: list[Path], recordings: dict[Path, Recording], args: argparse.Namespace, pool: Any
) -> tuple[dict[Path, list[Row]], str]:
    """Kernel Tuner's rows: every strategy (or `--kt-strategy`) for `--seeds` seeds on
    every space, each run stopped once within 1% of the optimum, from the on-disk
    cache where a run is there. Runs go seed by seed across spaces and strategies, so
    an interrupted benchmark leaves every strategy with about the same number of seeds."""
    try:
        from kxform.bench import kt_replay
    except ImportError:
        return {}, "kt_replay helper missing"
    version = kt_replay.kt_version()
    if version is None:
        return {}, "Kernel Tuner is not installed (pip install -e '.[bench]'): its rows are missing"
    from kxform.cache import cache_root

    folder = cache_root() / "bench_search"
    scratch = folder / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    cache = kt_replay.RunCache(folder / "kt_runs.sqlite")
    labels = [
        (label, options)
        for label, options in kt_replay.kt_strategies()
        if not args.kt_strategy or label in args.kt_strategy or label.split(":")[0] in args.kt_strategy
    ]
    planned: list[tuple[Path, str, dict[str, Any]]] = []
    for path in spaces:
        recording = recordings[path]
        restrictions = load_definition(Path(recording.definition))[1] if recording.definition else []
        target = min(recording.times().values()) * (1 + min(THRESHOLDS))
        digest, jobs = kt_replay.make_jobs(
            path,
            restrictions,
            args.budget,
            args.seeds,
            scratch,
            labels,
            args.timeout,
            target_ms=target,
            stall_s=args.stall,
        )
        planned.extend((path, digest, job) for job in jobs)
    planned.sort(key=lambda item: item[2]["seed"])  # seed by seed: balanced when interrupted
    todo = [
        (path, digest, job)
        for path, digest, job in planned
        if cache.lookup(digest, job["label"], job["seed"], args.budget, version, job["target_ms"]) is None
    ]
    print(
        f"# Kernel Tuner {version}: {len(planned) - len(todo)} runs cached, "
        f"{0 if args.kernel_tuner_cached else len(todo)} to run",
        file=sys.stderr,
        flush=True,
    )
    if not args.kernel_tuner_cached and todo:
        done = 0
        for index, result in pool.imap_unordered(_indexed_kt, list(enumerate(job for _, _, job in todo))):
            path, digest, job = todo[index]
            cache.put(
                kt_replay.RunCache.key(digest, job["label"], job["seed"], args.budget, version, job["target_ms"]),
                result,
            )
            done += 1
            if done % 50 == 0:
                print(f"# Kernel Tuner: {done}/{len(todo)} runs", file=sys.stderr, flush=True)
    out: dict[Path, list[Row]] = {}
    for path in spaces:
        results: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in labels}
        for p, digest, job in planned:
            if p != path:
                continue
            found = cache.lookup(digest, job["label"], job["seed"], args.budget, version, job["target_ms"])
            if found is not None:
                results[job["label"]].append(found)
        optimum = min(recordings[path].times().values())
        out[path] = [score(f"KT {label}", res, optimum) for label, res in results.items()]
    names = ", ".join(label for label, _ in labels)
    return out, f"Kernel Tuner {version} strategies run: {names}"


def _indexed_kt(item: tuple[int, dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    from kxform.bench import kt_replay

    return item[0], kt_replay.run_kt(item[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", nargs="+", type=Path, default=[], metavar="FILE", help="recordings to replay")
    parser.add_argument("--seeds", type=int, default=30, help="runs per strategy and space (default: 30)")
    parser.add_argument("--budget", type=int, default=1000, help="evaluations per run (default: 1000)")
    parser.add_argument(
        "--prior",
        nargs="+",
        type=Path,
        default=[],
        metavar="FILE",
        help="recordings to warm-start from (default: the other spaces of the same kernel)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every figure as JSON")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per Kernel Tuner run before it is dropped")
    parser.add_argument(
        "--stall",
        type=float,
        default=15.0,
        help="seconds without a new evaluation before a Kernel Tuner run is cut (default: 15)",
    )
    parser.add_argument("--no-kernel-tuner", action="store_true", help="replay kxform's strategies only")
    parser.add_argument(
        "--kernel-tuner-cached",
        action="store_true",
        help="use only the Kernel Tuner runs already cached (the runs column says how many)",
    )
    parser.add_argument(
        "--kt-strategy",
        nargs="+",
        default=[],
        metavar="NAME",
        help="run only these Kernel Tuner strategies (default: all)",
    )
    parser.add_argument("--kt-only", action="store_true", help="run (and cache) Kernel Tuner's runs only")
    parser.add_argument(
        "--min-runs",
        type=int,
        default=10,
        help="runs a Kernel Tuner strategy needs to count as its best on a space (default: 10)",
    )
    args = parser.parse_args()
    if args.seeds < 1 or args.budget < 1:
        parser.error("--seeds and --budget must be at least 1")
    spaces = args.space or default_spaces()
    try:
        recordings = {p: load_recording(p) for p in spaces}
        priors = {p: _priors_for(p, recordings[p], spaces, args.prior) for p in spaces}
    except KxformError as exc:
        print(f"bench_search: error: {exc}", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"budget": args.budget, "seeds": args.seeds, "spaces": {}}
    with mp.get_context("spawn").Pool(max(args.jobs, 1), maxtasksperchild=50) as pool:
        kt_rows, kt_note = (
            ({}, "Kernel Tuner skipped (--no-kernel-tuner)")
            if args.no_kernel_tuner
            else run_kernel_tuner(spaces, recordings, args, pool)
        )
        print(f"# {kt_note}")
        report["kernel_tuner"] = kt_note
        if args.kt_only:
            for path, rows in kt_rows.items():
                recording = recordings[path]
                print_table(path.name, min(recording.times().values()), len(recording.search), rows, args.budget)
            return 0
        for path in spaces:
            recording = recordings[path]
            optimum = min(recording.times().values())
            variants = [(name, ()) for name in KXFORM_STRATEGIES]
            if priors[path]:
                variants.append((DEFAULT, priors[path]))
            rows = []
            for name, prior_paths in variants:
                jobs = [(str(path), name, seed, args.budget, prior_paths) for seed in range(args.seeds)]
                results = pool.map(run_kxform, jobs)
                label = f"kxform {name}" + (
                    " + prior " + ",".join(Path(p).name.split(".")[0] for p in prior_paths) if prior_paths else ""
                )
                rows.append(score(label, results, optimum))
                strategy_s = sum(r["strategy_s"] for r in results) / max(sum(len(r["times"]) for r in results), 1)
                print(f"# {path.name}: {label}: {1000 * strategy_s:.2f} ms of search per proposal", file=sys.stderr)
            all_rows = rows + kt_rows.get(path, [])
            print_table(path.name, optimum, len(recording.search), all_rows, args.budget)
            report["spaces"][path.name] = {
                "optimum_ms": optimum,
                "valid": len(recording.search),
                "priors": list(priors[path]),
                "rows": [r.to_json() for r in all_rows],
                **goal(rows, kt_rows.get(path, []), args.min_runs),
            }
    print_goals(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


def goal(rows: list[Row], kt: list[Row], min_runs: int) -> dict[str, Any]:
    """kxform's default against Kernel Tuner's best strategy (median evaluations to 1%)
    among those with at least `min_runs` runs (fewer can win by luck); strategies
    with fewer runs and a lower median are listed beside it."""
    ran = [r for r in kt if r.runs >= min_runs]
    if not ran:
        return {}
    key = lambda r: (r.median_evals(0.01), -r.reached(0.01))  # noqa: E731
    best = min(ran, key=key)
    plain = next(r for r in rows if r.label == f"kxform {DEFAULT}")
    primed = next((r for r in rows if r.label.startswith(f"kxform {DEFAULT} + prior")), None)
    out = {
        "kt_best": best.label,
        "kt_best_runs": best.runs,
        "kt_best_evals_1pct": best.median_evals(0.01),
        "kt_best_median_exact": best.median_exact(0.01),
        "kt_fewer_runs_lower": [
            f"{r.label} ({r.runs} runs, {r.median_evals(0.01):.0f})"
            for r in kt
            if 0 < r.runs < min_runs and key(r) < key(best)
        ],
        "kxform_evals_1pct": plain.median_evals(0.01),
        "ratio": plain.median_evals(0.01) / best.median_evals(0.01),
    }
    if primed is not None:
        out["kxform_prior_evals_1pct"] = primed.median_evals(0.01)
        out["ratio_prior"] = primed.median_evals(0.01) / best.median_evals(0.01)
    return out


def print_goals(report: dict[str, Any]) -> None:
    print("\n## Goal: kxform default <= 1/3 of Kernel Tuner's best median evaluations to 1% (<= 1/10 with a prior)")
    for name, data in report["spaces"].items():
        if "kt_best" not in data:
            print(f"{name}: no Kernel Tuner rows")
            continue
        line = (
            f"{name}: {data['kt_best']} {data['kt_best_evals_1pct']:.0f}; kxform {data['kxform_evals_1pct']:.0f} "
            f"(ratio {data['ratio']:.2f}: {'met' if data['ratio'] <= 1 / 3 else 'NOT met'})"
        )
        if "ratio_prior" in data:
            line += (
                f"; with prior {data['kxform_prior_evals_1pct']:.0f} (ratio {data['ratio_prior']:.2f}: "
                f"{'met' if data['ratio_prior'] <= 0.1 else 'NOT met'})"
            )
        if data.get("kt_fewer_runs_lower"):
            line += f" [fewer than the minimum runs, lower: {', '.join(data['kt_fewer_runs_lower'])}]"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
