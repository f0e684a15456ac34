"""CPU runtime: runs CUDA and HIP kernels on the host CPU by emulation (no GPU needed).

See docs/cpu-runtime.md for what is emulated, the trace format and the limits.
"""

from .runtime import CpuOptions, CpuRuntime, default_cache_dir

__all__ = ["CpuOptions", "CpuRuntime", "default_cache_dir"]
