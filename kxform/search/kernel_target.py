"""What is tuned and how it is measured: the kernel (`TuneTarget`), the measurement's
options (`MeasureOptions`), the seconds each step of an evaluation took (`Phases`) and the
timing size (`timing_size`). Frozen, picklable values: a timing worker is handed them
(kxform.search.workers) and builds its objective (kxform.search.kernel_objective) from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.errors import KxformError, UsageError
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.search.recorded_times import RecordedTimes
from kxform.verify.measure import REPEAT


@dataclass(frozen=True)
class TuneTarget:
    """The kernel being tuned: its file, harness spec and hardware profile."""

    path: str
    data: bytes
    kernel: str
    spec: KernelSpec
    hw: str = "h100"
    build_dir: str | None = None


@dataclass(frozen=True)
class MeasureOptions:
    """How each configuration is verified and timed."""

    size: SizeSpec | None = None
    """The timing size (None: the spec's first bench size, else its largest check size)."""
    check_sizes: tuple[str, ...] = ()
    """Sizes verified before timing (empty: every check size of the spec)."""
    repeat: int = REPEAT
    launch_budget_s: float | None = None
    """Seconds of timed launches per configuration, about: a probe launch sets the count
    (at least MIN_REPEAT, at most `repeat`), so a slow configuration costs what a fast
    one does. None: always `repeat`."""
    verify_timeout_s: float = 120.0
    time_timeout_s: float = 600.0
    recorded: RecordedTimes | None = None
    """Times recorded elsewhere (`cpu+replay:FILE`): a verified configuration takes its
    recorded time instead of being timed; everything before timing runs for real."""
    cut_off: bool = True
    """Stop timing a configuration whose first launches are clearly slower than the best
    so far (on a recording: mark the configuration the GPU would have stopped)."""
    cost_model: bool = True
    """Predict each configuration's time before building it, and prune by it."""


MEASURED = MeasureOptions()
"""The default measurement."""


@dataclass(frozen=True)
class Phases:
    """Seconds one configuration spent in each step (a step not reached is 0)."""

    rewrite_s: float = 0.0
    compile_s: float = 0.0
    verify_s: float = 0.0
    time_s: float = 0.0
    predict_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.rewrite_s + self.compile_s + self.verify_s + self.time_s + self.predict_s


def timing_size(spec: KernelSpec, text: str | None) -> SizeSpec:
    """`--size`: a size of the spec by name, or `VAR=V,...` overriding the variables of the
    spec's first bench size (`M=2048,N=2048,K=2048`); None: that bench size as it is."""
    base = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    if not text:
        return base
    if "=" not in text:
        try:
            return spec.size(text)
        except KxformError as exc:
            raise UsageError(f"--size {text}: {exc.cause}") from None
    values = dict(base.values)
    for item in text.split(","):
        name, _, raw = item.partition("=")
        name = name.strip()
        if name not in values:
            raise UsageError(
                f"--size {text}: '{name}' is not a size variable of '{spec.name}' (variables: {', '.join(values)})"
            )
        try:
            values[name] = int(raw)
        except ValueError:
            raise UsageError(f"--size {text}: {name} must be an integer, got {raw.strip()!r}") from None
        if values[name] < 1:
            raise UsageError(f"--size {text}: {name} must be at least 1")
    return SizeSpec(",".join(f"{k}={v}" for k, v in values.items()), True, values)
