#!/usr/bin/env python3
"""Tune corpus kernels on a GPU with kxform's GPU objective and print what it took.

    python tools/bench_tune_gpu.py [--quick] [--out results.json] [--budget N] [--case NAME ...]

Per kernel and pass pipeline (every corpus kernel the tile pass lifts, under `tile`, and
sgemm_tiled and the jacobi5 stencil also under `tile,swizzle`): every configuration is rewritten,
compiled, verified against the original and timed (kxform.search.kernel_objective).
Where the space is small (at most --exhaustive-limit valid configurations) it is swept
exhaustively first, and the default strategy then runs on the sweep's measurements (no
configuration is measured twice); otherwise the strategy runs with --budget
evaluations. Printed per case: space size, configurations evaluated and how many
verified, failures by class, evaluations the strategy needed to reach its best and to
reach within 2% of the best known, the best against the default configuration and the
original code (speedup), and the seconds per evaluation in each step (rewrite with the
passes' checks, compile, verify, time) and in the search itself. Against a yardstick
measured in the same run (tools/gpu_baselines.py, its own process): for the GEMMs the
fraction of cuBLAS's speed (cuBLAS time over the kernel's), for memory-bound kernels the
fraction of the device-to-device copy bandwidth (least traffic over time); and the
geometric-mean speed-up over the original code (the original kept where nothing faster
verified).

A full run is about 250 evaluations (1-3 s each, builds in parallel with -j): split it
with --case where a command's time is limited. Needs a CUDA GPU with pycuda (exit 2
with the reason otherwise). `--quick` uses smaller timing sizes and small budgets, and
runs every `tile` case (about six minutes on an H100 with 16 build jobs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any


from kxform.bench.tune_cases import CASES, Loaded, load, pick, profile_for, require_gpu
from kxform.bench import yardsticks
from kxform.bench.output import geomean, mean, write_json

QUICK_CASES = tuple(c.name for c in CASES if c.passes == ("tile",))
NEAR = 0.02


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (under about 3 minutes)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--budget", type=int, help="evaluations per strategy run (default 40; quick 12)")
    p.add_argument(
        "--case",
        action="append",
        dest="cases",
        metavar="NAME",
        help=f"a case to run, repeatable (default: all; quick: {', '.join(QUICK_CASES)}); "
        f"cases: {', '.join(c.name for c in CASES)}",
    )
    p.add_argument("--strategy", default=None, help="kxform strategy (default: the default strategy)")
    p.add_argument("--exhaustive-limit", type=int, help="sweep spaces up to this size (default 100; quick 8)")
    p.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="candidates built in parallel")
    p.add_argument("--hw", help="hardware profile for the constraints (default: from the device)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baselines", action="store_true", help="skip the cuBLAS and copy yardsticks")
    args = p.parse_args(argv)
    if args.budget is not None and args.budget < 1:
        p.error("--budget must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    runtime = require_gpu("bench_tune_gpu")
    from kxform.search.strategy import DEFAULT

    strategy = args.strategy or DEFAULT
    budget = args.budget or (12 if args.quick else 40)
    limit = args.exhaustive_limit if args.exhaustive_limit is not None else (8 if args.quick else 100)
    hw = profile_for(runtime, args.hw)
    cases = pick(args.cases, QUICK_CASES if args.quick else tuple(c.name for c in CASES))
    device = runtime.device_info().name
    print(
        f"device: {device}; profile {hw}; strategy {strategy}; budget {budget}; exhaustive up to {limit}; "
        f"{args.jobs} build jobs{'; quick' if args.quick else ''}",
        flush=True,
    )
    results = []
    started = time.perf_counter()
    loaded_cases = [load(case, args.quick, hw) for case in cases]
    yardsticks = None if args.no_baselines else baselines(loaded_cases)
    with tempfile.TemporaryDirectory(prefix="kxform-bench-tune-") as scratch:
        for loaded in loaded_cases:
            try:
                result = run_case(loaded, runtime, strategy, budget, limit, args, Path(scratch))
            except Exception as exc:  # noqa: BLE001 - one case's failure must not lose the others' figures
                print(f"\n{loaded.case.name}: failed: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
                results.append(
                    {
                        "case": loaded.case.name,
                        "passes": list(loaded.case.passes),
                        "failed": f"{type(exc).__name__}: {exc}",
                    }
                )
                continue
            result["yardstick"] = yardstick(loaded, result, yardsticks)
            results.append(result)
            report(result)
            write_json(args.out, _document(device, hw, strategy, budget, limit, args, started, results, yardsticks))
    runtime.close()
    summary_table(results)
    print(f"geometric-mean speed-up over the original code: {geomean_line(results)}")
    print(f"total {time.perf_counter() - started:.0f} s")
    write_json(args.out, _document(device, hw, strategy, budget, limit, args, started, results, yardsticks))
    return 0


def _document(
    device: str,
    hw: str,
    strategy: str,
    budget: int,
    limit: int,
    args: argparse.Namespace,
    started: float,
    results: list[dict[str, Any]],
    yardsticks: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "tool": "bench_tune_gpu",
        "device": device,
        "profile": hw,
        "strategy": strategy,
        "budget": budget,
        "exhaustive_limit": limit,
        "quick": args.quick,
        "total_s": time.perf_counter() - started,
        "baselines": yardsticks,
        "geomean": speedups(results),
        "cases": results,
    }


def _gemm_shape(loaded: Loaded) -> tuple[int, int, int, int] | None:
    from kxform.expr import parse_expr

    ref = loaded.case.reference
    if ref is None or ref.kind != "gemm":
        return None
    values = loaded.size.values
    b, m, n, k = (parse_expr(text).evaluate_int(values) for text in (ref.batch, ref.m, ref.n, ref.k))
    return b, m, n, k


def baselines(loaded_cases: list[Loaded]) -> dict[str, Any] | None:
    """cuBLAS times for the GEMM cases' shapes and the copy bandwidth (kxform.bench.yardsticks)."""
    return yardsticks.baselines(shape for shape in map(_gemm_shape, loaded_cases) if shape)


def yardstick(loaded: Loaded, result: dict[str, Any], data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The case's original and tuned times against its yardstick (None: none applies or none measured)."""
    ref = loaded.case.reference
    if ref is None:
        return None
    times = {"original": result["original_ms"], "tuned": result["strategy"]["best_ms"]}
    nbytes = yardsticks.least_bytes(loaded.target.spec, loaded.size)
    found = yardsticks.yardstick(data, times, _gemm_shape(loaded), nbytes)
    return {**found, "note": ref.note} if found is not None and ref.kind == "gemm" else found


def speedups(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometric mean over the `tile` cases (one per kernel) of the original's time over the
    kept code's: the tuned best where it is faster, else the original (speed-up 1)."""
    kept, raw = [], []
    for r in results:
        if r["passes"] != ["tile"] or r.get("failed") or not r["original_ms"]:
            continue
        best = r["strategy"]["best_ms"]
        speed = r["original_ms"] / best if best else 1.0
        raw.append(speed)
        kept.append(max(speed, 1.0))
    return {"kernels": len(kept), "kept": geomean(kept), "best_tuned": geomean(raw)}


def geomean_line(results: list[dict[str, Any]]) -> str:
    g = speedups(results)
    if not g["kernels"]:
        return "-"
    return (
        f"{g['kept']:.3f}x over {g['kernels']} kernels (the original kept where nothing faster verified; "
        f"the tuned best alone: {g['best_tuned']:.3f}x)"
    )


def run_case(
    loaded: Loaded, runtime: Any, strategy: str, budget: int, limit: int, args: argparse.Namespace, scratch: Path
) -> dict[str, Any]:
    from kxform.search.db import TuneKey, TuningDB
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions
    from kxform.search.pipeline import PipelineOptions
    from kxform.search.tuner import TuneOptions, tune

    started = time.perf_counter()
    options = MeasureOptions(size=loaded.size, launch_budget_s=0.3 if args.quick else 0.5)
    objective = KernelObjective(loaded.target, loaded.space, runtime, options)
    original = objective.baseline()
    default = loaded.space.defaults()
    prepared = objective.prepare(default)
    default_eval = prepared.failure or objective.evaluate(prepared)
    search = loaded.search
    key = TuneKey(loaded.case.name, loaded.case.kernel, objective.hardware, search.names)
    parallel = PipelineOptions(jobs=args.jobs, ahead=args.jobs)
    with TuningDB(scratch / f"{loaded.case.name.replace('/', '_')}.sqlite") as db:
        sweep = None
        if len(search) <= limit:
            sweep = tune(
                search, objective, TuneOptions("exhaustive", budget=len(search), pipeline=parallel), db=db, key=key
            )
        run = tune(
            search,
            objective,
            TuneOptions(
                strategy,
                budget=min(budget, len(search)),
                seed=args.seed,
                pipeline=PipelineOptions(jobs=args.jobs, ahead=2),
                start_at_defaults=True,
            ),
            db=db,
            key=key,
        )
    measured = [s for s in (sweep or run).steps if s.source == "measured"]
    if sweep is not None:
        measured += [s for s in run.steps if s.source == "measured"]
    best_known = min((s.evaluation.time_ms for s in (sweep or run).steps if s.evaluation.ok), default=None)
    phases = [objective.phases[label] for label in (_label(s.config) for s in measured) if label in objective.phases]
    ok = [s for s in measured if s.evaluation.ok]
    best = run.best
    return {
        "case": loaded.case.name,
        "kernel": loaded.case.kernel,
        "passes": list(loaded.space.passes),
        "size": loaded.size.name,
        "space_size": len(search),
        "exhaustive": sweep is not None,
        "evaluated": len(measured),
        "verified": len(ok),
        "failures": dict(Counter(s.evaluation.failure.value for s in measured if s.evaluation.failure)),
        "failure_examples": _examples(measured),
        "original_ms": original.median_ms,
        "default_config": default,
        "default_ms": default_eval.time_ms,
        "default_failure": default_eval.detail if not default_eval.ok else None,
        "best_known_ms": best_known,
        "best_known_config": _best_config(sweep or run),
        "strategy": {
            "name": strategy,
            "evaluations": len(run.steps),
            "best_ms": best.evaluation.time_ms if best else None,
            "best_config": best.config if best else None,
            "evals_to_best": best.index + 1 if best else None,
            "evals_to_near_best": _evals_to(run, best_known, NEAR),
            "search_s_per_eval": run.strategy_s / max(len(run.steps), 1),
        },
        "speedup_vs_default": _ratio(default_eval.time_ms, best_known),
        "speedup_vs_original": _ratio(original.median_ms, best_known),
        "seconds_per_eval": {
            "rewrite": mean([p.rewrite_s for p in phases]),
            "compile": mean([p.compile_s for p in phases]),
            "verify": mean([p.verify_s for p in phases]),
            "time": mean([p.time_s for p in phases]),
            "total": mean([p.total_s for p in phases]),
        },
        "wall_s": time.perf_counter() - started,
        "measurements": [
            {
                "config": _label(s.config),
                "ms": s.evaluation.time_ms,
                "failure": s.evaluation.failure.value if s.evaluation.failure else None,
            }
            for s in measured
        ],
    }


def _label(config: dict[str, Any]) -> str:
    from kxform.search.kernel_space import label

    return label(config)


def _best_config(result: Any) -> dict[str, Any] | None:
    return result.best.config if result.best else None


def _examples(steps: list[Any]) -> dict[str, str]:
    """One reason per failure class (the first seen)."""
    out: dict[str, str] = {}
    for s in steps:
        if s.evaluation.failure and s.evaluation.failure.value not in out:
            out[s.evaluation.failure.value] = f"{_label(s.config)}: {s.evaluation.detail}"[:300]
    return out


def _evals_to(run: Any, target: float | None, near: float) -> int | None:
    if target is None:
        return None
    for step in run.steps:
        if step.best_ms is not None and step.best_ms <= target * (1 + near):
            return step.index + 1
    return None


def _ratio(before: float | None, after: float | None) -> float | None:
    return before / after if before and after else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def report(r: dict[str, Any]) -> None:
    s = r["strategy"]
    per = r["seconds_per_eval"]
    print(
        f"\n{r['case']} (size {r['size']}): {r['space_size']} valid configurations"
        f"{', swept exhaustively' if r['exhaustive'] else ''}; {r['evaluated']} evaluated, {r['verified']} verified"
        f"{', failures ' + str(r['failures']) if r['failures'] else ''}"
    )
    for kind, example in r["failure_examples"].items():
        print(f"  e.g. {kind}: {example}")
    print(
        f"  original {_ms(r['original_ms'])}; default {r['default_config']} {_ms(r['default_ms'])}; "
        f"best known {r['best_known_config']} {_ms(r['best_known_ms'])}"
    )
    vs_default = "-" if r["speedup_vs_default"] is None else f"{r['speedup_vs_default']:.3f}x"
    vs_original = "-" if r["speedup_vs_original"] is None else f"{r['speedup_vs_original']:.3f}x"
    print(f"  speedup of the best: {vs_default} over the default configuration, {vs_original} over the original")
    if r.get("yardstick"):
        print(f"  yardstick: {yardstick_text(r['yardstick'])}")
    print(
        f"  {s['name']}: {s['evaluations']} evaluations, best {s['best_config']} {_ms(s['best_ms'])} at evaluation "
        f"{s['evals_to_best']}; within {NEAR:.0%} of the best known at evaluation {s['evals_to_near_best'] or '-'}; "
        f"search {1000 * s['search_s_per_eval']:.1f} ms per proposal"
    )
    if per["total"] is not None:
        print(
            f"  seconds per evaluation: rewrite+checks {per['rewrite']:.2f}, compile {per['compile']:.2f}, "
            f"verify {per['verify']:.2f}, time {per['time']:.2f}, total {per['total']:.2f}; case wall {r['wall_s']:.0f} s",
            flush=True,
        )


def summary_table(results: list[dict[str, Any]]) -> None:
    print(
        "\n| case | space | verified/evaluated | evals to best | to 2% | original ms | tuned ms | speedup "
        "| vs default | yardstick (original -> tuned) | s/eval |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("failed"):
            print(f"| {r['case']} | failed: {r['failed'][:120]} |")
            continue
        s = r["strategy"]
        speed = "-" if r["speedup_vs_default"] is None else f"{r['speedup_vs_default']:.3f}x"
        tuned_speed = _ratio(r["original_ms"], s["best_ms"])
        per = r["seconds_per_eval"]["total"]
        print(
            f"| {r['case']} ({r['size']}) | {r['space_size']} | {r['verified']}/{r['evaluated']} | "
            f"{s['evals_to_best'] or '-'} | {s['evals_to_near_best'] or '-'} | {_num(r['original_ms'])} | "
            f"{_num(s['best_ms'])} | {'-' if tuned_speed is None else f'{tuned_speed:.3f}x'} | {speed} | "
            f"{yardstick_text(r.get('yardstick'))} | {'-' if per is None else f'{per:.2f}'} |"
        )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def yardstick_text(y: dict[str, Any] | None) -> str:
    if not y:
        return "-"
    what = "of cuBLAS" if y["kind"] == "cublas" else "of copy bandwidth"
    return f"{yardsticks.percent(y['original'])} -> {yardsticks.percent(y['tuned'])} {what}"


if __name__ == "__main__":
    sys.exit(main())
