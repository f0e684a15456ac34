"""kxform from Python: rewrite source text with a pass pipeline, and tune kernels.

    from kxform.api import rewrite, tune
    result = rewrite(open("gemm.cu", "rb").read(), "swizzle", path="gemm.cu", pattern="hilbert")
    result.new_data, result.results, result.remarks

    outcome = tune("gemm.cu", "sgemm", passes=("tile", "swizzle"), budget=40)
    outcome.record["result"]["pipeline"], outcome.record["best"]

`rewrite` and its siblings are the pure core (kxform.core): no files are written and nvcc
is not run; `kxform apply` layers files, builds and verification on top. `tune` is what
`kxform tune` runs (kxform.orchestrate.tune): it builds, verifies and times every
configuration it tries, stores them in the tuning database and writes a pass log; with
`write=True` it writes the winning pipeline into the file through `apply`'s checks.

For tuners: `space_of(data, kernel)` is the typed parameter space of a kernel under a
pass (tile by default), `rewrite_with(data, kernel, config)` the file rewritten at one
point of it, and `explain` what the pass found (parameters, constraints, refusals).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kxform.core import (
    _analysed,
    analyse_kernel,
    explain,
    kernel_context,
    rewrite,
    rewrite_passes,
    rewrite_with,
    space_of,
)
from kxform.orchestrate.tune import run
from kxform.orchestrate.tune_request import (
    QUIET,
    BuildInputs,
    Listeners,
    MeasureSettings,
    OutputSettings,
    RunKind,
    SearchSettings,
    TuneOutcome,
    TuneRequest,
)
from kxform.search.kernel_space import parse_passes

__all__ = [
    "BuildInputs",
    "Listeners",
    "MeasureSettings",
    "OutputSettings",
    "RunKind",
    "SearchSettings",
    "TuneOutcome",
    "TuneRequest",
    "_analysed",
    "analyse_kernel",
    "explain",
    "kernel_context",
    "rewrite",
    "rewrite_passes",
    "rewrite_with",
    "space_of",
    "tune",
]


def tune(
    path: str | TuneRequest,
    kernel: str | None = None,
    *,
    passes: str | Sequence[str] | None = None,
    budget: int | None = None,
    hw: str = "h100",
    objective: str = "gpu",
    write: bool = False,
    listeners: Listeners = QUIET,
) -> TuneOutcome:
    """Tune `kernel` of the file `path` (or every kernel a harness spec under the
    directory `path` describes) and return what the run found.

    `passes`: the passes whose parameters span the space (`"tile,swizzle"` or a
    sequence; None: every pass with something to tune, which apply being searched too);
    `budget`: evaluations (default 200); `hw`: the hardware profile of the constraints;
    `objective`: `gpu`, `cpu+replay:FILE` (verify on the CPU runtime, take the times a
    GPU run recorded) or `replay:FILE` (a recorded space); `write`: write the winner into
    the file when it beat the original. Every other setting (sizes, seeds, strategies,
    workers, build flags, the log) is a field of `TuneRequest`, which may be passed as
    `path` instead (the keywords must then be left out).

    Raises UsageError, InputError or BuildFailed (one line naming the file and the
    cause) before anything is evaluated; `outcome.failed` counts kernels that failed and
    writes that were refused once the run has evaluated."""
    if isinstance(path, TuneRequest):
        if kernel is not None or passes is not None or budget is not None or write:
            raise TypeError("tune(request): give the settings in the request, not as keywords")
        request = path
    else:
        names = tuple(n.strip() for n in passes.split(",") if n.strip()) if isinstance(passes, str) else passes
        request = TuneRequest(
            path,
            kernel,
            _known_passes(names),
            hw=hw,
            search=SearchSettings(budget=budget),
            measure=MeasureSettings(objective=objective),
            output=OutputSettings(write=write),
        )
    return run(replace(request, passes=_known_passes(request.passes)), listeners)


def _known_passes(names: Sequence[str] | None) -> tuple[str, ...] | None:
    """Registered pass names, each once (UsageError naming an unknown one)."""
    return None if names is None else parse_passes(",".join(names))
