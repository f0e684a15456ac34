"""`kxform tune`: the command line of tuning. It parses its arguments into a typed
request, runs it through the library entry (`kxform.api.tune`, kxform.orchestrate.tune)
and prints what the run found: a line per result, the table of a directory or of several
sizes, or (`--json`) the run's record. Workers, pools, Ray and the database are reached
through the library, never from here.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kxform.api import (
    BuildInputs,
    Listeners,
    MeasureSettings,
    OutputSettings,
    RunKind,
    SearchSettings,
    TuneOutcome,
    TuneRequest,
    tune,
)
from kxform.cli.progress import interactive
from kxform.cli.tune_print import print_cluster, print_directory, print_job, print_kernel, print_left_out, print_sizes
from kxform.search.progress import Progress
from kxform.search.strategy import DEFAULT, STRATEGIES
from kxform.search.kernel_space import parse_passes


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
    p.add_argument(
        "--gpus",
        metavar="all|N|LIST",
        help="time on several GPUs of this host at once: all, a count, or device numbers (0,2,3); "
        "with --ray, the number of workers",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS|auto|local",
        help="time on the GPUs of a Ray cluster (auto: the running one; local: start one here); "
        "needs kxform[distributed]",
    )
    p.add_argument(
        "--no-cost-model",
        dest="cost_model",
        action="store_false",
        help="no predicted cost per configuration: no ordering or pruning by it (docs/search.md)",
    )
    p.add_argument(
        "--no-cut-off",
        dest="cut_off",
        action="store_false",
        help="time every configuration to its full launch budget, however slow its first launches",
    )
    p.add_argument(
        "--no-transfer",
        dest="transfer",
        action="store_false",
        help="no warm start from kernels of similar features in the tuning database",
    )
    p.set_defaults(func=run)


def request_of(args: argparse.Namespace) -> TuneRequest:
    """The typed request of the parsed command line (UsageError for a value that cannot run)."""
    sizes = None
    if args.sizes is not None:
        sizes = tuple(n.strip() for n in args.sizes.split(","))
    elif args.dispatch is not None:
        sizes = ()  # every bench size
    return TuneRequest(
        args.file,
        args.kernel,
        parse_passes(args.passes) if args.passes is not None else None,
        args.spec,
        args.hw,
        SearchSettings(
            strategy=args.strategy,
            budget=args.budget,
            time_s=args.time,
            seed=args.seed,
            resume=args.resume,
            prior=tuple(args.prior),
            db=args.db,
            require=tuple(args.require),
            cost_model=args.cost_model,
            transfer=args.transfer,
        ),
        MeasureSettings(
            objective=args.objective or "gpu",
            size=args.size,
            sizes=sizes,
            repeat=args.repeat,
            launch_budget_s=args.launch_budget,
            cut_off=args.cut_off,
            jobs=args.jobs,
            gpus=args.gpus,
            ray=args.ray,
        ),
        BuildInputs(tuple(args.include), tuple(args.define), args.build_dir),
        OutputSettings(args.write, args.export, args.dispatch, args.log, tuple(sys.argv[1:])),
    )


def run(args: argparse.Namespace) -> int:
    request = request_of(args)
    drawn = not args.json and interactive(sys.stderr)
    with Progress(enabled=drawn, total=request.search.evaluations, time_s=request.search.time_s) as progress:
        listeners = Listeners(
            on_step=progress.step, on_job=None if args.json else print_job, on_left_out=print_left_out
        )
        outcome = tune(request, listeners=listeners)
    show(outcome, args.json)
    return 1 if outcome.failed else 0


def show(outcome: TuneOutcome, as_json: bool) -> None:
    """The outcome on stdout (`--json`: its record) and the closing lines on stderr."""
    if as_json:
        print(json.dumps(outcome.record, indent=2, default=str))
    printers: dict[RunKind, Any] = {
        RunKind.KERNEL: print_kernel,
        RunKind.DIRECTORY: print_directory,
        RunKind.SIZES: print_sizes,
        RunKind.CLUSTER: print_cluster,
    }
    printers[outcome.kind](outcome, as_json)
