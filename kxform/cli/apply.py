"""`kxform apply`: run a pass pipeline over files and directories."""

from __future__ import annotations

import argparse
import re
import sys

from kxform.errors import UsageError
from kxform.hw import load_profile
from kxform.engine.pass_api import KernelResult, Outcome
from kxform.log.passlog import PassLog
from kxform.log.report import WriteBack
from kxform.engine.runner import ApplyConfig, FileOutcome, run_apply


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("apply", help="apply passes to CUDA/HIP sources (default: in place)",
                              description="Apply a pass pipeline. Every rewrite is checked before it is written.")
    p.add_argument("--pass", dest="passes", required=True, metavar="NAME[,NAME]",
                   help="passes to run, e.g. swizzle or 'swizzle{pattern=grouped,group=4}'")
    p.add_argument("--pattern", help="swizzle pattern (row, column, grouped, diagonal, hilbert, morton, xcd, "
                   "xcd-grouped); default: chosen from the hardware profile")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="pass parameter (repeatable)")
    p.add_argument("--hw", default="h100", help="hardware profile name or .toml path (default: h100)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME", help="only these kernels (repeatable)")
    p.add_argument("-p", dest="build_dir", metavar="BUILD_DIR", help="directory with compile_commands.json")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N", help="parallel jobs (default: all cores)")
    p.add_argument("--verify", choices=("auto", "gpu", "cpu", "compile", "static"), default="auto",
                   help="static: parse-level checks only; compile: also nvcc -c (required); gpu/cpu: also run "
                   "original and rewritten on that runtime for kernels with a harness spec; auto (default): "
                   "compile when nvcc exists, run on the GPU if there is one, else on the CPU runtime")
    p.add_argument("--measure", action="store_true",
                   help="time original and rewritten (bench size) and keep a rewrite only if it is faster "
                   "beyond the measured spread")
    p.add_argument("--log", metavar="FILE", help="pass log path (default: .kxform/logs/RUN.jsonl)")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors and the summary only")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff; write nothing")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    mode.add_argument("-o", "--out-dir", metavar="OUT_DIR", help="write rewritten copies under OUT_DIR")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=run)


def _params(items: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--param {item!r}: expected KEY=VALUE")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def config_from_args(args: argparse.Namespace) -> ApplyConfig:
    extra = _params(args.param)
    if args.pattern:
        extra = (("pattern", args.pattern),) + extra
    if args.jobs < 0:
        raise UsageError("-j must be at least 1")
    write_back = WriteBack.DIFF if args.diff else WriteBack.CHECK if args.check else \
        WriteBack.OUT_DIR if args.out_dir else WriteBack.WRITE
    return ApplyConfig(pipeline=args.passes, extra_options=extra, hw=load_profile(args.hw),
                       kernels=tuple(args.kernel), verify=args.verify, measure=args.measure, jobs=args.jobs, write_back=write_back,
                       out_dir=args.out_dir, build_dir=args.build_dir)


class _Progress:
    """A single status line on stderr for long runs (only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def __call__(self, done: int, total: int, path: str) -> None:
        if self.enabled and total >= 20:
            sys.stderr.write(f"\r[{done}/{total}] {path[-60:]:<60}")
            if done == total:
                sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    assert config.hw is not None
    log = PassLog.open(args.log, hw=config.hw.name, pipeline=config.pipeline, argv=sys.argv[1:])
    report, outcomes = run_apply(args.paths, config, progress=_Progress(not args.quiet))
    _print(outcomes, args.quiet)
    for outcome in outcomes:
        _log_file(log, outcome)
    log.close(report)
    print(f"kxform: {report.summary()} Log: {log.path}", file=sys.stderr)
    return report.exit_code


def _print(outcomes: list[FileOutcome], quiet: bool) -> None:
    for outcome in outcomes:
        if outcome.error:
            print(f"kxform: error: {outcome.error}", file=sys.stderr)
            continue
        if quiet or outcome.transform is None:
            continue
        for remark in outcome.transform.remarks:
            print(remark.format(), file=sys.stderr)
        for result in outcome.results:
            if result.outcome is Outcome.APPLIED and result.checks:
                print(f"{result.path}:{result.line}:1: note: '{result.kernel}' passed: {_checks_line(result)}",
                      file=sys.stderr)
        if outcome.compile_record is not None and not outcome.compile_record.ok:
            print(f"{outcome.path}: error: rewritten file rejected: {outcome.compile_record.detail}", file=sys.stderr)


def _checks_line(result: KernelResult) -> str:
    """`bijection, reparse, ..., verify (cpu runtime, 4 sizes)`; skipped checks say so."""
    parts = []
    for check in result.checks:
        if check.detail.startswith("skipped"):
            parts.append(f"{check.name} skipped")
        elif check.name == "verify":
            runtime = "gpu" if "on the gpu runtime" in check.detail else "cpu"
            counts = re.findall(r"\(original vs rewritten, (\d+) sizes\)", check.detail)
            sizes = f"{sum(map(int, counts))} sizes" if counts else ""
            parts.append(f"verify ({runtime} runtime, {sizes})" if sizes else "verify")
        else:
            parts.append(check.name)
    return ", ".join(parts)


def _log_file(log: PassLog, outcome: FileOutcome) -> None:
    transform = outcome.transform
    log.kernels(outcome.results)
    if transform is not None:
        for remark in transform.remarks:
            log.write({"type": "remark", "schema": 1, "run": log.run_id, **remark.to_json()})
    log.write({"type": "file", "schema": 1, "run": log.run_id, "file": outcome.path,
               "changed": bool(transform and transform.changed), "error": outcome.error,
               "diff": transform.diff() if transform is not None else "",
               "compile": outcome.compile_record.to_json() if outcome.compile_record else None,
               "timings_s": transform.timings if transform is not None else {}})
