#!/usr/bin/env python3
"""Benchmark `kxform apply --pass swizzle` throughput and the compile-check cache.

1. Static checks: the corpus's CUDA files replicated to N files (default 1,000) in a
   temporary tree, `kxform apply --pass swizzle --diff --verify static` over it through
   the installed console script, wall-clock time -> files/s (target: >= 200 files/s on a
   2-core machine).
2. Compile checks: the same run with `--verify compile` twice on a fresh cache: the first
   run compiles each distinct rewritten content once (in parallel), the second compiles
   nothing (every check answered from the content-hash cache); then once more after the
   tree is moved to another directory (the cache key holds no absolute path of the tree,
   so this run compiles nothing either).

Prints a small table; exits non-zero if the static target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from kxform.bench.paths import ROOT


def corpus_files() -> list[Path]:
    files = []
    for path in sorted((ROOT / "corpora").rglob("*.cu")):
        if "naive" in path.relative_to(ROOT / "corpora").parts:
            continue  # a corpus of its own (docs/corpus.md): its expert versions are never inputs to a pass
        data = path.read_bytes()
        if b"__global__" in data and b"kxform-bench: skip" not in data:
            files.append(path)
    return files


def replicate(files: list[Path], count: int, target: Path) -> None:
    for i in range(count):
        src = files[i % len(files)]
        sub = target / f"d{i // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, sub / f"{src.stem}_{i}.cu")


def run(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    exe = shutil.which("kxform") or str(Path(sys.executable).parent / "kxform")
    start = time.perf_counter()
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, proc


def compile_stats(log: Path) -> tuple[int, int]:
    fresh = cached = 0
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "file" and record.get("compile"):
            detail = record["compile"]["detail"]
            if "succeeded" in detail:
                cached += "(cached)" in detail
                fresh += "(cached)" not in detail
    return fresh, cached


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--compile-files", type=int, default=24, help="files in the compile-check runs")
    parser.add_argument("--target", type=float, default=200.0, help="files/s the static run must reach")
    opts = parser.parse_args()
    files = corpus_files()
    if not files:
        print("no corpus files found under corpora/", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kxform-bench-") as tmp:
        root = Path(tmp)
        env = dict(os.environ, KXFORM_CACHE_DIR=str(root / "cache"))
        replicate(files, opts.files, root / "tree")
        run(["apply", "--pass", "swizzle", "--diff", "--verify", "static", "-q", str(files[0])], root, env)  # warm
        seconds, proc = run(["apply", "--pass", "swizzle", "--diff", "--verify", "static", "-q", "tree"], root, env)
        if proc.returncode not in (0, 1, 2):
            print(proc.stderr, file=sys.stderr)
            return 1
        rate = opts.files / seconds
        print(f"{'run':<44}{'files':>7}{'seconds':>10}{'files/s':>10}")
        print(f"{'apply --diff --verify static (cold process)':<44}{opts.files:>7}{seconds:>10.2f}{rate:>10.1f}")
        rows = []
        if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists():
            replicate(files, opts.compile_files, root / "ctree")
            for label in ("first (cold cache)", "second (warm cache)", "third (tree moved)"):
                if label.startswith("third"):
                    (root / "moved").mkdir()
                    shutil.move(str(root / "ctree"), str(root / "moved" / "ctree"))
                tree = "moved/ctree" if label.startswith("third") else "ctree"
                log = root / f"{label[:5]}.jsonl"
                secs, proc = run(
                    ["apply", "--pass", "swizzle", "--diff", "--verify", "compile", "-q", "--log", str(log), tree],
                    root,
                    env,
                )
                fresh, cached = compile_stats(log)
                rows.append((label, secs, fresh, cached))
            print(f"\n{'compile check run':<24}{'seconds':>9}{'nvcc compiles':>15}{'cache hits':>12}")
            for label, secs, fresh, cached in rows:
                print(f"{label:<24}{secs:>9.2f}{fresh:>15}{cached:>12}")
        else:
            print("nvcc not found: compile-check runs skipped")
        ok = rate >= opts.target
        print(
            f"\nstatic throughput {rate:.0f} files/s: {'meets' if ok else 'MISSES'} the {opts.target:.0f} files/s target"
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
