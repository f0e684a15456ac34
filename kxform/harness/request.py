"""A runtime request from harness inputs: the extracted unit, its resolved launch and the
flags of the project it was built with.

Below the differential check (kxform.verify.differential re-exports these names) so that
the harness's own probe, the tracer and the tuner build requests the same way without
importing the verifier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kxform.build.extract import ExtractedKernel
from kxform.harness.dtypes import numpy_dtype
from kxform.harness.launch import ResolvedLaunch
from kxform.runtime.base import BufferArg, LaunchRequest, ScalarArg

__all__ = ["NO_FLAGS", "UnitFlags", "launch_request", "unit_flags"]


@dataclass(frozen=True)
class UnitFlags:
    """Include directories and defines for building extracted units (from -p BUILD_DIR)."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()

    def for_unit(self, path: str | None) -> tuple[str, ...]:
        """The include directories of a unit extracted from `path`: the file's own directory
        first (the unit is built away from the user's tree, so quoted includes resolve as
        they did in place), then these."""
        own = (os.path.dirname(os.path.abspath(path)),) if path else ()
        return (*own, *self.include_dirs)

    def compiler_args(self) -> tuple[str, ...]:
        """`-IDIR` and `-DNAME[=V]` of these flags, for a front end that parses the file in
        place (libclang evaluating the macros a launch reads)."""
        return (*(f"-I{d}" for d in self.include_dirs), *(f"-D{d}" for d in self.defines))

    @classmethod
    def from_build_dir(cls, build_dir: str | None, path: str) -> UnitFlags:
        from kxform.build.toolchain import Toolchain

        flags = Toolchain.create(build_dir).project_flags(path)
        return cls(tuple(flags.include_dirs), tuple(flags.defines))


NO_FLAGS = UnitFlags()


def unit_flags(toolchain: object | None, path: str) -> UnitFlags | None:
    """The project's flags for a unit extracted from `path` (a run's `Toolchain`, whose
    build directory holds them), or None where the run has none or lacks the file: the
    model, the draft and the trace then build the unit as the file stands alone."""
    from kxform.errors import KxformError

    build_dir = getattr(toolchain, "build_dir", None)
    if not build_dir:
        return None
    try:
        return UnitFlags.from_build_dir(build_dir, path)
    except KxformError:
        return None


def launch_request(
    extracted: ExtractedKernel,
    resolved: ResolvedLaunch,
    inputs: dict,
    label: str,
    timeout_s: float,
    flags: UnitFlags = NO_FLAGS,
) -> LaunchRequest:
    """Turn harness inputs into a runtime request for the extracted kernel's entry. The
    unit is built away from the user's tree, so the file's own directory is an include
    directory (quoted includes resolve as they did in place). A rewritten kernel's scratch
    buffers (no input of the spec) start zeroed."""
    args: list[BufferArg | ScalarArg] = []
    for arg in resolved.args:
        value = np.zeros(arg.shape, numpy_dtype(arg.dtype)) if arg.scratch else inputs[arg.name]
        if arg.kind == "scalar":
            args.append(ScalarArg(arg.name, value))
        else:
            args.append(BufferArg(arg.name, np.ascontiguousarray(value), arg.role))
    return LaunchRequest(
        source=extracted.source,
        kernel=extracted.entry,
        params=extracted.params,
        args=tuple(args),
        grid=resolved.grid,
        block=resolved.block,
        shared_bytes=resolved.shared_bytes,
        timeout_s=timeout_s,
        label=label,
        filename=extracted.path,
        defines=flags.defines,
        include_dirs=flags.for_unit(extracted.path),
    )
