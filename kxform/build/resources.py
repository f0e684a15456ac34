"""Register and spill check of one candidate configuration (a tiling, a block size), from ptxas
(`-Xptxas -v`).

Registers depend on the tile sizes in ways no formula in the source predicts (unrolled
loops, accumulators per thread), so each non-default candidate is compiled for the
profile's architecture and ptxas's figures decide: a kernel that spills is refused, and
registers x threads must fit the profile's registers per block, or the launch fails.
Builds are cached by content (kxform.build), so a candidate is compiled once.
"""

from __future__ import annotations

import functools
import math
import os

from kxform.build.builder import Builder
from kxform.build.diagnostics import environment_failure
from kxform.build.nvcc import BuildJob, KernelResources
from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import CheckRecord
from kxform.engine.status import BUILD_ENVIRONMENT, DOES_NOT_COMPILE, Status
from kxform.errors import CheckFailed
from kxform.expr import parse_expr
from kxform.hw import HwProfile

RULE = "registers x threads <= hw.regs_per_block, no spills (ptxas, per candidate)"


@functools.cache
def _builder() -> Builder:
    return Builder(jobs=1)


def _kernel_entry(resources: tuple[KernelResources, ...], kernel: str) -> KernelResources | None:
    for entry in resources:
        name = entry.demangled.split("(")[0].split("<")[0].split("::")[-1].strip()
        if name == kernel:
            return entry
    return None


def check_resources(
    text: str,
    path: str,
    kernel: str,
    block: tuple[str | None, ...],
    config: dict[str, int],
    hw: HwProfile,
    toolchain: Toolchain | None,
) -> CheckRecord:
    """ptxas's registers and spills for `kernel` in the rewritten file `text`."""
    nvcc = toolchain.nvcc if toolchain is not None else None
    if nvcc is None or not hw.arch.startswith("sm_"):
        return CheckRecord("resources", Status.SKIPPED, f"skipped: no nvcc for {hw.arch} ({RULE})", "NoCompiler")
    if not path.endswith((".cu", ".cuh")):
        return CheckRecord(
            "resources", Status.SKIPPED, f"skipped: not a CUDA source nvcc can compile ({RULE})", "HipSource"
        )
    assert toolchain is not None
    include_dirs, defines, flags = toolchain.project_flags(path)
    job = BuildJob(
        source=text,
        filename=path,
        output="check",
        arch=hw.arch,
        include_dirs=include_dirs,
        defines=defines,
        extra_flags=flags,
        source_dir=os.path.dirname(os.path.abspath(path)),
    )
    result = _builder().build(job)
    if not result.ok:
        lines = result.log.strip().splitlines()
        first = next((line for line in lines if "error" in line), lines[-1] if lines else "no compiler output")
        raise CheckFailed(
            "resources",
            f"the candidate does not compile: {first.strip()}",
            key=BUILD_ENVIRONMENT if environment_failure(result.log) else DOES_NOT_COMPILE,
        )
    entry = _kernel_entry(result.resources, kernel)
    if entry is None:
        return CheckRecord(
            "resources", Status.SKIPPED, f"skipped: ptxas reported nothing for '{kernel}'", "NoResources"
        )
    if entry.spill_stores or entry.spill_loads:
        raise CheckFailed(
            "resources",
            f"'{kernel}' spills {entry.spill_stores} B / loads {entry.spill_loads} B "
            f"at this configuration ({entry.registers} registers)",
        )
    detail = f"{entry.registers} registers, no spills"
    figures: tuple[tuple[str, float | str], ...] = (("registers", entry.registers),)
    if all(b is not None for b in block):
        threads = math.prod(parse_expr(str(b)).evaluate_int(config) for b in block)
        if entry.registers * threads > hw.regs_per_block:
            raise CheckFailed(
                "resources",
                f"{entry.registers} registers x {threads} threads = "
                f"{entry.registers * threads} > {hw.regs_per_block} registers per block on {hw.name}",
            )
        detail += f"; {entry.registers} x {threads} threads = {entry.registers * threads} <= {hw.regs_per_block}"
        figures += (("threads", threads),)
    return CheckRecord("resources", True, detail, figures=figures)
