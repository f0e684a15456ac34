"""Yardsticks measured in the same run as a benchmark: the device's copy bandwidth and
cuBLAS's time for a GEMM's shape (tools/gpu_baselines.py, in its own process), and a
version's time as a fraction of them.

A copy yardstick: the fewest bytes a kernel must move (each input buffer read once, each
output written once, inout both) over the copy bandwidth, divided by the version's time:
the fraction of the device's bandwidth it reaches. A cuBLAS yardstick: cuBLAS's time for
the kernel's (batch, M, N, K) over the version's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from kxform.bench.paths import TOOLS
from kxform.harness.model import KernelSpec

COPY_MIB = 1024
"""The copy yardstick's buffer: far larger than any L2, so it measures device memory."""


def least_bytes(spec: KernelSpec, size: Any) -> int:
    """Each input buffer read once, each output written once (inout both): the fewest
    bytes the kernel must move through device memory at `size`."""
    launch = spec.launch(size)
    return sum(a.nbytes * (2 if a.role == "inout" else 1) for a in launch.args if a.kind == "buffer")


def baselines(gemm_shapes: Iterable[tuple[int, ...]]) -> dict[str, Any] | None:
    """The copy bandwidth and cuBLAS's times for `gemm_shapes`, measured by
    tools/gpu_baselines.py in its own process (one line says what it measured); None,
    said once, when it cannot run."""
    shapes = sorted(set(gemm_shapes))
    command = [
        sys.executable,
        str(TOOLS / "gpu_baselines.py"),
        "--json",
        "--copy-mib",
        str(COPY_MIB),
        *(f"--gemm={','.join(map(str, s))}" for s in shapes),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        print(f"no yardsticks: {said[-1] if said else f'exit {done.returncode}'}", flush=True)
        return None
    data: dict[str, Any] = json.loads(done.stdout)
    copy = data.get("copy") or {}
    gemms = "; ".join(
        f"cuBLAS {'x'.join(map(str, g['shape']))} {g['ms']:.4f} ms ({g['tflops']:.1f} TFLOP/s)"
        for g in data.get("gemm", [])
    )
    print(f"yardsticks ({data.get('library')}): copy {copy.get('gbps', 0):.0f} GB/s; {gemms}", flush=True)
    return data


def yardstick(
    data: dict[str, Any] | None,
    times: Mapping[str, float | None],
    gemm_shape: tuple[int, ...] | None = None,
    nbytes: int | None = None,
) -> dict[str, Any] | None:
    """Each of `times` (name -> ms) as a fraction of its yardstick: cuBLAS's time for
    `gemm_shape` where one is given, else the copy bandwidth over `nbytes`. None where
    nothing was measured (no yardsticks, the shape not among them, no time)."""
    if data is None or not any(times.values()):
        return None
    if gemm_shape is not None:
        match = next((g for g in data.get("gemm", []) if g["shape"] == list(gemm_shape)), None)
        if match is None:
            return None
        ms = match["ms"]
        return {"kind": "cublas", "shape": list(gemm_shape), "cublas_ms": ms, **_fractions(times, lambda t: ms / t)}
    if not data.get("copy") or nbytes is None:
        return None
    gbps = data["copy"]["gbps"]
    return {
        "kind": "copy",
        "least_bytes": nbytes,
        "copy_gbps": gbps,
        **_fractions(times, lambda t: nbytes / t / 1e6 / gbps),
    }


def _fractions(times: Mapping[str, float | None], of: Any) -> dict[str, float | None]:
    return {name: (of(ms) if ms else None) for name, ms in times.items()}


def percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"
