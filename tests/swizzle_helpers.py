"""Helpers for swizzle tests: the pure core on source text (kxform.api) and result views."""

from __future__ import annotations

import os

import pytest

from kxform.api import rewrite as _rewrite
from kxform.engine.driver import FileTransform
from kxform.engine.pass_api import Outcome


def rewrite(
    text: str | bytes,
    spec: str = "swizzle",
    hw: str = "h100",
    kernels: tuple[str, ...] = (),
    path: str = "k.cu",
    semantic: bool = False,
    **options: str | None,
) -> FileTransform:
    """`spec` on `text`. A bare `swizzle` on a text that is no file is given
    `pattern=grouped`: those tests are about the rewrite, and without a file the default
    has no evidence, so it proposes nothing (tests/test_default_evidence.py);
    `pattern=None` asks for the default."""
    if spec == "swizzle" and not os.path.isfile(path):
        options.setdefault("pattern", "grouped")
    given = {k: v for k, v in options.items() if v is not None}
    return _rewrite(text, spec, path=path, hw=hw, kernels=kernels, semantic=semantic, **given)


def outcomes(result: FileTransform) -> dict[str, Outcome]:
    return {r.kernel: r.outcome for r in result.results}


def remark_names(result: FileTransform) -> set[str]:
    return {r.name for r in result.remarks}


def _cpu_available() -> bool:
    from kxform.runtime.cpu import CpuRuntime

    return CpuRuntime().available()[0]


needs_cpu = pytest.mark.skipif(
    not _cpu_available(), reason="the model traces on the CPU runtime, which needs a host C++ compiler"
)
"""For tests of the locality model, which traces kernels on the CPU runtime."""
