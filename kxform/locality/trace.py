"""Trace acquisition: exact 32-byte sector sets of a few blocks, from the CPU runtime.

A launch at a bench size is far too large to emulate whole (an 8192^3 GEMM), so the
model runs only the blocks it asks about (`LaunchRequest.only_traced_blocks`) on the
real inputs of the harness spec at the real size: addresses, strides and data-dependent
indices are those of the real launch. Each traced block comes back as sorted NumPy
arrays of sector indices per buffer, read and written separately.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from kxform.build.extract import ExtractedKernel, extract_kernel
from kxform.errors import KxformError
from kxform.frontend.source import SourceText
from kxform.harness.inputs import make_inputs
from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.harness.request import UnitFlags
from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, SectorTrace
from kxform.runtime.cpu import CpuRuntime

Block = tuple[int, int, int]


class ModelRefused(KxformError):
    """The model cannot judge this kernel (cannot run it, traces not extrapolable, ...)."""


@dataclass(frozen=True)
class Buffer:
    """One buffer argument as the memory system sees it."""

    name: str
    nbytes: int
    role: str


@dataclass(frozen=True)
class BlockSectors:
    """The sectors one block read and wrote, per buffer in argument order (sorted int64)."""

    block: Block
    reads: tuple[np.ndarray, ...]
    writes: tuple[np.ndarray, ...]

    def streams(self) -> tuple[np.ndarray, ...]:
        """Reads of every buffer, then writes of every buffer (the model's stream order)."""
        return self.reads + self.writes


@dataclass(frozen=True)
class LaunchShape:
    """What the model needs to know about the launch besides the traces."""

    kernel: str
    size: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    buffers: tuple[Buffer, ...]

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def _sorted(sectors: frozenset[int]) -> np.ndarray:
    out = np.fromiter(sectors, dtype=np.int64, count=len(sectors))
    out.sort()
    return out


class BlockTracer:
    """Runs chosen blocks of one launch on the CPU runtime and remembers their traces.

    Only traced blocks run (their outputs are discarded); each call is one child process,
    so callers batch the blocks they need.
    """

    def __init__(self, request: LaunchRequest, runtime: CpuRuntime) -> None:
        self.request = request
        self.runtime = runtime
        self.buffers = tuple(a.name for a in request.args if isinstance(a, BufferArg))
        self._known: dict[Block, BlockSectors] = {}
        self.launches = 0
        self.emulation_ms = 0.0

    def trace(self, blocks: list[Block]) -> list[BlockSectors]:
        """The traces of `blocks` (those not seen yet run in one launch)."""
        wanted = [b for b in dict.fromkeys(blocks) if b not in self._known]
        if wanted:
            request = replace(self.request, trace_blocks=tuple(wanted), only_traced_blocks=True)
            try:
                result = self.runtime.run(request)
            except RuntimeError_ as exc:
                raise ModelRefused(f"cannot trace on the CPU runtime: {exc}") from None
            self.launches += 1
            self.emulation_ms += result.elapsed_ms or 0.0
            for trace in result.traces:
                self._known[trace.block] = self._convert(trace)
        return [self._known[b] for b in blocks]

    def _convert(self, trace: SectorTrace) -> BlockSectors:
        return BlockSectors(
            trace.block,
            tuple(_sorted(trace.reads[n]) for n in self.buffers),
            tuple(_sorted(trace.writes[n]) for n in self.buffers),
        )

    @property
    def traced(self) -> int:
        """How many distinct blocks were traced so far."""
        return len(self._known)


def launch_shape(spec: KernelSpec, size: SizeSpec, launch: ResolvedLaunch | None = None) -> LaunchShape:
    """Grid, block and buffers of `spec` at `size` (no inputs are made); `launch`: another
    launch of the same buffers (a rewrite's, such as a tile configuration's)."""
    resolved: ResolvedLaunch = launch or spec.launch(size)
    buffers = tuple(Buffer(a.name, a.nbytes, a.role) for a in resolved.args if a.kind == "buffer")
    return LaunchShape(spec.name, size.name, resolved.grid, resolved.block, resolved.shared_bytes, buffers)


def resolve_size(spec: KernelSpec, size: str | SizeSpec | None) -> SizeSpec:
    """A size name or SizeSpec; None: the default size (see `default_size`)."""
    return default_size(spec) if size is None else spec.size(size) if isinstance(size, str) else size


def extract(source: SourceText, spec: KernelSpec) -> ExtractedKernel:
    """The kernel's standalone unit, its parameters checked against the spec."""
    from kxform.verify.differential import check_signature

    extracted = extract_kernel(source, spec.name)
    check_signature(spec, extracted)
    return extracted


def trace_request(
    extracted: ExtractedKernel,
    spec: KernelSpec,
    size: SizeSpec,
    seed: int | None = None,
    launch: ResolvedLaunch | None = None,
    flags: UnitFlags | None = None,
) -> LaunchRequest:
    """The launch of the kernel at `size` (or `launch`) on the spec's real inputs, ready to
    trace; `flags`: the unit's include directories and defines (the project's build flags)."""
    from kxform.harness.request import NO_FLAGS, launch_request

    resolved = launch or spec.launch(size)
    inputs = make_inputs(spec, resolved, seed)
    return launch_request(
        extracted, resolved, inputs, f"{spec.name}[{size.name}] traced", timeout_s=600.0, flags=flags or NO_FLAGS
    )


def default_size(spec: KernelSpec) -> SizeSpec:
    """The size the model judges by default: the first bench size, else the largest check size."""
    return (spec.bench_sizes or spec.check_sizes[-1:])[0]


def source_dir(extracted: ExtractedKernel) -> str | None:
    """The directory of the file the kernel came from (its quoted includes resolve there)."""
    return os.path.dirname(os.path.abspath(extracted.path)) if extracted.path else None


def default_runtime() -> CpuRuntime:
    """The CPU runtime the model traces with; ModelRefused without a host compiler."""
    runtime = CpuRuntime()
    ok, why = runtime.available()
    if not ok:
        raise ModelRefused(f"the CPU runtime is unavailable: {why}")
    return runtime
