"""One kernel's tuning run: the objective and its space built, the search run with the
database and the priors, the summary made, the winner exported and written.

`tune_file` is what `kxform tune FILE --kernel K` runs (kxform.orchestrate.tune dispatches
to it); a directory run and a run over several sizes call it once per kernel and size,
with the run's shared pass log.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from kxform.cache import content_key
from kxform.errors import CheckFailed, UsageError
from kxform.frontend.source import read_source
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.orchestrate.tune_request import QUIET, Listeners, TuneRequest
from kxform.orchestrate.tune_setup import (
    build_flags,
    check_kernel,
    cpu_checker,
    objective_of,
    prior_of,
)
from kxform.orchestrate.tune_summary import measured_original, pipeline_result, tune_summary
from kxform.orchestrate.tune_write import write_pipeline
from kxform.search.db import TuneKey, TuningDB
from kxform.search.kernel_objective import KernelObjective
from kxform.search.kt_export import kernel_tuner_cache
from kxform.search.objective import Objective
from kxform.search.pipeline import PipelineOptions
from kxform.search.recorded_values import recorded_pipeline
from kxform.search.space import SearchSpace
from kxform.search.tuner import TuneOptions, TuneResult, tune
from kxform.workspace.files import write_atomic


def tune_options(request: TuneRequest, start_at_defaults: bool) -> TuneOptions:
    """The search loop's options for `request`."""
    search = request.search
    return TuneOptions(
        strategy=search.strategy,
        budget=search.evaluations,
        time_s=search.time_s,
        seed=search.seed,
        resume=search.resume,
        pipeline=PipelineOptions(jobs=request.measure.jobs, ahead=request.measure.jobs),
        start_at_defaults=start_at_defaults,
    )


def tune_file(
    request: TuneRequest, log: PassLog | None = None, listeners: Listeners = QUIET
) -> tuple[dict[str, Any], Path]:
    """Tune `request.kernel` of `request.path`: the summary and the log's path. `log`: a
    log shared by several kernels (kept open), else one of its own. Every configuration
    is built with the flags the original is (kxform.orchestrate.tune_setup.build_flags)."""
    with build_flags(request) as merged:
        return tune_merged(merged, log, listeners)


def tune_merged(
    request: TuneRequest, log: PassLog | None = None, listeners: Listeners = QUIET
) -> tuple[dict[str, Any], Path]:
    """`tune_file` for a request whose build flags are already merged."""
    export = request.output.export
    if export and not Path(export).resolve().parent.is_dir():  # before any evaluation, not after
        raise UsageError(f"--export {export}: its directory does not exist")
    source = read_source(request.path)
    check_kernel(source, str(request.kernel))
    objective, space = objective_of(request, source)
    if isinstance(objective, KernelObjective):
        listeners.left_out(request, objective.space)
    replayed = request.measure.recording is not None
    # a replayed --write is confirmed on the CPU runtime: its spec, space and build are checked before the search
    checker = cpu_checker(request, source) if request.output.write and replayed else None
    # On a kernel the source's current values come first: the search starts from the code as it is.
    options = tune_options(request, start_at_defaults=not replayed)
    own_log = log is None
    try:
        with TuningDB(request.search.db) as db:
            measures = [objective.measures] if objective.measures else []
            kernel_hash = content_key(source.data, str(request.kernel), *measures)
            key = TuneKey(kernel_hash, str(request.kernel), objective.hardware, space.names)
            features = objective.features() if isinstance(objective, KernelObjective) else None
            prior = prior_of(request, space, db, key, features)
            if log is None:
                log = open_log(request, objective.hardware)
            hints = objective.hints(space) if isinstance(objective, KernelObjective) else None
            result = tune(
                space, objective, options, db=db, key=key, prior=prior, on_step=listeners.on_step, hints=hints
            )
        summary = tune_summary(
            result, request.path, str(request.kernel), objective, request.measure.recording, options.seed, str(db.path)
        )
        summary.update(measured_original(objective))
        summary["result"] = pipeline_result(objective, result, summary.get("original_ms"))
        if export:
            export_cache(export, space, result, str(request.kernel), objective.hardware)
        if request.output.write and result.best is not None:
            try:
                summary["written"] = _write(request, objective, checker, summary["result"], result.best.config)
            except CheckFailed as exc:
                summary["written"] = {"written": [], "refused": str(exc)}
    finally:
        objective.close()
        if checker is not None:
            checker.close()
    log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
    if own_log:
        log.close(Report())
    return summary, log.path


def open_log(request: TuneRequest, hardware: str) -> PassLog:
    """The run's pass log (`request.output.log`, else a new one under .kxform/logs)."""
    return PassLog.open(request.output.log, hw=hardware, pipeline=request.passes_text, argv=list(request.output.argv))


def export_cache(path: str, space: SearchSpace, result: TuneResult, kernel: str, device: str) -> None:
    """`--export FILE`: the evaluations in Kernel Tuner's cache format, written atomically."""
    data = kernel_tuner_cache(result, space.params, kernel, device)
    try:
        write_atomic(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--export {path}: cannot write it ({exc.strerror or exc})") from None


def _write(
    request: TuneRequest,
    objective: Objective,
    checker: KernelObjective | None,
    result: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """`write`: a pipeline that won, through `apply`'s every check; nothing when the
    original was kept. A configuration from a recorded space is typed into the passes'
    composed space first (kxform.search.recorded_values: never copied as text), then
    written the same way, verified on the CPU runtime (`checker`) against the kernel's spec."""
    if not isinstance(objective, KernelObjective):
        assert checker is not None, "a replayed write is confirmed by a CPU checker"
        pipeline = recorded_pipeline(checker.space, config, request.hw)
        if not pipeline:
            return {"written": [], "kept_original": True}
        return write_pipeline(request.spec, checker, pipeline)
    if result["kept_original"]:
        return {"written": [], "kept_original": True}
    return write_pipeline(request.spec, objective, result["pipeline"])


def with_kernel(request: TuneRequest, path: str, kernel: str, spec: str | None) -> TuneRequest:
    """`request` for one kernel of a directory run (its own file and spec, the run's log)."""
    return replace(request, path=path, kernel=kernel, spec=spec, output=replace(request.output, log=None))
