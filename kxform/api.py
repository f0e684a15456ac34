"""The Python entry point to the pure core: rewrite source text with a pass pipeline.

    from kxform.api import rewrite
    result = rewrite(open("gemm.cu", "rb").read(), "swizzle", path="gemm.cu", pattern="hilbert")
    result.new_data, result.results, result.remarks

No files are written and nvcc is not run: that is what `kxform apply` layers on top.
"""

from __future__ import annotations

import functools

from kxform.engine.driver import FileTransform, transform_source
from kxform.frontend.semantic import semantic_provider
from kxform.hw import HwProfile, load_profile
from kxform.engine.pass_api import Pass, RunOptions
from kxform.engine.registry import default_registry
from kxform.frontend.source import validate_bytes


def rewrite(data: str | bytes, spec: str = "swizzle", *, path: str = "<memory>.cu", hw: str = "h100",
            kernels: tuple[str, ...] = (), semantic: bool = False, build_dir: str | None = None,
            **options: str) -> FileTransform:
    """Run the pipeline `spec` (e.g. "swizzle" or "swizzle{pattern=grouped}") over `data`.

    `options` go to every pass that takes them (like --pattern/--param); `semantic`
    consults libclang (with `build_dir`'s compile_commands.json) where the syntax
    leaves a question open, as `kxform apply` does.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    passes = _pipeline(spec, tuple(sorted(options.items())))
    provider = semantic_provider(path, build_dir) if semantic else None
    profile = _shipped_profile(hw) if not hw.endswith(".toml") and "/" not in hw and "\\" not in hw else \
        load_profile(hw)
    return transform_source(validate_bytes(path, raw), passes, profile, RunOptions(kernels=kernels),
                            semantic=provider)


@functools.lru_cache(maxsize=32)
def _pipeline(spec: str, options: tuple[tuple[str, str], ...]) -> tuple[Pass, ...]:
    """Passes and shipped profiles are frozen values: built once per process, not per call."""
    return tuple(default_registry().pipeline(spec, dict(options)))


@functools.lru_cache(maxsize=16)
def _shipped_profile(name: str) -> HwProfile:
    return load_profile(name)
