"""Tuning as a library entry: `run(request)` searches which passes to apply to a kernel,
and their parameters, for the fastest verified code (`kxform.api.tune` calls it, as do
`kxform tune` and the tools).

Without passes named, every pass that has something to tune in the kernel takes part
(one composed space: kxform.search.kernel_space), starting at the code as it is. The
objective is a GPU (rewrite, check, build, verify once per distinct code, time), the
CPU runtime with times recorded on a GPU (`cpu+replay:FILE`: everything but the
stopwatch runs), or a recorded space (`replay:FILE`, Kernel Tuner's cache format).
Every evaluation goes to the tuning database; the result to the pass log (a `tune`
record) and the returned outcome and, with `write`, into the source: a pipeline result
through `apply`'s every check (kxform.orchestrate.tune_write); a replayed one too, once
its recorded values are typed into the passes' space (nothing from a recording is
copied into the source as text) and apply verifies it on the CPU runtime.

Each shape of a run has a module: one kernel (kxform.orchestrate.tune_kernel), a
directory (tune_dir), several sizes and a dispatch header (tune_sizes), several timing
workers (tune_workers).
"""

from __future__ import annotations

from pathlib import Path

from kxform.errors import UsageError
from kxform.orchestrate.tune_dir import run_dir
from kxform.orchestrate.tune_kernel import tune_file
from kxform.orchestrate.tune_request import QUIET, Listeners, RunKind, TuneOutcome, TuneRequest
from kxform.orchestrate.tune_sizes import run_sizes
from kxform.orchestrate.tune_workers import run_workers


def run(request: TuneRequest, listeners: Listeners = QUIET) -> TuneOutcome:
    """Tune what `request` names (a kernel, a directory, a kernel at several sizes, on
    several workers); input errors raise (UsageError, InputError, BuildFailed) before
    anything is evaluated, and a run that evaluated returns its outcome."""
    if request.measure.sizes is not None or request.output.dispatch is not None:
        return run_sizes(request, listeners)
    if request.measure.workers:
        return run_workers(request, listeners)
    if Path(request.path).is_dir():
        return run_dir(request, listeners)
    if request.kernel is None:
        raise UsageError(
            f"{request.path}: --kernel K is required with a file (a directory tunes every kernel with a spec)"
        )
    summary, log_path = tune_file(request, listeners=listeners)
    refused = (summary.get("written") or {}).get("refused")
    return TuneOutcome(RunKind.KERNEL, summary, str(log_path), failed=1 if refused else 0)
