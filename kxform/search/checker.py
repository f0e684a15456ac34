"""The CPU checker: the tuner's kernel objective on the CPU runtime. It rewrites a
configuration through the passes, builds it and verifies it against the original at
every check size of the harness spec; it cannot time. `kxform tune --write` confirms a
replayed configuration with it, and tools that ask "does this configuration verify
here" build the same object rather than a verification of their own.

Building it checks what every later configuration needs, before any is evaluated: the
spec matches the kernel's signature, the original builds here with the run's flags,
and the passes offer a space.
"""

from __future__ import annotations

from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec
from kxform.runtime.cpu import CpuRuntime
from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
from kxform.search.kernel_space import kernel_space


def cpu_checker(
    source: SourceText,
    kernel: str,
    spec: KernelSpec,
    passes: tuple[str, ...] | None = None,
    *,
    hw: str = "h100",
    build_dir: str | None = None,
    require: tuple[str, ...] = (),
) -> KernelObjective:
    """The checker of `kernel` over the composed space of `passes` (None: every pass that
    offers something); raises what building it finds (UsageError, BuildFailed, SpecError)."""
    space = kernel_space(source.data, kernel, passes, path=source.path, hw=hw, build_dir=build_dir, require=require)
    target = TuneTarget(source.path, source.data, kernel, spec, hw, build_dir)
    return KernelObjective(target, space, CpuRuntime(), MeasureOptions(cost_model=False))  # it checks, never ranks
