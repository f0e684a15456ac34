"""The corpus kernels the GPU tuning benchmarks tune, and what both benchmarks share:
loading a case, requiring a GPU, writing the JSON result.

Imported by tools/bench_tune_gpu.py and tools/bench_tune_kt_live.py (run as scripts,
so this folder is on sys.path).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora"

SGEMM_128_REQUIRE = (
    "BM == BN",                             # one loop stages both slices: BM * BK == BK * BN elements
    "BM % TM == 0",
    "THREADS == (BM / TM) * (BN / TN)",     # one thread per TM x TN sub-tile, every sub-tile covered
    "(BM * BK) % THREADS == 0",             # every thread loads the same number of elements
    "TM * TN <= 64",                        # accumulators in registers (the original's 8 x 8)
    "BM >= 32", "THREADS >= 64", "BK <= 32",
)
"""What sgemm_128's indexing assumes and the tile pass cannot derive (its derived
constraints are threads per block and shared memory only), plus a sensible region:
the restrictions a Kernel Tuner user would write for it."""


@dataclass(frozen=True)
class Case:
    """One kernel tuned under one pass pipeline."""

    name: str
    folder: str
    file: str
    kernel: str
    passes: tuple[str, ...]
    size: str
    """The timing size (`--size` syntax) of a full run."""
    quick_size: str
    require: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return CORPORA / self.folder / self.file


CASES = (
    Case("sgemm_tiled/tile", "sgemm_tiled", "sgemm_tiled.cu", "sgemm_tiled", ("tile",),
         "M=2048,N=2048,K=2048", "M=1024,N=1024,K=1024"),
    Case("sgemm_tiled/tile+swizzle", "sgemm_tiled", "sgemm_tiled.cu", "sgemm_tiled", ("tile", "swizzle"),
         "M=2048,N=2048,K=2048", "M=1024,N=1024,K=1024"),
    Case("jacobi5/tile", "stencil5", "stencil5.cu", "jacobi5", ("tile",), "NX=8192,NY=8192", "NX=4096,NY=4096"),
    Case("jacobi5/tile+swizzle", "stencil5", "stencil5.cu", "jacobi5", ("tile", "swizzle"),
         "NX=8192,NY=8192", "NX=4096,NY=4096"),
    Case("sgemm_128/tile", "sgemm_128", "sgemm_128.cu", "sgemm_128", ("tile",), "M=2048,N=2048,K=2048",
         "M=1024,N=1024,K=1024", SGEMM_128_REQUIRE),
)


def pick(names: list[str] | None, default: tuple[str, ...], only_tile: bool = False) -> list[Case]:
    """The cases named (all of `default` when none), refusing unknown names."""
    known = {c.name: c for c in CASES if not only_tile or c.passes == ("tile",)}
    wanted = names or list(default)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        fail(f"unknown case '{unknown[0]}' (cases: {', '.join(known)})")
    return [known[n] for n in wanted]


@dataclass(frozen=True)
class Loaded:
    """A case ready to tune: target, tuning space, valid configurations, timing size."""

    case: Case
    target: Any
    space: Any
    search: Any
    size: Any


def load(case: Case, quick: bool, hw: str) -> Loaded:
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.hw import load_profile
    from kxform.search.kernel_objective import TuneTarget, timing_size
    from kxform.search.kernel_space import kernel_space
    from kxform.search.space import SearchSpace

    data = case.path.read_bytes()
    spec_path = find_spec_for(str(case.path))
    if spec_path is None:
        fail(f"{case.path}: no harness spec")
    spec = load_spec(spec_path).kernel(case.kernel)
    space = kernel_space(data, case.kernel, case.passes, path=str(case.path), hw=hw, require=case.require)
    search = SearchSpace.build(space.space, load_profile(hw))
    size = timing_size(spec, case.quick_size if quick else case.size)
    return Loaded(case, TuneTarget(str(case.path), data, case.kernel, spec, hw), space, search, size)


def require_gpu(tool: str) -> Any:
    """The GPU runtime, or exit 2 with one line saying why there is none."""
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        fail(f"needs a CUDA GPU (this machine has none usable: {why}); run it on a GPU machine", tool)
    return runtime


def profile_for(runtime: Any, given: str | None) -> str:
    """The hardware profile for the constraints: `given`, else the one matching the device."""
    if given:
        return given
    name = runtime.device_info().name.lower()
    for key, profile in (("h200", "h200"), ("h100", "h100"), ("a100", "a100"), ("l40s", "l40s"), ("4090", "rtx4090")):
        if key in name:
            return profile
    return "h100"


def write_json(path: str | None, data: dict[str, Any]) -> None:
    if not path:
        return
    from kxform.workspace.files import write_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, indent=2, default=str) + "\n").encode())
    print(f"results written to {path}", file=sys.stderr)


def fail(message: str, tool: str | None = None) -> None:
    name = tool or os.path.basename(sys.argv[0])
    print(f"{name}: {message}", file=sys.stderr)
    raise SystemExit(2)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
