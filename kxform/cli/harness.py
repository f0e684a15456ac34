"""`kxform harness`: work with harness specs (`infer` drafts one, `check` validates one)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kxform.cli.options import add_config_options, add_flag_options, unit_flags
from kxform.harness.spec import SPEC_NAME, SPEC_SUFFIX
from kxform.workspace.config import CONFIG_NAMES
from kxform.workspace.files import write_atomic
from kxform.frontend.source import read_source
from kxform.harness.model import KernelSpec


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("harness", help="draft or validate harness specs")
    sub = p.add_subparsers(dest="harness_command", metavar="ACTION", required=True)
    infer = sub.add_parser("infer", help="draft a spec from the file's own launch site (review it)")
    infer.add_argument("file")
    infer.add_argument("--kernel", required=True)
    infer.add_argument(
        "-o",
        "--output",
        help="write the draft here (a directory: DIR/STEM.kxspec.toml; refuses "
        "to overwrite, and refuses a project configuration's name)",
    )
    infer.add_argument(
        "--no-measure",
        action="store_true",
        help="do not run the kernel on the CPU runtime to measure element counts and roles",
    )
    add_flag_options(infer)
    add_config_options(infer)
    check = sub.add_parser("check", help="load and validate a spec")
    check.add_argument("spec")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.harness_command == "check":
        return _check(args.spec)
    from kxform.errors import UsageError
    from kxform.harness.infer import infer_spec

    runtime = None
    if not args.no_measure:
        from kxform.runtime.cpu import CpuRuntime

        cpu = CpuRuntime()
        runtime = cpu if cpu.available()[0] else None
    if args.output and os.path.isdir(args.output):  # a directory: the spec's own name in it
        args.output = os.path.join(args.output, f"{Path(args.file).stem}{SPEC_SUFFIX}")
    if args.output and os.path.basename(args.output) in CONFIG_NAMES:
        raise UsageError(
            f"{args.output}: that is the project configuration's name; write the spec as "
            f"{SPEC_NAME} or NAME{SPEC_SUFFIX} (docs/harness-spec.md)"
        )
    spec_dir = os.path.dirname(os.path.abspath(args.output)) if args.output else None
    draft = infer_spec(read_source(args.file), args.kernel, runtime, spec_dir, flags=unit_flags(args, args.file))
    where = args.output or "<stdout>"
    if draft.guessed:
        print(f"kxform: warning: {args.file}: '{args.kernel}': {draft.guessed}", file=sys.stderr)
    if args.output:
        if os.path.exists(args.output):
            raise UsageError(f"{args.output}: exists; not overwriting a spec (remove it or choose another path)")
        write_atomic(args.output, draft.text.encode("utf-8"))
        print(f"kxform: draft spec written to {args.output}; review the lines marked 'review'", file=sys.stderr)
    else:
        sys.stdout.write(draft.text)
    for todo in draft.todos:
        line, _, why = todo.partition(": ")
        print(f"kxform: {where}:{line.removeprefix('line ')}: fill in: {why}", file=sys.stderr)
    return 0


def _check(path: str) -> int:
    """Load and validate a spec, and refuse sizes whose buffers would not fit in memory."""
    from kxform.errors import SpecError
    from kxform.harness.spec import load_spec

    spec = load_spec(path)
    memory = physical_memory()
    for name, kernel in spec.kernels.items():
        for size in kernel.sizes:
            resolved = kernel.launch(size)
            need = resolved.total_bytes
            if memory and need > memory:
                largest = max((a for a in resolved.args if a.kind == "buffer"), key=lambda a: a.nbytes)
                raise SpecError(
                    f"kernel '{name}' size '{size.name}': its buffers need {_bytes(need)} "
                    f"('{largest.name}' alone {_bytes(largest.nbytes)}), more than this machine's "
                    f"{_bytes(memory)} of memory; check the counts and the size values",
                    size.location,
                )
        for warning in one_block_warnings(kernel):
            print(f"kxform: warning: {warning}", file=sys.stderr)
        print(
            f"{name}: {len(kernel.args)} args, {len(kernel.sizes)} sizes, compare {kernel.compare}, largest size "
            f"{_bytes(max(kernel.launch(s).total_bytes for s in kernel.sizes))} of buffers"
        )
    return 0


def one_block_warnings(kernel: KernelSpec) -> list[str]:
    """Sizes whose launch has one block along a grid dimension that a size variable sets:
    there a bug in how blocks share the work (x and y swapped, a wrong tile) cannot show."""
    out = []
    for size in kernel.check_sizes:
        grid = kernel.launch(size).grid
        for axis, expr, blocks in zip("xyz", kernel.grid, grid):
            if blocks == 1 and expr.variables:
                out.append(
                    f"{size.location}: kernel '{kernel.name}' size '{size.name}' launches 1 block along "
                    f"{axis} ({expr.text} = 1): a bug in how blocks share the work cannot show at this size; "
                    "add a size of 3 or more blocks with a partial last one"
                )
    return out


def physical_memory() -> int:
    """Bytes of physical memory (0 where the platform does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
