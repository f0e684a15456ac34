"""`kxform report RUN -o report.html`: one run's pass log as a self-contained HTML page."""

from __future__ import annotations

import argparse
import sys

from kxform.log.html_report import render
from kxform.log.reader import find_log_dir, resolve_run
from kxform.workspace.files import write_atomic


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="write one run's pass log as a self-contained HTML report",
        description="RUN: a log file, 'last', 'last~N', or a run id or unique prefix "
        "(in the nearest .kxform/logs or --dir). Plots need matplotlib (kxform[report]).",
    )
    p.add_argument("run", metavar="RUN")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: kxform-report-RUNID.html)")
    p.add_argument("--dir", metavar="DIR", help="log directory (default: the nearest .kxform/logs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    chosen = resolve_run(args.run, find_log_dir(args.dir))
    page = render(chosen).encode("utf-8")
    target = args.output or f"kxform-report-{chosen.run_id}.html"
    write_atomic(target, page)
    print(f"kxform: report of run {chosen.run_id} written to {target} ({len(page) / 1024:.0f} KiB)", file=sys.stderr)
    return 0
