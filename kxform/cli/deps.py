"""`kxform deps`: stamps of the files kxform's decisions read, for build systems.

A build runs it on every build (it is cheap: it reads no source, only looks for the
configuration, profile and spec files); a stamp is rewritten only when the set of
those files or their content changed (kxform.workspace.depfile.write_stamp), and the
rewritten copies depend on it. So a `kxform.toml` or a harness spec added after the
first build re-runs kxform, and a no-op build re-runs nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kxform import exitcodes
from kxform.cli.options import add_config_options, add_walk_options, project_config


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "deps",
        help="stamp the files kxform's decisions read (configuration, specs, hardware profile), for builds",
        description="Record the decision inputs of PATHS (the project configuration files searched, a hardware "
        "profile file, the harness specs) with their SHA-256 in a stamp, rewritten only when that record changed. "
        "Run it on every build and make the copies of `apply -o` depend on the stamp: a configuration or spec "
        "added, removed or edited then re-runs kxform, and nothing else does (docs/build-integration.md).",
    )
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--stamp", metavar="FILE", help="one stamp for every source under PATHS")
    out.add_argument(
        "-o",
        "--out-dir",
        metavar="OUT_DIR",
        help="one stamp per source, OUT_DIR/SOURCE.inputs beside the copy `apply -o OUT_DIR` writes; "
        "each PATH read as a run of apply on that PATH alone reads it (as CMake runs it)",
    )
    p.add_argument("--hw", help="hardware profile name or .toml path, as given to apply (a path is an input)")
    add_config_options(p)
    add_walk_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.add_argument("paths", nargs="+", metavar="PATH", help="the sources (files or directories) given to apply")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kxform.workspace.files import output_path, walk_sources
    from kxform.workspace.inputs import decision_inputs

    searched = not (args.config or args.no_config)
    planned: list[tuple[str, list[Path]]] = []  # every path read and checked before a stamp is written
    for paths in [args.paths] if args.stamp else [[path] for path in args.paths]:
        project = project_config(args, paths)
        sources = [str(s) for s in walk_sources(paths, gitignore=args.gitignore)]
        groups = (
            [(args.stamp, sources)]
            if args.stamp
            else [(f"{output_path(s, args.out_dir)}.inputs", [s]) for s in sources]
        )
        planned += [(stamp, decision_inputs(paths, read, project, args.hw, searched)) for stamp, read in groups]
    written = [stamp for stamp, inputs in planned if _write(stamp, inputs)]
    if not args.quiet:
        names = "".join(f"\n  {name}" for name in written)
        print(f"kxform: {len(planned)} stamp(s) checked, {len(written)} rewritten{names}", file=sys.stderr)
    return exitcodes.OK


def _write(stamp: str, inputs: list[Path]) -> bool:
    """write_stamp, with a file-system failure as one line naming the stamp (exit 2)."""
    from kxform.errors import InputError, Location
    from kxform.workspace.depfile import write_stamp

    try:
        return write_stamp(stamp, inputs)
    except OSError as exc:
        raise InputError(f"cannot write the stamp: {exc.strerror or exc}", Location(stamp)) from None
