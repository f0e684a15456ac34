"""Runs that make a race show: a rewrite whose threads share data is run again where the
order of its threads differs, so a missing barrier or `__syncwarp` changes its outputs or
is reported, instead of passing because one order happened to hide it.

On the CPU runtime the threads of a block run one at a time between synchronisation
points, in thread order by default: a read of what a lower thread stored without a
barrier between them is then always right. The rewritten version is also run in
reverse order, in a seeded random order and with the first warp delayed behind the
others (kxform.runtime.base.ADVERSARIAL_SCHEDULES); each run is compared with the
original like the first. On a GPU the rewritten version runs under compute-sanitizer's
racecheck and synccheck, whose findings fail the launch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from kxform.runtime.base import ADVERSARIAL_SCHEDULES, LaunchRequest, Runtime

SANITIZER_TOOLS = ("racecheck", "synccheck")


@dataclass(frozen=True)
class RaceRun:
    """One more run of the rewritten version: how it differs from the first (`label`), the
    request and the runtime that runs it."""

    label: str
    request: LaunchRequest
    runtime: Runtime


@contextmanager
def race_runs(runtime: Runtime, request: LaunchRequest) -> Iterator[list[RaceRun]]:
    """The runs that can show a race in `request` on `runtime` (empty where it has none:
    a runtime that neither orders threads nor has a sanitizer). Sanitizer runtimes are
    closed on exit."""
    if getattr(runtime, "orders_threads", False):
        yield [RaceRun(f"in {s} thread order", replace(request, schedule=s), runtime) for s in ADVERSARIAL_SCHEDULES]
        return
    sanitized = _sanitized(runtime)
    try:
        yield [RaceRun(f"under compute-sanitizer {tool}", request, r) for tool, r in sanitized]
    finally:
        for _, r in sanitized:
            close = getattr(r, "close", None)
            if close is not None:
                close()


def _sanitized(runtime: Runtime) -> list[tuple[str, Runtime]]:
    """A sanitizing twin of a GPU runtime per tool (same device and builder)."""
    from kxform.runtime.gpu import GpuRuntime

    if not isinstance(runtime, GpuRuntime) or runtime.sanitize:
        return []
    out: list[tuple[str, Runtime]] = []
    for tool in SANITIZER_TOOLS:
        twin = GpuRuntime(
            runtime.builder,
            device=runtime.device,
            arch=runtime.arch_override,
            sanitize=True,
            sanitizer=runtime.sanitizer_path,
            sanitizer_tool=tool,
            extra_flags=runtime.extra_flags,
            python=runtime.python,
        )
        if twin.available()[0]:  # a toolkit without compute-sanitizer: the other checks stand alone
            out.append((tool, twin))
    return out
