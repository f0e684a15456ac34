"""What a tuning run is built from: the kernel's harness spec, its build flags, the
objective and its space, the priors, the CPU checker.

Each function takes the typed request (kxform.orchestrate.tune_request) and raises a
UsageError, InputError or BuildFailed naming the file and the cause before anything is
evaluated or stored: a missing spec, a kernel the file lacks, a recording of another
kernel, an original that does not build here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from kxform.errors import InputError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.harness.spec import find_spec_for, load_spec, missing_spec
from kxform.hw import load_profile
from kxform.orchestrate.tune_request import TuneRequest
from kxform.search.db import TuneKey, TuningDB
from kxform.search.checker import cpu_checker as checker
from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget, gpu_runtime, timing_size
from kxform.search.kernel_space import KernelSpace, kernel_space
from kxform.search.objective import Objective
from kxform.search.prior import PriorSource, build_prior
from kxform.search.recorded import load_recording
from kxform.search.recorded_times import RecordedTimes, load_times
from kxform.search.space import SearchSpace
from kxform.search.strategy import Prior
from kxform.search.transfer import similar_columns
from kxform.verify.differential import pick_runtime
from kxform.workspace.config import find_config, load_config
from kxform.workspace.flags import merged_build_dir


@contextmanager
def build_flags(request: TuneRequest) -> Iterator[TuneRequest]:
    """`request` with its build directory naming one compile database for the run: the
    file's directory, `-I`/`-D`, the project's `include`/`defines` (`[tool.kxform]`) and
    the build directory's own database, merged, so that every configuration is built
    the way the original is."""
    build = request.build
    project = None
    if build.project_config:
        found = find_config([request.path])
        project = load_config(found) if found is not None else None
    include = tuple(os.path.abspath(d) for d in build.include) + (project.include if project else ())
    defines = tuple(build.defines) + (project.defines if project else ())
    build_dir = build.build_dir or (project.build_dir if project else None)
    with merged_build_dir([request.path], include, defines, build_dir) as merged:
        yield replace(request, build=replace(build, build_dir=merged, project_config=False))


def check_kernel(source: SourceText, kernel: str) -> None:
    """InputError naming the file's kernels when `kernel` is not one of them."""
    names = sorted({k.name for k in parse_model(source).kernels})
    if kernel not in names:
        raise InputError(f"{source.path}: no kernel '{kernel}' (kernels: {', '.join(names) or 'none'})")


def harness_spec(request: TuneRequest, source: SourceText) -> KernelSpec:
    """The kernel's harness spec: `request.spec`, else the one beside the file that names it."""
    path = request.spec or find_spec_for(source.path)
    if path is None:
        raise UsageError(missing_spec(source.path, str(request.kernel)))
    return load_spec(path).kernel(str(request.kernel))


def space_of(request: TuneRequest, source: SourceText) -> KernelSpace:
    """The kernel's composed tuning space under the request's passes and constraints."""
    return kernel_space(
        source.data,
        str(request.kernel),
        request.passes,
        path=source.path,
        hw=request.hw,
        build_dir=request.build.build_dir,
        require=request.search.require,
    )


def objective_of(request: TuneRequest, source: SourceText) -> tuple[Objective, SearchSpace]:
    """The objective and the space it is searched over: a recorded space (`replay:FILE`,
    whose kernel must be the one asked for), or the kernel rewritten, built, verified and
    timed on this machine's GPU (`gpu`) or verified on the CPU runtime with the times of
    a GPU run (`cpu+replay:FILE`)."""
    recording_path = request.measure.recording
    if recording_path is not None:
        recording = load_recording(recording_path)
        if not recording.kernel:  # matched to the file by the kernel's name, or not at all
            raise UsageError(
                f"{recording_path}: the recording names no kernel (kernel_name), "
                f"so it cannot be matched to '{request.kernel}'"
            )
        if recording.kernel != request.kernel:
            raise UsageError(f"{recording_path}: a recording of kernel '{recording.kernel}', not '{request.kernel}'")
        return recording.objective, recording.search
    objective = kernel_objective(request, source)
    return objective, objective.space.search(load_profile(request.hw))


def kernel_objective(request: TuneRequest, source: SourceText) -> KernelObjective:
    """Rewrite, compile, verify and time on this machine's GPU (one line and exit 2 without
    one), or verify on the CPU runtime and take the times recorded in `cpu+replay:FILE`."""
    times = request.measure.times
    gpu = gpu_runtime() if times is None else None  # first: without one nothing can be measured
    spec = harness_spec(request, source)
    size = timing_size(spec, request.measure.size)
    recorded = load_times(times, str(request.kernel), size.name) if times is not None else None
    runtime = gpu if gpu is not None else pick_runtime("cpu")
    space = space_of(request, source)
    target = TuneTarget(source.path, source.data, str(request.kernel), spec, request.hw, request.build.build_dir)
    return KernelObjective(target, space, runtime, measure_options(request, size, recorded))


def measure_options(request: TuneRequest, size: SizeSpec, recorded: RecordedTimes | None = None) -> MeasureOptions:
    """How each configuration of the request is measured (its size, launches, cut-off, model)."""
    measure = request.measure
    return MeasureOptions(
        size=size,
        repeat=measure.repeat,
        launch_budget_s=measure.launch_budget_s,
        recorded=recorded,
        cut_off=measure.cut_off,
        cost_model=request.search.cost_model,
    )


def cpu_checker(request: TuneRequest, source: SourceText) -> KernelObjective:
    """The run's CPU checker (kxform.search.checker), built before the search, so a missing
    spec or an original that does not build here stops the run before anything is stored."""
    return checker(
        source,
        str(request.kernel),
        harness_spec(request, source),
        request.passes,
        hw=request.hw,
        build_dir=request.build.build_dir,
        require=request.search.require,
    )


def prior_of(
    request: TuneRequest,
    space: SearchSpace,
    db: TuningDB,
    key: TuneKey,
    features: Mapping[str, float] | None = None,
) -> Prior | None:
    """Warm-start scores: `--prior` recordings, the database's results of the same kernel
    elsewhere and, given the kernel's `features` (stored here for the kernels tuned after
    it), the database's kernels of similar features (kxform.search.transfer)."""
    sources = []
    for path in request.search.prior:
        recording = load_recording(path)
        results = [
            (recording.search.config(r), recording.objective.records[recording.search.key(r)].time_ms)
            for r in range(len(recording.search))
        ]
        sources.append(PriorSource(f"{recording.kernel}@{recording.device} ({path})", results))
    for label, stored in db.related(key).items():
        sources.append(PriorSource(label, [(s.config, s.evaluation.time_ms) for s in stored]))
    if request.search.prior and not sources:
        raise UsageError("--prior: no usable source")
    columns = []
    if features is not None:
        if request.search.transfer:
            columns = similar_columns(db, key, features, space)
        db.put_features(key, features)
    return build_prior(space, sources, columns) if sources or columns else None
