#!/usr/bin/env python3
"""Mutation suite: planted wrong rewrites of every corpus kernel with a spec, through `verify`.

For each kernel, wrong versions of the block-index mapping are planted in its source
(in the kernel, its device functions and its macros) and verified against the original
on the CPU runtime at the spec's check sizes. A plant is *caught* when verification does
not say "verified" (a mismatch, or a run that cannot be trusted); one that verifies is a
*survivor*: a defect of the verifier or the spec, or a plant that is equivalent to the
original at every size the spec checks (reported with the reason).

Plants (each only where it applies to the kernel):
  non-bijective     every read of the major axis (y, else x) becomes `(blockIdx.A / 2)`
  xy-swap           one read of blockIdx.x becomes blockIdx.y (x and y swapped in one place)
  off-by-one        every read of the major axis becomes `(blockIdx.A + 1)`
  partial-remap     a bijective reversal `(gridDim.A - 1 - blockIdx.A)` on every read of the
                    major axis but one (needs two reads of that axis)
  partial-swizzle   kxform's own swizzle (column order), with one read of y left physical
                    (2-D kernels)
  wrong-grid        kxform's own swizzle, with `gridDim.x + 1` passed to the helper
  wrong-tile        the first `blockIdx.A * T` (or `T * blockIdx.A`) becomes `blockIdx.A * ((T) / 2)`

    python tools/mutants.py [--kernel NAME ...] [--json FILE] [--timeout S]
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
from kxform.build.extract import find_kernel, split_spelling
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import IndexRead
from kxform.frontend.source import SourceText, read_source
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.passes.swizzle.index_usage import index_usage
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair
from kxform.bench.paths import ROOT


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", default=[], help="manifest entry names (default: all with a spec)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per launch (default 30)")
    opts = parser.parse_args()
    manifest = [e for e in tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"] if e.get("spec")]
    chosen = [e for e in manifest if not opts.kernel or e["name"] in opts.kernel]
    runtime = CpuRuntime()
    ok, why = runtime.available()
    if not ok:
        print(f"mutants: the CPU runtime is unavailable: {why}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = []
    print(f"{'kernel':<24}{'caught/planted':>16}  survivors and notes")
    for entry in chosen:
        row = run_entry(entry, runtime, opts.timeout)
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
