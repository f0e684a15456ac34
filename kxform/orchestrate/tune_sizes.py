"""Tuning one kernel at several sizes of its harness spec and, with a dispatch header,
writing the per-size winners as a C++ decision table (kxform.search.dispatch).

Each size is tuned as one size is (kxform.orchestrate.tune, `size` set to its name: its
own database key, the original timed at the same size), one pass log for the run. Every
setting is checked before the first evaluation: an unknown size name, a dispatch file
that exists and was not generated here, a setting that makes no sense over several
sizes. A size where no configuration was verified and timed has no entry to offer, so a
dispatch header then stops the run with one line, exit 2, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kxform.errors import InputError, UsageError
from kxform.frontend.source import read_source
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.orchestrate.tune_kernel import open_log, tune_merged
from kxform.orchestrate.tune_request import QUIET, Listeners, RunKind, TuneOutcome, TuneRequest
from kxform.orchestrate.tune_setup import build_flags, check_kernel, harness_spec, space_of
from kxform.search.dispatch import (
    SizeClass,
    build_table,
    check_writable,
    render,
    write_header,
)
from kxform.search.kernel_objective import gpu_runtime


def run_sizes(request: TuneRequest, listeners: Listeners = QUIET) -> TuneOutcome:
    """`request.kernel` tuned at each of `request.measure.sizes` (every bench size when
    empty), and the dispatch header written when asked for."""
    _refuse(request)
    dispatch = request.output.dispatch
    if dispatch is not None:
        check_writable(dispatch)
    source = read_source(request.path)
    check_kernel(source, str(request.kernel))
    sizes = chosen_sizes(harness_spec(request, source), request.measure.sizes or None)
    if request.measure.objective == "gpu":
        gpu_runtime().close()  # without a GPU: one line, before any work
    log = open_log(request, request.hw)
    summaries: list[dict[str, Any]] = []
    with _closing(log), build_flags(request) as merged:
        space = space_of(merged, source)
        listeners.left_out(request, space)
        if dispatch is not None:  # names that clash in C++, sizes with equal values: before any evaluation
            render(
                build_table(
                    str(request.kernel),
                    space.passes,
                    space.space.params,
                    space.defaults(),
                    [SizeClass(s.name, dict(s.values), None) for s in sizes],
                )
            )
        for size in sizes:
            one = replace(
                merged,
                measure=replace(merged.measure, size=size.name, sizes=None),
                output=replace(merged.output, log=None, export=None, dispatch=None),
            )
            summary = tune_merged(one, log, listeners)[0]
            summaries.append({**summary, "size_values": dict(size.values)})
    classes = [size_class(size, summary) for size, summary in zip(sizes, summaries)]
    out: dict[str, Any] = {"file": request.path, "kernel": request.kernel, "sizes": summaries, "dispatch": None}
    if dispatch is not None:
        missing = next((c.name for c, s in zip(classes, summaries) if s["best"] is None), None)
        if missing is not None:
            raise InputError(
                f"--dispatch {dispatch}: size '{missing}': no configuration was verified and "
                "timed, so it has no entry; nothing written"
            )
        table = build_table(str(request.kernel), space.passes, space.space.params, space.defaults(), classes)
        write_header(dispatch, table)
        out["dispatch"] = {
            "path": dispatch,
            "classes": [
                {
                    "size": c.name,
                    "values": dict(c.values),
                    "original": c.config is None,
                    "config": None if c.config is None else dict(c.config),
                }
                for c in table.classes
            ],
        }
    return TuneOutcome(RunKind.SIZES, out, str(log.path))


@contextmanager
def _closing(log: PassLog) -> Iterator[None]:
    """The run's pass log closed however the sizes' runs end."""
    try:
        yield
    finally:
        log.close(Report())


def _refuse(request: TuneRequest) -> None:
    if Path(request.path).is_dir() or request.kernel is None:
        raise UsageError("--sizes/--dispatch tune one kernel: FILE --kernel K")
    clash = (
        "--size"
        if request.measure.size
        else "--write"
        if request.output.write
        else "--export"
        if request.output.export
        else "--gpus/--ray"
        if request.measure.workers
        else None
    )
    if clash:
        raise UsageError(f"--sizes/--dispatch: {clash} is one size's option")
    if request.measure.recording is not None:
        raise UsageError(
            f"--objective {request.measure.objective}: a recorded space has no sizes; --sizes/--dispatch take "
            "gpu or cpu+replay:FILE"
        )


def chosen_sizes(spec: KernelSpec, names: tuple[str, ...] | None) -> tuple[SizeSpec, ...]:
    """Those sizes of the spec, in that order; None: every bench size."""
    if names is None:
        return spec.bench_sizes or spec.check_sizes[-1:]
    text = ",".join(names)
    known = {s.name: s for s in spec.sizes}
    for name in names:
        if name not in known:
            raise UsageError(f"--sizes {text}: kernel '{spec.name}' has no size '{name}' (sizes: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UsageError(f"--sizes {text}: a size is named twice")
    return tuple(known[n] for n in names)


def size_class(size: SizeSpec, summary: dict[str, Any]) -> SizeClass:
    """What won at `size`: the best configuration, or None where the original was kept."""
    result = summary.get("result") or {}
    best = summary.get("best")
    kept = result.get("kept_original", True) or best is None
    return SizeClass(size.name, dict(size.values), None if kept else best["config"], result.get("time_ms"))
