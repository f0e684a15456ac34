"""`kxform optimize FILE --kernel K`: from a kernel to its fastest verified version, in one command.

1. The harness spec: `--spec`, else the one beside FILE (`NAME.kxspec.toml`), else one
   drafted as `kxform harness infer` drafts it (the launch read from the file, roles from
   the body, element counts measured on the CPU runtime), kept in `.kxform/specs/` and
   shown: what it assumed (launch, sizes, each argument's role, type and count) is what
   the verification below stands on. A draft with lines to fill in stops here (exit 2),
   naming them.
2. The original verified against it: run twice on the same inputs at every check size
   (kxform.verify.differential.verify_pair, the CPU runtime), so a spec whose outputs the
   kernel never writes, or whose inputs it cannot run on, is found before any tuning.
3. The passes with something to tune in the kernel, and their spaces.
4. Tuning (kxform.cli.optimize_run.tune_kernel: `kxform.api.tune` with a request of
   these options, the one call into the tuner) on this machine's GPU, or with times
   recorded on one (`--objective cpu+replay:FILE`), then a table: the original's and the
   best verified version's time, the speed-up, what changed, and how close each comes to
   the device's copy bandwidth. `--write` writes the
   fastest verified version into FILE through `apply`'s every check (and a drafted spec
   beside FILE). Without a GPU steps 1-3 run, and one line says what a GPU would add.
"""

from __future__ import annotations

import argparse
import json

from kxform.cli.optimize_run import OptimizeRun
from kxform.cli.options import add_config_options, add_flag_options, unit_flags
from kxform.errors import UsageError, printable
from kxform.search.strategy import DEFAULT, STRATEGIES


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "optimize",
        help="draft the spec if needed, verify, tune every pass, keep the fastest verified version",
        description="From a kernel to its fastest verified version: the harness spec (drafted when "
        "there is none), the original verified against it, every pass that applies tuned (on a GPU), "
        "the result written with --write.",
    )
    p.add_argument("file", metavar="FILE", help="CUDA/HIP source holding the kernel")
    p.add_argument("--kernel", required=True, metavar="K", help="the kernel to optimize")
    p.add_argument("--spec", metavar="S", help="harness spec (default: FILE's NAME.kxspec.toml, else a drafted one)")
    p.add_argument(
        "--write",
        action="store_true",
        help="write the fastest verified version into FILE (and a drafted spec beside it, as NAME.kxspec.toml)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget", type=int, metavar="N", help="evaluations, at most (default: 200)")
    budget.add_argument("--time", type=float, metavar="T", help="stop once evaluations have cost T seconds")
    p.add_argument(
        "--pass",
        dest="passes",
        metavar="NAME[,NAME]",
        help="only these passes (default: every pass with something to tune in the kernel)",
    )
    p.add_argument(
        "--strategy", choices=sorted(STRATEGIES), help=f"search strategy (default: {DEFAULT}; kxform tune's)"
    )
    p.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="EXPR",
        help="an extra constraint on the parameters, repeatable (as kxform tune's)",
    )
    p.add_argument(
        "--objective",
        metavar="gpu|cpu+replay:FILE",
        help="gpu (default): time on this machine's GPU; cpu+replay:FILE: verify on the CPU runtime and take "
        "the times a `tune --json` run recorded on a GPU (docs/search.md)",
    )
    p.add_argument(
        "--size",
        metavar="NAME|VAR=V,...",
        help="timing size (default: the spec's bench size; for a spec without one, a size of 4 waves of "
        "blocks and buffers 4x the L2)",
    )
    p.add_argument("--hw", metavar="NAME", help="hardware profile (default: this machine's GPU, else h100)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--log", metavar="FILE", help="pass log path (default: .kxform/logs/RUN.jsonl)")
    p.add_argument("--db", metavar="PATH", help="tuning database (default: the user cache's tuning.sqlite)")
    add_flag_options(p)
    add_config_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.objective not in (None, "gpu") and not str(args.objective).startswith("cpu+replay:"):
        raise UsageError(
            f"--objective {args.objective}: optimize rewrites and verifies the kernel, so it takes gpu or "
            "cpu+replay:FILE (a recorded space alone is `kxform tune --objective replay:FILE`)"
        )
    out = _Printer(args.json)
    optimizer = OptimizeRun(args, unit_flags(args, args.file), out.line)
    report = optimizer.run()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return int(report["exit"])


class _Printer:
    """Human lines on stdout, or nothing (`--json`: one object at the end)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def line(self, text: str = "") -> None:
        if not self.quiet:
            print(printable(text, keep="\n"))
