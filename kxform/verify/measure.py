"""Measuring: the original and the rewritten kernel timed on the same inputs, and the
evidence that the timed code is the verified code doing the verified work.

A timing is only worth keeping when it measures what was verified. So, per version, at
the spec's bench size: one plain run gives the outputs of a single launch; the timing
loop (CUDA events, warm-up, median of many launches, `out` buffers poisoned before each
launch, input sets rotated so no launch re-reads the last one's L2, the persisting-L2
carveout capped at zero) then returns its last launch's outputs, which must equal the
single run's. A kernel that skips work when launched again, or leaves outputs unwritten
under timing, fails here (`MeasurementError`) instead of winning.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kxform.engine.policy import VerifyPolicy
from kxform.frontend.source import SourceText
from kxform.harness.compare import compare
from kxform.harness.model import CompareSpec, KernelSpec
from kxform.runtime.base import LaunchRequest, Runtime, RuntimeError_, count_unwritten_against, poison_mask
from kxform.verify.differential import EXACT, launch_request, uses_float_atomics
from kxform.verify.versions import rewritten_launch

WARMUP = 5
REPEAT = 50
FIRST_LAUNCHES = 3
"""Timed launches after which a configuration may be cut off (`timed_and_checked`'s `cut`)."""


class MeasurementError(RuntimeError_):
    """The timed launches did not reproduce a single launch's outputs, or the timer could
    not put the caches in a known state."""


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread_ms: float  # half the interquartile range
    samples: int = 0
    copies: int = 1
    """Input sets rotated between launches."""
    cut_off: bool = False
    """Only the first launches were timed: they were already clearly slower than a bar."""


def timing_of(samples: list[float], copies: int = 1) -> Timing:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), 0, max(samples)]
    return Timing(statistics.median(samples), (q[2] - q[0]) / 2, len(samples), copies)


def launches_to_fill(budget_s: float, probe_ms: float, least: int, most: int) -> int:
    """Timed launches of a kernel whose single launch took `probe_ms` that fill about
    `budget_s` seconds, at least `least` and at most `most` (`most` when the probe took
    no measurable time)."""
    fits = int(budget_s * 1000.0 / probe_ms) if probe_ms > 0 else most
    return max(least, min(most, fits))


def timed_and_checked(
    runtime: Runtime,
    request: LaunchRequest,
    dtypes: Mapping[str, str],
    mode: CompareSpec,
    repeat: int | Callable[[float], int] = REPEAT,
    cut: Callable[[Timing], bool] | None = None,
) -> Timing:
    """Time `request` and check that the last timed launch wrote what a single launch writes
    (`dtypes`: the spec dtype of each output, `mode`: how outputs compare). `repeat` may be
    a function of the single launch's milliseconds (a count that fills a time budget), so
    that one launch both probes the time and is the reference.

    `cut`: asked once the first FIRST_LAUNCHES launches are timed (after one warm-up
    launch beyond the single run); when it answers True the rest are not run and the
    timing of those launches is returned with `cut_off` set (a tuner's early cut-off of a
    configuration already clearly slower than its best). Their outputs are checked all
    the same."""
    single = runtime.run(request)
    count = repeat(single.elapsed_ms or 0.0) if callable(repeat) else repeat
    label = request.label or request.kernel
    if cut is not None and count > FIRST_LAUNCHES:
        first = runtime.time(request, warmup=1, repeat=FIRST_LAUNCHES, keep_outputs=True)
        _check_timed(single.outputs, first, label, dtypes, mode)
        early = timing_of(list(first.samples_ms), first.copies)
        if cut(early):
            return replace(early, cut_off=True)
        rest = runtime.time(request, warmup=1, repeat=count - FIRST_LAUNCHES, keep_outputs=True)
        _check_timed(single.outputs, rest, label, dtypes, mode)
        return timing_of([*first.samples_ms, *rest.samples_ms], rest.copies)
    timed = runtime.time(request, warmup=WARMUP, repeat=count, keep_outputs=True)
    _check_timed(single.outputs, timed, label, dtypes, mode)
    return timing_of(list(timed.samples_ms), timed.copies)


def _check_timed(
    expected_outputs: Mapping[str, Any], timed: Any, label: str, dtypes: Mapping[str, str], mode: CompareSpec
) -> None:
    """The caches were in a known state, and the last timed launch wrote what a single launch did."""
    if timed.persisting_l2_bytes not in (None, 0):
        raise MeasurementError(
            f"{label}: the persisting-L2 carveout is {timed.persisting_l2_bytes} bytes while "
            "timing (it must be capped at 0)"
        )
    for name, expected in expected_outputs.items():
        got = timed.outputs.get(name)
        if got is None:
            raise MeasurementError(f"{label}: the timing loop returned no '{name}' to check")
        unwritten = count_unwritten_against(expected, got)
        both = poison_mask(expected) & poison_mask(got)  # a border neither launch writes agrees
        comparison = compare(expected, got, mode, dtype=dtypes[name], unwritten_both=both)
        if unwritten or not comparison.ok:
            what = f"{unwritten} elements left unwritten" if unwritten else comparison.summary()
            raise MeasurementError(
                f"{label}: output '{name}' of the last timed launch differs from a single "
                f"launch ({what}): the timed code does not do the same work on every launch"
            )


def measure_pair(
    source: SourceText,
    new: SourceText,
    spec: KernelSpec,
    runtime: Runtime,
    repeat: int = REPEAT,
    policy: VerifyPolicy | None = None,
) -> tuple[Timing, Timing, str]:
    """Median and spread of the original and the rewritten kernel at the spec's first bench
    size (else its largest check size), same inputs, same runtime; and the size's name.
    The rewritten version is launched as its pass's policy says (a new tile, a new grid)."""
    from kxform.build.extract import extract_kernel
    from kxform.harness.inputs import make_inputs

    size = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    resolved = spec.launch(size)
    inputs = make_inputs(spec, resolved)
    original = extract_kernel(source, spec.name)
    rewritten = rewritten_launch(resolved, original.params, (policy or VerifyPolicy()).launch)
    dtypes = {arg.name: arg.dtype for arg in resolved.args}
    timings = []
    for version, src, launch in (("original", source, resolved), ("rewritten", new, rewritten)):
        request = launch_request(
            extract_kernel(src, spec.name), launch, inputs, f"{spec.name}[{size.name}] {version}", 600.0
        )
        mode = EXACT if not uses_float_atomics(src) else spec.compare
        timings.append(timed_and_checked(runtime, request, dtypes, mode, repeat))
    return timings[0], timings[1], size.name
