#!/usr/bin/env python3
"""Benchmark of differential verification: how much it costs beyond the kernels' own time.

For a few corpus kernels (corpora/index.toml, each with its NAME.kxspec.toml harness spec),
the swizzle pass rewrites the kernel and `kxform.verify.verify_pair` checks the rewrite
against the original at every check size of the spec, as `kxform apply --verify` does.
One untimed run warms everything (nvcc or host-compiler cache, device probe, the GPU
worker); then `--repeat` timed runs. Per kernel and size (medians over the runs):

* wall: the size's verification time as `verify_pair` measures it (inputs, both
  launches, copies, comparisons);
* kernels: the launch times of the original and the rewritten kernel in that same
  verification (CUDA events on the GPU, the emulation time on the CPU runtime);
* overhead: wall - kernels. Target on the GPU: under `--target-ms` (50 ms).

The "all sizes" row of a kernel is one whole `verify_pair` call (extraction of both
versions included), its overhead divided by the number of sizes. On the GPU a column
also gives the median of `GpuRuntime.time` (warmup 3, repeat 20) for both versions.
Builds are excluded by construction (warm cache). The CPU runtime gets the same figures
and no target.

Usage: python tools/bench_verify.py [--runtime gpu|cpu] [--kernels a,b] [--repeat N]
Exit status: 0 target met (always on the CPU), 1 target missed, 2 verification failed,
3 runtime unavailable.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field

from kxform.engine.driver import transform_source
from kxform.errors import UsageError
from kxform.build.extract import extract_kernel
from kxform.harness.inputs import make_inputs
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.engine.pass_api import Outcome, RunOptions
from kxform.engine.registry import default_registry
from kxform.runtime.base import LaunchRequest, LaunchResult, Runtime
from kxform.frontend.source import SourceText, validate_bytes
from kxform.verify.differential import VerifyReport, launch_request, pick_runtime, verify_pair
from kxform.bench.paths import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


CORPORA = ROOT / "corpora"
DEFAULT_KERNELS = ("sgemm_tiled", "fused_bias_gelu", "layernorm", "softmax", "transpose", "stencil5")
VERSIONS = ("original", "rewritten")


class RecordingRuntime(Runtime):
    """Passes every launch to `inner` and keeps its reported kernel time by label."""

    def __init__(self, inner: Runtime) -> None:
        self.inner = inner
        self.name = inner.name
        self.launch_ms: dict[str, float] = {}

    def available(self) -> tuple[bool, str]:
        return self.inner.available()

    def run(self, request: LaunchRequest) -> LaunchResult:
        result = self.inner.run(request)
        self.launch_ms[request.label] = result.elapsed_ms or 0.0
        return result


@dataclass(frozen=True)
class Case:
    """One corpus kernel, its spec and its swizzled rewrite."""

    name: str
    spec: KernelSpec
    original: SourceText
    rewritten: SourceText


@dataclass
class Row:
    """Figures of one kernel at one size (or over all sizes), one entry per timed run."""

    kernel: str
    size: str
    sizes: int = 1
    wall_ms: list[float] = field(default_factory=list)
    kernel_ms: list[float] = field(default_factory=list)
    timed_ms: tuple[float, float] | None = None

    @property
    def overhead_ms(self) -> float:
        return statistics.median(w - k for w, k in zip(self.wall_ms, self.kernel_ms, strict=True)) / self.sizes


def load_case(entry: dict[str, str]) -> Case:
    """The entry's kernel rewritten by the swizzle pass (the first hardware profile it applies for)."""
    path = CORPORA / entry["path"]
    original = validate_bytes(str(path), path.read_bytes())
    spec = load_spec(CORPORA / entry["spec"]).kernels[entry["kernel"]]
    function = entry["kernel"].split("<")[0]
    passes = default_registry().pipeline("swizzle")
    for hw in ("h100", "mi300x"):
        result = transform_source(original, passes, load_profile(hw), RunOptions(kernels=(function,)))
        if any(r.kernel == function and r.outcome is Outcome.APPLIED for r in result.results):
            return Case(entry["name"], spec, original, validate_bytes(original.path, result.new_data))
    raise SystemExit(f"bench_verify: the swizzle pass does not apply to {entry['name']}")


def timed_medians(runtime: Runtime, case: Case, size: str) -> tuple[float, float]:
    """Median `runtime.time` milliseconds of the original and the rewritten kernel at `size`."""
    resolved = case.spec.launch(case.spec.size(size))
    inputs = make_inputs(case.spec, resolved, None)
    medians = []
    for source, version in zip((case.original, case.rewritten), VERSIONS, strict=True):
        request = launch_request(
            extract_kernel(source, case.spec.name), resolved, inputs, f"{case.spec.name}[{size}] {version}", 120.0
        )
        medians.append(statistics.median(runtime.time(request, warmup=3, repeat=20).samples_ms))
    return medians[0], medians[1]


def measure(runtime: Runtime, case: Case, repeat: int) -> tuple[list[Row], VerifyReport]:
    recorder = RecordingRuntime(runtime)
    report = verify_pair(case.original, case.rewritten, case.spec, recorder)  # warm-up, untimed
    if not report.ok:
        return [], report
    rows = {v.size: Row(case.name, v.size) for v in report.sizes}
    total = Row(case.name, "all sizes", sizes=len(rows))
    for _ in range(repeat):
        recorder.launch_ms.clear()
        started = time.perf_counter()
        report = verify_pair(case.original, case.rewritten, case.spec, recorder)
        wall = (time.perf_counter() - started) * 1e3
        if not report.ok:
            return [], report
        kernels_total = 0.0
        for verdict in report.sizes:
            kernels = sum(recorder.launch_ms[f"{case.spec.name}[{verdict.size}] {v}"] for v in VERSIONS)
            row = rows[verdict.size]
            row.wall_ms.append(verdict.seconds * 1e3)
            row.kernel_ms.append(kernels)
            kernels_total += kernels
        total.wall_ms.append(wall)
        total.kernel_ms.append(kernels_total)
    if runtime.times_kernels:  # the GPU; in the tests, a CPU runtime that times its runs
        for row in rows.values():
            row.timed_ms = timed_medians(runtime, case, row.size)
    return [*rows.values(), total], report


def print_table(rows: list[Row], gpu: bool) -> None:
    header = f"{'kernel':<18}{'size':<22}{'wall ms':>9}{'kernels ms':>12}{'overhead ms':>13}"
    print(header + (f"{'time() orig / rewr ms':>24}" if gpu else ""))
    for row in rows:
        size = row.size if row.sizes == 1 else f"{row.size} (/{row.sizes})"
        line = (
            f"{row.kernel:<18}{size:<22}{statistics.median(row.wall_ms):>9.2f}"
            f"{statistics.median(row.kernel_ms):>12.3f}{row.overhead_ms:>13.2f}"
        )
        if row.timed_ms is not None:
            line += f"{row.timed_ms[0]:>13.4f} / {row.timed_ms[1]:.4f}"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--kernels", default=",".join(DEFAULT_KERNELS), help="corpus entry names, comma-separated")
    parser.add_argument("--repeat", type=int, default=5, help="timed verifications per kernel (median)")
    parser.add_argument("--target-ms", type=float, default=50.0, help="overhead target per kernel and size (GPU)")
    opts = parser.parse_args()
    manifest = {e["name"]: e for e in tomllib.loads((CORPORA / "index.toml").read_text())["kernel"] if e.get("spec")}
    names = [n.strip() for n in opts.kernels.split(",") if n.strip()]
    unknown = [n for n in names if n not in manifest]
    if unknown or opts.repeat < 1:
        parser.error(
            f"unknown corpus kernels (or none with a spec): {', '.join(unknown)}"
            if unknown
            else "--repeat must be at least 1"
        )
    try:
        runtime = pick_runtime(opts.runtime)
    except UsageError as exc:
        print(f"bench_verify: {exc}", file=sys.stderr)
        return 3
    started = time.perf_counter()
    rows: list[Row] = []
    failed: list[str] = []
    try:
        print(f"bench_verify: {runtime.name} runtime ({runtime.available()[1]}), {opts.repeat} timed runs each")
        for name in names:
            case_rows, report = measure(runtime, load_case(manifest[name]), opts.repeat)
            if not report.ok:
                failed.append(report.summary() + ": " + "; ".join(v.summary() for v in report.sizes if not v.ok))
            rows.extend(case_rows)
    finally:
        close = getattr(runtime, "close", None)
        if callable(close):
            close()
    print_table(rows, gpu=runtime.name == "gpu")
    for line in failed:
        print(f"verification failed: {line}")
    worst = max((r.overhead_ms for r in rows), default=0.0)
    elapsed = time.perf_counter() - started
    if runtime.name != "gpu":
        print(
            f"\nworst overhead {worst:.1f} ms per kernel and size on the {runtime.name} runtime "
            f"(no target; the {opts.target_ms:g} ms target is for the GPU runtime); {elapsed:.0f} s"
        )
        return 2 if failed else 0
    met = worst < opts.target_ms and not failed
    verdict = "meets" if met else "MISSES"
    print(
        f"\nworst overhead {worst:.1f} ms per kernel and size: {verdict} the {opts.target_ms:g} ms target; "
        f"{elapsed:.0f} s"
    )
    return 2 if failed else (0 if met else 1)


if __name__ == "__main__":
    sys.exit(main())
