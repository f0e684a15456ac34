"""The CPU runtime runs only code nvcc accepts as device code.

The emulation compiles kernel code as host C++, where nothing stops a kernel from
calling `system()` or writing files: a host compiler accepts it, nvcc does not ("calling
a __host__ function from a __global__ function is not allowed"). So before a binary
is first run (and cached), the unit is compiled for the device with nvcc (`-ptx`,
through kxform.build, cached by content): a unit nvcc rejects is `Unsupported` and
never runs. Where nvcc is not installed, and for HIP units (nvcc cannot read them),
the check is skipped and only the sandbox (include/kxcpu/host/sandbox.h) stands
between the code and the machine; docs/cpu-runtime.md says so.
"""

from __future__ import annotations

import functools
import tempfile
import re
from dataclasses import replace
from pathlib import Path

from ..base import Unsupported

_ARCH_DEFINE = re.compile(r"^(?:-D)?__CUDA_ARCH__=(\d+)$")


@functools.cache
def _builder():  # type: ignore[no-untyped-def]
    from kxform.build import Builder
    from kxform.build.toolchain import Toolchain

    if Toolchain().nvcc is None:
        return None
    try:
        return Builder()
    except Exception:  # nvcc present but unusable: same as absent
        return None


def device_check_tag() -> str:
    """What the check ran with (part of the CPU binary cache key)."""
    builder = _builder()
    return "nvcc-device-check " + (builder.version if builder is not None else "unavailable")


def check_device_code(unit: object, where: str) -> None:
    """Raise `Unsupported` when nvcc rejects `unit` (a KernelUnit) as device code."""
    from kxform.build import BuildJob, first_error

    from .build import LIBRARY_STUB_DIR, MAX_ABSENT_HEADERS, KernelUnit
    from .source import absent_header, missing_gpu_header

    assert isinstance(unit, KernelUnit)
    builder = _builder()
    if builder is None or unit.hip:
        return
    arch, defines = "sm_80", []
    for define in unit.defines:
        match = _ARCH_DEFINE.match(define)
        if match:
            arch = f"sm_{int(match.group(1)) // 10}"
        elif not define.removeprefix("-D").startswith(("KXFORM_CPU_", "KXCPU_")):
            defines.append(define.removeprefix("-D"))
    job = BuildJob(
        source=unit.device_source or unit.source,
        filename=where,
        output="ptx",
        arch=arch,
        include_dirs=tuple(unit.include_dirs),
        defines=tuple(defines),
        extra_flags=("-Xcompiler", f"-idirafter,{LIBRARY_STUB_DIR}"),
    )
    result = builder.build(job)
    with tempfile.TemporaryDirectory(prefix="kxcpu-absent-") as folder:
        absent = 0  # library headers this machine lacks: compiled without them, as the host build is
        while not result.ok and absent < MAX_ABSENT_HEADERS:
            missing = missing_gpu_header(result.log)
            if missing is None:
                break
            absent_header(Path(folder), missing)
            absent += 1
            flags = ("-Xcompiler", f"-idirafter,{LIBRARY_STUB_DIR}", "-Xcompiler", f"-idirafter,{folder}")
            result = builder.build(replace(job, extra_flags=flags))
    if not result.ok:
        error = first_error(result.log)
        raise Unsupported(
            f"nvcc does not accept the kernel as device code, so the CPU runtime does not run "
            f"it: {error or 'nvcc failed'}"
        )
