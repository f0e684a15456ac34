"""`kxform inspect`: what kxform sees in a file: kernels, launch sites, and what each pass
makes of each kernel (every registered pass describes itself: swizzle its index reads and
safety, tile the parameter space and the constraints it derived)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from kxform.build.toolchain import Toolchain
from kxform.cli.options import add_config_options, add_walk_options, pick, project_config
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform import exitcodes
from kxform.errors import KxformError, UsageError, display_path
from kxform.frontend.cuda import parse_model
from kxform.build.semantic import semantic_provider
from kxform.frontend.source import read_source
from kxform.hw import HwProfile, load_profile
from kxform.log.remarks import RemarkSink
from kxform.workspace.exclude import Exclude
from kxform.workspace.files import walk_sources


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help="show kernels, launch sites and what each pass makes of them")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--hw", help="hardware profile for constraints and previews (default: configured, else h100)")
    p.add_argument(
        "--pass",
        dest="passes",
        metavar="NAME[,NAME]",
        help="only these passes (default: the configured 'passes', else all; with --prompt: the one "
        "pass asked about, default swizzle)",
    )
    p.add_argument("-p", dest="build_dir", metavar="BUILD_DIR", help="directory with compile_commands.json")
    add_config_options(p)
    add_walk_options(p)
    p.add_argument(
        "--prompt",
        metavar="FILE",
        help="print the context a model would get for --kernel K of FILE "
        "(what --proposer claude sends), and nothing else",
    )
    p.add_argument(
        "--l2",
        action="store_true",
        help="predict L2 hit rate and DRAM traffic of every block order (one FILE, --kernel; "
        "needs a harness spec and a host compiler; docs/locality-model.md)",
    )
    p.add_argument("--kernel", metavar="NAME", help="the kernel for --prompt or --l2")
    p.add_argument("--spec", help="with --l2: harness spec (default: the NAME.kxspec.toml beside FILE)")
    p.add_argument("--size", help="with --l2: spec size to model (default: its first bench size)")
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.set_defaults(func=run)


def inspect_file(
    path: str,
    hw: HwProfile | str,
    passes: str | None = None,
    build_dir: str | None = None,
    options: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What kxform sees in `path`; `options` (the configured `params`) go to the passes
    named in `passes`, as `apply` hands them."""
    profile = load_profile(hw) if isinstance(hw, str) else hw
    registry = default_registry()
    pipeline = (
        registry.pipeline(passes, dict(options or {})) if passes else [registry.get(n)() for n in registry.names()]
    )
    source = read_source(path)
    model = parse_model(source)
    semantic = semantic_provider(path, build_dir)(model)
    ctx = PassContext(model, profile, RunOptions(), RemarkSink(), semantic, Toolchain.create(build_dir))
    described: dict[str, dict[str, dict[str, Any]]] = {}
    for pass_ in pipeline:
        analyses = pass_.analyse(ctx)
        described[pass_.name] = {name: pass_.describe(ctx, analysis) for name, analysis in analyses.items()}
    kernels = []
    for kernel in model.kernels:
        entry: dict[str, Any] = {
            "name": kernel.name,
            "line": source.line_col(kernel.span.start)[0],
            "template": kernel.template_params,
            "params": [f"{p.ctype} {p.name}".strip() for p in kernel.params],
            "launch_bounds": kernel.launch_bounds,
            "passes": {
                name: per_kernel[kernel.name] for name, per_kernel in described.items() if kernel.name in per_kernel
            },
        }
        entry.update({name: d["status"] for name, d in entry["passes"].items()})
        kernels.append(entry)
    return {
        "file": path,
        "hw": profile.name,
        "kernels": kernels,
        "device_functions": [f.name for f in model.functions if f.kind.value == "device"],
        "launches": [
            {
                "kernel": launch.kernel,
                "template_args": launch.template_args,
                "config": list(launch.config),
                "style": launch.style,
                "line": source.line_col(launch.span.start)[0],
                "in": launch.function,
            }
            for launch in model.launches
        ],
        "syntax_errors": [str(source.location(i.span.start)) for i in model.syntax_issues],
    }


def run(args: argparse.Namespace) -> int:
    if args.l2:
        if args.prompt or args.passes or args.build_dir:
            print(
                "kxform: error: --prompt, --pass and -p do not go with --l2 (it models the swizzle pass's orders)",
                file=sys.stderr,
            )
            return exitcodes.USAGE
        from kxform.cli.inspect_l2 import run_l2

        return run_l2(args)
    if args.spec or args.size or (args.kernel and not args.prompt):
        print("kxform: error: --kernel, --spec and --size go with --l2 (--kernel also with --prompt)", file=sys.stderr)
        return exitcodes.USAGE
    if args.prompt or args.kernel:
        if not (args.prompt and args.kernel) or args.paths:
            raise UsageError("usage: kxform inspect --prompt FILE --kernel NAME [--hw H] [--pass P] [-p BUILD_DIR]")
        from kxform.propose.show import prompt_for

        sys.stdout.write(
            prompt_for(
                args.prompt,
                args.kernel,
                load_profile(args.hw or "h100"),
                args.passes or "swizzle",
                build_dir=args.build_dir,
            )
        )
        return exitcodes.OK
    if not args.paths:
        raise UsageError("kxform inspect: give at least one PATH (or --prompt FILE --kernel NAME)")
    from kxform.workspace.flags import merged_build_dir

    reports, status = [], 0
    project = project_config(args, args.paths)
    hw = load_profile(pick(args.hw, project and project.hw, "h100"))
    passes = pick(args.passes, project and project.passes, None)
    options = dict(project.params) if project is not None and passes else {}
    exclude = Exclude(str(project.root), project.exclude) if project and project.exclude else None
    files = [
        str(p) for p in walk_sources(args.paths, gitignore=args.gitignore) if exclude is None or not exclude.matches(p)
    ]
    include, defines = (project.include, project.defines) if project is not None else ((), ())
    with merged_build_dir(
        files, include, defines, pick(args.build_dir, project and project.build_dir, None)
    ) as build_dir:
        for path in files:
            try:
                reports.append(inspect_file(path, hw, passes, build_dir, options))
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
    print(display_path(report["file"]))
    for k in report["kernels"]:
        print(f"  kernel {k['name']} (line {k['line']})")
        for name, info in k["passes"].items():
            _print_pass(name, info)
    for launch in report["launches"]:
        targs = launch["template_args"] or ""
        print(
            f"  launch {launch['kernel']}{targs} <<<{', '.join(launch['config'])}>>> line {launch['line']} "
            f"({launch['style']})"
        )
    for error in report["syntax_errors"]:
        print(f"  syntax error at {error}")


def _print_pass(name: str, info: dict[str, Any]) -> None:
    extra = f", {info['grid_dims']}-D grid" if "grid_dims" in info else ""
    print(f"    {name}: {info['status']}{extra}")
    for reason in info.get("reasons", []):
        print(f"      - {reason}")
    for read in info.get("index_reads", []):
        where = f"macro {read['macro']}" if read["macro"] else read["function"]
        print(f"      {read['read']:<16} line {read['line']:<5} in {where}")
    for param in info.get("params", []):
        values = param.get("values", param.get("range"))
        origin = f"  [{param['origin']}]" if param.get("origin") else ""
        print(f"      param {param['name']} = {param['default']} ({param['type']}: {values}){origin}")
    for refused in info.get("not_lifted", []):
        print(f"      not lifted: {refused}")
    for constraint in info.get("constraints", []):
        origin = f"  [{constraint['origin']}]" if constraint.get("origin") else ""
        why = f"  -- {constraint['reason']}" if constraint.get("reason") else ""
        print(f"      require {constraint['expr']}{origin}{why}")
