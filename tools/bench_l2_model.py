#!/usr/bin/env python3
"""Benchmark and check of the L2/DRAM locality model (docs/locality-model.md).

Default mode: rank every library pattern of the corpus SGEMMs at M = N = K = 4096 on one
hardware profile, from an empty model cache (tracing included; the CPU runtime's own
compile cache is kept, as in normal use), and print the time per kernel (tracing,
simulation) and per pattern, with each pattern's predictions. Target: under 10 s per
kernel on a 2-core machine.

--gpu-results: rank the three kernels of docs/gpu-results.md at their bench sizes on
the h200 profile with the patterns that table measured (XCD patterns with 8 XCDs, as
tools/bench_swizzle.py ran them), print predicted gain next to measured speed-up for the
21 pairs, the Spearman rank correlation, and whether every effect above 3% has the
predicted sign; then the 128x128 SGEMM at 8192^3 next to the ncu figures of issue 12.

Usage: python tools/bench_l2_model.py [--hw h200] [--n 4096] [--kernels sgemm_tiled,sgemm_128]
       python tools/bench_l2_model.py --gpu-results
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np


from kxform.frontend.source import read_source
from kxform.harness.model import SizeSpec
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.locality.predict import Ranking, candidate_configs, rank_orders
from kxform.bench.paths import ROOT

CORPUS = {
    "sgemm_tiled": ("sgemm_tiled", "sgemm_tiled"),
    "sgemm_128": ("sgemm_128", "sgemm_128"),
    "transpose": ("transpose", "transposeNoBankConflicts"),
    "stencil5": ("stencil5", "jacobi5"),
}
ISSUE_12_NCU = {  # NVIDIA H200, ncu, 128x128-tile SGEMM at 8192^3 (issue 12): L2 hit rate, DRAM read bytes
    "row": (0.58, 8.74e9),
    "grouped(along=y,group=8)": (0.80, 3.51e9),
    "column": (0.70, 8.74e9),
}


def _rank(name: str, hw: str, size: SizeSpec | str | None, configs=None) -> Ranking:  # type: ignore[no-untyped-def]
    folder, kernel = CORPUS[name]
    spec = load_spec(ROOT / "corpora" / folder / f"{folder}.kxspec.toml").kernel(kernel)
    return rank_orders(read_source(_source_path(name)), spec, load_profile(hw), size, configs)


def _source_path(name: str) -> str:
    folder, _ = CORPUS[name]
    return str(load_spec(ROOT / "corpora" / folder / f"{folder}.kxspec.toml").source)


def _print_ranking(r: Ranking) -> None:
    print(f"{r.kernel} [{r.size}] on {r.hw}: grid {r.grid}, {r.occupancy}")
    print(
        f"  trace {r.seconds['trace']:.2f} s, simulate {r.seconds['simulate']:.2f} s, "
        f"total {r.seconds['total']:.2f} s   ({'; '.join(r.notes)})"
    )
    print(f"  {'order':<38}{'sim s':>7}{'L2 hit':>8}{'DRAM read':>11}{'+-':>7}{'write':>9}{'vs row':>9}")
    for p in sorted(r.predictions, key=lambda p: p.rank):
        s = p.stats
        sim = "same" if p.same_as else f"{s.seconds:.2f}"
        print(
            f"  {p.label:<38}{sim:>7}{s.hit_rate.value:>8.1%}{s.dram_read_bytes.value / 1e9:>9.3f}GB"
            f"{s.dram_read_bytes.rel():>7.2%}{s.dram_write_bytes.value / 1e9:>7.3f}GB{p.gain:>+9.1%}"
        )
    print(f"  proposal: {r.chosen.label if r.chosen else 'none'} ({r.decision})")


def bench(args: argparse.Namespace) -> None:
    for name in args.kernels.split(","):
        folder, kernel = CORPUS[name]
        spec = load_spec(ROOT / "corpora" / folder / f"{folder}.kxspec.toml").kernel(kernel)
        values = {k: args.n for k in spec.bench_sizes[0].values}
        size = SizeSpec(f"n{args.n}", True, values)
        started = time.perf_counter()
        ranking = rank_orders(read_source(_source_path(name)), spec, load_profile(args.hw), size)
        wall = time.perf_counter() - started
        _print_ranking(ranking)
        print(f"  wall time {wall:.2f} s for {len(ranking.predictions)} orders (target: under 10 s)\n")


def _measured() -> dict[tuple[str, str], float]:
    """(kernel, pattern) -> measured speed-up, parsed from docs/gpu-results.md."""
    table: dict[tuple[str, str], float] = {}
    current = ""
    for line in (ROOT / "docs" / "gpu-results.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.match(r"^\d", cells[4]):
            continue
        current = cells[0].split()[0] if cells[0] else current
        table[(current, cells[1])] = float(cells[4])
    return table


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(v: list[float]) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in set(v):  # average ranks of ties
            same = [i for i, x in enumerate(v) if x == value]
            r[same] = np.mean(r[same])
        return r

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def gpu_results() -> None:
    measured = _measured()
    configs = candidate_configs(load_profile("mi300x"), 2)  # XCD patterns with 8 XCDs, as measured
    pred, meas, rows = [], [], []
    for name in ("sgemm_tiled", "transpose", "stencil5"):
        ranking = _rank(name, "h200", None, configs)
        _print_ranking(ranking)
        for p in ranking.predictions:
            if p.config is None:
                continue
            key = (name, p.config.pattern.name)
            if key in measured:
                pred.append(p.gain)
                meas.append(measured[key])
                rows.append((name, p.config.pattern.name, p.gain, measured[key]))
        print()
    print(f"{'kernel':<14}{'pattern':<14}{'predicted':>11}{'measured':>10}  sign (effects above 3%)")
    wrong = 0
    for name, pattern, gain, speedup in rows:
        effect = speedup - 1.0
        check = ""
        if abs(effect) > 0.03:
            ok = (gain > 0) == (effect > 0)
            wrong += not ok
            check = "ok" if ok else "WRONG"
        print(f"{name:<14}{pattern:<14}{gain:>+11.1%}{speedup:>10.3f}  {check}")
    print(
        f"pairs: {len(rows)}; Spearman rank correlation (predicted gain, measured speed-up): "
        f"{_spearman(pred, meas):.3f}; effects above 3% with the wrong sign: {wrong}\n"
    )
    ranking = _rank("sgemm_128", "h200", None)
    _print_ranking(ranking)
    print(f"  {'order':<28}{'hit (model)':>12}{'hit (ncu)':>10}{'DRAM read (model)':>19}{'(ncu)':>9}{'diff':>8}")
    for p in ranking.predictions:
        if p.label in ISSUE_12_NCU:
            hit, dram = ISSUE_12_NCU[p.label]
            got = p.stats.dram_read_bytes.value
            print(
                f"  {p.label:<28}{p.stats.hit_rate.value:>12.1%}{hit:>10.0%}{got / 1e9:>17.2f}GB{dram / 1e9:>7.2f}GB"
                f"{got / dram - 1:>+8.1%}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="h200")
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--kernels", default="sgemm_tiled,sgemm_128")
    parser.add_argument("--gpu-results", action="store_true")
    parser.add_argument("--keep-cache", action="store_true", help="reuse $KXFORM_CACHE_DIR's model cache")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kxform-l2-bench-") as tmp:
        if not args.keep_cache:
            _fresh_model_cache(tmp)
        gpu_results() if args.gpu_results else bench(args)


def _fresh_model_cache(tmp: str) -> None:
    """An empty model cache, keeping the CPU runtime's and nvcc's compile caches."""
    from kxform.cache import cache_root

    base = cache_root()
    os.environ["KXFORM_CACHE_DIR"] = tmp
    for sub in ("cpu", "nvcc"):
        if (base / sub).exists():
            os.symlink(base / sub, Path(tmp) / sub)


if __name__ == "__main__":
    main()
