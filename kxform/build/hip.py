"""HIP sources through nvcc: the header set that spells HIP's device API in CUDA.

A HIP kernel's unit compiles with nvcc when `hip/hip_runtime.h` and its siblings come
from `hip_for_nvcc/` (index built-ins, launch macro, warp intrinsics mapped to their
CUDA names). Two users: the swizzle pass's PTX coverage check (compiles only), and the
GPU runtime, which runs HIP kernels on an NVIDIA GPU. A differential check there builds
the original and the rewrite the same way, so it compares like with like; code that
depends on 64-lane wavefronts runs with 32 lanes on such a device.
"""

from __future__ import annotations

import re
from pathlib import Path

from kxform.frontend.lexical import blank_comments_and_strings

HIP_FOR_NVCC = str(Path(__file__).resolve().parent / "hip_for_nvcc")


_HIP_MARKERS = re.compile(r"#\s*include\s*[<\"]hip/|\bhip(?:ThreadIdx|BlockIdx|BlockDim|GridDim)_[xyz]\b|\b__HIPCC__\b")
_KXFORM_GUARD = re.compile(r"^[ \t]*#[ \t]*if !defined\(KXFORM_\w+_DEFINED\) && .*$", re.M)
"""The guard kxform's swizzle puts around its helper names both compilers; not a HIP marker."""


def is_hip(source: str) -> bool:
    """Whether the unit is HIP: it then runs with 64-lane warps (AMD wavefronts)."""
    return _HIP_MARKERS.search(_KXFORM_GUARD.sub("", blank_comments_and_strings(source))) is not None


def hip_include_dirs(source: str) -> tuple[str, ...]:
    """The shim's include directory when `source` is HIP, else nothing."""
    return (HIP_FOR_NVCC,) if is_hip(source) else ()
