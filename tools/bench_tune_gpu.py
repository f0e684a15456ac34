#!/usr/bin/env python3
"""Tune corpus kernels on a GPU with kxform's GPU objective and print what it took.

    python tools/bench_tune_gpu.py [--quick] [--out results.json] [--budget N] [--case NAME ...]

Per kernel and pass pipeline (sgemm_tiled, the jacobi5 stencil and sgemm_128 under
`tile`, and the first two under `tile,swizzle`): every configuration is rewritten,
compiled, verified against the original and timed (kxform.search.kernel_objective).
Where the space is small (at most --exhaustive-limit valid configurations) it is swept
exhaustively first, and the default strategy then runs on the sweep's measurements (no
configuration is measured twice); otherwise the strategy runs with --budget
evaluations. Printed per case: space size, configurations evaluated and how many
verified, failures by class, evaluations the strategy needed to reach its best and to
reach within 2% of the best known, the best against the default configuration and the
original code (speedup), and the seconds per evaluation in each step (rewrite with the
passes' checks, compile, verify, time) and in the search itself.

A full run is about 250 evaluations (1-3 s each, builds in parallel with -j): split it
with --case where a command's time is limited. Needs a CUDA GPU with pycuda (exit 2
with the reason otherwise). `--quick` keeps the
whole run under about three minutes: smaller timing sizes, small budgets, three cases.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_cases import CASES, Loaded, load, mean, pick, profile_for, require_gpu, write_json  # noqa: E402

QUICK_CASES = ("sgemm_tiled/tile", "jacobi5/tile", "sgemm_128/tile")
NEAR = 0.02


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (under about 3 minutes)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--budget", type=int, help="evaluations per strategy run (default 40; quick 12)")
    p.add_argument("--case", action="append", dest="cases", metavar="NAME",
                   help=f"a case to run, repeatable (default: all; quick: {', '.join(QUICK_CASES)}); "
                   f"cases: {', '.join(c.name for c in CASES)}")
    p.add_argument("--strategy", default=None, help="kxform strategy (default: the default strategy)")
    p.add_argument("--exhaustive-limit", type=int, help="sweep spaces up to this size (default 100; quick 8)")
    p.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="candidates built in parallel")
    p.add_argument("--hw", help="hardware profile for the constraints (default: from the device)")
    p.add_argument("--seed", type=int, default=0)
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
    print(f"device: {device}; profile {hw}; strategy {strategy}; budget {budget}; exhaustive up to {limit}; "
          f"{args.jobs} build jobs{'; quick' if args.quick else ''}", flush=True)
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kxform-bench-tune-") as scratch:
        for case in cases:
            loaded = load(case, args.quick, hw)
            result = run_case(loaded, runtime, strategy, budget, limit, args, Path(scratch))
            results.append(result)
            report(result)
    runtime.close()
    total = time.perf_counter() - started
    summary_table(results)
    print(f"total {total:.0f} s")
    write_json(args.out, {"tool": "bench_tune_gpu", "device": device, "profile": hw, "strategy": strategy,
                          "budget": budget, "exhaustive_limit": limit, "quick": args.quick, "total_s": total,
                          "cases": results})
    return 0


def run_case(loaded: Loaded, runtime: Any, strategy: str, budget: int, limit: int, args: argparse.Namespace,
             scratch: Path) -> dict[str, Any]:
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
            sweep = tune(search, objective, TuneOptions("exhaustive", budget=len(search), pipeline=parallel),
                         db=db, key=key)
        run = tune(search, objective, TuneOptions(strategy, budget=min(budget, len(search)), seed=args.seed,
                                                  pipeline=PipelineOptions(jobs=args.jobs, ahead=2)),
                   db=db, key=key)
    measured = [s for s in (sweep or run).steps if s.source == "measured"]
    if sweep is not None:
        measured += [s for s in run.steps if s.source == "measured"]
    best_known = min((s.evaluation.time_ms for s in (sweep or run).steps if s.evaluation.ok), default=None)
    phases = [objective.phases[label] for label in (_label(s.config) for s in measured) if label in objective.phases]
    ok = [s for s in measured if s.evaluation.ok]
    best = run.best
    return {
        "case": loaded.case.name, "kernel": loaded.case.kernel, "passes": list(loaded.space.passes),
        "size": loaded.size.name, "space_size": len(search), "exhaustive": sweep is not None,
        "evaluated": len(measured), "verified": len(ok),
        "failures": dict(Counter(s.evaluation.failure.value for s in measured if s.evaluation.failure)),
        "failure_examples": _examples(measured),
        "original_ms": original.median_ms, "default_config": default,
        "default_ms": default_eval.time_ms, "default_failure": default_eval.detail if not default_eval.ok else None,
        "best_known_ms": best_known,
        "best_known_config": _best_config(sweep or run),
        "strategy": {"name": strategy, "evaluations": len(run.steps), "best_ms": best.evaluation.time_ms if best else None,
                     "best_config": best.config if best else None, "evals_to_best": best.index + 1 if best else None,
                     "evals_to_near_best": _evals_to(run, best_known, NEAR), "search_s_per_eval":
                         run.strategy_s / max(len(run.steps), 1)},
        "speedup_vs_default": _ratio(default_eval.time_ms, best_known),
        "speedup_vs_original": _ratio(original.median_ms, best_known),
        "seconds_per_eval": {"rewrite": mean([p.rewrite_s for p in phases]), "compile": mean([p.compile_s for p in phases]),
                             "verify": mean([p.verify_s for p in phases]), "time": mean([p.time_s for p in phases]),
                             "total": mean([p.total_s for p in phases])},
        "wall_s": time.perf_counter() - started,
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
    print(f"\n{r['case']} (size {r['size']}): {r['space_size']} valid configurations"
          f"{', swept exhaustively' if r['exhaustive'] else ''}; {r['evaluated']} evaluated, {r['verified']} verified"
          f"{', failures ' + str(r['failures']) if r['failures'] else ''}")
    for kind, example in r["failure_examples"].items():
        print(f"  e.g. {kind}: {example}")
    print(f"  original {_ms(r['original_ms'])}; default {r['default_config']} {_ms(r['default_ms'])}; "
          f"best known {r['best_known_config']} {_ms(r['best_known_ms'])}")
    vs_default = "-" if r["speedup_vs_default"] is None else f"{r['speedup_vs_default']:.3f}x"
    vs_original = "-" if r["speedup_vs_original"] is None else f"{r['speedup_vs_original']:.3f}x"
    print(f"  speedup of the best: {vs_default} over the default configuration, {vs_original} over the original")
    print(f"  {s['name']}: {s['evaluations']} evaluations, best {s['best_config']} {_ms(s['best_ms'])} at evaluation "
          f"{s['evals_to_best']}; within {NEAR:.0%} of the best known at evaluation {s['evals_to_near_best'] or '-'}; "
          f"search {1000 * s['search_s_per_eval']:.1f} ms per proposal")
    if per["total"] is not None:
        print(f"  seconds per evaluation: rewrite+checks {per['rewrite']:.2f}, compile {per['compile']:.2f}, "
              f"verify {per['verify']:.2f}, time {per['time']:.2f}, total {per['total']:.2f}; case wall {r['wall_s']:.0f} s",
              flush=True)


def summary_table(results: list[dict[str, Any]]) -> None:
    print("\n| case | space | verified/evaluated | evals to best | to 2% | best ms | default ms | speedup | s/eval |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        s = r["strategy"]
        speed = "-" if r["speedup_vs_default"] is None else f"{r['speedup_vs_default']:.3f}x"
        per = r["seconds_per_eval"]["total"]
        best = "-" if r["best_known_ms"] is None else f"{r['best_known_ms']:.4f}"
        default = "-" if r["default_ms"] is None else f"{r['default_ms']:.4f}"
        print(f"| {r['case']} | {r['space_size']} | {r['verified']}/{r['evaluated']} | {s['evals_to_best'] or '-'} | "
              f"{s['evals_to_near_best'] or '-'} | {best} | {default} | {speed} | "
              f"{'-' if per is None else f'{per:.2f}'} |")


if __name__ == "__main__":
    sys.exit(main())
