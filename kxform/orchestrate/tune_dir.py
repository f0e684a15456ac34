"""Tuning every kernel a harness spec under a directory describes.

Each harness spec under the directory (`NAME.kxspec.toml`, `kxform-spec.toml`; the older
names too: kxform.harness.spec.specs_under) names a source file and its kernels; each kernel is tuned as one file's kernel is (kxform.orchestrate.tune), with
the same request, one pass log for the run. A kernel no pass has anything to tune in
keeps its original (its summary says why); one that cannot be tuned (its spec or file is
broken) is a summary with its error, and the others go on. The outcome counts the
kernels that failed that way or had a `write` refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.errors import KxformError, UsageError
from kxform.harness.spec import load_spec, specs_under
from kxform.log.report import Report
from kxform.orchestrate.tune_kernel import open_log, tune_file, with_kernel
from kxform.orchestrate.tune_request import QUIET, Listeners, RunKind, TuneOutcome, TuneRequest
from kxform.search.kernel_objective import gpu_runtime
from kxform.search.kernel_space import NothingToTune


@dataclass(frozen=True)
class Target:
    file: str
    kernel: str
    spec: str


def targets(folder: Path, kernel: str | None) -> list[Target]:
    """Every (source, kernel) of the specs under `folder`, in path order; `kernel` filters."""
    found: list[Target] = []
    for path in specs_under(folder):
        spec = load_spec(path)  # a broken spec is an error naming its line: never a silently skipped kernel
        for name in spec.kernels:
            if kernel is None or name == kernel:
                found.append(Target(str(spec.source), name, str(path)))
    if not found:
        what = f"kernel '{kernel}'" if kernel else "kernel"
        raise UsageError(f"{folder}: no harness spec under it describes a {what} (docs/harness-spec.md)")
    return found


def run_dir(request: TuneRequest, listeners: Listeners = QUIET) -> TuneOutcome:
    """Every kernel under `request.path`, one after another, one pass log."""
    if request.measure.recording is not None:
        raise UsageError(
            f"--objective {request.measure.objective}: a recorded space is one kernel's; a directory takes gpu "
            "or cpu+replay:FILE"
        )
    found = targets(Path(request.path), request.kernel)
    if request.measure.objective == "gpu":
        gpu_runtime().close()  # without a GPU: one line for the whole run, before any work
    log = open_log(request, request.hw)
    summaries: list[dict[str, Any]] = []
    for target in found:
        one = with_kernel(request, target.file, target.kernel, target.spec)
        try:
            summary, _ = tune_file(one, log, listeners)
        except NothingToTune as exc:  # the original is kept: not a failure
            summary = {
                "file": target.file,
                "kernel": target.kernel,
                "result": {"kept_original": True, "reason": exc.cause, "passes": [], "values": {}, "pipeline": ""},
            }
        except KxformError as exc:
            summary = {"file": target.file, "kernel": target.kernel, "error": exc.cause}
        if "evaluations" not in summary:  # tune_file logged the others: every kernel is a row of the report's table
            log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
        summaries.append(summary)
    log.close(Report())
    failed = sum(1 for s in summaries if "error" in s or (s.get("written") or {}).get("refused"))
    return TuneOutcome(RunKind.DIRECTORY, {"kernels": summaries, "failed": failed}, str(log.path), failed)
