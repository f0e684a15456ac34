#!/usr/bin/env python3
"""Yardsticks for tuned kernels on this GPU: cuBLAS GEMM times and the copy bandwidth.

    python tools/gpu_baselines.py [--gemm B,M,N,K ...] [--copy-mib N] [--repeat N] [--json]

Each `--gemm` shape is timed as cuBLAS's single-precision GEMM (`B` batches of an M x K
by K x N product; TF32 off, so it is the same arithmetic as a float32 kernel); `--copy-mib`
times a device-to-device copy of that many MiB and reports the bandwidth as bytes read
plus bytes written per second. Both through PyTorch (else CuPy), timed with CUDA events
after warm-up launches, the median of `--repeat` launches, on random (never zero) inputs.

It runs as its own process (tools/bench_tune_gpu.py calls it) so that the framework's
CUDA context never meets pycuda's. Prints one line per figure, or with `--json` one JSON
object: {"library", "device", "gemm": [{"shape", "ms", "tflops"}], "copy": {"mib", "ms",
"gbps"}}. Exit 2 with one line when there is no GPU or neither library imports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any, Callable


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gemm", action="append", default=[], metavar="B,M,N,K", help="a GEMM shape, repeatable")
    p.add_argument("--copy-mib", type=int, default=0, help="time a device-to-device copy of this many MiB")
    p.add_argument("--repeat", type=int, default=30, help="timed launches per figure (default 30)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    shapes = []
    for text in args.gemm:
        try:
            shape = tuple(int(v) for v in text.split(","))
        except ValueError:
            p.error(f"--gemm {text}: expected four integers B,M,N,K")
        if len(shape) != 4 or min(shape) < 1:
            p.error(f"--gemm {text}: expected four positive integers B,M,N,K")
        shapes.append(shape)
    args.shapes = shapes
    if args.repeat < 1 or args.copy_mib < 0:
        p.error("--repeat must be at least 1 and --copy-mib at least 0")
    return args


class Torch:
    name = "torch"

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.t = torch
        self.device = torch.cuda.get_device_name(0)

    def random(self, *shape: int) -> Any:
        # uniform in [0.5, 1.5): never zero, no cancellation to make anything cheaper
        return self.t.rand(*shape, device="cuda", dtype=self.t.float32) + 0.5

    def gemm(self, b: int, m: int, n: int, k: int) -> Callable[[], Any]:
        a, bt = (self.random(b, m, k), self.random(b, k, n)) if b > 1 else (self.random(m, k), self.random(k, n))
        out = self.t.empty((b, m, n) if b > 1 else (m, n), device="cuda", dtype=self.t.float32)
        return lambda: self.t.matmul(a, bt, out=out)

    def copy(self, nbytes: int) -> Callable[[], Any]:
        src = self.random(nbytes // 4)
        dst = self.t.empty_like(src)
        return lambda: dst.copy_(src)

    def time(self, fn: Callable[[], Any], repeat: int) -> float:
        for _ in range(3):
            fn()
        self.t.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, end = self.t.cuda.Event(enable_timing=True), self.t.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


class Cupy(Torch):
    name = "cupy"

    def __init__(self) -> None:  # noqa: D107 - same interface, CuPy underneath
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        self.cp = cupy
        self.device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()

    def random(self, *shape: int) -> Any:
        return self.cp.random.random(shape, dtype=self.cp.float32) + 0.5

    def gemm(self, b: int, m: int, n: int, k: int) -> Callable[[], Any]:
        a, bt = (self.random(b, m, k), self.random(b, k, n)) if b > 1 else (self.random(m, k), self.random(k, n))
        return lambda: self.cp.matmul(a, bt)

    def copy(self, nbytes: int) -> Callable[[], Any]:
        src = self.random(nbytes // 4)
        dst = self.cp.empty_like(src)
        return lambda: dst.__setitem__(slice(None), src)

    def time(self, fn: Callable[[], Any], repeat: int) -> float:
        for _ in range(3):
            fn()
        self.cp.cuda.Device().synchronize()
        times = []
        for _ in range(repeat):
            start, end = self.cp.cuda.Event(), self.cp.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(self.cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)


def library() -> Torch:
    """PyTorch, else CuPy; exit 2 with the reasons when neither works."""
    reasons = []
    for kind in (Torch, Cupy):
        try:
            return kind()
        except Exception as exc:  # noqa: BLE001 - an import or driver error: try the next, say why at the end
            reasons.append(f"{kind.name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(f"gpu_baselines: no GPU library for the baselines ({'; '.join(reasons)})", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    lib = library()
    result: dict[str, Any] = {"library": lib.name, "device": lib.device, "gemm": [], "copy": None}
    for b, m, n, k in args.shapes:
        ms = lib.time(lib.gemm(b, m, n, k), args.repeat)
        result["gemm"].append({"shape": [b, m, n, k], "ms": ms, "tflops": 2.0 * b * m * n * k / ms / 1e9})
    if args.copy_mib:
        nbytes = args.copy_mib << 20
        ms = lib.time(lib.copy(nbytes), args.repeat)
        result["copy"] = {"mib": args.copy_mib, "ms": ms, "gbps": 2.0 * nbytes / ms / 1e6}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"device: {lib.device} ({lib.name})")
    for g in result["gemm"]:
        print(f"cuBLAS sgemm {'x'.join(map(str, g['shape']))}: {g['ms']:.4f} ms, {g['tflops']:.1f} TFLOP/s")
    if result["copy"]:
        c = result["copy"]
        print(f"copy {c['mib']} MiB: {c['ms']:.4f} ms, {c['gbps']:.0f} GB/s (read + write)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
