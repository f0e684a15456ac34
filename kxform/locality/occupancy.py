"""Resident blocks per SM: how many blocks of a launch run at once.

The figure decides the size of a wave (SMs x resident blocks), which decides what the
L2 sees at once. It follows the CUDA occupancy rules: registers are allocated per warp
in units of `REG_ALLOC_UNIT`, warps per SM in multiples of `WARP_ALLOC_GRANULARITY`;
shared memory per block is rounded up to `SMEM_ALLOC_UNIT` after adding the 1 KiB the
system reserves per block (compute capability 8.0 and later); then the thread, block,
register and shared-memory limits of the profile each bound the count. The same rules
are applied to AMD profiles with their per-CU figures (an approximation: AMD allocates
VGPRs per SIMD).

Constants: CUDA Occupancy Calculator (register allocation unit size 256, warp
allocation granularity 4, shared memory allocation unit 128 bytes) and the CUDA C++
Programming Guide (1 KB of shared memory reserved per block on 8.x and 9.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kxform.hw import HwProfile

REG_ALLOC_UNIT = 256
WARP_ALLOC_GRANULARITY = 4
SMEM_ALLOC_UNIT = 128
SMEM_RESERVED_PER_BLOCK = 1024
DEFAULT_MAX_BLOCKS_PER_SM = 32
"""Used when a profile does not state `max_blocks_per_sm` (AMD profiles)."""


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM, which limit decides it, and the inputs it came from."""

    blocks_per_sm: int
    limiter: str
    registers: int | None
    shared_bytes: int
    threads: int

    def describe(self) -> str:
        regs = f"{self.registers} regs" if self.registers is not None else "registers unknown"
        return (
            f"{self.blocks_per_sm} blocks/SM ({self.limiter}; {self.threads} threads, {regs}, "
            f"{self.shared_bytes} B smem)"
        )


def occupancy(hw: HwProfile, threads: int, registers: int | None, shared_bytes: int) -> Occupancy:
    """Blocks of `threads` threads using `registers` per thread (None: unknown, not a
    limit) and `shared_bytes` of static plus dynamic shared memory that fit on one SM."""
    warps = math.ceil(threads / hw.warp_size)
    limits = {
        "threads": hw.max_threads_per_sm // max(threads, 1),
        "blocks": hw.max_blocks_per_sm or DEFAULT_MAX_BLOCKS_PER_SM,
    }
    if registers:
        per_warp = math.ceil(registers * hw.warp_size / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        max_warps = hw.regs_per_sm // per_warp
        max_warps -= max_warps % WARP_ALLOC_GRANULARITY
        limits["registers"] = max_warps // warps
    smem = shared_bytes + (SMEM_RESERVED_PER_BLOCK if hw.vendor == "nvidia" else 0)
    smem = math.ceil(smem / SMEM_ALLOC_UNIT) * SMEM_ALLOC_UNIT
    if shared_bytes:
        limits["shared memory"] = hw.smem_per_sm // smem
    limiter = min(limits, key=lambda k: limits[k])
    return Occupancy(max(1, limits[limiter]), limiter, registers, shared_bytes, threads)


def kernel_registers(
    source: str,
    entry: str,
    arch: str,
    source_dir: str | None,
    include_dirs: tuple[str, ...] = (),
    defines: tuple[str, ...] = (),
) -> tuple[int | None, int, str]:
    """(registers per thread, static shared bytes, note) of `entry` from ptxas (cached by
    content); (None, 0, why) when nvcc is missing, the target is not NVIDIA or it fails."""
    if not arch.startswith("sm_"):
        return None, 0, f"no ptxas for {arch}: registers unknown"
    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob
    from kxform.errors import BuildFailed

    try:
        builder = Builder()
        result = builder.build(
            BuildJob(
                source=source,
                filename="locality.cu",
                output="cubin",
                arch=arch,
                include_dirs=include_dirs,
                defines=defines,
                source_dir=source_dir,
            )
        )
    except BuildFailed as exc:
        return None, 0, f"registers unknown ({exc.cause})"
    found = result.entry(entry) if result.ok else None
    if found is None:
        return None, 0, "registers unknown (ptxas reported nothing for the kernel)"
    return found.registers, found.shared_bytes, f"ptxas {arch}: {found.registers} regs, {found.shared_bytes} B smem"
