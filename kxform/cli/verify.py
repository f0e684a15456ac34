"""`kxform verify`: run an original and a rewritten kernel on the same inputs and compare,
or (`--program`) build and run two self-checking programs and compare what they print.
Each version is launched as its own file's launcher says (kxform.verify.own_launch): a
rewrite that changed the launch with the kernel (rows, smem-tile, vectorize) is checked at
its own grid and block, and the line `launch of 'K': ...` says which launch was used."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kxform import exitcodes
from kxform.cli.options import add_config_options, add_flag_options, pick, project_config
from kxform.cli.progress import ProgressBar
from kxform.errors import KxformError, UsageError, printable
from kxform.harness.dirs import spec_in_dirs
from kxform.harness.spec import find_spec_for, load_spec, missing_spec
from kxform.frontend.source import SourceText, read_source
from kxform.harness.model import KernelSpec


EXIT_BY_STATUS = {
    "ok": exitcodes.OK,
    "mismatch": exitcodes.CHANGES,
    "inconclusive": exitcodes.UNDECIDED,
    "unverified": exitcodes.UNDECIDED,
}
"""`kxform verify` exits 3 when verification could not tell (README, exit codes)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verify", help="differentially verify a rewritten kernel against the original")
    p.add_argument("original")
    p.add_argument(
        "rewritten", nargs="?", help="omit with --reference to check the original against its spec's NumPy reference"
    )
    p.add_argument("--kernel", help="kernel (templated: an instantiation, e.g. 'gemm<float, 64>')")
    p.add_argument("--spec", help="harness spec (default: the NAME.kxspec.toml beside the original)")
    p.add_argument("--runtime", choices=("auto", "gpu", "cpu"), default="auto")
    p.add_argument("--size", action="append", default=[], help="only these spec sizes (repeatable)")
    p.add_argument("--seed", type=int, help="input seed (default: the spec's)")
    p.add_argument("--reference", action="store_true", help="compare with the spec's NumPy reference")
    p.add_argument("--sanitize", action="store_true", help="run under compute-sanitizer (GPU runtime)")
    add_flag_options(p)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per launch (default 120)")
    p.add_argument("--program", action="store_true", help="whole-program mode: files with their own main()")
    p.add_argument(
        "--mask",
        action="append",
        default=[],
        metavar="REGEX",
        help="--program: lines matching REGEX are not compared (e.g. timings)",
    )
    p.add_argument("--rtol", type=float, default=1e-5, help="--program: relative tolerance for numbers")
    p.add_argument("--arch", default=None, help="--program: nvcc arch (default: detected or sm_90)")
    add_config_options(p)
    p.set_defaults(func=run)


def _run_programs(args: argparse.Namespace) -> int:
    from kxform.verify.program import verify_programs

    if not args.rewritten:
        raise UsageError("--program needs ORIGINAL and REWRITTEN")
    report = verify_programs(
        args.original, args.rewritten, masks=tuple(args.mask), rtol=args.rtol, arch=args.arch, timeout_s=args.timeout
    )
    print(printable(report.summary()))
    return 0 if report.ok else 1


def run(args: argparse.Namespace) -> int:
    if args.program:
        return _run_programs(args)
    from kxform.verify.differential import UnitFlags, pick_runtime, verify_pair, verify_reference
    from kxform.verify.own_launch import pair_policy
    from kxform.verify.verdict import combined_status

    if not args.kernel:
        raise UsageError("--kernel is required (kernel mode)")
    if not args.rewritten and not args.reference:
        raise UsageError("give REWRITTEN, or --reference to check ORIGINAL against its spec")
    project = project_config(args, [args.original])
    spec_path = (
        Path(args.spec)
        if args.spec
        else find_spec_for(args.original) or (spec_in_dirs(args.original, project.specs) if project else None)
    )
    if spec_path is None:
        raise UsageError(missing_spec(args.original, args.kernel))
    spec = load_spec(spec_path)
    kernel_specs = spec.instantiations(args.kernel) or (spec.kernel(args.kernel),)
    runtime = pick_runtime(args.runtime)
    if args.sanitize:
        if runtime.name != "gpu":
            raise UsageError("--sanitize needs the GPU runtime (compute-sanitizer)")
        runtime.sanitize = True  # type: ignore[attr-defined]
    original = read_source(args.original)
    sizes = tuple(args.size)
    flags = UnitFlags.from_build_dir(pick(args.build_dir, project and project.build_dir, None), args.original)
    include = tuple(os.path.abspath(d) for d in args.include) + (project.include if project else ())
    defines = tuple(args.define) + (project.defines if project else ())
    flags = UnitFlags(flags.include_dirs + include, flags.defines + defines)
    rewritten = read_source(args.rewritten) if args.rewritten else None
    reports = []
    notes: list[str] = []
    with ProgressBar(unit="size") as bar:
        for kernel_spec in kernel_specs:  # every instantiation of a template the spec lists

            def moved(done: int, total: int, name: str, label: str = kernel_spec.name) -> None:
                bar(done, total, f"{label} {name}" if len(kernel_specs) > 1 else name, stage="verify")

            if rewritten is None:
                report = verify_reference(
                    original, kernel_spec, runtime, sizes, args.seed, args.timeout, flags, progress=moved
                )
            else:
                policy, note = pair_policy(original, rewritten, kernel_spec.base_name, flags.compiler_args())
                notes.append(f"kxform: launch of '{kernel_spec.name}': {note}")
                report = verify_pair(
                    original,
                    rewritten,
                    kernel_spec,
                    runtime,
                    sizes,
                    args.seed,
                    args.timeout,
                    flags,
                    policy=policy,
                    progress=moved,
                )
            reports.append(report)
    for note in notes:
        print(printable(note))
    for report in reports:
        for verdict in report.sizes:
            print(printable(f"  {verdict.summary()}"), file=sys.stderr if not verdict.ok else sys.stdout)
        print(printable(report.summary()))
    if rewritten is not None:
        for note in _vacuity_warnings(rewritten, args.kernel, kernel_specs):
            print(printable(f"kxform: warning: {note}"), file=sys.stderr)
    if len(kernel_specs) > 1 or kernel_specs[0].name != args.kernel:
        from kxform.verify.stage import missing_instantiations

        for note in missing_instantiations(original, kernel_specs[0].base_name, kernel_specs):
            print(f"kxform: note: {note}", file=sys.stderr)
    return EXIT_BY_STATUS[combined_status(reports)]


def _vacuity_warnings(rewritten: SourceText, kernel: str, specs: Sequence[KernelSpec]) -> list[str]:
    """What the verification just run could not tell, as each registered pass sees it in
    the rewritten file (`Pass.verify_warnings`: a remap that moves no block at any check
    size, say), once per distinct warning."""
    from kxform.engine.registry import default_registry
    from kxform.frontend.cuda import parse_model

    try:
        model = parse_model(rewritten)
    except KxformError:
        return []  # the verification above has already said what is wrong with the file
    registry = default_registry()
    out: list[str] = []
    for name in registry.names():
        for spec in specs:
            for warning in registry.get(name)().verify_warnings(model, kernel, spec):
                if warning not in out:
                    out.append(warning)
    return out
