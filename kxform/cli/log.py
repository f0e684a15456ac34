"""`kxform log list|show|diff`: read the pass logs of earlier runs in a terminal.

Runs are found in the nearest `.kxform/logs` (from the current directory upwards),
in `--dir DIR`, or given as log files. A RUN is a log file (its last run), `last`,
`last~N` (N runs before the last), or a run id or its unique prefix.
"""

from __future__ import annotations

import argparse
import os
import sys

from kxform.errors import UsageError
from kxform.log.reader import LogError, Run, find_log_dir, load_runs, resolve_run, sort_runs
from kxform.log.view import OUTCOMES, ShowFilter, Style, diff_lines, list_lines, show_lines


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "log",
        help="list, show and compare the pass logs of earlier runs",
        description="Read pass logs (.kxform/logs or given files). RUN: a log file, 'last', "
        "'last~N', or a run id or unique prefix.",
    )
    p.add_argument("--dir", metavar="DIR", help="log directory (default: the nearest .kxform/logs)")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour output (default: when stdout is a terminal and NO_COLOR is unset)",
    )
    actions = p.add_subparsers(dest="log_action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="runs with date, passes and counts (oldest first)")
    ls.add_argument("paths", nargs="*", metavar="PATH", help="log files or directories (default: the log directory)")
    show = actions.add_parser("show", help="one run: kernels, reasons, checks, times, remarks, diffs")
    show.add_argument("run", metavar="RUN")
    show.add_argument("--kernel", metavar="K", help="only this kernel (a glob works: 'sgemm*')")
    show.add_argument("--outcome", choices=OUTCOMES, help="only kernels with this outcome")
    show.add_argument("--no-diff", action="store_true", help="leave out the diffs")
    diff = actions.add_parser(
        "diff",
        help="what changed between two runs: decisions, outcomes, times (exit 1 when a decision or outcome changed)",
    )
    diff.add_argument("run1", metavar="RUN1")
    diff.add_argument("run2", metavar="RUN2")
    p.set_defaults(func=run)


def _style(choice: str) -> Style:
    if choice == "auto":
        return Style(sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    return Style(choice == "always")


def run(args: argparse.Namespace) -> int:
    style = _style(args.color)
    if args.log_action == "list":
        return _list(args)
    if args.log_action == "show":
        chosen = resolve_run(args.run, find_log_dir(args.dir))
        _emit(show_lines(chosen.printable(), ShowFilter(args.kernel, args.outcome, not args.no_diff), style))
        return 0
    if args.log_action == "diff":
        directory = find_log_dir(args.dir)
        lines, changed = diff_lines(
            resolve_run(args.run1, directory).printable(), resolve_run(args.run2, directory).printable(), style
        )
        _emit(lines)
        return 1 if changed else 0
    raise UsageError(f"unknown log action {args.log_action!r}")


def _list(args: argparse.Namespace) -> int:
    directory = None if args.paths else find_log_dir(args.dir)
    locations = args.paths or ([directory] if directory else [])
    if not locations:
        raise LogError("no .kxform/logs here or above (run kxform apply first, or give --dir or log files)")
    loaded = list(load_runs(locations))
    runs = [item.printable() for item in loaded if isinstance(item, Run)]
    errors = [item for item in loaded if isinstance(item, LogError)]
    _emit(list_lines(sort_runs(runs)))
    for error in errors:
        print(f"kxform: error: {error}", file=sys.stderr)
    return 2 if errors else 0


def _emit(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")
