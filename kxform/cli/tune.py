"""`kxform tune`: search which passes to apply to a kernel, and their parameters, for
the fastest verified code.

Without `--pass` every pass that has something to tune in the kernel takes part (one
composed space: kxform.search.kernel_space), starting at the code as it is; with
`--pass` only those named. The objective is a GPU (rewrite, check, build, verify once
per distinct code, time), the CPU runtime with times recorded on a GPU
(`--objective cpu+replay:FILE`: everything but the stopwatch runs), or a recorded space
(`--objective replay:FILE`, Kernel Tuner's cache format). Every evaluation goes to the
tuning database; the result goes to the pass log (a `tune` record), to stdout (`--json`:
one JSON object) and, with `--write`, into the source: a pipeline result through
`apply`'s every check (kxform.cli.tune_write); a replayed one too, once its recorded
values are typed into the passes' space (nothing from a recording is copied into the
source as text) and apply verifies it on the CPU runtime.
`kxform tune DIR` tunes every kernel a harness spec under DIR describes
(kxform.cli.tune_dir); `--sizes`/`--dispatch` tune one kernel at several sizes and
write the per-size winners as a C++ header (kxform.cli.tune_sizes).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kxform.cache import content_key
from kxform.errors import CheckFailed, InputError, UsageError, printable
from kxform.frontend.cuda import parse_model
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.search.db import TuneKey, TuningDB
from kxform.search.kernel_space import KernelSpace
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
    p = subparsers.add_parser(
        "tune",
        help="search a kernel's parameters for the fastest configuration",
        description="Tune a kernel's parameters on a GPU, or against a recorded space.",
    )
    p.add_argument(
        "file",
        metavar="FILE|DIR",
        help="CUDA/HIP source holding the kernel, or a directory: every kernel a harness spec under it describes",
    )
    p.add_argument("--kernel", metavar="K", help="kernel to tune (required with FILE; with DIR only this one)")
    p.add_argument(
        "--pass",
        dest="passes",
        metavar="NAME[,NAME]",
        help="passes whose parameters span the space (default: every pass with something to tune in "
        "the kernel; which apply is searched too)",
    )
    p.add_argument(
        "--spec", metavar="S", help="harness spec for building, verifying and timing (default: FILE's NAME.kxspec.toml)"
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=int, metavar="N", help="evaluations, at most (default: 200)")
    budget.add_argument("--time", type=float, metavar="T", help="stop once evaluations have cost T seconds")
    p.add_argument(
        "--strategy", default=DEFAULT, choices=sorted(STRATEGIES), help=f"search strategy (default: {DEFAULT})"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed of the strategy (default: 0)")
    p.add_argument(
        "--resume", action="store_true", help="continue from every stored evaluation of this kernel and hardware"
    )
    p.add_argument("--write", action="store_true", help="write the best values into FILE's #defines")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument(
        "--export",
        metavar="FILE",
        help="write the run's evaluations as a Kernel Tuner cache file (JSON; replays with --objective replay:FILE)",
    )
    p.add_argument(
        "--objective",
        metavar="gpu|cpu+replay:FILE|replay:FILE",
        help="gpu (default): rewrite, compile, verify and time on this machine's GPU; cpu+replay:FILE: "
        "the same on the CPU runtime with the times of a `tune --json` summary FILE; replay:FILE: a "
        "recorded space instead",
    )
    p.add_argument(
        "--size",
        metavar="NAME|VAR=V,...",
        help="timing size: a size of the spec, or values overriding its bench size (default: the bench size)",
    )
    p.add_argument(
        "--sizes",
        metavar="NAME[,NAME]",
        help="tune at each of these sizes of the spec, one after another (default with --dispatch: every bench size)",
    )
    p.add_argument(
        "--dispatch",
        metavar="OUT.h",
        help="write a C++ header picking the fastest verified "
        'configuration per size class (docs/search.md, "Per-size dispatch")',
    )
    p.add_argument(
        "--repeat", type=int, default=50, metavar="N", help="timed launches per configuration, at most (default: 50)"
    )
    p.add_argument(
        "--launch-budget",
        type=float,
        default=2.0,
        metavar="S",
        help="seconds of timed launches per configuration, about: a probe launch sets the count, "
        "at least 5 (default: 2)",
    )
    p.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="EXPR",
        help="an extra constraint on the parameters (kxform's expression language), repeatable",
    )
    p.add_argument("--hw", default="h100", metavar="NAME", help="hardware profile for the constraints (default: h100)")
    p.add_argument("-p", "--build-dir", metavar="DIR", help="directory holding compile_commands.json")
    p.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="include directory (repeatable; before the configuration's)",
    )
    p.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="preprocessor define (repeatable; before the configuration's)",
    )
    p.add_argument(
        "--prior",
        nargs="+",
        default=[],
        metavar="FILE",
        help="recordings of this kernel elsewhere to warm-start from (the database is also used)",
    )
    p.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache's tuning.sqlite)")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="candidates prepared in parallel")
    p.add_argument("--log", metavar="FILE", help="pass log path (default: .kxform/logs/RUN.jsonl)")
    from kxform.cli import tune_workers  # imports this module's helpers

    tune_workers.add_options(p)
    p.set_defaults(func=run)


def _objective(args: argparse.Namespace, source: SourceText) -> tuple[Objective, SearchSpace, str]:
    """The objective and its space: the GPU (the default, `gpu`) or a recording, whose
    kernel must be the one asked for."""
    if args.objective in (None, "gpu"):
        return _kernel_objective(args, source, None)
    kind, sep, path = args.objective.partition(":")
    if kind not in ("replay", "cpu+replay") or not sep or not path:
        raise UsageError(f"--objective {args.objective!r}: expected gpu, cpu+replay:FILE or replay:FILE")
    if kind == "cpu+replay":
        return _kernel_objective(args, source, path)
    from kxform.search.recorded import load_recording

    recording = load_recording(path)
    if not recording.kernel:  # matched to the file by the kernel's name, or not at all
        raise UsageError(
            f"{path}: the recording names no kernel (kernel_name), so it cannot be matched to '{args.kernel}'"
        )
    if recording.kernel != args.kernel:
        raise UsageError(f"{path}: a recording of kernel '{recording.kernel}', not '{args.kernel}'")
    return recording.objective, recording.search, path


def _kernel_objective(
    args: argparse.Namespace, source: SourceText, times: str | None
) -> tuple[Objective, SearchSpace, str]:
    """Rewrite, compile, verify and time on this machine's GPU (one line and exit 2 without
    one), or verify on the CPU runtime and take the times recorded in `times`."""
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget, gpu_runtime, timing_size
    from kxform.search.kernel_space import kernel_space, parse_passes
    from kxform.search.recorded_times import load_times

    passes = parse_passes(args.passes) if args.passes is not None else None
    if args.repeat < 1:
        raise UsageError(f"--repeat {args.repeat}: must be at least 1")
    if not (math.isfinite(args.launch_budget) and args.launch_budget > 0):
        raise UsageError(f"--launch-budget {args.launch_budget:g}: must be a positive number of seconds")
    gpu = gpu_runtime() if times is None else None  # first: without one nothing can be measured
    spec = _spec(args, source)
    size = timing_size(spec, args.size)
    recorded = load_times(times, args.kernel, size.name) if times is not None else None
    runtime = gpu if gpu is not None else _cpu_runtime()
    space = kernel_space(
        source.data,
        args.kernel,
        passes,
        path=source.path,
        hw=args.hw,
        build_dir=args.build_dir,
        require=tuple(args.require),
    )
    say_left_out(space, passes)
    target = TuneTarget(source.path, source.data, args.kernel, spec, args.hw, args.build_dir)
    search = space.search(load_profile(args.hw))
    objective = KernelObjective(
        target,
        space,
        runtime,
        MeasureOptions(size=size, repeat=args.repeat, launch_budget_s=args.launch_budget, recorded=recorded),
    )
    return objective, search, ""


def say_left_out(space: KernelSpace, passes: tuple[str, ...] | None) -> None:
    """One line on stderr per pass named with `--pass` that has nothing to tune in the
    kernel, with its reason: the others are tuned without it."""
    for name, why in space.not_offered if passes is not None else ():
        print(printable(f"kxform: {name} left out of the tuning of '{space.kernel}': {why}"), file=sys.stderr)


def _cpu_runtime():  # type: ignore[no-untyped-def]
    from kxform.verify.differential import pick_runtime

    return pick_runtime("cpu")


def _spec(args: argparse.Namespace, source: SourceText):  # type: ignore[no-untyped-def]
    """The kernel's harness spec: `--spec`, else the one beside the file that names it."""
    from kxform.harness.spec import find_spec_for, load_spec, missing_spec

    path = args.spec or find_spec_for(source.path)
    if path is None:
        raise UsageError(missing_spec(source.path, args.kernel))
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
        results = [
            (recording.search.config(r), recording.objective.records[recording.search.key(r)].time_ms)
            for r in range(len(recording.search))
        ]
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
    return TuneOptions(
        strategy=args.strategy,
        budget=budget,
        time_s=args.time,
        seed=args.seed,
        resume=args.resume,
        pipeline=PipelineOptions(jobs=args.jobs, ahead=args.jobs),
    )


def run(args: argparse.Namespace) -> int:
    from kxform.cli import tune_workers

    if (
        getattr(args, "sizes", None) is not None or getattr(args, "dispatch", None) is not None
    ):  # several timing sizes, and a dispatch header
        from kxform.cli.tune_sizes import run_sizes

        return run_sizes(args)
    if tune_workers.wanted(args):  # several timing workers: GPUs of this host, or a Ray cluster
        return tune_workers.run(args)
    if Path(args.file).is_dir():
        from kxform.cli.tune_dir import run_dir

        return run_dir(args)
    if args.kernel is None:
        raise UsageError(
            f"{args.file}: --kernel K is required with a file (a directory tunes every kernel with a spec)"
        )
    summary, log_path = tune_one(args)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print(summary, log_path)
    refused = (summary.get("written") or {}).get("refused")
    if refused:
        print(f"kxform: --write: {args.file}: not written: {refused}", file=sys.stderr)
    return 1 if refused else 0


def tune_one(args: argparse.Namespace, log: PassLog | None = None) -> tuple[dict[str, Any], Path]:
    """Tune `args.kernel` of `args.file`: the summary (what `--json` prints) and the log's
    path. `log`: a log shared by several kernels (kept open), else one of its own.

    Every configuration is built with the flags the original is: the file's directory
    (added per unit), `-I`/`-D`, the configuration's `include`/`defines` and the build
    directory's compile database, merged into one database for the run."""
    with build_flags(args) as merged:
        return _tune_one(merged, log)


@contextmanager
def build_flags(args: argparse.Namespace) -> Iterator[argparse.Namespace]:
    """`args` with `build_dir` naming one compile database for the run: the file's
    directory, `-I`/`-D`, the configuration's `include`/`defines` and `-p`'s database."""
    import os

    from kxform.cli.options import project_config
    from kxform.workspace.flags import merged_build_dir

    project = project_config(args, [args.file])
    include = tuple(os.path.abspath(d) for d in args.include) + (project.include if project else ())
    defines = tuple(args.define) + (project.defines if project else ())
    build_dir = args.build_dir or (project.build_dir if project else None)
    with merged_build_dir([args.file], include, defines, build_dir) as merged:
        yield argparse.Namespace(**{**vars(args), "build_dir": merged})


def tune_merged(args: argparse.Namespace, log: PassLog | None = None) -> tuple[dict[str, Any], Path]:
    """`tune_one` for `args` already through `build_flags`."""
    return _tune_one(args, log)


def _tune_one(args: argparse.Namespace, log: PassLog | None) -> tuple[dict[str, Any], Path]:
    from kxform.cli.tune_result import pipeline_result

    options = _options(args)
    export = getattr(args, "export", None)
    if export and not Path(export).resolve().parent.is_dir():  # before any evaluation, not after
        raise UsageError(f"--export {export}: its directory does not exist")
    source = read_source(args.file)
    _check_kernel(source, args.kernel)
    objective, space, replay_path = _objective(args, source)
    # a replayed --write is confirmed on the CPU runtime: its spec, space and build are checked before the search
    checker = _cpu_checker(args, source) if args.write and replay_path else None
    # On a kernel the source's current values come first: the search starts from the code as it is.
    options = replace(options, start_at_defaults=not replay_path)  # "" for a kernel objective
    own_log = log is None
    try:
        with TuningDB(args.db) as db:
            kernel_hash = content_key(source.data, args.kernel, *([objective.measures] if objective.measures else []))
            key = TuneKey(kernel_hash, args.kernel, objective.hardware, space.names)
            prior = _prior(args, space, db, key)
            if log is None:
                log = PassLog.open(args.log, hw=objective.hardware, pipeline=args.passes or "", argv=sys.argv[1:])
            drawn = not args.json and interactive(sys.stderr)
            with Progress(enabled=drawn, total=options.budget, time_s=options.time_s) as progress:
                result = tune(space, objective, options, db=db, key=key, prior=prior, on_step=progress.step)
        summary = tune_summary(result, args, objective, replay_path, str(db.path))
        summary.update(_measured(objective))
        summary["result"] = pipeline_result(objective, result, summary.get("original_ms"))
        if getattr(args, "export", None):
            _export(args, space, result, objective.hardware)
        if args.write and result.best is not None:
            try:
                summary["written"] = _write(args, objective, checker, summary["result"], result.best.config)
            except CheckFailed as exc:
                summary["written"] = {"written": [], "refused": str(exc)}
    finally:
        objective.close()
        if checker is not None:
            checker.close()
    log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
    if own_log:
        log.close(Report())
    return summary, log.path


def _export(args: argparse.Namespace, space: SearchSpace, result: TuneResult, device: str) -> None:
    """`--export FILE`: the evaluations in Kernel Tuner's cache format, written atomically."""
    from kxform.search.kt_export import kernel_tuner_cache
    from kxform.workspace.files import write_atomic

    data = kernel_tuner_cache(result, space.params, args.kernel, device)
    try:
        write_atomic(args.export, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--export {args.export}: cannot write it ({exc.strerror or exc})") from None


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


def _write(
    args: argparse.Namespace,
    objective: Objective,
    checker: Objective | None,
    result: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """`--write`: a pipeline that won, through `apply`'s every check; nothing when the
    original was kept. A configuration from a recorded space is typed into the passes'
    composed space first (kxform.search.recorded_values: never copied as text), then
    written the same way, verified on the CPU runtime (`checker`) against the kernel's spec."""
    from kxform.cli.tune_write import write_pipeline
    from kxform.search.kernel_objective import KernelObjective
    from kxform.search.recorded_values import recorded_pipeline

    if not isinstance(objective, KernelObjective):
        assert isinstance(checker, KernelObjective), "a replayed --write is confirmed by a CPU checker"
        pipeline = recorded_pipeline(checker.space, config, args.hw)
        if not pipeline:
            return {"written": [], "kept_original": True}
        return write_pipeline(args, checker, pipeline)
    if result["kept_original"]:
        return {"written": [], "kept_original": True}
    return write_pipeline(args, objective, result["pipeline"])


def _cpu_checker(args: argparse.Namespace, source: SourceText) -> Objective:
    """The run's CPU checker (kxform.search.checker), built before the search, so a missing
    spec or an original that does not build here stops the run before anything is stored."""
    from kxform.search.checker import cpu_checker
    from kxform.search.kernel_space import parse_passes

    return cpu_checker(
        source,
        args.kernel,
        _spec(args, source),
        parse_passes(args.passes) if args.passes else None,
        hw=args.hw,
        build_dir=args.build_dir,
        require=tuple(args.require),
    )


def tune_summary(
    result: TuneResult, args: argparse.Namespace, objective: Objective, replay: str, db_path: str
) -> dict[str, Any]:
    best = result.best
    return {
        "file": args.file,
        "kernel": args.kernel,
        "objective": objective.name,
        "recording": replay or None,
        "hardware": objective.hardware,
        "strategy": result.strategy,
        "seed": args.seed,
        "space_size": result.space_size,
        "evaluated": len(result.steps),
        "measured": result.measured,
        "from_database": sum(1 for s in result.steps if s.source != "measured"),
        "failed": sum(1 for s in result.steps if not s.evaluation.ok),
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
        "evaluations": [_evaluation(step) for step in result.steps],
        "phases_s": _phase_totals(objective),
    }


def _phase_totals(objective: Objective) -> dict[str, float] | None:
    """Seconds the run's configurations spent rewriting, compiling, verifying and timing,
    summed (None for an objective that does not record them): where a tune's time went."""
    phases = getattr(objective, "phases", None)
    if not isinstance(phases, dict) or not phases:
        return None
    totals = {"rewrite": 0.0, "compile": 0.0, "verify": 0.0, "time": 0.0}
    for recorded in phases.values():
        totals["rewrite"] += recorded.rewrite_s
        totals["compile"] += recorded.compile_s
        totals["verify"] += recorded.verify_s
        totals["time"] += recorded.time_s
    return {name: round(value, 3) for name, value in totals.items()}


def _evaluation(step: Step) -> dict[str, Any]:
    """One evaluation in the shape the log viewers read (docs/pass-log.md, `tune`)."""
    e = step.evaluation
    return {
        "eval": step.index + 1,
        "params": step.config,
        "time_ms": e.time_ms,
        "status": e.failure.value if e.failure else "ok",
        "source": step.source,
        "spread_ms": e.spread_ms,
        "cost_s": e.cost_s,
        "detail": e.detail,
    }


def _print(summary: dict[str, Any], log_path: Path) -> None:
    from kxform.cli.tune_result import TABLE_HEADER, format_table, result_line, table_row

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
    print(
        f"kxform: {summary['evaluated']} evaluations ({summary['measured']} measured, "
        f"{summary['from_database']} from the database, {summary['failed']} failed) of {summary['space_size']} "
        f"configurations, stopped: {summary['stopped']}, cost {summary['cost_s']:.1f} s. Log: {log_path}",
        file=sys.stderr,
    )
