"""Helpers for swizzle tests: run the pure core on source text."""

from __future__ import annotations

from kxform.driver import FileTransform, transform_source
from kxform.frontend.semantic import semantic_provider
from kxform.hw import load_profile
from kxform.pass_api import Outcome, RunOptions
from kxform.registry import default_registry
from kxform.source import validate_bytes


def rewrite(text: str | bytes, spec: str = "swizzle", hw: str = "h100", kernels: tuple[str, ...] = (),
            path: str = "k.cu", semantic: bool = False, **options: str) -> FileTransform:
    data = text.encode() if isinstance(text, str) else text
    passes = default_registry().pipeline(spec, options)
    provider = semantic_provider(path, None) if semantic else None
    return transform_source(validate_bytes(path, data), passes, load_profile(hw), RunOptions(kernels=kernels),
                            semantic=provider)


def outcomes(result: FileTransform) -> dict[str, Outcome]:
    return {r.kernel: r.outcome for r in result.results}


def remark_names(result: FileTransform) -> set[str]:
    return {r.name for r in result.remarks}
