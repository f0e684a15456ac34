"""The layer above the pure core: files, parallelism, compile checks, write-back and logs.

`run_apply` transforms every file in memory first (in worker processes), runs the later
stages over the changed ones (compile with nvcc where asked, in parallel and cached by
content; differential verification; measurement: kxform.engine.stages, whose refusals
send a kernel back to the proposer and its file through the core again), and only then
writes. Files are isolated from each other: a file that cannot be read, parsed,
analysed or written is reported on one line and left untouched, and every other file
is processed and written as usual (README, "Exit codes"). Environment problems found
before any work (an unwritable cache, `-o` naming a file) stop the run before anything
is written.
"""

from __future__ import annotations

import concurrent.futures as futures
import functools
import os
import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kxform.build.toolchain import Toolchain
from kxform.engine.driver import Feedback, FileTransform, transform_source
from kxform.engine.stages import run_later_stages
from kxform.errors import InputError, KxformError, Location, UsageError, display_path
from kxform.workspace.exclude import Exclude
from kxform.workspace.files import output_path, write_atomic
from kxform.workspace.lock import TreeLock
from kxform.workspace.tree import SourceSet, collect_files
from kxform.hw import HwProfile
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome, Pass, RunOptions
from kxform.engine.status import Status
from kxform.engine.registry import default_registry
from kxform.log.report import Report, WriteBack
from kxform.frontend.source import read_source


class Progress(Protocol):
    """Told after each file of a stage (`transform`, `verify`): the CLI draws a bar."""

    def __call__(self, done: int, total: int, path: str, stage: str = "transform") -> None: ...


@dataclass(frozen=True)
class ApplyConfig:
    """Every option of one `apply` run, grouped (varied with dataclasses.replace)."""

    pipeline: str
    extra_options: tuple[tuple[str, str], ...] = ()
    hw: HwProfile | None = None
    kernels: tuple[str, ...] = ()
    verify: str = "auto"  # static | compile | auto | gpu | cpu
    measure: bool = False
    jobs: int = 0
    write_back: WriteBack = WriteBack.WRITE
    out_dir: str | None = None
    build_dir: str | None = None
    semantic: bool = True
    exclude: Exclude | None = None
    """Files it matches are left out (project configuration's `exclude`)."""
    gitignore: bool = True
    """Leave out what git ignores (`--no-gitignore`: False)."""
    spec_dirs: tuple[str, ...] = ()
    """Directories searched for harness specs after the sources' own directories."""
    proposer: Any = None
    """A `kxform.propose.registry.ProposerSpec` (built in each worker); None: the default."""
    expected: tuple[tuple[str, bytes], ...] = ()
    """(absolute path, content) a caller already judged (`tune --write`): a file that no
    longer holds that content is refused as changed on disk, never rewritten from new text."""


@dataclass
class FileOutcome:
    path: str
    transform: FileTransform | None = None
    error: str | None = None
    internal: bool = False
    """The error is a defect in kxform, not in the input (exit 123, traceback saved)."""
    compile_record: CheckRecord | None = None
    results: list[KernelResult] = field(default_factory=list)


@functools.lru_cache(maxsize=8)
def _pipeline(pipeline: str, extra_options: tuple[tuple[str, str], ...]) -> tuple[Pass, ...]:
    """Passes are frozen values: build them once per worker process, not once per file."""
    return tuple(default_registry().pipeline(pipeline, dict(extra_options)))


def _transform_one(
    path: str, config: ApplyConfig, includer: str | None = None, feedback: Feedback | None = None
) -> FileOutcome:
    """Worker: read, validate and transform one file. Never raises for bad input.
    `includer`: the unit of the run that includes this header (its flags and directory);
    `feedback`: candidates the later stages refused in an earlier round."""
    try:
        source = read_source(path)
        judged = dict(config.expected).get(os.path.abspath(path))
        if judged is not None and source.data != judged:
            raise InputError(
                "changed on disk while kxform ran; not written (run kxform again on the new content)",
                Location(display_path(path)),
            )
        passes = _pipeline(config.pipeline, config.extra_options)
        assert config.hw is not None
        options = RunOptions(kernels=config.kernels, arch=config.hw.arch)
        toolchain = Toolchain.create(config.build_dir)
        semantic = None
        if config.semantic:
            from kxform.build.semantic import semantic_provider

            semantic = semantic_provider(path, config.build_dir, includer, toolchain)
        proposer = config.proposer.build() if config.proposer is not None else None
        transform = transform_source(
            source,
            passes,
            config.hw,
            options,
            proposer=proposer,
            semantic=semantic,
            feedback=feedback,
            toolchain=toolchain,
            finalize=False,
        )
        if transform.syntax_errors:  # a kernel that does not parse: the file is bad input, not "nothing to do"
            kernel, offset = transform.syntax_errors[0]
            raise InputError(
                f"syntax error: kernel '{kernel}' does not parse (tree-sitter-cuda); the file is left unchanged",
                source.location(offset),
            )
        return FileOutcome(path, transform, results=list(transform.results))
    except UsageError:
        raise
    except KxformError as exc:
        return FileOutcome(path, error=str(exc))
    except Exception as exc:  # a defect: report it for this file, keep going, write nothing
        saved = save_traceback(exc)
        return FileOutcome(
            path,
            error=f"{display_path(path)}: internal error: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())} (traceback saved to {saved})",
            internal=True,
        )


KEEP_ERROR_LOGS = 10
"""Tracebacks of internal errors kept in the error-log directory; older ones are removed."""


def save_traceback(exc: BaseException) -> str:
    """Write the traceback to `<tmp>/kxform-errors-<uid>/` and return its path, keeping
    only the newest `KEEP_ERROR_LOGS` logs there (they must not pile up in /tmp)."""
    import tempfile
    import traceback

    folder = Path(tempfile.gettempdir()) / f"kxform-errors-{os.getuid() if hasattr(os, 'getuid') else 0}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        logs = sorted(folder.glob("kxform-error-*.log"), key=lambda p: p.stat().st_mtime_ns)
        for old in logs[: max(0, len(logs) - KEEP_ERROR_LOGS + 1)]:
            old.unlink(missing_ok=True)
    except OSError:
        folder = Path(tempfile.gettempdir())
    with tempfile.NamedTemporaryFile("w", prefix="kxform-error-", suffix=".log", dir=folder, delete=False) as handle:
        handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return handle.name


def check_options(config: ApplyConfig) -> None:
    """Usage errors found without reading a source (an unknown pass or option, see also
    `check_environment`): callers that collect the files first check these before, so
    they come first whatever else is wrong. Cheap enough to run twice."""
    _pipeline(config.pipeline, config.extra_options)  # (and warms the cache)
    check_environment(config)


def check_environment(config: ApplyConfig) -> None:
    """Problems of the environment, found before any work so that nothing is written
    first: `-o` naming something that is not a directory, a cache that cannot be written."""
    from kxform.cache import cache_root

    if config.write_back is WriteBack.OUT_DIR and config.out_dir is not None:
        out = Path(config.out_dir)
        if out.exists() and not out.is_dir():
            raise UsageError(f"-o {display_path(out)}: exists and is not a directory")
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        import tempfile

        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as exc:
        raise UsageError(
            f"the cache directory {display_path(root)} is not writable ({exc.strerror or exc}); "
            "set KXFORM_CACHE_DIR to a writable directory"
        ) from None


@dataclass(frozen=True)
class RunSources:
    """The files of one run, from one walk of its paths: `kxform apply` hands the same
    set to the lock plan, `run_apply` and the depfile instead of walking again."""

    sources: SourceSet
    """What the run processes: the walk less what the project's `exclude` matches
    (`includers` keeps excluded units: a header still takes its first includer's flags)."""
    walked: tuple[str, ...]
    """Every file the walk found, excluded ones too (the merged flags cover them all)."""


def collect_sources(paths: Sequence[str], config: ApplyConfig) -> RunSources:
    """Walk `paths` once for a run of `config`: with `-o OUT_DIR` the headers beside a
    named file count too (kxform.workspace.tree.collect_files, `copies`), and the files
    `config.exclude` matches are left out."""
    found = collect_files(list(paths), copies=config.write_back is WriteBack.OUT_DIR, gitignore=config.gitignore)
    if config.exclude is None:
        kept = found.files
    else:
        kept = [f for f in found.files if not config.exclude.matches(f)]
    refused = [str(e.location.path) for e in found.refused if e.location is not None]
    _check_found(paths, [*kept, *refused], found.files)
    return RunSources(replace(found, files=kept), tuple(found.files))


def _check_found(paths: Sequence[str], kept: Sequence[str], walked: Sequence[str]) -> None:
    """A directory given with no CUDA/HIP source under it to process (or to refuse, with
    its own reason: a link leading outside) is a usage error naming it (a mistyped or
    wrong path), not a run of "0 files rewritten"."""
    for path in paths:
        if not os.path.isdir(path):
            continue
        roots = (os.path.abspath(path), os.path.realpath(path))

        def under(file: str, roots: tuple[str, str] = roots) -> bool:  # as named, or as resolved
            named, real = os.path.abspath(file), os.path.realpath(file)
            return os.path.commonpath([roots[0], named]) == roots[0] or os.path.commonpath([roots[1], real]) == roots[1]

        if any(under(f) for f in kept):
            continue
        excluded = sum(1 for f in walked if under(f))
        why = f"the {excluded} there are excluded by the configuration" if excluded else "none there"
        raise UsageError(
            f"{display_path(path)}: no CUDA/HIP source to process under it ({why}; kxform walks .cu, .cuh and .hip "
            "files and the headers they include, leaving out what git ignores)"
        )


def run_apply(
    paths: list[str],
    config: ApplyConfig,
    progress: Progress | None = None,
    emit: Callable[[str], object] | None = None,
    sources: SourceSet | None = None,
) -> tuple[Report, list[FileOutcome]]:
    """Run the pipeline over `paths`; return the report and per-file outcomes (for logs).
    `sources`: the files, collected already by `collect_sources` (default: collected here;
    `paths` still name the tree an in-place run locks)."""
    check_options(config)
    if config.measure:
        _check_measure(config)
    if sources is None:
        sources = collect_sources(paths, config).sources
    if config.write_back is WriteBack.OUT_DIR and config.out_dir is not None:
        try:
            Path(config.out_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"-o {display_path(config.out_dir)}: cannot create it ({exc.strerror or exc})") from None
    with _write_lock(config, sources.files, paths):
        outcomes = [
            FileOutcome(str(err.location.path) if err.location else "", error=str(err)) for err in sources.refused
        ]
        outcomes += _transform_all(sources, config, progress)
        _check_kernels_named(config, outcomes)
        report = Report(write_back=config.write_back)
        latest = {o.path: o for o in outcomes if o.transform is not None}  # each file as it stands

        def retransform(path: str, feedback: Feedback) -> FileOutcome:
            latest[path] = _transform_one(path, config, _includer(sources, path), feedback)
            return latest[path]

        outcomes = run_later_stages(
            outcomes,
            (
                lambda batch: compile_stage(batch, config, sources, report, list(latest.values())),
                lambda batch: verify_stage(batch, config, progress=progress),
            ),
            retransform,
        )
        for outcome in outcomes:
            report.add_kernels(outcome.results)
            transform = outcome.transform
            if transform is None:
                continue
            if transform.changed:
                report.files_changed += 1
            else:
                report.files_unchanged += 1
        _write_back(outcomes, config, report, emit or (lambda text: sys.stdout.write(text)))
        for outcome in outcomes:
            if outcome.error:
                (report.internal_errors if outcome.internal else report.input_errors).append(outcome.error)
    return report, outcomes


def _check_kernels_named(config: ApplyConfig, outcomes: list[FileOutcome]) -> None:
    """`--kernel NAME` that names no kernel of the files is a usage error (exit 2, nothing
    written), unless a file could not be read or parsed (NAME may be defined there)."""
    if not config.kernels or any(o.error for o in outcomes):
        return
    defined = {r.kernel for o in outcomes for r in o.results}
    missing = [name for name in config.kernels if name not in defined and name.split("<", 1)[0] not in defined]
    if missing:
        known = ", ".join(sorted(defined)[:8]) or "none"
        raise UsageError(f"--kernel {missing[0]}: no kernel of that name in the files given (kernels: {known})")


def _check_measure(config: ApplyConfig) -> None:
    """`--measure` needs a runtime that times kernels: a usage error before any work otherwise."""
    if config.verify in ("static", "compile"):
        raise UsageError(f"--measure needs a runtime that times kernels; --verify {config.verify} runs none")
    from kxform.verify.differential import pick_runtime

    runtime = pick_runtime(config.verify)
    if not runtime.times_kernels:
        raise UsageError(
            f"--measure needs a runtime that times kernels (a GPU with pycuda); the {runtime.name} runtime does not"
        )


def _worker_init(parent: int) -> None:
    """Pool workers die with the run that started them (Linux: PR_SET_PDEATHSIG), so a
    `kill -9` of `apply` leaves no orphan holding memory."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _includer(sources: SourceSet, path: str) -> str | None:
    """The first unit of the run that includes `path` (None for a unit, or a lone header)."""
    return (sources.includers.get(os.path.realpath(path)) or [None])[0]


def _transform_all(sources: SourceSet, config: ApplyConfig, progress: Progress | None) -> list[FileOutcome]:
    files = sources.files
    includer = {path: _includer(sources, path) for path in files}
    jobs = config.jobs or os.cpu_count() or 1
    if jobs == 1 or len(files) < 8:
        out = []
        for i, path in enumerate(files):
            out.append(_transform_one(path, config, includer[path]))
            if progress:
                progress(i + 1, len(files), path)
        return out
    results: list[FileOutcome | None] = [None] * len(files)
    with futures.ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init, initargs=(os.getpid(),)) as pool:
        pending = {pool.submit(_transform_one, path, config, includer[path]): i for i, path in enumerate(files)}
        done = 0
        for future in futures.as_completed(pending):
            results[pending[future]] = future.result()
            done += 1
            if progress:
                progress(done, len(files), files[pending[future]])
    return [r for r in results if r is not None]


def compile_stage(
    outcomes: list[FileOutcome],
    config: ApplyConfig,
    sources: SourceSet | None = None,
    report: Report | None = None,
    run: list[FileOutcome] | None = None,
) -> None:
    """Check (d): rewritten files must compile with nvcc where it exists, each through
    every translation unit of the run that includes it (with all rewritten files of the
    run in place: `run`, in its current round; default `outcomes`); a file that fails is
    not written, and its kernels are marked failed with nvcc's first new error (see
    kxform.build.compile_check). `outcomes`: the files of this round of the candidate
    stage; `sources`: the run's files and includers (default: none known); the checker's
    notes go to `report`."""
    changed = [o for o in outcomes if o.transform is not None and o.transform.changed]
    if config.verify == "static" or not changed:
        return
    from kxform.build.compile_check import CompileChecker

    checker = CompileChecker.create(
        config.build_dir,
        config.hw.arch if config.hw else "sm_90",
        config.jobs,
        strict=config.verify == "compile",
        toolchain=Toolchain.create(config.build_dir),
    )
    if checker is None:
        if config.verify == "compile":
            raise UsageError("--verify compile needs nvcc (not found on PATH; set KXFORM_NVCC)")
        for outcome in changed:
            outcome.compile_record = CheckRecord("compile", Status.SKIPPED, "skipped: nvcc not found", "NoCompiler")
            _attach(outcome, outcome.compile_record)
        return
    run = outcomes if run is None else run
    transforms = [o.transform for o in changed if o.transform is not None]
    checked = {id(o) for o in changed}
    originals = {os.path.realpath(o.path): o.transform.source.data for o in run if o.transform is not None}
    in_place = [o.transform for o in run if o.transform is not None and id(o) not in checked]
    records = checker.check_tree(transforms, sources.includers if sources else {}, originals, in_place)
    if report is not None:
        report.notes.extend(n for n in checker.notes if n not in report.notes)
    for outcome, record in zip(changed, records):
        outcome.compile_record = record
        if record.ok:
            _attach(outcome, record)
            continue
        transform = outcome.transform
        assert transform is not None
        outcome.results = [
            replace(
                r,
                outcome=Outcome.FAILED,
                reasons=(record.detail,),
                stage="compile",
                key=record.key,
                checks=r.checks + (record,),
            )
            if r.outcome is Outcome.APPLIED
            else r
            for r in outcome.results
        ]
        outcome.transform = replace(transform, new_data=transform.source.data)


def verify_stage(
    outcomes: list[FileOutcome], config: ApplyConfig, runtime: Any = None, progress: Progress | None = None
) -> None:
    """Differential runs of rewritten kernels that have harness specs (kxform.verify.stage),
    on `runtime` (a `kxform.runtime.base.Runtime`) or the one `config.verify` picks."""
    if config.verify in ("static", "compile"):
        return
    changed = [o for o in outcomes if o.transform is not None and o.transform.changed]
    if not changed:
        return
    from kxform.verify.differential import pick_runtime
    from kxform.verify.stage import verify_file

    try:
        runtime = runtime or pick_runtime(config.verify)
    except UsageError as exc:
        if config.verify != "auto":
            raise
        for outcome in changed:
            _attach(outcome, CheckRecord("verify", Status.SKIPPED, f"skipped: {exc.cause}", "NoRuntime"))
        return
    for done, outcome in enumerate(changed, start=1):
        transform = outcome.transform
        assert transform is not None
        results, keep = verify_file(
            transform.source.data,
            transform.new_data,
            outcome.path,
            outcome.results,
            runtime,
            config.measure,
            config.build_dir,
            config.spec_dirs,
        )
        if progress:
            progress(done, len(changed), outcome.path, stage="verify")
        outcome.results = results
        if not keep:
            outcome.transform = replace(transform, new_data=transform.source.data)


def _attach(outcome: FileOutcome, record: CheckRecord) -> None:
    outcome.results = [
        replace(r, checks=r.checks + (record,)) if r.outcome is Outcome.APPLIED else r for r in outcome.results
    ]


def write_back(
    outcomes: list[FileOutcome],
    config: ApplyConfig,
    report: Report,
    emit: Callable[[str], object] | None = None,
    paths: Sequence[str] = (),
) -> None:
    """What `run_apply` does last, for callers that run with `WriteBack.CHECK` and write
    after a step of their own (`apply --lock` records the lockfile before the sources),
    under the same write lock as `run_apply` (`paths`: the run's paths)."""
    with _write_lock(config, [o.path for o in outcomes if o.transform is not None], paths):
        _write_back(outcomes, config, report, emit or (lambda text: sys.stdout.write(text)))


def _write_lock(
    config: ApplyConfig, files: Sequence[str], paths: Sequence[str]
) -> contextlib.AbstractContextManager[object]:
    """The lock a run that writes takes (kxform.workspace.lock): the copies for `-o`, the
    tree of `paths` (default: of `files`) for in-place writes; none for diff and check."""
    if config.write_back is WriteBack.OUT_DIR and config.out_dir is not None:
        return TreeLock.acquire_copies(config.out_dir, [output_path(f, config.out_dir) for f in files])
    if config.write_back is WriteBack.WRITE and (paths or files):
        return TreeLock.acquire(list(paths or files))
    return contextlib.nullcontext()


def _write_back(
    outcomes: list[FileOutcome], config: ApplyConfig, report: Report, emit: Callable[[str], object]
) -> None:
    """Per file: a file with an error is never written; a file that cannot be written
    gets an error naming it (and its kernels are marked failed); the others are written,
    each atomically."""
    mode = config.write_back
    if mode in (WriteBack.DIFF, WriteBack.CHECK_DIFF):
        for outcome in outcomes:
            if outcome.transform is not None and outcome.transform.changed:
                emit(outcome.transform.diff())
        return
    if mode is WriteBack.CHECK:
        return
    for outcome in outcomes:
        transform = outcome.transform
        if transform is None or outcome.error:
            continue
        try:
            if mode is WriteBack.OUT_DIR:
                assert config.out_dir is not None
                target = output_path(outcome.path, config.out_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(target, transform.new_data)
            elif transform.changed:
                write_atomic(outcome.path, transform.new_data, expected=transform.source.data)
        except InputError as exc:
            _not_written(outcome, report, str(exc))
        except OSError as exc:
            where = f" to {display_path(exc.filename)}" if mode is WriteBack.OUT_DIR and exc.filename else ""
            _not_written(outcome, report, f"{display_path(outcome.path)}: not written{where}: {exc.strerror or exc}")


def _not_written(outcome: FileOutcome, report: Report, message: str) -> None:
    outcome.error = message
    transform = outcome.transform
    if transform is not None and transform.changed:
        report.files_changed -= 1
        failed = [r for r in outcome.results if r.outcome is Outcome.APPLIED]
        report.kernel_outcomes[Outcome.APPLIED] -= len(failed)
        report.kernel_outcomes[Outcome.FAILED] += len(failed)
        outcome.results = [
            replace(r, outcome=Outcome.FAILED, stage="write", reasons=(message,), key="NotWritten")
            if r.outcome is Outcome.APPLIED
            else r
            for r in outcome.results
        ]
    else:
        report.files_unchanged -= 1
