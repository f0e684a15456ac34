"""What the CPU runtime's sandbox can use on this machine (include/kxcpu/host/sandbox.h
applies it inside the emulation binary; this module only asks the kernel what exists,
for documentation, tests and `kxform verify` messages)."""

from __future__ import annotations

import ctypes
import functools
import platform
from dataclasses import dataclass

_LANDLOCK_CREATE_RULESET = {"x86_64": 444, "aarch64": 444}
_PR_GET_SECCOMP = 21


@dataclass(frozen=True)
class SandboxSupport:
    """Landlock ABI version (0: none: writes are not confined to the work directory) and
    whether seccomp filters can be installed (False: programs could be started)."""

    landlock_abi: int
    seccomp: bool

    @property
    def filesystem(self) -> bool:
        return self.landlock_abi > 0

    def describe(self) -> str:
        fs = f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock (writes not confined)"
        return f"{fs}; {'seccomp' if self.seccomp else 'no seccomp (programs could be started)'}"


@functools.cache
def sandbox_support() -> SandboxSupport:
    """Probe the running kernel (Linux only; elsewhere nothing is available)."""
    if platform.system() != "Linux":
        return SandboxSupport(0, False)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return SandboxSupport(0, False)
    abi = 0
    number = _LANDLOCK_CREATE_RULESET.get(platform.machine())
    if number is not None:
        libc.syscall.restype = ctypes.c_long
        result = libc.syscall(ctypes.c_long(number), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        abi = max(0, int(result))
    seccomp = libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0) >= 0
    return SandboxSupport(abi, seccomp)
