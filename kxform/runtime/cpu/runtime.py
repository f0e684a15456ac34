"""`CpuRuntime`: runs a CUDA or HIP kernel on the host CPU, without a GPU.

The request's translation unit is compiled as C++ against an emulation layer
(include/): every GPU thread of a block is a fiber, blocks are spread over worker
threads, and barriers and warp collectives are real rendezvous. The runtime refuses
what it cannot emulate faithfully (inline assembly, integer tensor-core fragments, textures,
grid-wide sync, ...) with `Unsupported` before compiling, and reports barrier
divergence and deadlocks as `LaunchTimeout` instead of hanging.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base import (
    BufferArg,
    LaunchRequest,
    LaunchResult,
    Runtime,
    RuntimeError_,
    ScalarArg,
)
from .build import Builder, KernelUnit, Toolchain
from .launch import ChildSettings, run_binary
from kxform.build.hip import is_hip

from .source import drop_static_on_shared, rewrite_dynamic_shared

MAX_BLOCK_THREADS = 1024
"""Threads per block allowed by CUDA and HIP."""


def default_cache_dir() -> Path:
    """`<cache root>/cpu` (kxform.cache.cache_root: `$KXFORM_CACHE_DIR`, XDG, `~/.cache/kxform`)."""
    from kxform.cache import cache_root

    return cache_root() / "cpu"


@dataclass(frozen=True)
class CpuOptions:
    """Settings of a CPU runtime.

    `workers`: threads that run blocks in parallel (default: `$KXFORM_CPU_WORKERS`, else
    the CPU count). `cxx`: host compiler command (default: `$CXX`, then g++, c++,
    clang++). `cache_dir`: where binaries are cached. `stack_kib`: stack of each
    emulated GPU thread (fibers; raise it for kernels with large local arrays).
    """

    workers: int | None = None
    cxx: str | None = None
    cache_dir: Path | None = None
    stack_kib: int = 256


class CpuRuntime(Runtime):
    """Runs kernels on the CPU by compiling them against the kxform emulation layer."""

    name = "cpu"
    watches_reads = True
    orders_threads = True
    """`LaunchRequest.schedule` is honoured (kxform.verify.races runs rewrites in adversarial orders)."""

    def __init__(self, options: CpuOptions | None = None) -> None:
        self.options = options or CpuOptions()
        self._toolchain: Toolchain | None = None
        self._builder: Builder | None = None

    def available(self) -> tuple[bool, str]:
        """Whether a host C++ compiler exists (nothing else is needed)."""
        toolchain = self._find_toolchain()
        if toolchain is None:
            return False, "no host C++ compiler found (install g++ or set CXX)"
        return True, f"host compiler: {toolchain.version}"

    def run(self, request: LaunchRequest) -> LaunchResult:
        """Compiles (or reuses) the emulation binary of `request` and launches it once."""
        name = request.label or request.kernel
        _validate(request, name)
        try:  # messages name the user's file (the unit keeps its line numbers) when it is known
            exe = self.builder().binary(self.unit_for(request), request.filename or name)
        except RuntimeError_ as exc:
            if request.filename and request.label:
                raise type(exc)(f"{request.label}: {exc}") from exc
            raise
        return run_binary(exe, request, self.settings(), name)

    def unit_for(self, request: LaunchRequest) -> KernelUnit:
        """The compile unit a request maps to (its cache key is the binary's identity)."""
        return KernelUnit(
            source=rewrite_dynamic_shared(drop_static_on_shared(request.source)),
            kernel=request.kernel,
            defines=request.defines,
            include_dirs=request.include_dirs,
            hip=is_hip(request.source),
            traced=bool(request.trace_blocks),
            watched=request.watch,
            clang="clang" in self.builder().toolchain.version.lower(),
            device_source=request.source,
        )

    def builder(self) -> Builder:
        """The compiler and cache this runtime uses (raises if there is no compiler)."""
        if self._builder is None:
            toolchain = self._find_toolchain()
            if toolchain is None:
                raise RuntimeError_("the CPU runtime needs a host C++ compiler (install g++ or set CXX)")
            self._builder = Builder(toolchain, self.options.cache_dir or default_cache_dir())
        return self._builder

    def _find_toolchain(self) -> Toolchain | None:
        if self._toolchain is None:
            self._toolchain = Toolchain.find(self.options.cxx)
        return self._toolchain

    def settings(self) -> ChildSettings:
        """Worker threads and fiber stack size the emulation runs with."""
        workers = self.options.workers
        if workers is None:
            env = os.environ.get("KXFORM_CPU_WORKERS", "")
            workers = int(env) if env.isdigit() else os.cpu_count() or 1
        return ChildSettings(workers=max(1, workers), stack_bytes=max(16, self.options.stack_kib) * 1024)


def _validate(request: LaunchRequest, name: str) -> None:
    """Rejects malformed requests with a message that names the offending part."""
    if any(d < 1 for d in request.grid) or any(d < 1 for d in request.block):
        raise RuntimeError_(f"{name}: grid {request.grid} and block {request.block} must be positive")
    threads = request.block[0] * request.block[1] * request.block[2]
    if threads > MAX_BLOCK_THREADS:
        raise RuntimeError_(f"{name}: block {request.block} has {threads} threads, more than {MAX_BLOCK_THREADS}")
    if request.shared_bytes < 0:
        raise RuntimeError_(f"{name}: shared_bytes must not be negative")
    if request.params and len(request.params) != len(request.args):
        raise RuntimeError_(
            f"{name}: the kernel declares {len(request.params)} parameter(s) "
            f"but {len(request.args)} argument(s) were given"
        )
    for i, arg in enumerate(request.args):
        if isinstance(arg, ScalarArg) and not isinstance(arg.value, np.generic):
            raise RuntimeError_(f"{name}: scalar '{arg.name}' must be a NumPy scalar (its dtype is the C type)")
        if request.params and ("*" in request.params[i].ctype) != isinstance(arg, BufferArg):
            kind = "buffer" if isinstance(arg, BufferArg) else "scalar"
            raise RuntimeError_(
                f"{name}: argument '{arg.name}' is a {kind} but parameter "
                f"'{request.params[i].ctype} {request.params[i].name}' is not"
            )
    if request.only_traced_blocks and not request.trace_blocks:
        raise RuntimeError_(f"{name}: only_traced_blocks needs trace_blocks (there is nothing else to run)")
    if request.only_traced_blocks and request.watch:
        raise RuntimeError_(
            f"{name}: a watched launch runs the whole grid (only_traced_blocks leaves `out` buffers unpoisoned)"
        )
    for block in request.trace_blocks:
        if any(not 0 <= b < g for b, g in zip(block, request.grid, strict=True)):
            raise RuntimeError_(f"{name}: traced block {block} is outside the grid {request.grid}")
