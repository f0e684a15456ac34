#!/usr/bin/env python3
"""Measure every swizzle pattern on corpus kernels: verified first, then timed.

For each kernel (default: the 2-D GEMM, transpose and stencil of the corpus) and each
pattern, the rewrite is verified bit-exact against the original at the spec's check
sizes, then both are timed at the bench size (CUDA events, warm-up, median of N runs,
spread = half the interquartile range). Prints one table; a pattern "wins" only when it
is faster beyond both spreads, the rule `kxform apply --measure` applies.

    python tools/bench_swizzle.py --runtime gpu [--kernel sgemm_tiled ...] [--repeat 50]
"""

from __future__ import annotations

import argparse
import sys

from kxform.api import rewrite
from kxform.harness.spec import load_spec
from kxform.passes.swizzle.patterns import PATTERNS
from kxform.frontend.source import read_source, validate_bytes
from kxform.verify.differential import pick_runtime, verify_pair
from kxform.verify.measure import measure_pair
from kxform.bench.paths import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


DEFAULT_KERNELS = ("sgemm_tiled", "transpose", "stencil5")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="gpu", choices=("gpu",), help="timing needs CUDA events")
    parser.add_argument("--kernel", action="append", default=[], help="manifest entry names")
    parser.add_argument("--repeat", type=int, default=50)
    opts = parser.parse_args()
    runtime = pick_runtime(opts.runtime)
    manifest = {e["name"]: e for e in tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"]}
    print(f"{'kernel':<16}{'pattern':<14}{'original ms':>14}{'rewritten ms':>14}{'speedup':>9}  verdict")
    for name in opts.kernel or DEFAULT_KERNELS:
        entry = manifest[name]
        path = ROOT / "corpora" / entry["path"]
        source = read_source(path)
        spec = load_spec(ROOT / "corpora" / entry["spec"]).kernels[entry["kernel"]]
        dims = 1 if entry["grid_dims"] == 1 else 2
        for pattern in (p for p in PATTERNS.values() if p.name != "row" and dims in p.dims):
            kernel = entry["kernel"].split("<")[0]
            result = rewrite(source.data, path=str(path), kernels=(kernel,), hw="mi300x", pattern=pattern.name)
            new = validate_bytes(str(path), result.new_data)
            report = verify_pair(source, new, spec, runtime)
            if not report.ok:
                print(f"{name:<16}{pattern.name:<14}{'':>14}{'':>14}{'':>9}  NOT VERIFIED: {report.summary()}")
                continue
            before, after, _ = measure_pair(source, new, spec, runtime, repeat=opts.repeat)
            wins = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
            slower = after.median_ms - after.spread_ms > before.median_ms + before.spread_ms
            verdict = "faster" if wins else "slower" if slower else "no difference"
            print(
                f"{name:<16}{pattern.name:<14}{before.median_ms:>14.4f}{after.median_ms:>14.4f}"
                f"{before.median_ms / after.median_ms:>9.3f}  {verdict}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
