"""`kxform harness`: work with harness specs (`infer` drafts one, `check` validates one)."""

from __future__ import annotations

import argparse
import sys

from kxform.workspace.files import write_atomic
from kxform.frontend.source import read_source


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("harness", help="draft or validate harness specs")
    sub = p.add_subparsers(dest="harness_command", metavar="ACTION", required=True)
    infer = sub.add_parser("infer", help="draft a spec from the file's own launch site (review it)")
    infer.add_argument("file")
    infer.add_argument("--kernel", required=True)
    infer.add_argument("-o", "--output", help="write the draft here (refuses to overwrite)")
    check = sub.add_parser("check", help="load and validate a spec")
    check.add_argument("spec")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.harness_command == "check":
        from kxform.harness.spec import load_spec

        spec = load_spec(args.spec)
        for name, kernel in spec.kernels.items():
            print(f"{name}: {len(kernel.args)} args, {len(kernel.sizes)} sizes, compare {kernel.compare}")
        return 0
    from kxform.errors import UsageError
    from kxform.harness.infer import infer_spec

    text = infer_spec(read_source(args.file), args.kernel)
    if args.output:
        import os

        if os.path.exists(args.output):
            raise UsageError(f"{args.output}: exists; not overwriting a spec (remove it or choose another path)")
        write_atomic(args.output, text.encode("utf-8"))
        print(f"kxform: draft spec written to {args.output}; review the lines marked 'review'", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
