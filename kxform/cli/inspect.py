"""`kxform inspect`: what kxform sees in a file: kernels, launches, index reads, swizzle safety."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kxform.cli.options import add_config_options, pick, project_config
from kxform.errors import KxformError
from kxform.workspace.exclude import Exclude
from kxform.workspace.files import walk_sources
from kxform.frontend.cuda import parse_model
from kxform.hw import load_profile
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.log.remarks import RemarkSink
from kxform.frontend.source import read_source


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help="show kernels, launch sites, index reads and swizzle safety")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--hw", help="hardware profile for the swizzle preview (default: configured, else h100)")
    add_config_options(p)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=run)


def inspect_file(path: str, hw_name: str) -> dict[str, Any]:
    from kxform.passes.swizzle import Swizzle

    source = read_source(path)
    model = parse_model(source)
    ctx = PassContext(model, load_profile(hw_name), RunOptions(), RemarkSink())
    analyses = Swizzle().analyse(ctx)
    kernels = []
    for kernel in model.kernels:
        analysis = analyses[kernel.name]
        usage = analysis.facts["usage"]
        kernels.append({
            "name": kernel.name,
            "line": source.line_col(kernel.span.start)[0],
            "template": kernel.template_params,
            "params": [f"{p.ctype} {p.name}".strip() for p in kernel.params],
            "launch_bounds": kernel.launch_bounds,
            "grid_dims": usage.dims,
            "device_functions": [f.name for f in usage.functions[1:]],
            "index_reads": [{"read": r.spelling, "line": source.line_col(r.span.start)[0],
                             "function": r.function, "macro": r.macro} for r in usage.reads],
            "swizzle": "already applied" if analysis.already_applied else
                       "safe" if analysis.applicable else "refused",
            "reasons": [f"{b.key}: {b.message}" for b in analysis.blockers],
        })
    return {
        "file": path,
        "kernels": kernels,
        "device_functions": [f.name for f in model.functions if f.kind.value == "device"],
        "launches": [{"kernel": l.kernel, "template_args": l.template_args, "config": list(l.config),
                      "style": l.style, "line": source.line_col(l.span.start)[0], "in": l.function}
                     for l in model.launches],
        "syntax_errors": [str(source.location(i.span.start)) for i in model.syntax_issues],
    }


def run(args: argparse.Namespace) -> int:
    reports, status = [], 0
    project = project_config(args, args.paths)
    hw = pick(args.hw, project and project.hw, "h100")
    exclude = Exclude(str(project.root), project.exclude) if project else None
    for path in walk_sources(args.paths):
        if exclude is not None and exclude.matches(path):
            continue
        try:
            reports.append(inspect_file(str(path), hw))
        except KxformError as exc:
            print(f"kxform: error: {exc}", file=sys.stderr)
            status = 2
    if args.json:
        json.dump(reports, sys.stdout, indent=2)
        print()
        return status
    for report in reports:
        _print_table(report)
    return status


def _print_table(report: dict[str, Any]) -> None:
    print(report["file"])
    for k in report["kernels"]:
        print(f"  kernel {k['name']} (line {k['line']}, {k['grid_dims']}-D grid)  swizzle: {k['swizzle']}")
        for reason in k["reasons"]:
            print(f"      - {reason}")
        for read in k["index_reads"]:
            where = f"macro {read['macro']}" if read["macro"] else read["function"]
            print(f"      {read['read']:<16} line {read['line']:<5} in {where}")
    for launch in report["launches"]:
        targs = launch["template_args"] or ""
        print(f"  launch {launch['kernel']}{targs} <<<{', '.join(launch['config'])}>>> line {launch['line']} "
              f"({launch['style']})")
    for error in report["syntax_errors"]:
        print(f"  syntax error at {error}")
