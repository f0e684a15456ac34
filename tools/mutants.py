#!/usr/bin/env python3
"""Mutation suite: planted wrong rewrites, verified against the original on the CPU runtime.

Two suites. `swizzle` plants wrong block-index mappings in every corpus kernel with a
spec (in the kernel, its device functions and its macros) and verifies them at the
spec's check sizes. `structural` rewrites corpus naive kernels with the structural passes
(vectorize, coarsen, rows, smem-tile, launch), plants a defect in each rewrite (a guard,
barrier, combine or index removed or off by one: `STRUCTURAL` lists them) and verifies it
under the correct rewrite's own verification policy (its launch, its comparison, its
derived sizes, its thread orders). A plant is *caught* when verification does not say
"verified" (a mismatch, or a run that cannot be trusted); one that verifies is a
*survivor*: a defect of the verifier or the spec, or a plant that is equivalent to the
original at every size checked (reported with the reason).

Swizzle plants (each only where it applies to the kernel):
  non-bijective     every read of the major axis (y, else x) becomes `(blockIdx.A / 2)`
  xy-swap           one read of blockIdx.x becomes blockIdx.y (x and y swapped in one place)
  off-by-one        every read of the major axis becomes `(blockIdx.A + 1)`
  partial-remap     a bijective reversal `(gridDim.A - 1 - blockIdx.A)` on every read of the
                    major axis but one (needs two reads of that axis)
  partial-swizzle   kxform's own swizzle (column order), with one read of y left physical
                    (2-D kernels)
  wrong-grid        kxform's own swizzle, with `gridDim.x + 1` passed to the helper
  wrong-tile        the first `blockIdx.A * T` (or `T * blockIdx.A`) becomes `blockIdx.A * ((T) / 2)`

    python tools/mutants.py [--suite swizzle|structural|all] [--kernel NAME ...] [--json FILE] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kxform.api import rewrite
from kxform.bench.paths import ROOT
from kxform.build.extract import find_kernel, split_spelling
from kxform.engine.contracts import LaunchContract, check_contract
from kxform.engine.pass_api import KernelResult, PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform.engine.remarks import RemarkSink
from kxform.engine.run_files import RunFiles
from kxform.errors import CheckFailed
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import IndexRead
from kxform.frontend.source import SourceText, read_source
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.passes.swizzle.index_usage import index_usage
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair


@dataclass
class Plant:
    kind: str
    text: bytes


@dataclass
class Outcome:
    kind: str
    status: str
    detail: str


@dataclass
class KernelRow:
    entry: str
    kernel: str
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def planted(self) -> int:
        return len(self.outcomes)

    @property
    def caught(self) -> int:
        return sum(o.status != "ok" for o in self.outcomes)


def _edit(data: bytes, replacements: list[tuple[int, int, str]]) -> bytes:
    out = data
    for start, end, text in sorted(replacements, reverse=True):
        out = out[:start] + text.encode() + out[end:]
    return out


def _reads(source: SourceText, spelling: str) -> list[IndexRead]:
    model = parse_model(source)
    kernel = find_kernel(model, split_spelling(spelling)[0])
    return list(index_usage(model, kernel).remapped_reads)


def _axis_reads(reads: list[IndexRead]) -> tuple[str, list[IndexRead]]:
    ys = [r for r in reads if r.axis == "y"]
    return ("y", ys) if ys else ("x", [r for r in reads if r.axis == "x"])


def _spelled(read: IndexRead, axis: str) -> str:
    return f"hipBlockIdx_{axis}" if read.spelling.startswith("hip") else f"blockIdx.{axis}"


def _grid(read: IndexRead, axis: str) -> str:
    return f"hipGridDim_{axis}" if read.spelling.startswith("hip") else f"gridDim.{axis}"


def plants(source: SourceText, spelling: str, hw: str) -> tuple[list[Plant], list[str]]:
    """The plants that apply to this kernel, and the ones that do not (with why)."""
    data = source.data
    reads = _reads(source, spelling)
    if not reads:
        return [], ["the kernel reads no blockIdx.x/.y"]
    axis, major = _axis_reads(reads)
    out: list[Plant] = []
    skipped: list[str] = []
    out.append(
        Plant("non-bijective", _edit(data, [(r.span.start, r.span.end, f"({_spelled(r, axis)} / 2)") for r in major]))
    )
    xs = [r for r in reads if r.axis == "x"]
    if xs:
        out.append(Plant("xy-swap", _edit(data, [(xs[0].span.start, xs[0].span.end, _spelled(xs[0], "y"))])))
    out.append(
        Plant("off-by-one", _edit(data, [(r.span.start, r.span.end, f"({_spelled(r, axis)} + 1)") for r in major]))
    )
    if len(major) >= 2:
        out.append(
            Plant(
                "partial-remap",
                _edit(
                    data,
                    [(r.span.start, r.span.end, f"({_grid(r, axis)} - 1 - {_spelled(r, axis)})") for r in major[1:]],
                ),
            )
        )
    else:
        skipped.append(f"partial-remap: one read of blockIdx.{axis} only")
    name = split_spelling(spelling)[0]
    pattern = "column" if any(r.axis == "y" for r in reads) else "xcd"
    result = rewrite(data, "swizzle", path=source.path, hw=hw, kernels=(name,), pattern=pattern)
    grid_x = _grid(reads[0], "x")
    marker = f"{grid_x}, "
    at = result.new_data.find(b"kxform_block = kxform_swizzle_")
    if result.changed and at >= 0 and result.new_data.find(marker.encode(), at) > 0:
        prologue_end = result.new_data.find(b";", at)
        head, tail = result.new_data[:at], result.new_data[at:prologue_end]
        out.append(
            Plant(
                "wrong-grid",
                head + tail.replace(marker.encode(), f"{grid_x} + 1, ".encode(), 1) + result.new_data[prologue_end:],
            )
        )
        use = result.new_data.find(b"kxform_block.y", prologue_end)
        if pattern == "column" and use > 0:  # kxform's remap, with one read of y left physical
            out.append(
                Plant(
                    "partial-swizzle",
                    result.new_data[:use]
                    + _spelled(reads[0], "y").encode()
                    + result.new_data[use + len(b"kxform_block.y") :],
                )
            )
    else:
        skipped.append(
            f"wrong-grid: kxform does not rewrite it ({'; '.join(r for k in result.results for r in k.reasons)[:120]})"
        )
    tile = _tile_plant(data, reads)
    if tile is not None:
        out.append(Plant("wrong-tile", tile))
    else:
        skipped.append("wrong-tile: no `blockIdx * tile` product")
    return out, skipped


def _tile_plant(data: bytes, reads: list[IndexRead]) -> bytes | None:
    for read in reads:
        after = re.match(rb"\s*\*\s*(\(?[A-Za-z_0-9.]+(?:\s*[-+]\s*[A-Za-z_0-9.]+)?\)?)", data[read.span.end :])
        if after:
            start, end = read.span.end + after.start(1), read.span.end + after.end(1)
            return _edit(data, [(start, end, f"(({after.group(1).decode()}) / 2)")])
        before = re.search(
            rb"(\(?[A-Za-z_0-9.]+\)?)\s*\*\s*\(?\s*$", data[max(0, read.span.start - 40) : read.span.start]
        )
        if before:
            base = max(0, read.span.start - 40)
            start, end = base + before.start(1), base + before.end(1)
            return _edit(data, [(start, end, f"(({before.group(1).decode()}) / 2)")])
    return None


def run_entry(entry: dict, runtime: CpuRuntime, timeout_s: float) -> KernelRow:
    path = ROOT / "corpora" / entry["path"]
    source = read_source(path)
    spec: KernelSpec = load_spec(ROOT / "corpora" / entry["spec"]).kernels[entry["kernel"]]
    row = KernelRow(entry["name"], entry["kernel"])
    baseline = verify_pair(source, source, spec, runtime, timeout_s=timeout_s)
    if not baseline.ok:
        row.skipped.append(f"baseline: the original does not verify against itself ({baseline.summary()})")
        return row
    found, skipped = plants(source, entry["kernel"], "mi300x")
    row.skipped += skipped
    for plant in found:
        report = verify_pair(source, SourceText(str(path), plant.text), spec, runtime, timeout_s=timeout_s)
        detail = report.reason or report.summary()
        if report.status == "mismatch" and "compile error" in detail:
            row.skipped.append(f"{plant.kind}: the plant does not compile ({detail[:100]})")
            continue
        if report.status == "ok":
            detail = _equivalence(spec, plant.kind) or "SURVIVED: verified although wrong"
        row.outcomes.append(Outcome(plant.kind, report.status, detail))
    return row


def _equivalence(spec: KernelSpec, kind: str) -> str:
    """Why a survivor may be equivalent at the spec's sizes (a 1-wide grid axis)."""
    grids = [spec.launch(s).grid for s in spec.check_sizes]
    if all(g[1] == 1 for g in grids) and kind in ("non-bijective", "off-by-one", "partial-remap"):
        return "equivalent at the spec's sizes? grid.y is 1 at every check size"
    return ""


@dataclass(frozen=True)
class Defect:
    """A structural plant: `pattern` (a regular expression over the rewritten text) replaced
    by `by` at its `which`-th match (0: the first; -1: the last; None: every match)."""

    kind: str
    pattern: str
    by: str
    which: int | None = 0


@dataclass(frozen=True)
class Structural:
    """A corpus naive kernel, a structural pass configuration, and the defects planted in its rewrite."""

    name: str
    family: str
    spec: str
    defects: tuple[Defect, ...]
    folder: str = "corpora/naive"
    """Where the family's folder is (naive.cu and its naive.kxspec.toml), under the repository."""

    @property
    def kernel(self) -> str:
        return f"{self.family}_naive"


STRUCTURAL = (
    Structural(
        "vectorize:gelu_f32",
        "gelu_f32",
        "vectorize{width=4}",
        (
            Defect("alignment-check-removed", r"\(unsigned long long\)\((\w+)\) % 16 == 0", "true", None),
            Defect("tail-past-the-end", r"kx_first \+ (\w+) <= \(N\)", r"kx_first + \1 <= (N) + 1"),
            Defect(
                "vector-index-off",
                r"reinterpret_cast<const uint4\*>\(inp\)\[kx_v\]",
                "reinterpret_cast<const uint4*>(inp)[kx_v + 1]",
            ),
            Defect("scalar-element-off", r"int i = kx_first \+ kx_j;", "int i = kx_first + kx_j + 1;"),
            Defect(
                "grid-counts-too-few",
                r"/ GELU_F32_NAIVE_VEC\) \+ block_size",
                "/ (2 * GELU_F32_NAIVE_VEC)) + block_size",
            ),
        ),
    ),
    Structural(
        "vectorize:to_half",
        "to_half",
        "vectorize{width=4}",
        (
            Defect("overlap-check-removed", r"\(\(\(unsigned long long\)\(in \+ \(n\)\).*\)\)\)\) \{", "true) {"),
            Defect("alignment-check-removed", r"\(unsigned long long\)\((\w+)\) % (16|8) == 0", "true", None),
        ),
        "tests/fixtures/mutants",
    ),
    Structural(
        "coarsen:gelu_f32",
        "gelu_f32",
        "coarsen{factor=4}",
        (
            Defect("factor-loop-short", r"kx_f < GELU_F32_NAIVE_COARSEN;", "kx_f < GELU_F32_NAIVE_COARSEN - 1;"),
            Defect("index-not-scaled", r"\* GELU_F32_NAIVE_COARSEN \+ kx_f", "+ kx_f"),
            Defect(
                "grid-rounded-down",
                r"\+ GELU_F32_NAIVE_COARSEN - 1\) / GELU_F32_NAIVE_COARSEN",
                ") / GELU_F32_NAIVE_COARSEN",
            ),
            Defect("guard-dropped", r"if \(i < N\)", "if (i < N + 1)"),
        ),
    ),
    Structural(
        "coarsen:jacobi2d",
        "jacobi2d",
        "coarsen{factor=4,along=y,loads=once}",
        (
            Defect("register-slot-off", r"\(kx_r0\[kx_f \+ 2\] = ", "(kx_r0[kx_f + 1] = "),
            Defect("factor-loop-short", r"kx_f < JACOBI2D_NAIVE_COARSEN;", "kx_f < JACOBI2D_NAIVE_COARSEN - 1;"),
        ),
    ),
    Structural(
        "coarsen:stencil1d",
        "stencil1d",
        "coarsen{factor=4,loads=once}",
        (
            Defect("overlap-check-removed", r"if \(!kx_overlap\)", "if (true)"),
            Defect(
                "register-reused-across-stores", r"kx_h0\[kx_f \+ 1\] \? kx_r0\[kx_f \+ 1\]", "true ? kx_r0[kx_f + 1]"
            ),
        ),
        "tests/fixtures/mutants",
    ),
    Structural(
        "rows:layernorm",
        "layernorm",
        "rows{lanes=32,rows=8}",
        (
            Defect("butterfly-short", r"offset = G / 2;", "offset = G / 4;"),
            Defect("combine-dropped", r"\n\s*var = kxform_rows_warp_sum_float<LAYERNORM_NAIVE_LANES>\(var\);", ""),
            Defect("lane-stride-wrong", r"i \+= (rows_share|LAYERNORM_NAIVE_LANES)\)", r"i += \1 + 1)"),
            Defect("alias-check-removed", r"rows_alias \? 1 :", "false ? 1 :"),
            Defect(
                "rows-per-block-wrong",
                r"blockIdx\.x \* \(blockDim\.x / LAYERNORM_NAIVE_LANES\)",
                "blockIdx.x * (blockDim.x / LAYERNORM_NAIVE_LANES / 2)",
            ),
        ),
    ),
    Structural(
        "rows:softmax",
        "softmax",
        "rows{lanes=256,rows=1}",
        (
            Defect(
                "first-barrier-removed",
                r"__syncthreads\(\);  // every warp's partial is stored",
                "// every warp's partial is stored",
                None,
            ),
            Defect(
                "second-barrier-removed",
                r"__syncthreads\(\);  // every thread has read the partials",
                "// every thread has read the partials",
                None,
            ),
            Defect("warp-partial-dropped", r"w < G / 32;", "w < G / 64;", None),
            Defect("partials-combined-wrong", r"v = fmaxf\(v, partial\[w\]\);", "v = fminf(v, partial[w]);"),
            Defect(
                "partial-slot-wrong",
                r"partial\[\(threadIdx\.x % G\) / 32\] = v;",
                "partial[(threadIdx.x % G) / 64] = v;",
                None,
            ),
        ),
    ),
    Structural(
        "rows:lastscale",
        "lastscale",
        "rows{lanes=32,rows=2}",
        (Defect("group-barrier-removed", r"\n\s*kxform_rows_warp_sync<LASTSCALE_NAIVE_LANES>\(\);", ""),),
        "tests/fixtures/rows",
    ),
    Structural(
        "smem-tile:gemm",
        "gemm",
        "smem-tile{BM=64,BN=64,BK=16,TM=4,TN=4,VEC=4}",
        (
            Defect("alignment-check-removed", r"&& \(\(size_t\)&A\[\(size_t\)i \* K \+ k\] & 15\) == 0", ""),
            Defect("barrier-removed", r"__syncthreads\(\);  // every thread's slice", "// every thread's slice"),
            Defect(
                "stage-read-wrong", r"kx_s0\[kx_t % GEMM_NAIVE_STAGES\]", "kx_s0[(kx_t + 1) % GEMM_NAIVE_STAGES]", None
            ),
            Defect("k-tail-dropped", r"\(i < M && k < K\) \? A", "(i < M) ? A"),
            Defect(
                "fragment-element-wrong", r"kx_f0\[4 \* kx_g \+ 1\] = kx_v\.y;", "kx_f0[4 * kx_g + 1] = kx_v.x;", None
            ),
            Defect("grid-rounded-down", r"\(M \+ GEMM_NAIVE_BM - 1\) / GEMM_NAIVE_BM", "M / GEMM_NAIVE_BM"),
        ),
    ),
    Structural(
        "launch:gelu_f32",
        "gelu_f32",
        "launch{GELU_F32_NAIVE_BLOCK_X=64}",
        (
            Defect("grid-not-followed", r"\(N \+ block_size - 1\) / block_size", "(N + 127) / 128"),
            Defect("last-block-dropped", r"\(N \+ block_size - 1\) / block_size", "(N - 1) / block_size"),
        ),
    ),
)


def plant_defect(text: bytes, defect: Defect) -> bytes | None:
    """`text` with `defect` planted; None where its pattern does not occur."""
    pattern = re.compile(defect.pattern.encode())
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    chosen = matches if defect.which is None else [matches[defect.which]]
    out = text
    for match in reversed(chosen):
        out = out[: match.start()] + match.expand(defect.by.encode()) + out[match.end() :]
    return out


def run_structural(case: Structural, runtime: CpuRuntime, timeout_s: float) -> KernelRow:
    """Rewrite the case's kernel, verify the rewrite, then each defect planted in it under
    the rewrite's own verification policy."""
    path = ROOT / case.folder / case.family / "naive.cu"
    source = read_source(path)
    spec: KernelSpec = load_spec(path.parent / "naive.kxspec.toml").kernels[case.kernel]
    row = KernelRow(case.name, case.kernel)
    result = rewrite(source.data, case.spec, path=str(path), kernels=(case.kernel,))
    applied = next(
        (r for r in result.results if r.kernel == case.kernel and r.policy is not None and result.changed), None
    )
    if applied is None:
        row.skipped.append(
            f"{case.spec} does not rewrite it: {'; '.join(r for k in result.results for r in k.reasons)[:160]}"
        )
        return row
    policy = applied.policy
    contract = _contract(source, case.spec, applied)
    baseline = verify_pair(
        source, SourceText(str(path), result.new_data), spec, runtime, timeout_s=timeout_s, policy=policy
    )
    if not baseline.ok:
        row.skipped.append(f"baseline: the correct rewrite does not verify ({baseline.summary()}: {baseline.reason})")
        return row
    for defect in case.defects:
        planted = plant_defect(result.new_data, defect)
        if planted is None or planted == result.new_data:
            row.skipped.append(f"{defect.kind}: its pattern is not in the rewrite")
            continue
        refused = _refused_by_contract(source, contract, planted)
        if refused:
            row.outcomes.append(Outcome(defect.kind, "refused", refused))
            continue
        report = verify_pair(source, SourceText(str(path), planted), spec, runtime, timeout_s=timeout_s, policy=policy)
        detail = report.reason or report.summary()
        if report.status == "mismatch" and "compile error" in detail:
            row.skipped.append(f"{defect.kind}: the plant does not compile ({detail[:100]})")
            continue
        if report.status == "ok":
            detail = "SURVIVED: verified although wrong"
        row.outcomes.append(Outcome(defect.kind, report.status, detail))
    return row


def _contract(source: SourceText, spec: str, applied: KernelResult) -> LaunchContract | None:
    """The launch contract the pass stated for its correct rewrite (kxform.engine.contracts)."""
    (pass_,) = default_registry().pipeline(spec)
    ctx = PassContext(parse_model(source), load_profile("h100"), RunOptions(), RemarkSink())
    assert applied.proposal is not None
    return pass_.launch_contract(ctx, applied.proposal)


def _refused_by_contract(source: SourceText, contract: LaunchContract | None, planted: bytes) -> str:
    """Why the launch contract refuses the planted file as the pass's output ("" when it
    holds): a pass that wrote this launch would have been refused before verification."""
    if contract is None:
        return ""
    rewritten = parse_model(SourceText(source.path, planted))
    try:
        check_contract(parse_model(source), contract, rewritten, RunFiles())
    except CheckFailed as exc:
        return f"launch contract: {exc.cause}"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--suite", choices=("swizzle", "structural", "all"), default="all", help="which plants")
    parser.add_argument(
        "--kernel", action="append", default=[], help="entry names (manifest names, or pass:family) (default: all)"
    )
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per launch (default 30)")
    opts = parser.parse_args()
    manifest = [e for e in tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"] if e.get("spec")]
    chosen = [e for e in manifest if not opts.kernel or e["name"] in opts.kernel] if opts.suite != "structural" else []
    cases = [c for c in STRUCTURAL if not opts.kernel or c.name in opts.kernel] if opts.suite != "swizzle" else []
    runtime = CpuRuntime()
    ok, why = runtime.available()
    if not ok:
        print(f"mutants: the CPU runtime is unavailable: {why}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = []
    print(f"{'kernel':<24}{'caught/planted':>16}  survivors and notes")
    work = [(e, lambda e=e: run_entry(e, runtime, opts.timeout)) for e in chosen]
    work += [(c, lambda c=c: run_structural(c, runtime, opts.timeout)) for c in cases]
    for _, run in work:
        row = run()
        rows.append(row)
        survivors = [f"{o.kind}: {o.detail}" for o in row.outcomes if o.status == "ok"]
        print(f"{row.entry:<24}{f'{row.caught}/{row.planted}':>16}  {'; '.join(survivors)}", flush=True)
        for note in row.skipped:
            print(f"{'':<42}not planted: {note}")
    caught, planted = sum(r.caught for r in rows), sum(r.planted for r in rows)
    share = 100.0 * caught / planted if planted else 0.0
    print(f"{'total':<24}{f'{caught}/{planted}':>16}  ({share:.1f}% caught, {time.perf_counter() - started:.0f} s)")
    if opts.json:
        Path(opts.json).write_text(
            json.dumps([{**asdict(r), "caught": r.caught, "planted": r.planted} for r in rows], indent=1)
        )
    return 0 if caught == planted else 1


if __name__ == "__main__":
    sys.exit(main())
