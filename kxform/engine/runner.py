"""The layer above the pure core: files, parallelism, compile checks, write-back and logs.

`run_apply` transforms every file in memory first (in worker processes), compiles the
changed ones with nvcc where asked (in parallel, cached by content), and only then
writes. If any file had an input error, nothing is written at all.
"""

from __future__ import annotations

import concurrent.futures as futures
import functools
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from kxform.build.toolchain import Toolchain
from kxform.engine.driver import Feedback, FileTransform, transform_source
from kxform.engine.stages import run_later_stages
from kxform.errors import KxformError, UsageError
from kxform.workspace.exclude import Exclude
from kxform.workspace.files import walk_sources, write_atomic
from kxform.hw import HwProfile
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome, Pass, RunOptions
from kxform.engine.registry import default_registry
from kxform.log.report import Report, WriteBack
from kxform.frontend.source import HEADER_SUFFIXES, read_source



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
    spec_dirs: tuple[str, ...] = ()
    """Directories searched for harness specs after the sources' own directories."""
    proposer: Any = None
    """A `kxform.propose.registry.ProposerSpec` (built in each worker); None: the default."""

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


def _transform_one(path: str, config: ApplyConfig, feedback: Feedback | None = None) -> FileOutcome:
    """Worker: read, validate and transform one file. Never raises for bad input.
    `feedback`: candidates the later stages refused in an earlier round."""
    try:
        source = read_source(path)
        passes = _pipeline(config.pipeline, config.extra_options)
        assert config.hw is not None
        options = RunOptions(kernels=config.kernels, arch=config.hw.arch)
        toolchain = Toolchain.create(config.build_dir)
        semantic = None
        if config.semantic:
            from kxform.frontend.semantic import semantic_provider

            semantic = semantic_provider(path, config.build_dir)
        proposer = config.proposer.build() if config.proposer is not None else None
        transform = transform_source(source, passes, config.hw, options, proposer=proposer, semantic=semantic,
                                     feedback=feedback, toolchain=toolchain, finalize=False)
        return FileOutcome(path, transform, results=list(transform.results))
    except UsageError:
        raise
    except KxformError as exc:
        return FileOutcome(path, error=str(exc))
    except Exception as exc:  # a defect: report it for this file, keep going, write nothing
        saved = save_traceback(exc)
        return FileOutcome(path, error=f"{path}: internal error: {type(exc).__name__}: {exc} "
                                       f"(traceback saved to {saved})", internal=True)


_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def save_traceback(exc: BaseException) -> str:
    """Write the traceback to a temporary file (black's way) and return its path."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="kxform-error-", suffix=".log", delete=False) as handle:
        handle.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return handle.name


def collect_files(paths: list[str]) -> list[str]:
    """CUDA/HIP files under `paths`, plus the `.h`/`.hpp` headers they include with quotes
    (headers hold kernels and device functions too; other headers are not CUDA)."""
    files = [str(p) for p in walk_sources(paths)]
    seen = {os.path.realpath(f) for f in files}
    extra: list[str] = []
    for path in files:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue  # reported when the file itself is read
        for match in _LOCAL_INCLUDE.finditer(data):
            header = Path(path).parent / match.group(1).decode("utf-8", "replace")
            if header.suffix in HEADER_SUFFIXES and header.is_file() and os.path.realpath(header) not in seen:
                seen.add(os.path.realpath(header))
                extra.append(os.path.normpath(header))
    return files + sorted(extra)


def run_apply(paths: list[str], config: ApplyConfig, progress: Progress | None = None,
              emit: Callable[[str], object] | None = None) -> tuple[Report, list[FileOutcome]]:
    """Run the pipeline over `paths`; return the report and per-file outcomes (for logs)."""
    _pipeline(config.pipeline, config.extra_options)  # usage errors before any work (and warms the cache)
    if config.measure:
        _check_measure(config)
    files = [f for f in collect_files(paths) if config.exclude is None or not config.exclude.matches(f)]
    outcomes = _transform_all(files, config, progress)
    report = Report(write_back=config.write_back)
    for outcome in outcomes:
        if outcome.error:
            (report.internal_errors if outcome.internal else report.input_errors).append(outcome.error)
    outcomes = run_later_stages(
        outcomes, (lambda batch: compile_stage(batch, config),
                   lambda batch: verify_stage(batch, config, progress=progress)),
        lambda path, feedback: _transform_one(path, config, feedback))
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
    return report, outcomes


def _check_measure(config: ApplyConfig) -> None:
    """`--measure` needs a runtime that times kernels: a usage error before any work otherwise."""
    if config.verify in ("static", "compile"):
        raise UsageError(f"--measure needs a runtime that times kernels; --verify {config.verify} runs none")
    from kxform.verify.differential import pick_runtime

    runtime = pick_runtime(config.verify)
    if not runtime.times_kernels:
        raise UsageError(f"--measure needs a runtime that times kernels (a GPU with pycuda); the {runtime.name} "
                         "runtime does not")


def _transform_all(files: list[str], config: ApplyConfig, progress: Progress | None) -> list[FileOutcome]:
    jobs = config.jobs or os.cpu_count() or 1
    if jobs == 1 or len(files) < 8:
        out = []
        for i, path in enumerate(files):
            out.append(_transform_one(path, config))
            if progress:
                progress(i + 1, len(files), path)
        return out
    results: list[FileOutcome | None] = [None] * len(files)
    with futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        pending = {pool.submit(_transform_one, path, config): i for i, path in enumerate(files)}
        done = 0
        for future in futures.as_completed(pending):
            results[pending[future]] = future.result()
            done += 1
            if progress:
                progress(done, len(files), files[pending[future]])
    return [r for r in results if r is not None]


def compile_stage(outcomes: list[FileOutcome], config: ApplyConfig) -> None:
    """Check (d): rewritten files must compile with nvcc where it exists; a file that fails
    is not written, and its kernels are marked failed with nvcc's first error."""
    changed = [o for o in outcomes if o.transform is not None and o.transform.changed]
    if config.verify == "static" or not changed:
        return
    from kxform.build.compile_check import CompileChecker

    checker = CompileChecker.create(config.build_dir, config.hw.arch if config.hw else "sm_90", config.jobs,
                                    strict=config.verify == "compile")
    if checker is None:
        if config.verify == "compile":
            raise UsageError("--verify compile needs nvcc (not found on PATH; set KXFORM_NVCC)")
        for outcome in changed:
            outcome.compile_record = CheckRecord("compile", True, "skipped: nvcc not found")
            _attach(outcome, outcome.compile_record)
        return
    for outcome, record in zip(changed, checker.check_many([o.transform for o in changed if o.transform])):
        outcome.compile_record = record
        if record.ok:
            _attach(outcome, record)
            continue
        transform = outcome.transform
        assert transform is not None
        outcome.results = [replace(r, outcome=Outcome.FAILED, reasons=(record.detail,), stage="compile",
                                   checks=r.checks + (record,)) if r.outcome is Outcome.APPLIED else r
                           for r in outcome.results]
        outcome.transform = replace(transform, new_data=transform.source.data)


def verify_stage(outcomes: list[FileOutcome], config: ApplyConfig, runtime: Any = None,
                 progress: Progress | None = None) -> None:
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
            _attach(outcome, CheckRecord("verify", True, f"skipped: {exc.cause}"))
        return
    for done, outcome in enumerate(changed, start=1):
        transform = outcome.transform
        assert transform is not None
        results, keep = verify_file(transform.source.data, transform.new_data, outcome.path, outcome.results,
                                    runtime, config.measure, config.build_dir, config.spec_dirs)
        if progress:
            progress(done, len(changed), outcome.path, stage="verify")
        outcome.results = results
        if not keep:
            outcome.transform = replace(transform, new_data=transform.source.data)


def _attach(outcome: FileOutcome, record: CheckRecord) -> None:
    outcome.results = [replace(r, checks=r.checks + (record,)) if r.outcome is Outcome.APPLIED else r
                       for r in outcome.results]


def _write_back(outcomes: list[FileOutcome], config: ApplyConfig, report: Report,
                emit: Callable[[str], object]) -> None:
    mode = config.write_back
    if mode is WriteBack.DIFF:
        for outcome in outcomes:
            if outcome.transform is not None and outcome.transform.changed:
                emit(outcome.transform.diff())
        return
    if mode is WriteBack.CHECK or report.input_errors or report.internal_errors:
        return  # nothing is written when any file could not be processed
    for outcome in outcomes:
        transform = outcome.transform
        if transform is None:
            continue
        if mode is WriteBack.OUT_DIR:
            assert config.out_dir is not None
            target = Path(config.out_dir) / _relative(outcome.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, transform.new_data)
        elif transform.changed:
            write_atomic(outcome.path, transform.new_data)


def output_path(path: str, out_dir: str) -> Path:
    """Where `-o OUT_DIR` writes the copy of `path`."""
    return Path(out_dir) / _relative(path)


def _relative(path: str) -> Path:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd())
        except ValueError:
            return Path(*p.parts[1:])
    return Path(*[part for part in p.parts if part not in ("..",)])

