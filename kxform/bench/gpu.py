"""What the GPU benchmarks share: the 2-D corpus kernels, their swizzle variants, the
device check and time budgets (their output: kxform.bench.output).

Used by tools/bench_swizzle_select.py, tools/bench_l2_ncu.py and tools/bench_integrity.py;
importable on a machine without a GPU, so every part but the timing runs (and is tested)
there. Nothing here talks to the device except `gpu_runtime`, through the GPU runtime's
own probe.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import numpy as np

from kxform.errors import UsageError
from kxform.frontend.source import SourceText, read_source, validate_bytes
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.hw import HwProfile, load_profile, match_device
from kxform.passes.swizzle.patterns import PATTERNS, RemapConfig
from kxform.bench.output import EXIT_USAGE
from kxform.bench.paths import CORPORA

FIRST_KERNELS = ("sgemm_tiled", "transpose", "stencil5", "sgemm_128")
"""Run first (the kernels of docs/gpu-results.md and issue 12): they matter most when a
time budget stops a run early."""


@dataclass(frozen=True)
class CorpusKernel:
    """One manifest entry of corpora/index.toml with a 2-D grid, ready to run."""

    name: str
    """The manifest entry (`fdtd2d_ey`)."""
    function: str
    """The kernel's function name as the swizzle pass sees it (`matmul_tiled`)."""
    source: SourceText
    spec: KernelSpec


def corpus_2d(names: Sequence[str] = ()) -> list[CorpusKernel]:
    """The corpus kernels with a 2-D grid that the swizzle pass applies to and nvcc builds,
    those of FIRST_KERNELS first; `names` selects entries (UsageError naming the known ones)."""
    manifest = tomllib.loads((CORPORA / "index.toml").read_text(encoding="utf-8"))["kernel"]
    eligible = [
        e
        for e in manifest
        if e.get("grid_dims") == 2 and e.get("spec") and e.get("nvcc") and e.get("swizzle") == "applies"
    ]
    known = [e["name"] for e in eligible]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown kernel {unknown[0]!r} (2-D corpus kernels: {', '.join(known)})")
    chosen = [e for e in eligible if not names or e["name"] in names]
    chosen.sort(key=lambda e: FIRST_KERNELS.index(e["name"]) if e["name"] in FIRST_KERNELS else len(FIRST_KERNELS))
    out = []
    for entry in chosen:
        spec = load_spec(CORPORA / entry["spec"]).kernel(entry["kernel"])
        out.append(CorpusKernel(entry["name"], spec.base_name, read_source(CORPORA / entry["path"]), spec))
    return out


def split_names(text: str | None) -> tuple[str, ...]:
    """`a,b` -> ("a", "b"); None or "" -> ()."""
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


# ------------------------------------------------------------------------- patterns


def sweep_configs(hw: HwProfile, patterns: Sequence[str] = ()) -> list[RemapConfig]:
    """Every library pattern for a 2-D grid with its defaults: the configurations the swizzle
    pass offers on `hw` (its XCD count), plus the XCD patterns over 8 XCDs as
    tools/bench_swizzle.py measured them. `patterns` keeps only those names."""
    unknown = [p for p in patterns if p not in PATTERNS or p == "row"]
    if unknown:
        names = ", ".join(p for p in PATTERNS if p != "row")
        raise UsageError(f"unknown pattern {unknown[0]!r} (patterns: {names})")
    out: dict[str, RemapConfig] = {}
    for pattern in PATTERNS.values():
        if pattern.name == "row" or 2 not in pattern.dims or (patterns and pattern.name not in patterns):
            continue
        takes = {p.name for p in pattern.params}
        for xcds in (hw.xcds, 8) if "xcds" in takes else (None,):
            config = pattern.resolve({"xcds": xcds} if xcds is not None else {})
            out.setdefault(config.label(), config)
    return list(out.values())


def order_key(config: RemapConfig | None, grid: tuple[int, int, int]) -> str:
    """A digest of the block order `config` gives on `grid` (None: row-major), so two
    configurations that dispatch identically (xcd over one XCD and row-major) share it."""
    from kxform.locality.dispatch import blocks_for

    total = grid[0] * grid[1] * grid[2]
    mapping = blocks_for(config, grid, np.arange(total, dtype=np.int64))
    return hashlib.sha256(np.ascontiguousarray(mapping).tobytes()).hexdigest()[:16]


def variant(kernel: CorpusKernel, config: RemapConfig, hw: HwProfile) -> SourceText:
    """The kernel's file with the swizzle pass applied at `config` (checked as in `apply`:
    bijection, coverage, re-parse, idempotence). UsageError when the pass refuses it."""
    from kxform.api import rewrite
    from kxform.engine.pass_api import Outcome

    result = rewrite(
        kernel.source.data, path=kernel.source.path, kernels=(kernel.function,), hw=hw.name, **config.options()
    )
    applied = [r for r in result.results if r.outcome is Outcome.APPLIED]
    if not applied:
        why = "; ".join(r for res in result.results for r in res.reasons) or "no result"
        raise UsageError(f"{kernel.name}: swizzle {config.label()} not applied: {why}")
    return validate_bytes(kernel.source.path, result.new_data, rewritten=True)


# ----------------------------------------------------------------------------- device


def gpu_runtime(tool: str) -> Any:
    """The GPU runtime when pycuda and a CUDA device are there; otherwise SystemExit(2)
    after one line on stderr saying why."""
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        print(
            f"{tool}: no GPU: {why} (run on a CUDA machine, after tools/gpu-check.sh's setup, or use --dry-run)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USAGE)
    return runtime


def hardware(runtime: Any, name: str | None) -> HwProfile:
    """`--hw NAME` when given, else the profile matching the runtime's device."""
    if name:
        return load_profile(name)
    info = runtime.device_info()
    return match_device(info.name, info.sm_count, info.l2_bytes)


def device_line(runtime: Any) -> str:
    """`NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 50 MiB L2)`, or `none (dry run)`."""
    if runtime is None or getattr(runtime, "name", "") != "gpu":
        return "none (dry run)"
    info = runtime.device_info()
    return f"{info.name} ({info.arch}, {info.sm_count} SMs, {info.l2_bytes >> 20} MiB L2)"


# ------------------------------------------------------------------- budget


class Budget:
    """Wall-clock seconds a run may take before it stops starting new kernels."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def exhausted(self) -> bool:
        return self.seconds is not None and self.elapsed() >= self.seconds
