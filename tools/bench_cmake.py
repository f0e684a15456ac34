#!/usr/bin/env python3
"""Configure and build times of examples/demo with and without kxform_transform.

    python tools/bench_cmake.py [--generator Ninja] [--repeat 1]

Copies the demo to a temporary directory and times, with real CMake and nvcc:
configure (fresh build tree), a full build, a no-op build, a rebuild after a header
that one kernel includes changed, a rebuild after a kxform.toml is added beside the
sources (every source re-run), and a no-op build after it; then the same project with the
kxform_transform line removed (plain CUDA build), so the cost kxform adds shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from kxform.bench.paths import ROOT


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"bench_cmake: {' '.join(argv)} failed:\n{proc.stdout}\n{proc.stderr}")
    return time.perf_counter() - start


def measure(work: Path, generator: str, with_kxform: bool, env: dict[str, str]) -> dict[str, float]:
    source, build = work / "src", work / "build"
    shutil.copytree(ROOT / "examples" / "demo", source)
    if not with_kxform:
        lists = source / "CMakeLists.txt"
        lists.write_text(lists.read_text().replace("kxform_transform(demo)", ""))
    cmake_dir = subprocess.run(["kxform", "--cmake-dir"], capture_output=True, text=True, env=env).stdout.strip()
    figures = {
        "configure": _timed(
            ["cmake", "-S", str(source), "-B", str(build), "-G", generator, f"-Dkxform_DIR={cmake_dir}"], env
        )
    }
    figures["build"] = _timed(["cmake", "--build", str(build)], env)
    figures["no-op build"] = _timed(["cmake", "--build", str(build)], env)
    header = source / "src" / "tile.cuh"
    now = time.time()  # newer than every output; not in the future (the steps after would re-build it too)
    os.utime(header, (now, now))
    figures["rebuild after a header change"] = _timed(["cmake", "--build", str(build)], env)
    (source / "src" / "kxform.toml").write_text((source / "kxform.toml").read_text())  # governs src/ now
    figures["rebuild, kxform.toml added"] = _timed(["cmake", "--build", str(build)], env)
    figures["no-op build after it"] = _timed(["cmake", "--build", str(build)], env)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generator", default="Ninja" if shutil.which("ninja") else "Unix Makefiles")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant (the median is printed)")
    args = parser.parse_args()
    missing = [tool for tool in ("cmake", "nvcc") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"bench_cmake: {', '.join(missing)} not found")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # this environment's kxform
    results: dict[str, list[dict[str, float]]] = {"with kxform_transform": [], "plain CUDA build": []}
    for _ in range(args.repeat):
        for label, with_kxform in (("with kxform_transform", True), ("plain CUDA build", False)):
            with tempfile.TemporaryDirectory(prefix="kxform-bench-cmake-") as work:
                results[label].append(measure(Path(work), args.generator, with_kxform, env))
    version = subprocess.run(["cmake", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(
        f"examples/demo (3 CUDA sources, 2 kernels), {version}, generator {args.generator}, "
        f"{os.cpu_count()} cores, median of {args.repeat}"
    )
    steps = list(results["with kxform_transform"][0])
    print(f"{'step':<32}{'with kxform':>14}{'plain':>10}")
    for step in steps:
        values = [sorted(r[step] for r in results[label])[len(results[label]) // 2] for label in results]
        print(f"{step:<32}{values[0]:>13.2f}s{values[1]:>9.2f}s")


if __name__ == "__main__":
    main()
