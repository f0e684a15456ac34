"""`kxform tune`: search a kernel's parameter space for its fastest configuration.

The objective is a GPU (build, verify once per distinct code, time) or, without one,
a recorded space (`--objective replay:FILE`, Kernel Tuner's cache format). Every
evaluation goes to the tuning database; the result goes to the pass log (a `tune`
record), to stdout (`--json`: one JSON object) and, with `--write`, into the source
as the new defaults of the parameters' `#define`s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kxform.cache import content_key
from kxform import exitcodes
from kxform.errors import InputError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Objective
from kxform.search.pipeline import PipelineOptions
from kxform.cli.progress import interactive
from kxform.search.progress import Progress
from kxform.search.space import SearchSpace
from kxform.search.strategy import DEFAULT, STRATEGIES, Prior
from kxform.search.tuner import Step, TuneOptions, TuneResult, tune
from kxform.frontend.source import SourceText, read_source

NO_OBJECTIVE = "tuning needs a GPU or a recorded space (--objective replay:FILE)"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("tune", help="search a kernel's parameters for the fastest configuration",
                              description="Tune a kernel's parameters on a GPU, or against a recorded space.")
    p.add_argument("file", metavar="FILE", help="CUDA/HIP source holding the kernel")
    p.add_argument("--kernel", required=True, metavar="K", help="kernel to tune")
    p.add_argument("--pass", dest="passes", default="tile", metavar="NAME[,NAME]",
                   help="passes whose parameters span the space (default: tile)")
    p.add_argument("--spec", metavar="S", help="harness spec (kxform.toml) for building, verifying and timing")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=int, metavar="N", help="evaluations, at most (default: 200)")
    budget.add_argument("--time", type=float, metavar="T", help="stop once evaluations have cost T seconds")
    p.add_argument("--strategy", default=DEFAULT, choices=sorted(STRATEGIES),
                   help=f"search strategy (default: {DEFAULT})")
    p.add_argument("--seed", type=int, default=0, help="random seed of the strategy (default: 0)")
    p.add_argument("--resume", action="store_true",
                   help="continue from every stored evaluation of this kernel and hardware")
    p.add_argument("--write", action="store_true", help="write the best values into FILE's #defines")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--objective", metavar="gpu|replay:FILE",
                   help="gpu (default): rewrite, compile, verify and time on this machine's GPU; "
                   "replay:FILE: a recorded space instead")
    p.add_argument("--size", metavar="NAME|VAR=V,...",
                   help="timing size: a size of the spec, or values overriding its bench size (default: the bench size)")
    p.add_argument("--repeat", type=int, default=50, metavar="N", help="timed launches per configuration, at most "
                   "(default: 50)")
    p.add_argument("--launch-budget", type=float, default=2.0, metavar="S",
                   help="seconds of timed launches per configuration, about: a probe launch sets the count, "
                   "at least 5 (default: 2)")
    p.add_argument("--require", action="append", default=[], metavar="EXPR",
                   help="an extra constraint on the parameters (kxform's expression language), repeatable")
    p.add_argument("--hw", default="h100", metavar="NAME", help="hardware profile for the constraints (default: h100)")
    p.add_argument("-p", "--build-dir", metavar="DIR", help="directory holding compile_commands.json")
    p.add_argument("--prior", nargs="+", default=[], metavar="FILE",
                   help="recordings of this kernel elsewhere to warm-start from (the database is also used)")
    p.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache's tuning.sqlite)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="candidates prepared in parallel")
    p.add_argument("--log", metavar="FILE", help="pass log path (default: .kxform/logs/RUN.jsonl)")
    p.set_defaults(func=run)


def _objective(args: argparse.Namespace, source: SourceText) -> tuple[Objective, SearchSpace, str]:
    """The objective and its space: the GPU (the default, `gpu`) or a recording, whose
    kernel must be the one asked for."""
    if args.objective in (None, "gpu"):
        return _gpu_objective(args, source)
    kind, sep, path = args.objective.partition(":")
    if kind != "replay" or not sep or not path:
        raise UsageError(f"--objective {args.objective!r}: expected gpu or replay:FILE")
    from kxform.search.recorded import load_recording

    recording = load_recording(path)
    if recording.kernel and recording.kernel != args.kernel:
        raise UsageError(f"{path}: a recording of kernel '{recording.kernel}', not '{args.kernel}'")
    return recording.objective, recording.search, path


def _gpu_objective(args: argparse.Namespace, source: SourceText) -> tuple[Objective, SearchSpace, str]:
    """Rewrite, compile, verify and time on this machine's GPU (one line and exit 2 without one)."""
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget, gpu_runtime, timing_size
    from kxform.search.kernel_space import kernel_space, parse_passes

    passes = parse_passes(args.passes)
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: must be at least 1")
    if not (math.isfinite(args.launch_budget) and args.launch_budget > 0):
        raise UsageError(f"--launch-budget {args.launch_budget:g}: must be a positive number of seconds")
    runtime = gpu_runtime()  # first: without a GPU nothing else can be measured
    spec = _spec(args, source)
    size = timing_size(spec, args.size)
    space = kernel_space(source.data, args.kernel, passes, path=source.path, hw=args.hw, build_dir=args.build_dir,
                         require=tuple(args.require))
    target = TuneTarget(source.path, source.data, args.kernel, spec, args.hw, args.build_dir)
    search = SearchSpace.build(space.space, load_profile(args.hw))
    objective = KernelObjective(target, space, runtime, MeasureOptions(size=size, repeat=args.repeat,
                                                                          launch_budget_s=args.launch_budget))
    return objective, search, ""


def _spec(args: argparse.Namespace, source: SourceText):  # type: ignore[no-untyped-def]
    """The kernel's harness spec: `--spec`, else the kxform.toml that names the file."""
    from kxform.harness.spec import find_spec_for, load_spec

    path = args.spec or find_spec_for(source.path)
    if path is None:
        raise UsageError(f"{source.path}: no harness spec names this file; tuning verifies and times "
                         f"'{args.kernel}' from one (--spec S, docs/harness-spec.md)")
    return load_spec(path).kernel(args.kernel)


def _check_kernel(source: SourceText, kernel: str) -> None:
    model = parse_model(source)
    names = sorted({k.name for k in model.kernels})
    if kernel not in names:
        raise InputError(f"{source.path}: no kernel '{kernel}' (kernels: {', '.join(names) or 'none'})")


def _prior(args: argparse.Namespace, space: SearchSpace, db: TuningDB, key: TuneKey) -> Prior | None:
    from kxform.search.prior import PriorSource, build_prior
    from kxform.search.recorded import load_recording

    sources = []
    for path in args.prior:
        recording = load_recording(path)
        results = [(recording.search.config(r), recording.objective.records[recording.search.key(r)].time_ms)
                   for r in range(len(recording.search))]
        sources.append(PriorSource(f"{recording.kernel}@{recording.device} ({path})", results))
    for label, stored in db.related(key).items():
        sources.append(PriorSource(label, [(s.config, s.evaluation.time_ms) for s in stored]))
    if args.prior and not sources:
        raise UsageError("--prior: no usable source")
    return build_prior(space, sources) if sources else None


def _options(args: argparse.Namespace) -> TuneOptions:
    if args.time is not None and not (math.isfinite(args.time) and args.time > 0):
        raise UsageError(f"--time {args.time:g}: must be a positive number of seconds")
    if args.jobs < 1:
        raise UsageError("-j must be at least 1")
    budget = args.budget if args.budget is not None else (None if args.time is not None else 200)
    return TuneOptions(strategy=args.strategy, budget=budget, time_s=args.time, seed=args.seed, resume=args.resume,
                       pipeline=PipelineOptions(jobs=args.jobs, ahead=args.jobs))


def run(args: argparse.Namespace) -> int:
    options = _options(args)
    source = read_source(args.file)
    _check_kernel(source, args.kernel)
    objective, space, replay_path = _objective(args, source)
    # On a kernel the source's current values come first: the search starts from the code as it is.
    options = replace(options, start_at_defaults=replay_path is None)
    try:
        with TuningDB(args.db) as db:
            kernel_hash = content_key(source.data, args.kernel, *([objective.measures] if objective.measures else []))
            key = TuneKey(kernel_hash, args.kernel, objective.hardware, space.names)
            prior = _prior(args, space, db, key)
            log = PassLog.open(args.log, hw=objective.hardware, pipeline=args.passes, argv=sys.argv[1:])
            drawn = not args.json and interactive(sys.stderr)
            with Progress(enabled=drawn, total=options.budget, time_s=options.time_s) as progress:
                result = tune(space, objective, options, db=db, key=key, prior=prior, on_step=progress.step)
        summary = tune_summary(result, args, objective, replay_path, str(db.path))
        summary.update(_measured(objective))
        if args.write and result.best is not None:
            summary["written"] = _write(objective, source, result.best.config)
    finally:
        objective.close()
    log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
    log.close(Report())
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print(result, summary, log.path)
    return exitcodes.OK


def _measured(objective: Objective) -> dict[str, Any]:
    """For a measuring objective: the timing size and the unmodified kernel's time there."""
    from kxform.runtime.base import RuntimeError_
    from kxform.search.kernel_objective import KernelObjective

    if not isinstance(objective, KernelObjective):
        return {}
    try:
        original: float | None = objective.baseline().median_ms
    except RuntimeError_:
        original = None
    return {"size": objective.size.name, "original_ms": original}


def _write(objective: Objective, source: SourceText, config: dict[str, Any]) -> dict[str, list[str]]:
    """`--write`: a measured configuration as its verified rewrite; a replayed one into the `#define`s."""
    from kxform.search.kernel_objective import KernelObjective
    from kxform.search.write import write_defaults

    if isinstance(objective, KernelObjective):
        return objective.write(config)
    return write_defaults(source, config)


def tune_summary(result: TuneResult, args: argparse.Namespace, objective: Objective, replay: str,
                 db_path: str) -> dict[str, Any]:
    best = result.best
    return {
        "file": args.file, "kernel": args.kernel, "objective": objective.name, "recording": replay or None,
        "hardware": objective.hardware, "strategy": result.strategy, "seed": args.seed,
        "space_size": result.space_size, "evaluated": len(result.steps), "measured": result.measured,
        "from_database": sum(1 for s in result.steps if s.source != "measured"),
        "failed": sum(1 for s in result.steps if not s.evaluation.ok), "stopped": result.stopped,
        "cost_s": round(result.cost_s, 6), "strategy_s": round(result.strategy_s, 6),
        "prior": list(result.prior_sources), "database": db_path,
        "best": None if best is None else {"config": best.config, "time_ms": best.evaluation.time_ms,
                                           "spread_ms": best.evaluation.spread_ms, "found_at": best.index + 1},
        "evaluations": [_evaluation(step) for step in result.steps],
    }


def _evaluation(step: Step) -> dict[str, Any]:
    """One evaluation in the shape the log viewers read (docs/pass-log.md, `tune`)."""
    e = step.evaluation
    return {"eval": step.index + 1, "params": step.config, "time_ms": e.time_ms,
            "status": e.failure.value if e.failure else "ok", "source": step.source,
            "spread_ms": e.spread_ms, "cost_s": e.cost_s, "detail": e.detail}


def _print(result: TuneResult, summary: dict[str, Any], log_path: Path) -> None:
    best = summary["best"]
    if best is None:
        print(f"kxform: no configuration ran successfully in {len(result.steps)} evaluations", file=sys.stderr)
    else:
        values = ", ".join(f"{k}={v}" for k, v in best["config"].items())
        print(f"best: {best['time_ms']:.4g} ms ({values}), found at evaluation {best['found_at']}")
        if summary.get("original_ms"):
            print(f"original: {summary['original_ms']:.4g} ms at size {summary['size']}: speedup "
                  f"{summary['original_ms'] / best['time_ms']:.3f}x")
    print(f"kxform: {summary['evaluated']} evaluations ({summary['measured']} measured, "
          f"{summary['from_database']} from the database, {summary['failed']} failed) of {summary['space_size']} "
          f"configurations, stopped: {summary['stopped']}, cost {summary['cost_s']:.1f} s. Log: {log_path}",
          file=sys.stderr)
