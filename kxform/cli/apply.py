"""`kxform apply`: run a pass pipeline over files and directories."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kxform import exitcodes
from kxform.cli.options import (
    add_config_options,
    add_remark_options,
    add_walk_options,
    pick,
    project_config,
    remark_filter,
)
from kxform.cli.progress import ProgressBar
from kxform.errors import UsageError, display_path, printable
from kxform.hw import load_profile
from kxform.engine.pass_api import KernelResult, Outcome
from kxform.engine.status import Status
from kxform.log.passlog import PassLog, encode_line_map
from kxform.log.remarks import RemarkFilter
from kxform.log.report import Report, WriteBack
from kxform.orchestrate.runner import (
    ApplyConfig,
    FileOutcome,
    check_options,
    collect_sources,
    output_path,
    run_apply,
    write_back,
)
from kxform.workspace.tree import SourceSet
from kxform.workspace.config import ProjectConfig
from kxform.workspace.exclude import Exclude

if TYPE_CHECKING:
    from kxform.cli.lock_args import LockMode
    from kxform.engine.driver import FileTransform
    from kxform.propose.replay import LockPlan


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "apply",
        help="apply passes to CUDA/HIP sources (default: in place)",
        description="Apply a pass pipeline. Every rewrite is checked before it is written.",
    )
    p.add_argument(
        "--pass",
        dest="passes",
        metavar="NAME[,NAME]",
        help="passes to run, e.g. swizzle or 'swizzle{pattern=grouped,group=4}' (default: the "
        "project configuration's 'passes')",
    )
    p.add_argument(
        "--pattern",
        help="swizzle pattern (row, column, grouped, diagonal, xcd, xcd-grouped; hilbert "
        "and morton have no proof and are refused); default: the locality model's choice, else none",
    )
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="pass parameter (repeatable)")
    p.add_argument("--hw", help="hardware profile name or .toml path (default: configured, else h100)")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME", help="only these kernels (repeatable)")
    p.add_argument("-p", dest="build_dir", metavar="BUILD_DIR", help="directory with compile_commands.json")
    p.add_argument(
        "-I",
        dest="include",
        action="append",
        default=[],
        metavar="DIR",
        help="include directory (repeatable; before the configuration's)",
    )
    p.add_argument(
        "-D",
        dest="define",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="preprocessor define (repeatable; before the configuration's)",
    )
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="parallel jobs (default: all cores)")
    p.add_argument(
        "--verify",
        choices=("auto", "gpu", "cpu", "compile", "static"),
        help="static: parse-level checks only; compile: also nvcc -c (required); gpu/cpu: also run "
        "original and rewritten on that runtime for kernels with a harness spec; auto (default): "
        "compile when nvcc exists, run on the GPU if there is one, else on the CPU runtime",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        default=None,
        help="time original and rewritten (bench size) and keep a rewrite only if it is faster "
        "beyond the measured spread",
    )
    p.add_argument("--log", metavar="FILE", help="pass log path (default: .kxform/logs/RUN.jsonl)")
    from kxform.cli.propose_args import register_proposer_args

    register_proposer_args(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print errors and the summary only")
    p.add_argument(
        "--depfile",
        metavar="FILE",
        help="with -o: write a Make-style dependency file (the copies "
        "depend on the sources, the headers read and the configuration) for build systems",
    )
    add_config_options(p)
    add_walk_options(p)
    add_remark_options(p)
    p.add_argument(
        "--diff",
        action="store_true",
        help="print a unified diff; write nothing (with --check: also exit 1 if a file would change)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; name each file that would change ('would rewrite PATH') and exit 1 if one would",
    )
    mode.add_argument("-o", "--out-dir", metavar="OUT_DIR", help="write rewritten copies under OUT_DIR")
    p.add_argument("paths", nargs="*", metavar="PATH")  # at least one: checked in run (--lock [FILE] may take it)
    p.set_defaults(func=run)


def _params(items: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise UsageError(f"--param {item!r}: expected KEY=VALUE")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def config_from_args(
    args: argparse.Namespace, project: ProjectConfig | None = None, locked: bool = False
) -> ApplyConfig:
    """The run's options: the command line over the project configuration over defaults
    (`locked`: a lockfile decides which kernels need the proposer)."""
    extra = _params(args.param)
    if args.pattern:
        extra = (("pattern", args.pattern),) + extra
    if project is not None:
        extra += tuple(item for item in project.params if item[0] not in dict(extra))
    pipeline = pick(args.passes, project and project.passes, "")
    if not pipeline:
        raise UsageError("no pass given: use --pass NAME or set passes in [tool.kxform] (docs/configuration.md)")
    jobs = pick(args.jobs, project and project.jobs, 0)
    if jobs < 0:
        raise UsageError("-j must be at least 1")
    if args.depfile and not args.out_dir:
        raise UsageError("--depfile needs -o OUT_DIR (it names the copies written there)")
    if args.diff and args.out_dir:
        raise UsageError("--diff writes nothing: it cannot be combined with -o OUT_DIR")
    write_back = (
        WriteBack.CHECK_DIFF
        if args.diff and args.check
        else WriteBack.DIFF
        if args.diff
        else WriteBack.CHECK
        if args.check
        else WriteBack.OUT_DIR
        if args.out_dir
        else WriteBack.WRITE
    )
    from kxform.cli.propose_args import proposer_spec

    return ApplyConfig(
        pipeline=pipeline,
        extra_options=extra,
        hw=load_profile(pick(args.hw, project and project.hw, "h100")),
        kernels=tuple(args.kernel),
        verify=pick(args.verify, project and project.verify, "auto"),
        measure=pick(args.measure, project and project.measure, False),
        jobs=jobs,
        write_back=write_back,
        out_dir=args.out_dir,
        build_dir=pick(args.build_dir, project and project.build_dir, None),
        exclude=Exclude(str(project.root), project.exclude) if project and project.exclude else None,
        spec_dirs=project.specs if project else (),
        proposer=proposer_spec(args, locked),
        gitignore=getattr(args, "gitignore", True),
    )


def run(args: argparse.Namespace) -> int:
    from kxform.cli import lock_args
    from kxform.workspace.flags import merged_build_dir

    lock_args.take_paths(args)
    shown = remark_filter(args)
    project = project_config(args, args.paths)
    lock = lock_args.lock_mode(args, project)
    config = config_from_args(args, project, locked=lock is not None)
    hw = config.hw
    assert hw is not None
    check_options(config)  # an unknown pass or a bad -o before a missing PATH, as run_apply orders them
    collected = collect_sources(args.paths, config)  # the one walk: the lock plan, flags, run and depfile share it
    sources = collected.sources
    plan, need = None, None
    if lock is not None:  # the lockfile is read and checked before anything is written
        config, plan, need = lock_args.prepare(lock, config, args.paths, sources)
    include = tuple(os.path.abspath(d) for d in args.include) + (project.include if project else ())
    defines = tuple(args.define) + (project.defines if project else ())
    with (
        merged_build_dir(collected.walked, include, defines, config.build_dir) as build_dir,
        ProgressBar(not args.quiet) as progress,
    ):
        home = args.out_dir if config.write_back is WriteBack.OUT_DIR else "."  # -o: the tree is never written
        log = PassLog.open(args.log, hw=hw.name, pipeline=config.pipeline, argv=sys.argv[1:], home=home)
        try:
            if project is not None:
                log.write({"type": "config", "schema": 1, "run": log.run_id, **project.to_json()})
            config = replace(config, build_dir=build_dir)
            if config.proposer.name == "claude" and (lock is None or need):  # the attempt loop first
                from kxform.cli.propose_args import search_with_claude

                config = search_with_claude(args, config, log, only=need)
            deferred = lock is not None and lock.write and config.write_back in (WriteBack.WRITE, WriteBack.OUT_DIR)
            run_config = replace(config, write_back=WriteBack.CHECK) if deferred else config
            report, outcomes = run_apply(args.paths, run_config, progress=progress, sources=sources)
        except BaseException:
            log.abandon()
            raise
    for note in report.notes:
        print(f"kxform: note: {note}", file=sys.stderr)
    _print(outcomes, args.quiet, shown)
    if config.write_back in (WriteBack.CHECK, WriteBack.CHECK_DIFF):
        _print_would_rewrite(outcomes)
    try:
        for outcome in outcomes:
            _log_file(log, outcome)
        if lock is not None and plan is not None:
            _finish_lock(lock, plan, config, report, outcomes, log, deferred, args.paths)
        log.close(report)
    except OSError as exc:  # the sources are written already; say the log is incomplete
        print(f"kxform: error: {log.path}: the pass log is incomplete: {exc.strerror or exc}", file=sys.stderr)
        print(f"kxform: {report.summary()}", file=sys.stderr)
        return report.exit_code if report.exit_code == exitcodes.INTERNAL else max(report.exit_code, exitcodes.USAGE)
    written = report.exit_code in (exitcodes.OK, exitcodes.CHANGES)
    if args.depfile and written and not (report.input_errors or report.internal_errors):
        _write_depfile(args, outcomes, sources, project, lock.path if lock is not None else None)
    print(f"kxform: {report.summary()} Log: {log.path}", file=sys.stderr)
    return report.exit_code


def _finish_lock(
    lock: LockMode,
    plan: LockPlan,
    config: ApplyConfig,
    report: Report,
    outcomes: list[FileOutcome],
    log: PassLog,
    deferred: bool,
    paths: list[str],
) -> None:
    """Record the lockfile, then write the sources (`deferred`); print what disagrees."""
    from kxform.cli import lock_args

    reconciled = lock_args.reconcile(plan, outcomes, config)
    clean = not (report.input_errors or report.internal_errors)
    written = lock_args.record(lock, reconciled) if lock.write and clean else None
    if deferred:
        report.write_back = config.write_back
        write_back(outcomes, config, report, paths=paths)
    for line in reconciled.changed + (reconciled.unlocked + reconciled.stale if lock.check else []):
        print(f"kxform: {line}", file=sys.stderr)
    if lock.check and reconciled.disagreements:
        report.failures.append(f"{reconciled.disagreements} disagreement(s) between the tree and {lock.path}")
    why_not = (
        ""
        if written is not None
        else "errors"
        if lock.write
        else "--check"
        if lock.check
        else "read-only"
        if lock.strict
        else "--diff"
    )
    print(lock_args.summary(lock, reconciled, written, why_not), file=sys.stderr)
    log.write(
        {
            "type": "lock",
            "schema": 1,
            "run": log.run_id,
            "path": str(lock.path),
            "written": bool(written),
            **reconciled.to_json(),
        }
    )


def _write_depfile(
    args: argparse.Namespace,
    outcomes: list[FileOutcome],
    sources: SourceSet,
    project: ProjectConfig | None,
    lock: Path | None = None,
) -> None:
    """Targets: the copies of the files named on the command line (of every file under a
    named directory); dependencies: every file read (`sources`: the run's files), the
    decision inputs (configuration files, hardware profile file, harness specs) and the
    lockfile."""
    from kxform.workspace.depfile import write_depfile
    from kxform.workspace.inputs import decision_inputs

    named = [os.path.abspath(p) for p in args.paths]

    def wanted(path: str) -> bool:
        full = os.path.abspath(path)
        return any(full == p or full.startswith(p.rstrip(os.sep) + os.sep) for p in named)

    targets = [str(output_path(o.path, args.out_dir)) for o in outcomes if wanted(o.path)]
    headers = list(sources.includers)  # quoted includes read, inside the paths or not
    read = [o.path for o in outcomes]
    inputs = decision_inputs(args.paths, read, project, args.hw, searched=not (args.config or args.no_config))
    deps = read + headers + [str(p) for p in inputs] + ([str(lock)] if lock is not None and lock.is_file() else [])
    write_depfile(args.depfile, targets, deps)


def remark_width() -> int:
    """The columns of the terminal stderr is (remarks then use the whole line; `COLUMNS`
    overrides it, as for other tools), else 0: `SHORT_LINE` in pipes and CI logs."""
    from kxform.cli.progress import interactive

    if not interactive(sys.stderr):
        return 0
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0


def _print(outcomes: list[FileOutcome], quiet: bool, shown: RemarkFilter) -> None:
    width = remark_width()
    for outcome in outcomes:
        if outcome.error:
            print(printable(f"kxform: error: {outcome.error}"), file=sys.stderr)
            continue
        if quiet or outcome.transform is None:
            continue
        for remark in outcome.transform.remarks:
            if shown.shows(remark):
                print(remark.format(width=width), file=sys.stderr)
        for result in outcome.results:
            if result.outcome is Outcome.APPLIED and result.checks:
                note = f"{result.path}:{result.line}:1: note: '{result.kernel}' passed: {_checks_line(result)}"
                print(printable(note), file=sys.stderr)
        if outcome.compile_record is not None and not outcome.compile_record.ok:
            print(
                printable(f"{outcome.path}: error: rewritten file rejected: {outcome.compile_record.detail}"),
                file=sys.stderr,
            )


def _print_would_rewrite(outcomes: list[FileOutcome]) -> None:
    """black's `would reformat PATH`: one line per file `--check` would change, so a
    pre-commit hook's failure names its files."""
    for outcome in outcomes:
        if outcome.transform is not None and outcome.transform.changed and not outcome.error:
            print(f"would rewrite {display_path(outcome.path)}", file=sys.stderr)


def _checks_line(result: KernelResult) -> str:
    """`bijection, reparse, ..., verify (cpu runtime, 4 sizes)`; skipped checks say so."""
    parts = []
    for check in result.checks:
        if check.status is not Status.PASSED:
            parts.append(f"{check.name} {check.status.value}")
        elif check.name == "verify" and check.figure("runtime"):
            sizes = check.figure("sizes")
            parts.append(f"verify ({check.figure('runtime')} runtime" + (f", {sizes} sizes)" if sizes else ")"))
        else:
            parts.append(check.name)
    return ", ".join(parts)


LOGGED_SOURCE_BYTES = 1 << 20
"""Files up to this size have their text in the log (the report's source view shows the
remarks on the text the run read); larger ones are read from disk by the viewer."""


def _logged_source(transform: FileTransform | None) -> str | None:
    if transform is None or len(transform.source.data) > LOGGED_SOURCE_BYTES:
        return None
    return transform.source.data.decode("utf-8", errors="replace")


def _log_file(log: PassLog, outcome: FileOutcome) -> None:
    transform = outcome.transform
    log.kernels(outcome.results)
    if transform is not None:
        for remark in transform.remarks:
            log.write({"type": "remark", "schema": 1, "run": log.run_id, **remark.to_json()})
    log.write(
        {
            "type": "file",
            "schema": 1,
            "run": log.run_id,
            "file": outcome.path,
            "changed": bool(transform and transform.changed),
            "error": outcome.error,
            "diff": transform.diff() if transform is not None else "",
            "source": _logged_source(transform),
            "line_maps": {name: encode_line_map(line_map) for name, line_map in transform.input_maps}
            if transform is not None
            else {},
            "compile": outcome.compile_record.to_json() if outcome.compile_record else None,
            "timings_s": transform.timings if transform is not None else {},
        }
    )
