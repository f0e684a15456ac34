"""What a tuning run is asked to do, and what it answers: the typed request
`kxform.api.tune` takes and the outcome it returns.

The options of `kxform tune` are grouped into small frozen dataclasses (what to search,
how to measure, how the code is built, what to write), varied with `dataclasses.replace`
and checked where they are made: a request that cannot run (`--budget 0`, `-j 0`, a
negative launch budget) is a UsageError before any file is read. The command line
(kxform.cli.tune) only parses into a `TuneRequest` and prints a `TuneOutcome`; tools and
other commands build the request themselves.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kxform.errors import UsageError
from kxform.search.kernel_space import KernelSpace
from kxform.search.spread import JobResult
from kxform.search.strategy import DEFAULT
from kxform.search.tuner import Step

DEFAULT_BUDGET = 200
"""Evaluations of a run given neither a budget nor a time."""


@dataclass(frozen=True)
class SearchSettings:
    """How the space is searched: the strategy, its budget, where results are remembered."""

    strategy: str = DEFAULT
    budget: int | None = None
    """Evaluations, at most (None: DEFAULT_BUDGET, or unbounded under `time_s`)."""
    time_s: float | None = None
    """Seconds of evaluation cost after which no new evaluation starts."""
    seed: int = 0
    resume: bool = False
    prior: tuple[str, ...] = ()
    """Recordings of the same kernel elsewhere to warm-start from (the database is used too)."""
    db: str | None = None
    """The tuning database (None: the user cache's)."""
    require: tuple[str, ...] = ()
    """Extra constraints in kxform's expression language."""
    cost_model: bool = True
    """Predict each configuration's time before building it; order and prune by it
    (kxform.search.cost, docs/search.md)."""
    transfer: bool = True
    """Warm-start from kernels of similar features in the database (kxform.search.transfer)."""

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise UsageError(f"--budget {self.budget}: must be at least 1 evaluation")
        if self.time_s is not None and not (math.isfinite(self.time_s) and self.time_s > 0):
            raise UsageError(f"--time {self.time_s:g}: must be a positive number of seconds")

    @property
    def evaluations(self) -> int | None:
        """The budget in evaluations the run keeps to."""
        if self.budget is not None:
            return self.budget
        return None if self.time_s is not None else DEFAULT_BUDGET


@dataclass(frozen=True)
class MeasureSettings:
    """What a time is and where it is taken."""

    objective: str = "gpu"
    """`gpu`, `cpu+replay:FILE` (a `tune --json` summary's times) or `replay:FILE` (a recorded space)."""
    size: str | None = None
    """The timing size: a size of the spec by name, or `VAR=V,...` over its bench size."""
    sizes: tuple[str, ...] | None = None
    """Tune at each of these sizes of the spec (`()`: every bench size); None: one size."""
    repeat: int = 50
    launch_budget_s: float = 2.0
    cut_off: bool = True
    """Stop timing a configuration whose first launches are clearly slower than the best so far."""
    jobs: int = 1
    """Candidates prepared in parallel on one GPU."""
    gpus: str | None = None
    """`all`, a count or a device list: one timing worker per GPU of this host."""
    ray: str | None = None
    """A Ray cluster's address (`auto`, `local`): timing workers as Ray actors."""

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise UsageError(f"--repeat {self.repeat}: must be at least 1")
        if not (math.isfinite(self.launch_budget_s) and self.launch_budget_s > 0):
            raise UsageError(f"--launch-budget {self.launch_budget_s:g}: must be a positive number of seconds")
        if self.jobs < 1:
            raise UsageError("-j must be at least 1")
        kind, sep, path = self.objective.partition(":")
        if self.objective != "gpu" and (kind not in ("replay", "cpu+replay") or not sep or not path):
            raise UsageError(f"--objective {self.objective!r}: expected gpu, cpu+replay:FILE or replay:FILE")

    @property
    def workers(self) -> bool:
        """Whether several timing workers run the evaluations (`--gpus`, `--ray`)."""
        return self.gpus is not None or self.ray is not None

    @property
    def recording(self) -> str | None:
        """The recorded space of `replay:FILE` (None for the other objectives)."""
        kind, _, path = self.objective.partition(":")
        return path if kind == "replay" else None

    @property
    def times(self) -> str | None:
        """The recorded times of `cpu+replay:FILE` (None for the other objectives)."""
        kind, _, path = self.objective.partition(":")
        return path if kind == "cpu+replay" else None


@dataclass(frozen=True)
class BuildInputs:
    """How the kernel's unit is built: as the original is (its directory is always added)."""

    include: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    build_dir: str | None = None
    """A directory holding compile_commands.json."""
    project_config: bool = True
    """Read the project's `[tool.kxform]` include directories, defines and build directory."""


@dataclass(frozen=True)
class OutputSettings:
    """What the run writes besides the tuning database."""

    write: bool = False
    """Write the winning pipeline into the file, through `apply`'s every check."""
    export: str | None = None
    """The evaluations as a Kernel Tuner cache file."""
    dispatch: str | None = None
    """A C++ header picking the fastest configuration per size (with `sizes`)."""
    log: str | None = None
    """The pass log (None: .kxform/logs/RUN.jsonl)."""
    argv: tuple[str, ...] = ()
    """The command line recorded in the log's header."""


@dataclass(frozen=True)
class TuneRequest:
    """One `kxform tune` run: a file's kernel (or every kernel a harness spec under a
    directory describes), its passes, and the settings."""

    path: str
    kernel: str | None = None
    passes: tuple[str, ...] | None = None
    """Passes whose parameters span the space (None: every pass with something to tune)."""
    spec: str | None = None
    """The harness spec (None: the one beside the file that names it, `NAME.kxspec.toml`)."""
    hw: str = "h100"
    search: SearchSettings = field(default_factory=SearchSettings)
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    build: BuildInputs = field(default_factory=BuildInputs)
    output: OutputSettings = field(default_factory=OutputSettings)

    @property
    def passes_text(self) -> str:
        """The `--pass` text ("" for every pass)."""
        return ",".join(self.passes) if self.passes is not None else ""


@dataclass(frozen=True)
class Listeners:
    """Who hears a run as it goes (the command line's progress bar and job lines)."""

    on_step: Callable[[Step], None] | None = None
    """Each evaluation of a kernel's search, as it is recorded."""
    on_job: Callable[[JobResult], None] | None = None
    """Each finished job of a directory spread over a Ray cluster."""
    on_left_out: Callable[[str, str, str], None] | None = None
    """(kernel, pass, reason) for each pass named in `passes` that has nothing to tune in
    the kernel: the others are tuned without it (heard before the search starts)."""

    def left_out(self, request: TuneRequest, space: KernelSpace) -> None:
        """Tell `on_left_out` of the named passes `space` left out."""
        if request.passes is None or self.on_left_out is None:
            return
        for name, why in space.not_offered:
            self.on_left_out(space.kernel, name, why)


QUIET = Listeners()
"""No one listening."""


class RunKind(enum.Enum):
    """What a run tuned, and so the shape of its record."""

    KERNEL = "kernel"
    """One kernel at one size: the record is the `tune` summary (docs/pass-log.md)."""
    DIRECTORY = "directory"
    """Every kernel of the specs under a directory: `{"kernels": [summary, ...], "failed": N}`."""
    SIZES = "sizes"
    """One kernel at several sizes: `{"file", "kernel", "sizes": [summary, ...], "dispatch"}`."""
    CLUSTER = "cluster"
    """A directory over a Ray cluster: `{"directory", "database", "jobs", "skipped"}`."""


@dataclass(frozen=True)
class TuneOutcome:
    """What a run found: the record `--json` prints (the pass log's `tune` record for one
    kernel), the log's path, and how many kernels failed or had a `--write` refused (the
    exit status is 1 when any did)."""

    kind: RunKind
    record: dict[str, Any]
    log_path: str | None
    failed: int = 0

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """The per-kernel summaries (one for a kernel run)."""
        if self.kind is RunKind.KERNEL:
            return [self.record]
        if self.kind is RunKind.DIRECTORY:
            return list(self.record["kernels"])
        if self.kind is RunKind.SIZES:
            return list(self.record["sizes"])
        return []

    @property
    def refused(self) -> str | None:
        """Why a `--write` of a kernel run was refused (None: written, kept or not asked)."""
        return (self.record.get("written") or {}).get("refused") if self.kind is RunKind.KERNEL else None
