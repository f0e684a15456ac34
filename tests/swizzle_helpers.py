"""Helpers for swizzle tests: the pure core on source text (kxform.api) and result views."""

from __future__ import annotations

from kxform.api import rewrite as _rewrite
from kxform.engine.driver import FileTransform
from kxform.engine.pass_api import Outcome


def rewrite(text: str | bytes, spec: str = "swizzle", hw: str = "h100", kernels: tuple[str, ...] = (),
            path: str = "k.cu", semantic: bool = False, **options: str) -> FileTransform:
    return _rewrite(text, spec, path=path, hw=hw, kernels=kernels, semantic=semantic, **options)


def outcomes(result: FileTransform) -> dict[str, Outcome]:
    return {r.kernel: r.outcome for r in result.results}


def remark_names(result: FileTransform) -> set[str]:
    return {r.name for r in result.remarks}
